// ncclUniqueId for the drop-in: nothing to bootstrap (the coordinator
// matches communicators by size, position and order), so an id only has to
// be unique, and its FNV-1a hash names the communicator to the coordinator.
#pragma once

#include <cstddef>
#include <cstdint>

#include "shim/nccl/entry.h"

namespace prism::nccl {

// Fills *id from the pid, $RANK, a per-process counter, the clocks and
// /dev/urandom.
void make_unique_id(ncclUniqueId* id) noexcept;

inline constexpr std::uint64_t kFnvOffset = 14695981039346656037ull;
// FNV-1a 64 of n bytes, continuing from `h` (chain calls to hash several ids).
std::uint64_t fnv1a(const void* data, std::size_t n, std::uint64_t h = kFnvOffset) noexcept;

}  // namespace prism::nccl
