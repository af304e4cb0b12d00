// CachingAllocator's public face, SimulatedDevice, PyTorch's size rules
// (round_size, roundup_power2_next_division, get_allocation_size) and the
// memory_snapshot()-like segment listing.
#include "mem/caching_allocator.h"

#include <algorithm>
#include <bit>

#include "mem/caching_allocator_impl.h"

namespace prism {

using alloc_internal::kLargeBuffer;
using alloc_internal::kMinBlockSize;
using alloc_internal::kMinLargeAlloc;
using alloc_internal::kNone;
using alloc_internal::kRoundLarge;
using alloc_internal::kSmallBuffer;
using alloc_internal::kSmallSize;

namespace {

constexpr std::int64_t kDeviceAlignment = 2 << 20;

std::int64_t align_up(std::int64_t v, std::int64_t a) {
  return (v + a - 1) / a * a;
}

// CUDAAllocatorConfig::roundup_power2_divisions(size): the interval of
// floor(log2(size)), counted from 1 MiB and clamped to [0, 15].
int divisions_for(std::int64_t size, const AllocatorConfig& config) {
  const int log_size = std::bit_width(static_cast<std::uint64_t>(size)) - 1;
  const int index = std::clamp(log_size - 20, 0, AllocatorConfig::kRoundupIntervals - 1);
  return config.roundup_power2_divisions[index];
}

// Rounds size up to the next of `divisions` equal steps between the powers
// of two around it: 1200 with 4 divisions -> 1280 (steps 1024, 1280, ...).
std::int64_t roundup_power2_next_division(std::int64_t size, int divisions) {
  const auto usize = static_cast<std::uint64_t>(size);
  if (std::has_single_bit(usize)) return size;
  const std::uint64_t power2_floor = std::bit_floor(usize);
  // divisions is a power of two; PyTorch shifts by its log2.
  const int shift = std::bit_width(static_cast<std::uint64_t>(divisions)) - 1;
  const std::uint64_t power2_division = power2_floor >> shift;
  if (power2_division == 0) return static_cast<std::int64_t>(power2_floor << 1);
  const std::uint64_t round_size_floor = usize & ~(power2_division - 1);
  return static_cast<std::int64_t>(round_size_floor == usize ? usize
                                                             : round_size_floor + power2_division);
}

}  // namespace

std::int64_t round_request(std::int64_t size, const AllocatorConfig& config) {
  if (size < kMinBlockSize) return kMinBlockSize;
  const int divisions = divisions_for(size, config);
  if (divisions > 1 && size > kMinBlockSize * divisions)
    return roundup_power2_next_division(size, divisions);
  return align_up(size, kMinBlockSize);
}

std::int64_t segment_size_for(std::int64_t rounded) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return align_up(rounded, kRoundLarge);
}

// --- SimulatedDevice ------------------------------------------------------

std::optional<std::uint64_t> SimulatedDevice::malloc(std::int64_t size) {
  if (size > capacity_ - used_) return std::nullopt;
  used_ += size;
  const std::uint64_t addr = next_addr_;
  next_addr_ += static_cast<std::uint64_t>(align_up(size, kDeviceAlignment));
  return addr;
}

void SimulatedDevice::free(std::uint64_t /*addr*/, std::int64_t size) {
  used_ -= size;
}

std::uint64_t SimulatedDevice::reserve(std::int64_t size) {
  const std::uint64_t addr = next_addr_;
  next_addr_ += static_cast<std::uint64_t>(align_up(size, kDeviceAlignment));
  return addr;
}

bool SimulatedDevice::map(std::int64_t size) {
  if (size > capacity_ - used_) return false;
  used_ += size;
  return true;
}

void SimulatedDevice::unmap(std::int64_t size) {
  used_ -= size;
}

// --- CachingAllocator -----------------------------------------------------

CachingAllocator::CachingAllocator(const AllocatorConfig& config, DeviceMemory* device)
    : impl_(std::make_unique<Impl>(config, device)) {}
CachingAllocator::CachingAllocator(const CachingAllocator& other, DeviceMemory* device)
    : impl_(std::make_unique<Impl>(*other.impl_, device)) {}
CachingAllocator::~CachingAllocator() = default;

