#include "mem/memory_model.h"

#include <limits>

namespace prism {

void CountingMemoryModel::reset(int num_ranks) {
  current_.assign(num_ranks, Bytes{});
  peak_.assign(num_ranks, Bytes{});
}

void CountingMemoryModel::alloc(int rank, std::int64_t, Bytes bytes, int, SimTime) {
  // Saturates instead of overflowing: 8,192 allocations of 1 PiB are
  // representable input, and "more than 8 EiB" is answer enough.
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  current_[rank].count =
      bytes.count > kMax - current_[rank].count ? kMax : current_[rank].count + bytes.count;
  if (current_[rank] > peak_[rank]) peak_[rank] = current_[rank];
}

void CountingMemoryModel::free(int rank, std::int64_t, Bytes bytes, int, SimTime) {
  current_[rank] -= bytes;
}

}  // namespace prism
