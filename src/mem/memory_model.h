// MemoryModel: what the replay's alloc/free ops do to each simulated rank's
// device memory. Ranks here are the engine's simulated ranks
// (representatives when folded), numbered 0..n-1.
//
// AllocatorMemoryModel gives every rank its own PyTorch caching allocator
// (mem/caching_allocator.h) on a device of the GPU's capacity, less the CUDA
// context; NCCL's buffers arrive as external memory while the replay runs
// (replay/nccl_memory.h). An allocation the device cannot hold is an
// out-of-memory outcome, as in PyTorch.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "mem/alloc_config.h"
#include "mem/caching_allocator.h"
#include "util/units.h"

namespace prism {

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

class MemoryModel {
 public:
  virtual ~MemoryModel() = default;
  virtual void reset(int num_ranks) = 0;
  // `alloc_id` identifies the allocation within the rank until it is freed.
  // Returns false when the device cannot hold it (out of memory); the
  // allocation then does not exist and oom() describes the failure.
  virtual bool alloc(int rank, std::int64_t alloc_id, Bytes bytes, int stream, SimTime now) = 0;
  // `deferred`: the block was recorded on other streams that have not yet
  // finished with it; allocated bytes drop now, and the block returns to the
  // allocator at release().
  virtual void free(int rank, std::int64_t alloc_id, int stream, SimTime now, bool deferred) = 0;
  virtual void release(int rank, std::int64_t alloc_id, SimTime now) = 0;
  // Device memory taken outside the allocator from now on (NCCL buffers).
  // Returns false when the device has no room for it (the memory is still
  // counted, as the failed attempt's outcome).
  virtual bool add_external(int rank, Bytes bytes, SimTime now) = 0;
  // The device's capacity; 0 = unlimited.
  virtual Bytes capacity() const = 0;
  virtual MemoryUsage usage(int rank) const = 0;
  virtual MemoryPeaks peaks(int rank) const = 0;
  // The last failed alloc() of `rank`.
  virtual OomInfo oom(int rank) const = 0;
};

struct DeviceMemoryOptions {
  // GPU memory as cudaGetDeviceProperties reports it (totalGlobalMem);
  // 0 = unlimited (no out-of-memory).
  Bytes capacity;
  Bytes context;  // taken by the CUDA context before the first allocation
  AllocatorConfig allocator;
};

class AllocatorMemoryModel final : public MemoryModel {
 public:
  explicit AllocatorMemoryModel(DeviceMemoryOptions options);
  ~AllocatorMemoryModel() override;

  void reset(int num_ranks) override;
  bool alloc(int rank, std::int64_t alloc_id, Bytes bytes, int stream, SimTime now) override;
  void free(int rank, std::int64_t alloc_id, int stream, SimTime now, bool deferred) override;
  void release(int rank, std::int64_t alloc_id, SimTime now) override;
  bool add_external(int rank, Bytes bytes, SimTime now) override;
  Bytes capacity() const override { return options_.capacity; }
  MemoryUsage usage(int rank) const override;
  MemoryPeaks peaks(int rank) const override;
  OomInfo oom(int rank) const override;

  // The rank's allocator (segments, stats), for reports and tests.
  const CachingAllocator& allocator(int rank) const;
  const DeviceMemoryOptions& options() const { return options_; }

 private:
  struct RankMemory {
    explicit RankMemory(const DeviceMemoryOptions& o);
    SimulatedDevice device;
    CachingAllocator allocator;
    absl::flat_hash_map<std::int64_t, BlockId> live;           // alloc_id -> block
    absl::flat_hash_map<std::int64_t, std::uint64_t> pending;  // alloc_id -> ticket
    std::int64_t external = 0;
    std::int64_t device_peak = 0;
    std::int64_t cached_at_reserved_peak = 0;
    std::int64_t reserved_peak_seen = -1;
  };
  void note_peaks(RankMemory& m) const;

  DeviceMemoryOptions options_;
  std::vector<std::unique_ptr<RankMemory>> ranks_;
};

}  // namespace prism