BlockId CachingAllocator::malloc(std::int64_t size, StreamId stream) {
  return impl_->malloc(size, stream);
}
void CachingAllocator::free(BlockId b) {
  impl_->free(b);
}
std::uint64_t CachingAllocator::free_deferred(BlockId b) {
  return impl_->free_deferred(b);
}
void CachingAllocator::complete_free(std::uint64_t ticket) {
  impl_->complete_free(ticket);
}
void CachingAllocator::empty_cache() {
  impl_->empty_cache();
}
std::uint64_t CachingAllocator::address(BlockId b) const {
  return impl_->block(b).addr;
}
std::int64_t CachingAllocator::block_size(BlockId b) const {
  return impl_->block(b).size;
}
const AllocatorStats& CachingAllocator::stats() const {
  return impl_->stats;
}
const OomInfo& CachingAllocator::last_oom() const {
  return impl_->oom;
}
const AllocatorConfig& CachingAllocator::config() const {
  return impl_->config;
}
std::vector<SegmentInfo> CachingAllocator::segments() const {
  return impl_->segments();
}
void CachingAllocator::set_observer(std::function<void(const AllocatorEvent&)> observer) {
  impl_->observer = std::move(observer);
}

std::string CachingAllocator::check_internal_state() const {
  return impl_->check_internal_state();
}

std::string CachingAllocator::Impl::check_internal_state() const {
  std::size_t free_blocks = 0;
  std::size_t unmapped_blocks = 0;
  std::size_t pending = 0;
  for (std::int32_t b = 0; b < static_cast<std::int32_t>(blocks_.size()); ++b) {
    const Block& k = blocks_[b];
    if (!k.live || k.zero) continue;
    const std::string at = "block " + std::to_string(b) + ": ";
    if (k.prev != kNone && blocks_[k.prev].next != b) return at + "prev link broken";
    if (k.next != kNone && blocks_[k.next].prev != b) return at + "next link broken";
    if (k.next != kNone && blocks_[k.next].addr != k.addr + static_cast<std::uint64_t>(k.size))
      return at + "not adjacent to its next block";
    const auto& sp = *streams_[k.stream_index];
    if (sp.stream != k.stream) return at + "stream index disagrees with stream";
    const BlockSet& set = k.mapped ? sp.free[k.small ? 1 : 0] : sp.unmapped[k.small ? 1 : 0];
    const SetKey want = k.mapped ? key(b) : unmapped_key(b);
    const BlockSet::Pos p = set.lower_bound(want);
    const bool in_set = p != set.end() && set.key(p) == want;
    const bool should_be = !k.allocated && !k.pending;
    if (in_set != should_be)
      return at + (in_set ? "in its pool but in use" : "free but not in its pool");
    if (should_be) ++(k.mapped ? free_blocks : unmapped_blocks);
    if (k.pending) ++pending;
  }
  std::size_t in_sets = 0;
  std::size_t in_unmapped = 0;
  for (const auto& sp : streams_) {
    for (int pool = 0; pool < 2; ++pool) {
      in_sets += sp->free[pool].size();
      in_unmapped += sp->unmapped[pool].size();
    }
  }
  if (in_sets != free_blocks) return "pool sets hold keys of no free block";
  if (in_unmapped != unmapped_blocks) return "unmapped sets hold keys of no unmapped block";
  std::size_t listed = 0;
  for (std::int32_t b = pending_head_; b != kNone; b = blocks_[b].pend_next) {
    if (!blocks_[b].pending) return "pending list holds a block that is not pending";
    if (++listed > pending) break;
  }
  if (listed != pending) return "pending list disagrees with pending blocks";
  return "";
}

std::vector<SegmentInfo> CachingAllocator::Impl::segments() const {
  // Heads are the blocks at a segment's start; an expandable segment is
  // listed whole, its unmapped stretches as kUnmapped blocks (PyTorch's
  // snapshot lists each mapped stretch as a segment of its own instead).
  std::vector<SegmentInfo> result;
  for (std::int32_t h = 0; h < static_cast<std::int32_t>(blocks_.size()); ++h) {
    const Block& head = blocks_[h];
    if (!head.live || head.zero || head.prev != kNone) continue;
    SegmentInfo seg;
    seg.addr = head.addr;
    seg.stream = head.stream;
    seg.small_pool = head.small;
    seg.expandable = head.segment != kNone;
    for (std::int32_t b = h; b != kNone; b = blocks_[b].next) {
      const Block& k = blocks_[b];
      SegmentInfo::Block info;
      info.addr = k.addr;
      info.size = k.size;
      if (k.allocated)
        info.state = SegmentInfo::Block::State::kAllocated;
      else if (k.pending)
        info.state = SegmentInfo::Block::State::kPendingFree;
      else if (!k.mapped)
        info.state = SegmentInfo::Block::State::kUnmapped;
      else
        info.state = SegmentInfo::Block::State::kFree;
      if (k.allocated || k.pending) info.requested = k.requested;
      seg.size += k.size;
      seg.blocks.push_back(info);
    }
    result.push_back(std::move(seg));
  }
  std::sort(result.begin(), result.end(),
            [](const SegmentInfo& a, const SegmentInfo& b) { return a.addr < b.addr; });
  return result;
}

}  // namespace prism
