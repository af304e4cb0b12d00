// TraceReplayer's device: cudaMalloc, address reservations and page maps
// answered from the recording (mem/trace_replayer.h).
#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "mem/trace_replayer.h"

namespace prism::snapshot_internal {
namespace {

using Action = AllocatorEvent::Action;

// An H100's memory, for the address reservation of expandable segments when
// neither the recording nor the user says the GPU's.
constexpr std::int64_t kAssumedDeviceMemory = std::int64_t{80} << 30;

// After a failed cudaMalloc or page map, torch releases cached memory
// (segment_free, segment_unmap, free_completed of synchronized frees) or
// gives up (oom): an expected event of these kinds says the call failed.
bool follows_device_failure(Action a) {
  return a == Action::kSegmentFree || a == Action::kSegmentUnmap || a == Action::kFreeCompleted ||
         a == Action::kOom;
}

}  // namespace

// --- RecordedDevice -------------------------------------------------------

std::optional<std::uint64_t> TraceReplayer::RecordedDevice::malloc(std::int64_t size) {
  if (full(size)) return std::nullopt;
  const AllocatorEvent* e = r_->peek();
  if (e != nullptr && follows_device_failure(e->action)) return std::nullopt;
  used_ += size;
  if (e != nullptr && e->action == Action::kSegmentAlloc) return e->addr;
  return unrecorded(size);
}

void TraceReplayer::RecordedDevice::free(std::uint64_t /*addr*/, std::int64_t size) {
  used_ -= size;
}

std::uint64_t TraceReplayer::RecordedDevice::reserve(std::int64_t size) {
  const std::optional<std::uint64_t> base = r_->fresh_segment_base();
  return base ? *base : unrecorded(size);
}

bool TraceReplayer::RecordedDevice::map(std::int64_t size) {
  if (full(size)) return false;
  const AllocatorEvent* e = r_->peek();
  if (e != nullptr && follows_device_failure(e->action)) return false;
  used_ += size;
  return true;
}

void TraceReplayer::RecordedDevice::unmap(std::int64_t size) {
  used_ -= size;
}

// Sizes the expandable segments' address reservation, as the GPU's memory
// does in torch; the recording does not say it.
std::int64_t TraceReplayer::RecordedDevice::capacity() const {
  if (device_memory_ > 0) return device_memory_;
  return capacity_ > 0 ? capacity_ : kAssumedDeviceMemory;
}

std::int64_t TraceReplayer::RecordedDevice::free_bytes() const {
  return capacity_ > used_ ? capacity_ - used_ : 0;
}

std::uint64_t TraceReplayer::RecordedDevice::unrecorded(std::int64_t size) {
  const std::uint64_t addr = next_unrecorded_;
  next_unrecorded_ +=
      (static_cast<std::uint64_t>(size) + (kLargeBuffer - 1)) / kLargeBuffer * kLargeBuffer;
  return addr;
}

std::optional<std::uint64_t> TraceReplayer::fresh_segment_base() const {
  // A new expandable segment maps its first pages at its base, now or (when
  // this malloc fails) in a later one: the first segment_map of the malloc's
  // stream and pool that no live segment explains. A live segment maps its
  // next pages in its gaps or at the end of its mapped pages, so following
  // the maps and unmaps ahead tells which are its own, whatever the size of
  // its reservation (1 1/8 of the GPU's memory in torch).
  if (divergence_) return std::nullopt;
  struct Live {
    std::uint64_t base;
    std::uint64_t limit;                           // end of the reservation
    std::map<std::uint64_t, std::uint64_t> pages;  // mapped ranges, start -> end
    std::uint64_t mapped_end() const { return pages.empty() ? base : pages.rbegin()->second; }
  };
  std::vector<Live> live;
  for (const SegmentInfo& seg : allocator_.segments()) {
    if (!seg.expandable || seg.stream != request_stream_ || seg.small_pool != request_small_)
      continue;
    Live l{seg.addr, seg.addr + static_cast<std::uint64_t>(seg.size), {}};
    for (const SegmentInfo::Block& b : seg.blocks)
      if (b.state != SegmentInfo::Block::State::kUnmapped)
        l.pages[b.addr] = b.addr + static_cast<std::uint64_t>(b.size);
    live.push_back(std::move(l));
  }
  for (std::size_t i = next_; i < size(); ++i) {
    const AllocatorEvent& e = expected(i);
    if (e.stream != request_stream_) continue;
    const std::uint64_t end = e.addr + static_cast<std::uint64_t>(e.size);
    if (e.action == Action::kSegmentMap) {
      // Small-pool pages are 2 MiB, large-pool pages 20 MiB.
      if ((e.size % kLargeBuffer != 0) != request_small_) continue;
      const auto owner = std::find_if(live.begin(), live.end(), [&](const Live& l) {
        return e.addr >= l.base && e.addr < l.limit && e.addr <= l.mapped_end();
      });
      if (owner == live.end()) return e.addr;
      owner->pages[e.addr] = end;
    } else if (e.action == Action::kSegmentUnmap) {
      for (Live& l : live) {
        if (e.addr < l.base || e.addr >= l.limit) continue;
        // Take [e.addr, end) out of the mapped ranges.
        std::map<std::uint64_t, std::uint64_t> kept;
        for (const auto& [first, last] : l.pages) {
          if (first < e.addr) kept[first] = std::min(last, e.addr);
          if (last > end) kept[std::max(first, end)] = last;
        }
        l.pages = std::move(kept);
      }
    }
  }
  return std::nullopt;
}

}  // namespace prism::snapshot_internal
