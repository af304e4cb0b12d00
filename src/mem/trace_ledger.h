// What a recorded memory history says on its own, without the allocator
// model: the memory_allocated() and memory_reserved() curves torch's
// allocator went through, and whether the history is complete.
//
// The trace gives each alloc's address and requested size but not the size
// of the block handed out, which is what memory_allocated() counts. The
// ledger rebuilds it from the trace: the block starts the free run at its
// address (the run reaches the next live block or the end of the segment or
// of the mapped range) and is the rounded request, or the whole run when
// PyTorch would not split the remainder off (should_split). Reserved bytes
// are the segments allocated and pages mapped, less those freed and
// unmapped.
//
// Every event must fit what came before it: an alloc inside a live segment
// and not at a live block, a free of a live block, a segment_free of a
// segment with no live block. A history that starts after the first CUDA
// allocation (or whose ring buffer wrapped, max_entries too small) breaks
// one of these and is rejected, naming the entry.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "mem/alloc_config.h"
#include "mem/snapshot.h"
#include "util/status.h"

namespace prism {

struct RecordedPeaks {
  std::int64_t allocated_peak = 0;  // memory_allocated(): rounded block sizes
  std::int64_t reserved_peak = 0;   // memory_reserved()
  std::int64_t requested_peak = 0;  // sizes as requested
  std::int64_t allocated_final = 0;
  std::int64_t reserved_final = 0;
  std::int64_t allocs = 0;
  std::int64_t frees = 0;           // free_requested
  std::int64_t segment_allocs = 0;  // segment_alloc and segment_map
  std::int64_t segment_frees = 0;   // segment_free and segment_unmap
  std::int64_t ooms = 0;
  // The first trace entry that the allocator settings cannot explain (an
  // alloc inside the block these settings make of an earlier one, or
  // rounded past the free space); from there the allocated bytes are
  // approximate. The replay diverges there or earlier.
  std::optional<std::size_t> misfit_entry;
};

// `config` decides rounding and splitting (the recorded settings, or what
// the user says they were).
Result<RecordedPeaks> account_trace(const MemoryTrace& trace, const AllocatorConfig& config);

}  // namespace prism
