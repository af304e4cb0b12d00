#include "mem/memory_model.h"

namespace prism {

void CountingMemoryModel::reset(int num_ranks) {
  current_.assign(num_ranks, Bytes{});
  peak_.assign(num_ranks, Bytes{});
}

void CountingMemoryModel::alloc(int rank, std::int64_t, Bytes bytes, int, SimTime) {
  current_[rank] += bytes;
  if (current_[rank] > peak_[rank]) peak_[rank] = current_[rank];
}

void CountingMemoryModel::free(int rank, std::int64_t, Bytes bytes, int, SimTime) {
  current_[rank] -= bytes;
}

}  // namespace prism
