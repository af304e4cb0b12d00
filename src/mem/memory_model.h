// MemoryModel: what the replay's alloc/free ops do to each simulated rank's
// device memory. The placeholder counts allocated bytes and their peak; the
// caching-allocator model (segments, pools, fragmentation, OOM) replaces it
// behind the same interface. Ranks here are the engine's simulated ranks
// (representatives when folded), numbered 0..n-1.
#pragma once

#include <cstdint>
#include <vector>

#include "util/units.h"

namespace prism {

class MemoryModel {
 public:
  virtual ~MemoryModel() = default;
  virtual void reset(int num_ranks) = 0;
  // `alloc_id` identifies the allocation within the rank until it is freed.
  virtual void alloc(int rank, std::int64_t alloc_id, Bytes bytes, int stream, SimTime now) = 0;
  virtual void free(int rank, std::int64_t alloc_id, Bytes bytes, int stream, SimTime now) = 0;
  virtual Bytes peak_allocated(int rank) const = 0;
};

class CountingMemoryModel final : public MemoryModel {
 public:
  void reset(int num_ranks) override;
  void alloc(int rank, std::int64_t alloc_id, Bytes bytes, int stream, SimTime now) override;
  void free(int rank, std::int64_t alloc_id, Bytes bytes, int stream, SimTime now) override;
  Bytes peak_allocated(int rank) const override { return peak_[rank]; }
  Bytes allocated(int rank) const { return current_[rank]; }

 private:
  std::vector<Bytes> current_;
  std::vector<Bytes> peak_;
};

}  // namespace prism
