// RankMemory: one rank's device memory as the replay changes it: a simulated
// device of the GPU's capacity with the CUDA context taken, PyTorch's caching
// allocator on it, the replay's allocation ids, NCCL's (external) bytes and
// the peaks. Its state follows from the MemoryCalls applied since
// construction and nothing else (simulated time plays no part), so two ranks
// that made the same calls are in the same state and may share one
// (mem/shared_histories.h). Copyable.
#pragma once

#include <cstdint>

#include <absl/container/flat_hash_map.h>

#include "mem/alloc_config.h"
#include "mem/caching_allocator.h"
#include "util/units.h"

namespace prism {

struct DeviceMemoryOptions {
  // GPU memory as cudaGetDeviceProperties reports it (totalGlobalMem);
  // 0 = unlimited (no out-of-memory).
  Bytes capacity;
  Bytes context;  // taken by the CUDA context before the first allocation
  AllocatorConfig allocator;
};

// A rank's device memory at one moment. device = reserved + external +
// context: what nvidia-smi would show for the process.
struct MemoryUsage {
  Bytes allocated;  // PyTorch's memory_allocated()
  Bytes reserved;   // PyTorch's memory_reserved()
  Bytes external;   // NCCL buffers (outside the caching allocator)
  Bytes context;    // CUDA context
  Bytes device() const { return reserved + external + context; }
};

// Peaks over the replay; each is its own maximum (they need not coincide).
struct MemoryPeaks {
  Bytes requested;  // bytes asked for, before the allocator's rounding
  Bytes allocated;
  Bytes reserved;
  Bytes device;
  // Reserved but not allocated when reserved peaked: the allocator's cache
  // and fragmentation at the worst moment.
  Bytes cached_at_reserved_peak;
  // Free bytes inside split segments, at their peak: PyTorch's
  // inactive_split_bytes.all.peak.
  Bytes inactive_split;
};

// One operation on a rank's memory (see MemoryModel for what each does).
struct MemoryCall {
  enum class Kind : std::uint8_t { kAlloc, kFree, kFreeDeferred, kRelease, kExternal };
  Kind kind = Kind::kAlloc;
  std::int32_t stream = 0;  // kAlloc, kFree, kFreeDeferred
  std::int64_t id = 0;      // the allocation (all but kExternal)
  std::int64_t bytes = 0;   // kAlloc, kExternal
  friend bool operator==(const MemoryCall&, const MemoryCall&) = default;
};

class RankMemory {
 public:
  explicit RankMemory(const DeviceMemoryOptions& options);
  RankMemory(const RankMemory& o);
  RankMemory& operator=(const RankMemory&) = delete;

  // False when an alloc or external memory does not fit (out of memory; a
  // failed alloc leaves no allocation, external bytes are counted anyway).
  bool apply(const MemoryCall& call);

  MemoryUsage usage() const;
  MemoryPeaks peaks() const;
  // The last failed alloc.
  const OomInfo& oom() const { return allocator_.last_oom(); }

 private:
  void note_peaks();

  Bytes context_;
  SimulatedDevice device_;
  CachingAllocator allocator_;
  absl::flat_hash_map<std::int64_t, BlockId> live_;           // alloc id -> block
  absl::flat_hash_map<std::int64_t, std::uint64_t> pending_;  // alloc id -> ticket
  std::int64_t external_ = 0;
  std::int64_t device_peak_ = 0;
  std::int64_t cached_at_reserved_peak_ = 0;
  std::int64_t reserved_peak_seen_ = -1;
};

}  // namespace prism
