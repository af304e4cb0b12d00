#include "mem/memory_model.h"

namespace prism {

AllocatorMemoryModel::AllocatorMemoryModel(DeviceMemoryOptions options)
    : options_(std::move(options)) {}

AllocatorMemoryModel::~AllocatorMemoryModel() = default;

void AllocatorMemoryModel::reset(int num_ranks) {
  histories_.reset(num_ranks, RankMemory(options_));
}

bool AllocatorMemoryModel::alloc(int rank, std::int64_t alloc_id, Bytes bytes, int stream,
                                 SimTime) {
  return histories_.apply(rank,
                          MemoryCall{MemoryCall::Kind::kAlloc, stream, alloc_id, bytes.count});
}

void AllocatorMemoryModel::free(int rank, std::int64_t alloc_id, int stream, SimTime,
                                bool deferred) {
  const auto kind = deferred ? MemoryCall::Kind::kFreeDeferred : MemoryCall::Kind::kFree;
  histories_.apply(rank, MemoryCall{kind, stream, alloc_id, 0});
}

void AllocatorMemoryModel::release(int rank, std::int64_t alloc_id, SimTime) {
  histories_.apply(rank, MemoryCall{MemoryCall::Kind::kRelease, 0, alloc_id, 0});
}

bool AllocatorMemoryModel::add_external(int rank, Bytes bytes, SimTime) {
  return histories_.apply(rank, MemoryCall{MemoryCall::Kind::kExternal, 0, 0, bytes.count});
}

MemoryUsage AllocatorMemoryModel::usage(int rank) const {
  return histories_.usage(rank);
}

MemoryPeaks AllocatorMemoryModel::peaks(int rank) const {
  return histories_.peaks(rank);
}

OomInfo AllocatorMemoryModel::oom(int rank) const {
  return histories_.oom(rank);
}

}  // namespace prism
