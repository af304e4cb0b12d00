#include "mem/trace_ledger.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <string>

#include <fmt/format.h>

#include "mem/caching_allocator.h"

namespace prism {
namespace {

using Action = AllocatorEvent::Action;

constexpr std::int64_t kMinBlockSize = 512;
constexpr std::int64_t kSmallSize = 1 << 20;  // largest small-pool request
// cudaMalloc and cuMemAddressReserve align to 256 bytes at least.
constexpr std::uint64_t kAddressAlignment = 256;

constexpr std::string_view kIncomplete =
    "the history must be recorded from the start: call "
    "torch.cuda.memory._record_memory_history() before the first CUDA allocation, with "
    "max_entries above the number of events";

class Ledger {
 public:
  explicit Ledger(const AllocatorConfig& config) : config_(config) {}

  Status apply(const RecordedEvent& r) {
    const AllocatorEvent& e = r.event;
    entry_ = r.entry;
    Status s;
    switch (e.action) {
      case Action::kAlloc:
        s = alloc(e);
        break;
      case Action::kFreeRequested:
        s = free_requested(e);
        break;
      case Action::kFreeCompleted:
        s = free_completed(e);
        break;
      case Action::kSegmentAlloc:
        s = segment_alloc(e, /*expandable=*/false);
        break;
      case Action::kSegmentMap:
        s = segment_alloc(e, /*expandable=*/true);
        break;
      case Action::kSegmentFree:
      case Action::kSegmentUnmap:
        s = segment_free(e);
        break;
      case Action::kOom:
        ++p_.ooms;
        break;
    }
    if (!s.is_ok())
      return s.with_context(fmt::format("trace entry {} ({})", r.entry, action_name(e.action)));
    p_.allocated_peak = std::max(p_.allocated_peak, allocated_);
    p_.reserved_peak = std::max(p_.reserved_peak, reserved_);
    p_.requested_peak = std::max(p_.requested_peak, requested_);
    return Status::ok();
  }

  // The trace does not fit the settings: block sizes are guesses from here.
  void misfit() {
    if (!p_.misfit_entry) p_.misfit_entry = entry_;
  }

  RecordedPeaks finish() {
    p_.allocated_final = allocated_;
    p_.reserved_final = reserved_;
    return p_;
  }

 private:
  struct Range {
    std::uint64_t end = 0;
    bool expandable = false;  // mapped pages of an expandable segment
  };
  struct Block {
    std::int64_t size = 0;
    std::int64_t requested = 0;
    bool pending = false;  // freed, waiting for its streams
  };

  static Status incomplete(const std::string& what) {
    return Status::invalid_argument(fmt::format("{}: {}", what, kIncomplete));
  }

  // The range holding `addr`, or end().
  std::map<std::uint64_t, Range>::iterator range_at(std::uint64_t addr) {
    auto it = ranges_.upper_bound(addr);
    if (it == ranges_.begin()) return ranges_.end();
    --it;
    return addr < it->second.end ? it : ranges_.end();
  }

  bool blocks_in(std::uint64_t begin, std::uint64_t end) const {
    const auto it = blocks_.lower_bound(begin);
    return it != blocks_.end() && it->first < end;
  }

  // PyTorch's should_split() for a block of `block` bytes serving `rounded`.
  bool should_split(std::int64_t block, std::int64_t rounded) const {
    const std::int64_t remaining = block - rounded;
    if (rounded <= kSmallSize || config_.expandable_segments) return remaining >= kMinBlockSize;
    return rounded < config_.max_split_size && remaining > kSmallSize;
  }

  Status alloc(const AllocatorEvent& e) {
    const auto range = range_at(e.addr);
    if (range == ranges_.end())
      return incomplete(fmt::format("{:#x} is in no segment the trace allocated", e.addr));
    auto next = blocks_.upper_bound(e.addr);
    if (next != blocks_.begin()) {
      const auto prev = std::prev(next);
      const auto overlap =
          static_cast<std::int64_t>(prev->first + static_cast<std::uint64_t>(prev->second.size)) -
          static_cast<std::int64_t>(e.addr);
      if (prev->first == e.addr)
        return Status::invalid_argument(
            fmt::format("{:#x} is a live block already: the trace is inconsistent", e.addr));
      if (overlap > 0) {  // the block before was smaller than these settings made it
        misfit();
        prev->second.size -= overlap;
        if (!prev->second.pending) allocated_ -= overlap;
      }
    }
    std::uint64_t limit = range->second.end;
    if (next != blocks_.end()) limit = std::min(limit, next->first);
    const auto run = static_cast<std::int64_t>(limit - e.addr);
    const std::int64_t rounded = round_request(e.size, config_);
    std::int64_t size = run > rounded && !should_split(run, rounded) ? run : rounded;
    if (size > run) {  // these settings round up past the free space
      misfit();
      size = run;
    }
    blocks_[e.addr] = Block{size, e.size, false};
    allocated_ += size;
    requested_ += e.size;
    ++p_.allocs;
    return Status::ok();
  }

