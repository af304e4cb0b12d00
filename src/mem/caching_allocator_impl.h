// CachingAllocator::Impl: DeviceCachingAllocator of PyTorch's
// c10/cuda/CUDACachingAllocator.cpp (commit 001074d2, see
// docs/memory.md), one function here per function there,
// with the same names. Internal to src/mem.
//
// Blocks live in one vector and refer to each other by index (prev/next
// within their segment); freed slots are reused (LIFO). A free, mapped block
// sits in its stream's free set of its pool, a free unmapped one
// (expandable segments) in the unmapped set; an allocated or pending-free
// block is in neither. PyTorch's BlockPool::blocks is the union of a pool's
// free sets over the streams, in stream order (StreamPools). Keys are copies
// of (size, addr), so a block leaves its set before either changes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mem/caching_allocator.h"
#include "mem/caching_allocator_block_set.h"

namespace prism::alloc_internal {

inline constexpr std::int64_t kMinBlockSize = 512;        // every size rounds to 512 B
inline constexpr std::int64_t kSmallSize = 1 << 20;       // largest small request, 1 MiB
inline constexpr std::int64_t kSmallBuffer = 2 << 20;     // small segments, 2 MiB
inline constexpr std::int64_t kLargeBuffer = 20 << 20;    // segments for 1-10 MiB, 20 MiB
inline constexpr std::int64_t kMinLargeAlloc = 10 << 20;  // below: a kLargeBuffer segment
inline constexpr std::int64_t kRoundLarge = 2 << 20;      // larger segments round to 2 MiB

inline constexpr std::int32_t kNone = -1;

struct Block {
  std::uint64_t addr = 0;
  std::int64_t size = 0;
  std::int64_t requested = 0;  // requested_size
  StreamId stream = 0;
  std::int64_t gc_count_base = 0;
  std::int32_t stream_index = 0;  // into the allocator's StreamPools
  std::int32_t prev = kNone;
  std::int32_t next = kNone;
  std::int32_t segment = kNone;    // expandable segment index, or kNone
  std::uint32_t ticket = 0;        // sequence of the pending free, when pending
  std::int32_t pend_prev = kNone;  // pending-free list, in free_deferred order
  std::int32_t pend_next = kNone;
  bool small = false;
  bool allocated = false;
  bool mapped = true;
  bool pending = false;  // freed, waiting for its streams (event_count > 0)
  bool live = false;     // slot in use
  bool zero = false;     // a size-0 handle: no memory behind it

  bool is_split() const { return prev != kNone || next != kNone; }
};

// A pool's counters; its blocks are in the StreamPools.
struct BlockPool {
  bool is_small = false;
  std::int64_t get_free_blocks_call_count = 0;
};

// One stream's share of both pools: free blocks by (size, addr), unmapped
// blocks by addr; [0] the large pool, [1] the small pool.
struct StreamPools {
  StreamId stream = 0;
  BlockSet free[2];
  BlockSet unmapped[2];
};

// ExpandableSegment: a reserved address range mapped in pages of
// segment_size (2 MiB small pool, 20 MiB large pool).
struct ExpandableSegment {
  std::uint64_t base = 0;
  std::int64_t page = 0;
  std::int64_t max_handles = 0;
  bool live = false;
  std::int64_t size() const { return page * max_handles; }
};

struct AllocParams {
  std::int64_t size = 0;  // rounded request
  StreamId stream = 0;
  std::int32_t stream_index = 0;
  BlockPool* pool = nullptr;
  std::int64_t alloc_size = 0;
  std::int32_t block = kNone;
  // Where get_free_block found the block; it is still in that set.
  BlockSet* found_set = nullptr;
  BlockSet::Pos found_pos;
};

}  // namespace prism::alloc_internal

namespace prism {

class CachingAllocator::Impl {
 public:
  using Block = alloc_internal::Block;
  using BlockPool = alloc_internal::BlockPool;
  using AllocParams = alloc_internal::AllocParams;

  Impl(const AllocatorConfig& config, DeviceMemory* device);
  // A copy of `o`'s state on `device`, which must hold what o's device
  // holds; without o's observer.
  Impl(const Impl& o, DeviceMemory* device);

  BlockId malloc(std::int64_t orig_size, StreamId stream);
  void free(BlockId b);
  std::uint64_t free_deferred(BlockId b);
  void complete_free(std::uint64_t ticket);
  void empty_cache() { release_cached_blocks(); }
  std::vector<SegmentInfo> segments() const;
  std::string check_internal_state() const;

