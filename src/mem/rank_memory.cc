#include "mem/rank_memory.h"

#include <limits>

#include "util/check.h"

namespace prism {

RankMemory::RankMemory(const DeviceMemoryOptions& options)
    : context_(options.context),
      device_(options.capacity.count > 0 ? options.capacity.count
                                         : std::numeric_limits<std::int64_t>::max()),
      allocator_(options.allocator, &device_) {
  device_.add_external(options.context.count);
}

RankMemory::RankMemory(const RankMemory& o)
    : context_(o.context_),
      device_(o.device_),
      allocator_(o.allocator_, &device_),
      live_(o.live_),
      pending_(o.pending_),
      external_(o.external_),
      device_peak_(o.device_peak_),
      cached_at_reserved_peak_(o.cached_at_reserved_peak_),
      reserved_peak_seen_(o.reserved_peak_seen_) {}

bool RankMemory::apply(const MemoryCall& call) {
  switch (call.kind) {
    case MemoryCall::Kind::kAlloc: {
      const BlockId b = allocator_.malloc(call.bytes, call.stream);
      if (b == kOutOfMemory) return false;
      live_[call.id] = b;
      note_peaks();
      return true;
    }
    case MemoryCall::Kind::kFree:
    case MemoryCall::Kind::kFreeDeferred: {
      const auto it = live_.find(call.id);
      PRISM_CHECK(it != live_.end(), "free of an allocation the memory model does not hold");
      if (call.kind == MemoryCall::Kind::kFreeDeferred) {
        pending_[call.id] = allocator_.free_deferred(it->second);
      } else {
        allocator_.free(it->second);
      }
      live_.erase(it);
      return true;
    }
    case MemoryCall::Kind::kRelease: {
      const auto it = pending_.find(call.id);
      PRISM_CHECK(it != pending_.end(), "release of an allocation that is not pending");
      allocator_.complete_free(it->second);
      pending_.erase(it);
      return true;
    }
    case MemoryCall::Kind::kExternal: {
      const bool fits = call.bytes <= device_.free_bytes();
      external_ += call.bytes;
      device_.add_external(call.bytes);
      note_peaks();
      return fits;
    }
  }
  PRISM_CHECK(false, "unknown memory call");
  return false;
}

// The device peak is reserved + external + context; the cache at the reserved
// peak is taken when reserved reaches a new maximum.
void RankMemory::note_peaks() {
  const AllocatorStats& s = allocator_.stats();
  const std::int64_t device = s.reserved + external_ + context_.count;
  if (device > device_peak_) device_peak_ = device;
  if (s.reserved > reserved_peak_seen_) {
    reserved_peak_seen_ = s.reserved;
    cached_at_reserved_peak_ = s.reserved - s.allocated;
  }
}

MemoryUsage RankMemory::usage() const {
  const AllocatorStats& s = allocator_.stats();
  return MemoryUsage{Bytes{s.allocated}, Bytes{s.reserved}, Bytes{external_}, context_};
}

MemoryPeaks RankMemory::peaks() const {
  const AllocatorStats& s = allocator_.stats();
  return MemoryPeaks{Bytes{s.requested_peak},         Bytes{s.allocated_peak},
                     Bytes{s.reserved_peak},          Bytes{device_peak_},
                     Bytes{cached_at_reserved_peak_}, Bytes{s.inactive_split_peak}};
}

}  // namespace prism