  Status free_requested(const AllocatorEvent& e) {
    const auto it = blocks_.find(e.addr);
    if (it == blocks_.end())
      return incomplete(fmt::format("{:#x} was not handed out by an alloc in the trace", e.addr));
    if (it->second.pending)
      return Status::invalid_argument(
          fmt::format("{:#x} was already freed: the trace is inconsistent", e.addr));
    it->second.pending = true;
    allocated_ -= it->second.size;
    requested_ -= it->second.requested;
    ++p_.frees;
    return Status::ok();
  }

  Status free_completed(const AllocatorEvent& e) {
    const auto it = blocks_.find(e.addr);
    if (it == blocks_.end())
      return incomplete(fmt::format("{:#x} was not handed out by an alloc in the trace", e.addr));
    if (!it->second.pending)
      return Status::invalid_argument(
          fmt::format("{:#x} completes a free that was never requested", e.addr));
    blocks_.erase(it);
    return Status::ok();
  }

  Status segment_alloc(const AllocatorEvent& e, bool expandable) {
    if (e.addr % kAddressAlignment != 0)
      return Status::invalid_argument(
          fmt::format("{:#x} is not {}-byte aligned, as the addresses of device memory are", e.addr,
                      kAddressAlignment));
    const std::uint64_t end = e.addr + static_cast<std::uint64_t>(e.size);
    auto next = ranges_.lower_bound(e.addr);
    const bool overlaps_next = next != ranges_.end() && next->first < end;
    const bool overlaps_prev = next != ranges_.begin() && std::prev(next)->second.end > e.addr;
    if (overlaps_next || overlaps_prev)
      return Status::invalid_argument(fmt::format(
          "[{:#x}, {:#x}) overlaps memory the allocator already holds: the trace is inconsistent",
          e.addr, end));
    std::uint64_t begin = e.addr;
    Range r{end, expandable};
    // Mapped pages join the mapped pages around them: free blocks merge
    // across them.
    if (expandable && next != ranges_.begin()) {
      const auto prev = std::prev(next);
      if (prev->second.expandable && prev->second.end == e.addr) {
        begin = prev->first;
        ranges_.erase(prev);
      }
    }
    if (expandable && next != ranges_.end() && next->second.expandable && next->first == end) {
      r.end = next->second.end;
      ranges_.erase(next);
    }
    ranges_[begin] = r;
    reserved_ += e.size;
    ++p_.segment_allocs;
    return Status::ok();
  }

  Status segment_free(const AllocatorEvent& e) {
    const std::uint64_t end = e.addr + static_cast<std::uint64_t>(e.size);
    const auto range = range_at(e.addr);
    const bool unmap = e.action == Action::kSegmentUnmap;
    if (range == ranges_.end() || range->second.end < end || range->second.expandable != unmap ||
        (!unmap && (range->first != e.addr || range->second.end != end)))
      return incomplete(
          fmt::format("[{:#x}, {:#x}) is not memory the trace allocated", e.addr, end));
    if (blocks_in(e.addr, end))
      return Status::invalid_argument(fmt::format(
          "[{:#x}, {:#x}) still holds live blocks: the trace is inconsistent", e.addr, end));
    const Range whole = range->second;
    const std::uint64_t begin = range->first;
    ranges_.erase(range);
    if (begin < e.addr) ranges_[begin] = Range{e.addr, whole.expandable};
    if (end < whole.end) ranges_[end] = Range{whole.end, whole.expandable};
    reserved_ -= e.size;
    ++p_.segment_frees;
    return Status::ok();
  }

  const AllocatorConfig& config_;
  std::map<std::uint64_t, Range> ranges_;  // segments and mapped ranges by start
  std::map<std::uint64_t, Block> blocks_;  // live and pending-free blocks by address
  std::int64_t allocated_ = 0;
  std::int64_t reserved_ = 0;
  std::int64_t requested_ = 0;
  RecordedPeaks p_;
  std::size_t entry_ = 0;  // of the event being applied
};

}  // namespace

Result<RecordedPeaks> account_trace(const MemoryTrace& trace, const AllocatorConfig& config) {
  Ledger ledger(config);
  for (const RecordedEvent& r : trace.events) PRISM_RETURN_IF_ERROR(ledger.apply(r));
  return ledger.finish();
}

}  // namespace prism
