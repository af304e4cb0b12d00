// DeviceCachingAllocator's malloc and free paths (c10/cuda/
// CUDACachingAllocator.cpp at 001074d2): malloc, get_free_block,
// alloc_found_block, free, free_block, try_merge_blocks, and the record-
// stream frees (insert_events / process_events, here free_deferred and
// complete_free). The fallbacks malloc tries when nothing fits are in
// caching_allocator_fallbacks.cc. Observer events sit where PyTorch calls
// record_trace.
#include <algorithm>
#include <limits>

#include "mem/caching_allocator_impl.h"
#include "util/units.h"

namespace prism {

using alloc_internal::kLargeBuffer;
using alloc_internal::kMinBlockSize;
using alloc_internal::kNone;
using alloc_internal::kSmallSize;

CachingAllocator::Impl::Impl(const AllocatorConfig& cfg, DeviceMemory* device)
    : config(cfg), device_(device) {
  PRISM_CHECK(device_ != nullptr, "CachingAllocator needs a DeviceMemory");
  small_blocks_.is_small = true;
  // Stream 0's (empty) pools exist from the start, so that stream_index's
  // first look needs no bounds check.
  streams_.push_back(std::make_unique<alloc_internal::StreamPools>());
  stream_ids_.push_back(0);
  stream_order_.push_back(0);
  PRISM_CHECK(!config.expandable_segments || device_->capacity() > 0,
              "expandable segments need the device's capacity");
  PRISM_CHECK(config.memory_fraction >= 0 && config.memory_fraction <= 1,
              "memory fraction outside [0, 1]");
  if (config.memory_fraction > 0) {
    // setMemoryFraction: allowed_memory_maximum = fraction * total memory.
    PRISM_CHECK(device_->capacity() > 0, "a memory fraction needs the device's capacity");
    const std::int64_t total = device_->capacity();
    const double allowed = config.memory_fraction * static_cast<double>(total);
    allowed_memory_maximum_ =
        allowed >= static_cast<double>(total) ? total : static_cast<std::int64_t>(allowed);
    set_fraction_ = true;
  }
}

CachingAllocator::Impl::Impl(const Impl& o, DeviceMemory* device)
    : config(o.config),
      stats(o.stats),
      oom(o.oom),
      device_(device),
      blocks_(o.blocks_),
      free_slots_(o.free_slots_),
      stream_ids_(o.stream_ids_),
      stream_order_(o.stream_order_),
      last_stream_(o.last_stream_),
      large_blocks_(o.large_blocks_),
      small_blocks_(o.small_blocks_),
      expandable_segments_(o.expandable_segments_),
      pending_head_(o.pending_head_),
      pending_tail_(o.pending_tail_),
      next_ticket_(o.next_ticket_),
      total_allocated_memory_(o.total_allocated_memory_),
      allowed_memory_maximum_(o.allowed_memory_maximum_),
      set_fraction_(o.set_fraction_) {
  PRISM_CHECK(device_ != nullptr, "CachingAllocator needs a DeviceMemory");
  streams_.reserve(o.streams_.size());
  for (const auto& sp : o.streams_)
    streams_.push_back(std::make_unique<alloc_internal::StreamPools>(*sp));
}

// --- blocks -------------------------------------------------------------

std::int32_t CachingAllocator::Impl::stream_index(StreamId stream) {
  if (stream_ids_[last_stream_] == stream) return last_stream_;
  const auto n = static_cast<std::int32_t>(stream_ids_.size());
  for (std::int32_t i = 0; i < n; ++i) {
    if (stream_ids_[i] == stream) return last_stream_ = i;
  }
  streams_.push_back(std::make_unique<alloc_internal::StreamPools>());
  streams_.back()->stream = stream;
  stream_ids_.push_back(stream);
  const auto at = std::lower_bound(stream_order_.begin(), stream_order_.end(), stream,
                                   [&](std::int32_t i, StreamId s) { return stream_ids_[i] < s; });
  stream_order_.insert(at, n);
  return last_stream_ = n;
}

std::int32_t CachingAllocator::Impl::new_block() {
  std::int32_t b;
  if (!free_slots_.empty()) {
    b = free_slots_.back();
    free_slots_.pop_back();
    blocks_[b] = Block{};
  } else {
    b = static_cast<std::int32_t>(blocks_.size());
    PRISM_CHECK(b < alloc_internal::kMaxSlots, "CachingAllocator: too many blocks");
    blocks_.emplace_back();
  }
  blocks_[b].live = true;
  return b;
}

void CachingAllocator::Impl::delete_block(std::int32_t b) {
  blocks_[b].live = false;
  free_slots_.push_back(b);
}

void CachingAllocator::Impl::insert_into_blocks(std::int32_t b) {
  blocks_[b].gc_count_base = pool_of(b).get_free_blocks_call_count;
  set_of(b).insert(key(b));
}

const CachingAllocator::Impl::Block& CachingAllocator::Impl::block(BlockId b) const {
  PRISM_CHECK(b >= 0 && b < static_cast<BlockId>(blocks_.size()) && blocks_[b].live &&
                  (blocks_[b].allocated || blocks_[b].zero),
              "CachingAllocator: not a live allocation: " + std::to_string(b));
  return blocks_[b];
}

void CachingAllocator::Impl::record_trace(Action action, std::uint64_t addr, std::int64_t size,
                                          StreamId stream) {
  if (observer) observer(AllocatorEvent{action, addr, size, stream});
}

// --- malloc -------------------------------------------------------------

BlockId CachingAllocator::Impl::malloc(std::int64_t orig_size, StreamId stream) {
  PRISM_CHECK(orig_size >= 0 && orig_size <= kMaxBytes.count,
              "CachingAllocator::malloc: size outside [0, 1 PiB]");
  if (orig_size == 0) {  // PyTorch's allocate(0) never reaches malloc
    const std::int32_t b = new_block();
    blocks_[b].zero = true;
    blocks_[b].stream = stream;
    return b;
  }
  AllocParams p;
  p.size = round_request(orig_size, config);
  p.stream = stream;
  p.stream_index = stream_index(stream);
  p.pool = p.size <= kSmallSize ? &small_blocks_ : &large_blocks_;
  p.alloc_size = segment_size_for(p.size);

  // No free-memory callbacks are registered, so the second search of
  // PyTorch's "get_free_block || (trigger_free_memory_callbacks && ...)"
  // never runs.
  bool found = get_free_block(p);
  if (!found) {
    if (gc_enabled()) garbage_collect_cached_blocks();
    found = alloc_block(p, false) ||
            (release_available_cached_blocks(p) && alloc_block(p, false)) ||
            (release_cached_blocks() && alloc_block(p, true));
  }
  if (!found) {
    record_oom(p, orig_size);
    return kOutOfMemory;
  }
  return alloc_found_block(p, orig_size, should_split(p.block, p.size));
}

void CachingAllocator::Impl::record_oom(const AllocParams& p, std::int64_t orig_size) {
  const std::int64_t device_free = device_->free_bytes();
  record_trace(Action::kOom, static_cast<std::uint64_t>(device_free), p.size, p.stream);
  ++stats.num_ooms;
  oom = OomInfo{orig_size,   p.size,          p.alloc_size,  p.stream,
                device_free, stats.allocated, stats.reserved};
}

bool CachingAllocator::Impl::get_free_block(AllocParams& p) {
  BlockPool& pool = *p.pool;
  // Block reuse intervals are tracked only when garbage collection is on.
  if (gc_enabled()) ++pool.get_free_blocks_call_count;
  BlockSet* set = &streams_[p.stream_index]->free[pool.is_small ? 1 : 0];
  BlockSet::Pos it = set->lower_bound(alloc_internal::search_key(p.size));
  if (it == set->end()) return false;

  if (config.expandable_segments && blocks_[set->slot(it)].segment != kNone) {
    // Best fit counts an expandable block as the size it can grow to: its
    // own plus the unmapped block after it. (Blocks are expandable only when
    // the config says so, so PyTorch's "expandable segments turned off
    // since" branch cannot arise here.)
    auto expandable_size = [&](std::int32_t b) {
      const Block& k = blocks_[b];
      return k.size + (k.next != kNone && !blocks_[k.next].mapped ? blocks_[k.next].size : 0);
    };
    BlockSet::Pos next = set->next(it);
    while (blocks_[set->slot(it)].segment != kNone && next != set->end() &&
           expandable_size(set->slot(next)) < expandable_size(set->slot(it))) {
      it = next;
      next = set->next(next);
    }
  }
  const std::int64_t found = alloc_internal::key_size(set->key(it));
  // Do not return an oversized block for a large request.
  if (p.size < config.max_split_size && found >= config.max_split_size) return false;
  // Allow an oversized block to be rounded up, but within a limit.
  if (p.size >= config.max_split_size && found >= p.size + kLargeBuffer) return false;
  // The block leaves the pool in alloc_found_block, which knows whether a
  // remainder takes its place in the set.
  p.block = set->slot(it);
  p.found_set = set;
  p.found_pos = it;
  return true;
}

// --- handing out and taking back -------------------------------------------

bool CachingAllocator::Impl::should_split(std::int32_t b, std::int64_t size) const {
  const std::int64_t remaining = blocks_[b].size - size;
  if (blocks_[b].small || config.expandable_segments) return remaining >= kMinBlockSize;
  return size < config.max_split_size && remaining > kSmallSize;
}

BlockId CachingAllocator::Impl::alloc_found_block(const AllocParams& p, std::int64_t orig_size,
                                                  bool split_remainder) {
  std::int32_t b = p.block;
  const bool already_split = blocks_[b].is_split();
  const bool expandable = blocks_[b].segment != kNone;
  if (split_remainder) {
    // The block keeps the front; `remaining` (the old Block) the rest.
    const std::int32_t remaining = b;
    b = new_block();
    Block& blk = blocks_[b];
    Block& rem = blocks_[remaining];
    blk.addr = rem.addr;
    blk.size = p.size;
    blk.stream = p.stream;
    blk.stream_index = rem.stream_index;
    blk.small = rem.small;
    blk.segment = rem.segment;
    blk.prev = rem.prev;
    if (blk.prev != kNone) blocks_[blk.prev].next = b;
    blk.next = remaining;
    rem.prev = b;
    rem.addr += static_cast<std::uint64_t>(p.size);
    rem.size -= p.size;
    if (p.found_set != nullptr) {
      rem.gc_count_base = p.pool->get_free_blocks_call_count;
      p.found_set->replace(p.found_pos, key(remaining));
    } else {
      insert_into_blocks(remaining);
    }
    if (already_split && !expandable) {
      stats.inactive_split -= p.size;  // an inactive split block shrinks
    } else if (!expandable) {
      increase(stats.inactive_split, stats.inactive_split_peak, blocks_[remaining].size);
    }
  } else {
    if (p.found_set != nullptr) p.found_set->erase(p.found_pos);
    if (already_split && !expandable) stats.inactive_split -= blocks_[b].size;
  }
  Block& blk = blocks_[b];
  blk.allocated = true;
  blk.requested = orig_size;
  record_trace(Action::kAlloc, blk.addr, orig_size, blk.stream);
  ++stats.num_allocs;
  increase(stats.allocated, stats.allocated_peak, blk.size);
  increase(stats.active, stats.active_peak, blk.size);
  increase(stats.requested, stats.requested_peak, orig_size);
  return b;
}

void CachingAllocator::Impl::free(BlockId id) {
  const std::int32_t b = id;
  if (block(id).zero) {
    delete_block(b);
    return;
  }
  Block& k = blocks_[b];
  k.allocated = false;
  ++stats.num_frees;
  stats.allocated -= k.size;
  record_trace(Action::kFreeRequested, k.addr, k.requested, k.stream);
  free_block(b);
}

std::uint64_t CachingAllocator::Impl::free_deferred(BlockId id) {
  const std::int32_t b = id;
  if (block(id).zero) {
    delete_block(b);
    return 0;  // complete_free(0) does nothing
  }
  Block& k = blocks_[b];
  k.allocated = false;
  ++stats.num_frees;
  stats.allocated -= k.size;
  record_trace(Action::kFreeRequested, k.addr, k.requested, k.stream);
  // insert_events: the block waits, still active, for the streams.
  k.pending = true;
  k.ticket = ++next_ticket_;
  if (k.ticket == 0) k.ticket = ++next_ticket_;
  k.pend_prev = pending_tail_;
  k.pend_next = kNone;
  if (pending_tail_ != kNone)
    blocks_[pending_tail_].pend_next = b;
  else
    pending_head_ = b;
  pending_tail_ = b;
  return (static_cast<std::uint64_t>(k.ticket) << 32) | static_cast<std::uint32_t>(b);
}

void CachingAllocator::Impl::complete_free(std::uint64_t ticket) {
  const auto b = static_cast<std::int32_t>(ticket & 0xffffffffu);
  const auto seq = static_cast<std::uint32_t>(ticket >> 32);
  if (seq == 0 || b < 0 || b >= static_cast<std::int32_t>(blocks_.size())) return;
  const Block& k = blocks_[b];
  if (!k.live || !k.pending || k.ticket != seq) return;  // completed already
  pending_unlink(b);
  free_block(b);
}

void CachingAllocator::Impl::pending_unlink(std::int32_t b) {
  Block& k = blocks_[b];
  if (k.pend_prev != kNone)
    blocks_[k.pend_prev].pend_next = k.pend_next;
  else
    pending_head_ = k.pend_next;
  if (k.pend_next != kNone)
    blocks_[k.pend_next].pend_prev = k.pend_prev;
  else
    pending_tail_ = k.pend_prev;
  k.pend_prev = k.pend_next = kNone;
  k.pending = false;
}

void CachingAllocator::Impl::free_block(std::int32_t b) {
  // The block returns to its pool, merged with free neighbours.
  {
    const Block& k = blocks_[b];
    record_trace(Action::kFreeCompleted, k.addr, k.requested, k.stream);
  }
  const std::int64_t original_block_size = blocks_[b].size;
  const std::int64_t requested_size = blocks_[b].requested;
  // try_merge_blocks with prev, then next; the set changes once at the end
  // (a merged neighbour's place goes to the merged block).
  const std::int32_t prev = blocks_[b].prev;
  const std::int32_t next = blocks_[b].next;
  const bool merge_prev = mergeable(b, prev);
  const bool merge_next = mergeable(b, next);
  const SetKey prev_key = merge_prev ? key(prev) : 0;
  const SetKey next_key = merge_next ? key(next) : 0;
  std::int64_t net_inactive_split_size = 0;
  if (merge_prev) net_inactive_split_size -= merge_blocks(b, prev);
  if (merge_next) net_inactive_split_size -= merge_blocks(b, next);
  Block& k = blocks_[b];
  k.requested = 0;
  k.gc_count_base = pool_of(b).get_free_blocks_call_count;
  BlockSet& set = set_of(b);
  if (merge_prev && merge_next) set.erase(prev_key);
  if (merge_prev || merge_next) {
    const SetKey old = merge_next ? next_key : prev_key;
    const BlockSet::Pos at = set.lower_bound(old);
    PRISM_CHECK(set.key(at) == old, "free_block: merged neighbour not in its pool");
    set.replace(at, key(b));
  } else {
    set.insert(key(b));
  }
  if (k.is_split()) net_inactive_split_size += k.size;
  // Expandable segments are left out of inactive_split, as in PyTorch.
  if (k.segment == kNone) {
    if (net_inactive_split_size > 0)
      increase(stats.inactive_split, stats.inactive_split_peak, net_inactive_split_size);
    else
      stats.inactive_split += net_inactive_split_size;
  }
  stats.active -= original_block_size;
  stats.requested -= requested_size;
}

bool CachingAllocator::Impl::mergeable(std::int32_t dst, std::int32_t src) const {
  if (src == kNone) return false;
  const Block& s = blocks_[src];
  return !s.allocated && !s.pending && s.mapped == blocks_[dst].mapped;
}

std::int64_t CachingAllocator::Impl::try_merge_blocks(std::int32_t dst, std::int32_t src) {
  if (!mergeable(dst, src)) return 0;
  // src leaves its set before dst takes its bytes.
  if (blocks_[src].mapped)
    set_of(src).erase(key(src));
  else
    unmapped_set_of(src).erase(unmapped_key(src));
  return merge_blocks(dst, src);
}

std::int64_t CachingAllocator::Impl::merge_blocks(std::int32_t dst, std::int32_t src) {
  const Block& s = blocks_[src];
  Block& d = blocks_[dst];
  if (d.prev == src) {  // [src dst]
    d.addr = s.addr;
    d.prev = s.prev;
    if (d.prev != kNone) blocks_[d.prev].next = dst;
  } else {  // [dst src]
    d.next = s.next;
    if (d.next != kNone) blocks_[d.next].prev = dst;
  }
  const std::int64_t subsumed = s.size;
  d.size += subsumed;
  delete_block(src);
  return subsumed;
}

}  // namespace prism
