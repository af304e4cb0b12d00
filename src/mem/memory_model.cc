#include "mem/memory_model.h"

#include <limits>

#include "util/check.h"

namespace prism {

AllocatorMemoryModel::RankMemory::RankMemory(const DeviceMemoryOptions& o)
    : device(o.capacity.count > 0 ? o.capacity.count : std::numeric_limits<std::int64_t>::max()),
      allocator(o.allocator, &device) {
  device.add_external(o.context.count);
}

AllocatorMemoryModel::AllocatorMemoryModel(DeviceMemoryOptions options)
    : options_(std::move(options)) {}

AllocatorMemoryModel::~AllocatorMemoryModel() = default;

void AllocatorMemoryModel::reset(int num_ranks) {
  ranks_.clear();
  ranks_.reserve(num_ranks);
  for (int r = 0; r < num_ranks; ++r) ranks_.push_back(std::make_unique<RankMemory>(options_));
}

// The device peak is reserved + external + context; the cache at the reserved
// peak is taken when reserved reaches a new maximum.
void AllocatorMemoryModel::note_peaks(RankMemory& m) const {
  const AllocatorStats& s = m.allocator.stats();
  const std::int64_t device = s.reserved + m.external + options_.context.count;
  if (device > m.device_peak) m.device_peak = device;
  if (s.reserved > m.reserved_peak_seen) {
    m.reserved_peak_seen = s.reserved;
    m.cached_at_reserved_peak = s.reserved - s.allocated;
  }
}

bool AllocatorMemoryModel::alloc(int rank, std::int64_t alloc_id, Bytes bytes, int stream,
                                 SimTime) {
  RankMemory& m = *ranks_[rank];
  const BlockId b = m.allocator.malloc(bytes.count, stream);
  if (b == kOutOfMemory) return false;
  m.live[alloc_id] = b;
  note_peaks(m);
  return true;
}

void AllocatorMemoryModel::free(int rank, std::int64_t alloc_id, int, SimTime, bool deferred) {
  RankMemory& m = *ranks_[rank];
  const auto it = m.live.find(alloc_id);
  PRISM_CHECK(it != m.live.end(), "free of an allocation the memory model does not hold");
  if (deferred) {
    m.pending[alloc_id] = m.allocator.free_deferred(it->second);
  } else {
    m.allocator.free(it->second);
  }
  m.live.erase(it);
}

void AllocatorMemoryModel::release(int rank, std::int64_t alloc_id, SimTime) {
  RankMemory& m = *ranks_[rank];
  const auto it = m.pending.find(alloc_id);
  PRISM_CHECK(it != m.pending.end(), "release of an allocation that is not pending");
  m.allocator.complete_free(it->second);
  m.pending.erase(it);
}

bool AllocatorMemoryModel::add_external(int rank, Bytes bytes, SimTime) {
  RankMemory& m = *ranks_[rank];
  const bool fits = bytes.count <= m.device.free_bytes();
  m.external += bytes.count;
  m.device.add_external(bytes.count);
  note_peaks(m);
  return fits;
}

MemoryUsage AllocatorMemoryModel::usage(int rank) const {
  const RankMemory& m = *ranks_[rank];
  const AllocatorStats& s = m.allocator.stats();
  return MemoryUsage{Bytes{s.allocated}, Bytes{s.reserved}, Bytes{m.external}, options_.context};
}

MemoryPeaks AllocatorMemoryModel::peaks(int rank) const {
  const RankMemory& m = *ranks_[rank];
  const AllocatorStats& s = m.allocator.stats();
  return MemoryPeaks{Bytes{s.requested_peak},          Bytes{s.allocated_peak},
                     Bytes{s.reserved_peak},           Bytes{m.device_peak},
                     Bytes{m.cached_at_reserved_peak}, Bytes{s.inactive_split_peak}};
}

OomInfo AllocatorMemoryModel::oom(int rank) const {
  return ranks_[rank]->allocator.last_oom();
}

const CachingAllocator& AllocatorMemoryModel::allocator(int rank) const {
  return ranks_[rank]->allocator;
}

}  // namespace prism
