// FNV-1a, 64 bits: a small, stable hash for identities that travel between
// processes (NCCL unique ids, rendezvous keys), where std::hash, which may
// differ between builds, will not do.
#pragma once

#include <cstddef>
#include <cstdint>

namespace prism {

inline constexpr std::uint64_t kFnvOffset = 14695981039346656037ull;

// FNV-1a 64 of n bytes, continuing from `h` (chain calls to hash pieces).
inline std::uint64_t fnv1a(const void* data, std::size_t n, std::uint64_t h = kFnvOffset) noexcept {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace prism