  const Block& block(BlockId b) const;

  AllocatorConfig config;
  AllocatorStats stats;
  OomInfo oom;
  std::function<void(const AllocatorEvent&)> observer;

 private:
  using SetKey = alloc_internal::SetKey;
  using BlockSet = alloc_internal::BlockSet;
  using Action = AllocatorEvent::Action;

  // Blocks.
  std::int32_t new_block();
  void delete_block(std::int32_t b);
  SetKey key(std::int32_t b) const {
    return alloc_internal::block_key(blocks_[b].size, blocks_[b].addr, b);
  }
  SetKey unmapped_key(std::int32_t b) const {
    return alloc_internal::block_key(0, blocks_[b].addr, b);
  }
  // The set of free mapped (unmapped) blocks of b's stream and pool.
  BlockSet& set_of(std::int32_t b) {
    return streams_[blocks_[b].stream_index]->free[blocks_[b].small ? 1 : 0];
  }
  BlockSet& unmapped_set_of(std::int32_t b) {
    return streams_[blocks_[b].stream_index]->unmapped[blocks_[b].small ? 1 : 0];
  }
  std::int32_t stream_index(StreamId stream);
  // f(slot) for every free mapped block of a pool, in PyTorch's order.
  template <typename F>
  void for_each_free_block(const BlockPool& pool, F f) const {
    for (std::int32_t i : stream_order_) streams_[i]->free[pool.is_small ? 1 : 0].for_each(f);
  }
  BlockPool& pool_of(std::int32_t b) { return blocks_[b].small ? small_blocks_ : large_blocks_; }
  void insert_into_blocks(std::int32_t b);
  void record_trace(Action action, std::uint64_t addr, std::int64_t size, StreamId stream);
  bool gc_enabled() const { return set_fraction_ && config.garbage_collection_threshold > 0; }

  // malloc and its fallbacks (caching_allocator_impl.cc).
  bool get_free_block(AllocParams& p);
  void garbage_collect_cached_blocks();
  bool alloc_block(AllocParams& p, bool is_retry);
  bool release_available_cached_blocks(const AllocParams& p);
  bool release_cached_blocks();
  void release_blocks(BlockPool& pool);
  void release_block(std::int32_t b);
  void synchronize_and_free_events();
  bool should_split(std::int32_t b, std::int64_t size) const;
  BlockId alloc_found_block(const AllocParams& p, std::int64_t orig_size, bool split_remainder);
  void record_oom(const AllocParams& p, std::int64_t orig_size);
  void free_block(std::int32_t b);
  std::int64_t try_merge_blocks(std::int32_t dst, std::int32_t src);
  bool mergeable(std::int32_t dst, std::int32_t src) const;
  // try_merge_blocks without the set update: links and sizes only.
  std::int64_t merge_blocks(std::int32_t dst, std::int32_t src);
  void pending_unlink(std::int32_t b);

  // Expandable segments (caching_allocator_expandable.cc).
  std::int32_t find_expandable_block(const AllocParams& p);
  bool map_block(std::int32_t to_map, std::int64_t size);
  std::int32_t try_allocate_expandable_block(const AllocParams& p);
  void unmap_block(std::int32_t b);
  void release_expandable_segment(std::int32_t b);

  // Stats helpers (torch's increase_stat / decrease_stat on the "all" pool).
  static void increase(std::int64_t& current, std::int64_t& peak, std::int64_t amount) {
    current += amount;
    if (current > peak) peak = current;
  }

  DeviceMemory* device_;
  std::vector<Block> blocks_;
  std::vector<std::int32_t> free_slots_;
  std::vector<std::unique_ptr<alloc_internal::StreamPools>> streams_;  // by first use
  std::vector<StreamId> stream_ids_;                                   // streams_[i]->stream
  std::vector<std::int32_t> stream_order_;  // indices into streams_, by stream id
  std::int32_t last_stream_ = 0;
  BlockPool large_blocks_;
  BlockPool small_blocks_;
  std::vector<alloc_internal::ExpandableSegment> expandable_segments_;
  std::int32_t pending_head_ = alloc_internal::kNone;
  std::int32_t pending_tail_ = alloc_internal::kNone;
  std::uint32_t next_ticket_ = 0;
  std::int64_t total_allocated_memory_ = 0;
  std::int64_t allowed_memory_maximum_ = 0;
  bool set_fraction_ = false;
  std::vector<std::int32_t> scratch_;  // reused by release loops
};

}  // namespace prism
