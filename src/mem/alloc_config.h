// AllocatorConfig: the settings of PyTorch's CUDA caching allocator that
// change its decisions, parsed from PYTORCH_CUDA_ALLOC_CONF syntax
// ("max_split_size_mb:512,expandable_segments:True"), as
// c10/cuda/CUDAAllocatorConfig.cpp parses it. Options that only affect the
// host (pinned_use_cuda_host_register, pinned_num_register_threads,
// pinned_use_background_threads, release_lock_on_cudamalloc, and the _hip
// spellings) are checked as PyTorch checks them, then ignored;
// backend:native is the only backend (cudaMallocAsync is refused).
// docs/memory.md lists every rule.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "util/status.h"

namespace prism {

struct AllocatorConfig {
  static constexpr std::int64_t kNoLimit = std::numeric_limits<std::int64_t>::max();
  // Intervals of roundup_power2_divisions: [1 MiB, 2 MiB), ... up to 64 GiB;
  // sizes below 1 MiB use interval 0, above 64 GiB the last one.
  static constexpr int kRoundupIntervals = 16;

  // max_split_size_mb (bytes here): blocks this large or larger are never
  // split, and requests below it never take them.
  std::int64_t max_split_size = kNoLimit;
  // roundup_power2_divisions, per interval: 0 or 1 = plain 512-byte rounding.
  std::array<int, kRoundupIntervals> roundup_power2_divisions{};
  // garbage_collection_threshold in (0, 1); 0 = off. Like PyTorch, it only
  // acts when memory_fraction is set.
  double garbage_collection_threshold = 0;
  bool expandable_segments = false;
  // torch.cuda.set_per_process_memory_fraction(f); 0 = not set. Not part of
  // PYTORCH_CUDA_ALLOC_CONF; set by --memory-fraction.
  double memory_fraction = 0;

  // The configuration in PYTORCH_CUDA_ALLOC_CONF syntax, options in a fixed
  // order, defaults left out ("" for the default configuration).
  std::string to_string() const;
};

// Parses PYTORCH_CUDA_ALLOC_CONF. Errors name the option and the value, and
// follow PyTorch's checks (max_split_size_mb > 20, threshold in (0, 1),
// divisions powers of two, ...).
Result<AllocatorConfig> parse_alloc_conf(std::string_view conf);

}  // namespace prism
