// Expandable segments (PyTorch's Note [Expandable Segments], c10/cuda/
// CUDACachingAllocator.cpp at 001074d2): find_expandable_block, map_block,
// try_allocate_expandable_block, unmap_block, release_expandable_segment,
// and ExpandableSegment::map / unmap's page arithmetic.
//
// A segment reserves address space for 1 1/8 of the device's memory and
// maps it in pages (2 MiB small pool, 20 MiB large pool) as blocks need
// them. Its blocks tile the whole reservation; unmapped ones are always
// page-aligned at both ends.
#include <algorithm>

#include "mem/caching_allocator_impl.h"
#include "util/units.h"

namespace prism {

using alloc_internal::kLargeBuffer;
using alloc_internal::kNone;
using alloc_internal::kSmallBuffer;

namespace {

// Block::splice: puts `b` between `before` and `after`, which are adjacent.
void splice(std::vector<alloc_internal::Block>& blocks, std::int32_t b, std::int32_t before,
            std::int32_t after) {
  if (before != kNone) {
    PRISM_CHECK(blocks[before].next == after, "splice: blocks not adjacent");
    blocks[before].next = b;
  }
  blocks[b].prev = before;
  if (after != kNone) {
    PRISM_CHECK(blocks[after].prev == before, "splice: blocks not adjacent");
    blocks[after].prev = b;
  }
  blocks[b].next = after;
}

}  // namespace

std::int32_t CachingAllocator::Impl::find_expandable_block(const AllocParams& p) {
  // The lowest address of the stream's segments with `size` bytes of free or
  // unmapped space in a row; else a new segment.
  auto allocatable = [&](std::int32_t b) {
    return b != kNone && !blocks_[b].allocated && !blocks_[b].pending;
  };
  auto has_available_address_space = [&](std::int32_t b) {
    std::int64_t bytes = 0;
    while (bytes < p.size && allocatable(b)) {
      bytes += blocks_[b].size;
      b = blocks_[b].next;
    }
    return bytes >= p.size;
  };
  const int pool = p.pool->is_small ? 1 : 0;
  BlockSet& unmapped = streams_[p.stream_index]->unmapped[pool];
  for (BlockSet::Pos it = unmapped.begin(); it != unmapped.end(); it = unmapped.next(it)) {
    std::int32_t c = unmapped.slot(it);
    // A free block just before the unmapped one counts too.
    if (allocatable(blocks_[c].prev)) c = blocks_[c].prev;
    if (has_available_address_space(c)) return c;
  }
  alloc_internal::ExpandableSegment es;
  es.page = p.pool->is_small ? kSmallBuffer : kLargeBuffer;
  // 1 1/8 of the device's memory; an "unlimited" device counts as 1 PiB,
  // which keeps block sizes inside the pool keys' range.
  const std::int64_t total = std::min(device_->capacity(), kMaxBytes.count);
  const std::int64_t address_space_size = total + total / 8;
  es.max_handles = (address_space_size + es.page - 1) / es.page;
  es.base = device_->reserve(es.size());
  PRISM_CHECK(es.base % alloc_internal::kKeyAddrUnit == 0,
              "DeviceMemory: address not 256-byte aligned");
  es.live = true;
  expandable_segments_.push_back(es);

  const std::int32_t candidate = new_block();
  Block& k = blocks_[candidate];
  k.addr = es.base;
  k.size = es.size();
  k.stream = p.stream;
  k.stream_index = p.stream_index;
  k.small = p.pool->is_small;
  k.mapped = false;
  k.segment = static_cast<std::int32_t>(expandable_segments_.size()) - 1;
  unmapped.insert(unmapped_key(candidate));
  return candidate;
}

bool CachingAllocator::Impl::map_block(std::int32_t to_map, std::int64_t size) {
  PRISM_CHECK(!blocks_[to_map].mapped && size <= blocks_[to_map].size, "map_block: bad block");
  const alloc_internal::ExpandableSegment& es = expandable_segments_[blocks_[to_map].segment];
  // ExpandableSegment::map: whole pages from the block's start.
  const std::uint64_t ptr = blocks_[to_map].addr;
  const auto offset = static_cast<std::int64_t>(ptr - es.base);
  PRISM_CHECK(offset % es.page == 0, "map_block: unmapped block not page-aligned");
  const std::int64_t begin = offset / es.page;
  const std::int64_t end = (offset + size + es.page - 1) / es.page;
  const std::int64_t mapped_size = (end - begin) * es.page;
  if (mapped_size == 0 || !device_->map(mapped_size)) return false;

  unmapped_set_of(to_map).erase(unmapped_key(to_map));
  blocks_[to_map].mapped = true;
  if (mapped_size < blocks_[to_map].size) {
    // to_map -> remaining -> to_map.next
    const std::int32_t remaining = new_block();
    Block& r = blocks_[remaining];
    const Block& m = blocks_[to_map];
    r.addr = m.addr + static_cast<std::uint64_t>(mapped_size);
    r.size = m.size - mapped_size;
    r.stream = m.stream;
    r.stream_index = m.stream_index;
    r.small = m.small;
    r.segment = m.segment;
    r.mapped = false;
    splice(blocks_, remaining, to_map, m.next);
    unmapped_set_of(remaining).insert(unmapped_key(remaining));
    blocks_[to_map].size = mapped_size;
  }
  try_merge_blocks(to_map, blocks_[to_map].prev);
  try_merge_blocks(to_map, blocks_[to_map].next);
  insert_into_blocks(to_map);

  total_allocated_memory_ += mapped_size;
  increase(stats.reserved, stats.reserved_peak, mapped_size);
  ++stats.num_device_alloc;
  record_trace(Action::kSegmentMap, ptr, mapped_size, blocks_[to_map].stream);
  return true;
}

std::int32_t CachingAllocator::Impl::try_allocate_expandable_block(const AllocParams& p) {
  const std::int64_t size = p.size;
  std::int32_t candidate = find_expandable_block(p);
  // candidate starts a run of free/unmapped blocks with room for `size`:
  // unmapped -> null, unmapped -> free -> *, or free -> unmapped -> *.
  if (!blocks_[candidate].mapped && !map_block(candidate, std::min(blocks_[candidate].size, size)))
    return kNone;
  while (blocks_[candidate].size < size) {
    // free -> unmapped -> *: map part of the unmapped block; it merges with
    // the free one before it.
    const std::int64_t remaining = size - blocks_[candidate].size;
    const std::int32_t next = blocks_[candidate].next;
    PRISM_CHECK(next != kNone && !blocks_[next].mapped,
                "expandable block not followed by unmapped");
    if (!map_block(next, std::min(remaining, blocks_[next].size))) return kNone;
    candidate = next;
  }
  set_of(candidate).erase(key(candidate));
  return candidate;
}

void CachingAllocator::Impl::unmap_block(std::int32_t b) {
  // ExpandableSegment::unmap: only the pages the free block covers whole.
  const alloc_internal::ExpandableSegment& es = expandable_segments_[blocks_[b].segment];
  const auto start = static_cast<std::int64_t>(blocks_[b].addr - es.base);
  const std::int64_t begin = (start + es.page - 1) / es.page;
  const std::int64_t end = (start + blocks_[b].size) / es.page;
  if (begin >= end) return;
  const std::uint64_t unmapped_ptr = es.base + static_cast<std::uint64_t>(begin * es.page);
  const std::int64_t unmapped_size = (end - begin) * es.page;

  set_of(b).erase(key(b));
  auto free_piece = [&](std::uint64_t addr, std::int64_t size, std::int32_t before,
                        std::int32_t after) {
    const std::int32_t piece = new_block();
    Block& f = blocks_[piece];
    f.addr = addr;
    f.size = size;
    f.stream = blocks_[b].stream;
    f.stream_index = blocks_[b].stream_index;
    f.small = blocks_[b].small;
    f.segment = blocks_[b].segment;
    splice(blocks_, piece, before, after);
    insert_into_blocks(piece);
  };
  const auto before_size = static_cast<std::int64_t>(unmapped_ptr - blocks_[b].addr);
  if (before_size > 0) free_piece(blocks_[b].addr, before_size, blocks_[b].prev, b);
  const std::int64_t after_size = blocks_[b].size - (before_size + unmapped_size);
  if (after_size > 0)
    free_piece(unmapped_ptr + static_cast<std::uint64_t>(unmapped_size), after_size, b,
               blocks_[b].next);

  blocks_[b].addr = unmapped_ptr;
  blocks_[b].size = unmapped_size;
  blocks_[b].mapped = false;
  try_merge_blocks(b, blocks_[b].prev);
  try_merge_blocks(b, blocks_[b].next);
  unmapped_set_of(b).insert(unmapped_key(b));

  device_->unmap(unmapped_size);
  total_allocated_memory_ -= unmapped_size;
  stats.reserved -= unmapped_size;
  ++stats.num_device_free;
  record_trace(Action::kSegmentUnmap, unmapped_ptr, unmapped_size, blocks_[b].stream);
}

void CachingAllocator::Impl::release_expandable_segment(std::int32_t b) {
  alloc_internal::ExpandableSegment& es = expandable_segments_[blocks_[b].segment];
  PRISM_CHECK(blocks_[b].size == es.size() && !blocks_[b].mapped, "block disagrees with segment");
  es.live = false;
  unmapped_set_of(b).erase(unmapped_key(b));
  delete_block(b);
}

}  // namespace prism
