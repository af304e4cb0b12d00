// MemoryModel: what the replay's alloc/free ops do to each simulated rank's
// device memory. Ranks here are the engine's simulated ranks
// (representatives when folded), numbered 0..n-1.
//
// AllocatorMemoryModel gives every rank its own PyTorch caching allocator
// (mem/caching_allocator.h) on a device of the GPU's capacity, less the CUDA
// context (mem/rank_memory.h); NCCL's buffers arrive as external memory
// while the replay runs (replay/nccl_memory.h). An allocation the device
// cannot hold is an out-of-memory outcome, as in PyTorch. Ranks whose calls
// have been the same so far share one state (mem/shared_histories.h), which
// is what makes an unfolded replay of thousands of ranks affordable.
#pragma once

#include <cstdint>

#include "mem/caching_allocator.h"
#include "mem/rank_memory.h"
#include "mem/shared_histories.h"
#include "util/units.h"

namespace prism {

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

  const DeviceMemoryOptions& options() const { return options_; }
  // Distinct memory states the ranks are in (mem/shared_histories.h).
  int num_states() const { return histories_.num_live_histories(); }

 private:
  DeviceMemoryOptions options_;
  SharedHistories histories_;
};

}  // namespace prism
