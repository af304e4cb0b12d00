// Replays a recorded PyTorch memory history (mem/snapshot.h) through the
// caching-allocator model and compares, event by event, what the model does
// with what torch's allocator did.
//
// The recording's user-level calls drive the model: alloc (and oom) is a
// malloc of the recorded size on the recorded stream; free_requested is a
// free, or a record-stream free when its free_completed does not follow at
// once; a later free_completed completes it; segment_free / segment_unmap
// runs that no malloc explains are an empty_cache(). Segment events are
// outcomes: the model's cudaMalloc and page maps are answered from the
// recording (the address torch got, or a failure where torch's failed), so
// the addresses the model hands out can be compared exactly. The replay
// stops at the first event that differs in action, address, size or stream
// (for an oom: action, size and stream).
//
// The recorded peaks come from the trace alone (mem/trace_ledger.h); the
// modelled ones from the allocator's statistics. docs/memory.md
// says exactly what is compared.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mem/alloc_config.h"
#include "mem/caching_allocator.h"
#include "mem/snapshot.h"
#include "mem/trace_ledger.h"
#include "util/status.h"

namespace prism {

// Where the replay puts segments the recording does not explain (the model
// asked for memory torch did not): far above any device address.
inline constexpr std::uint64_t kUnrecordedAddress = std::uint64_t{1} << 62;

struct SnapshotReplayOptions {
  AllocatorConfig config;
  // Device memory for the model's cudaMalloc and page maps, bytes; 0 = no
  // limit but the recording's own failures.
  std::int64_t capacity = 0;
  // The GPU's total memory, bytes, which sizes expandable segments' address
  // reservations (1 1/8 of it, as in torch); 0 = `capacity`, else 80 GiB.
  std::int64_t device_memory = 0;
};

// Where the model first parted from the recording.
struct Divergence {
  std::size_t entry = 0;                   // trace entry (the number of entries: past the end)
  std::optional<AllocatorEvent> expected;  // recorded; none past the end
  std::optional<AllocatorEvent> got;       // modelled; none when the model did nothing
};

struct SnapshotReplayResult {
  RecordedPeaks recorded;
  AllocatorStats modelled;  // at the end, or where the replay stopped
  std::size_t events = 0;   // allocator events in the recording
  std::size_t matched = 0;  // replayed events equal to the recording
  std::optional<Divergence> divergence;
  // The end state against the recording's final segments (torch's
  // memory_snapshot() form: an expandable segment is one segment per mapped
  // run). Not checked when the recording has none or the events diverged.
  bool segments_checked = false;
  std::string segments_difference;  // empty when they match
  std::size_t modelled_segments = 0;

  bool events_match() const { return !divergence.has_value(); }
  bool peaks_match() const {
    return recorded.allocated_peak == modelled.allocated_peak &&
           recorded.reserved_peak == modelled.reserved_peak;
  }
  bool segments_match() const { return segments_difference.empty(); }
};

// Errors: a recording that is not complete or not consistent (the ledger's
// rejections), or a segment event no malloc follows.
Result<SnapshotReplayResult> replay_memory_trace(const MemoryTrace& trace,
                                                 const SnapshotReplayOptions& options);

// "segment_alloc addr=0x7f0000000000 size=2097152 stream=0"; an oom shows
// no addr (device_free), a segment the recording does not explain
// "addr=unrecorded".
std::string describe_event(const AllocatorEvent& e);
// "trace entry 7: expected alloc ..., got segment_alloc ..."
std::string describe_divergence(const Divergence& d);

// The allocator's segments as torch.cuda.memory_snapshot() lists them.
std::vector<SegmentInfo> torch_segments(const std::vector<SegmentInfo>& segments);
// The first difference between two segment lists in torch's form ("" when
// none); requested sizes are compared for active blocks only (torch keeps a
// stale one on free blocks).
std::string compare_segments(const std::vector<SegmentInfo>& recorded,
                             const std::vector<SegmentInfo>& modelled);

}  // namespace prism
