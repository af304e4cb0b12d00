// DeviceCachingAllocator's fallbacks when no cached block fits a request
// (c10/cuda/CUDACachingAllocator.cpp at 001074d2):
// garbage_collect_cached_blocks, alloc_block (cudaMalloc, or mapping pages
// of an expandable segment), release_available_cached_blocks,
// release_cached_blocks, release_blocks, release_block and
// synchronize_and_free_events. Observer events sit where PyTorch calls
// record_trace.
#include <algorithm>
#include <vector>

#include "mem/caching_allocator_impl.h"

namespace prism {

using alloc_internal::kNone;

void CachingAllocator::Impl::garbage_collect_cached_blocks() {
  // Frees unsplit cached blocks of the large pool, oldest (in get_free_block
  // calls) first, until reserved memory is back under the threshold.
  const auto gc_threshold = static_cast<std::int64_t>(config.garbage_collection_threshold *
                                                      static_cast<double>(allowed_memory_maximum_));
  if (total_allocated_memory_ <= gc_threshold) return;
  const std::int64_t target_size = total_allocated_memory_ - gc_threshold;
  std::int64_t gc_reclaimed = 0;

  auto gc_count = [&](std::int32_t b) {
    return static_cast<std::int64_t>(
        static_cast<int>(large_blocks_.get_free_blocks_call_count - blocks_[b].gc_count_base));
  };
  // An expandable block is never unsplit (its segment is larger than the
  // device), so release_block's assertion holds.
  auto freeable = [&](std::int32_t b) {
    return !blocks_[b].is_split() && blocks_[b].segment == kNone;
  };
  std::int64_t total_age = 0;
  int freeable_block_count = 0;
  for_each_free_block(large_blocks_, [&](std::int32_t b) {
    if (!freeable(b)) return;
    total_age += gc_count(b);
    ++freeable_block_count;
  });
  if (freeable_block_count == 0) return;

  bool block_freed = true;
  while (gc_reclaimed < target_size && block_freed && freeable_block_count > 0) {
    const double age_threshold =
        static_cast<double>(total_age) / static_cast<double>(freeable_block_count);
    block_freed = false;
    // The threshold is fixed for a pass and releasing one block changes no
    // other, so gathering first and releasing after matches PyTorch's loop.
    scratch_.clear();
    for_each_free_block(large_blocks_, [&](std::int32_t b) {
      if (freeable(b) && static_cast<double>(gc_count(b)) >= age_threshold) scratch_.push_back(b);
    });
    for (std::int32_t b : scratch_) {
      block_freed = true;
      gc_reclaimed += blocks_[b].size;
      total_age -= gc_count(b);
      --freeable_block_count;
      release_block(b);
    }
  }
}

bool CachingAllocator::Impl::alloc_block(AllocParams& p, bool is_retry) {
  if (is_retry) ++stats.num_alloc_retries;
  const std::int64_t size = p.alloc_size;
  if (set_fraction_ && total_allocated_memory_ + size > allowed_memory_maximum_) return false;
  if (config.expandable_segments) {
    p.block = try_allocate_expandable_block(p);
    return p.block != kNone;
  }
  const std::optional<std::uint64_t> ptr = device_->malloc(size);
  if (!ptr) return false;
  PRISM_CHECK(*ptr % alloc_internal::kKeyAddrUnit == 0,
              "DeviceMemory: address not 256-byte aligned");

  total_allocated_memory_ += size;
  const std::int32_t b = new_block();
  Block& k = blocks_[b];
  k.addr = *ptr;
  k.size = size;
  k.stream = p.stream;
  k.stream_index = p.stream_index;
  k.small = p.pool->is_small;
  p.block = b;
  ++stats.segments;
  increase(stats.reserved, stats.reserved_peak, size);
  ++stats.num_device_alloc;
  record_trace(Action::kSegmentAlloc, k.addr, k.size, p.stream);
  return true;
}

bool CachingAllocator::Impl::release_available_cached_blocks(const AllocParams& p) {
  // Frees oversize cached blocks of the request's pool and stream: the
  // smallest single one that is large enough, else the largest ones until
  // enough is freed.
  if (config.max_split_size == AllocatorConfig::kNoLimit) return false;
  const BlockSet& set = streams_[p.stream_index]->free[p.pool->is_small ? 1 : 0];
  const std::int64_t key_size = std::max(p.size, config.max_split_size);
  BlockSet::Pos it = set.lower_bound(alloc_internal::search_key(key_size));
  if (it != set.end() && blocks_[set.slot(it)].segment == kNone) {
    release_block(set.slot(it));
    return true;
  }
  // Expandable blocks cannot be released whole; they are skipped as in
  // later PyTorch (at 001074d2, release_block asserted on them).
  if (it == set.begin()) return false;
  std::int64_t total_released = 0;
  it = set.prev(it);
  scratch_.clear();
  while (total_released < key_size &&
         alloc_internal::key_size(set.key(it)) >= config.max_split_size) {
    const std::int32_t b = set.slot(it);
    if (blocks_[b].segment == kNone) {
      scratch_.push_back(b);
      total_released += blocks_[b].size;
    }
    if (it == set.begin()) break;
    it = set.prev(it);
  }
  for (std::int32_t b : scratch_) release_block(b);
  return total_released >= key_size;
}

bool CachingAllocator::Impl::release_cached_blocks() {
  // Pending frees first, so that their blocks can be released too.
  synchronize_and_free_events();
  release_blocks(large_blocks_);
  release_blocks(small_blocks_);
  return true;
}

void CachingAllocator::Impl::release_blocks(BlockPool& pool) {
  // Every unsplit block; expandable blocks lose their free pages, and a
  // segment left with nothing mapped is released.
  scratch_.clear();
  std::vector<std::int32_t> to_unmap;
  for_each_free_block(pool, [&](std::int32_t b) {
    if (blocks_[b].segment != kNone)
      to_unmap.push_back(b);
    else if (!blocks_[b].is_split())
      scratch_.push_back(b);
  });
  for (std::int32_t b : scratch_) release_block(b);
  for (std::int32_t b : to_unmap) {
    unmap_block(b);
    if (!blocks_[b].is_split()) release_expandable_segment(b);
  }
}

void CachingAllocator::Impl::release_block(std::int32_t b) {
  Block& k = blocks_[b];
  PRISM_CHECK(k.segment == kNone, "release_block of an expandable block");
  ++stats.num_device_free;
  record_trace(Action::kSegmentFree, k.addr, k.size, k.stream);
  device_->free(k.addr, k.size);
  total_allocated_memory_ -= k.size;
  --stats.segments;
  stats.reserved -= k.size;
  set_of(b).erase(key(b));
  delete_block(b);
}

void CachingAllocator::Impl::synchronize_and_free_events() {
  // Every pending free completes, in the order of the free_deferred calls
  // (PyTorch walks its per-stream event queues in hash-map order).
  ++stats.num_sync_all_streams;
  while (pending_head_ != kNone) {
    const std::int32_t b = pending_head_;
    pending_unlink(b);
    free_block(b);
  }
}

}  // namespace prism
