#include "mem/snapshot_replay.h"

#include <memory>
#include <utility>

#include <fmt/format.h>

#include "mem/trace_replayer.h"

namespace prism {
namespace {

using Action = AllocatorEvent::Action;

// Replays from the start with another call behind an ambiguous run, at most
// this many times; each costs one replay of the trace.
constexpr int kMaxRetries = 64;

}  // namespace

std::string describe_event(const AllocatorEvent& e) {
  if (e.action == Action::kOom) return fmt::format("oom size={} stream={}", e.size, e.stream);
  const std::string addr =
      e.addr >= kUnrecordedAddress ? std::string("unrecorded") : fmt::format("{:#x}", e.addr);
  return fmt::format("{} addr={} size={} stream={}", action_name(e.action), addr, e.size, e.stream);
}

std::string describe_divergence(const Divergence& d) {
  const std::string expected =
      d.expected ? describe_event(*d.expected) : std::string("the end of the trace");
  const std::string got = d.got ? describe_event(*d.got) : std::string("nothing");
  return fmt::format("trace entry {}: expected {}, got {}", d.entry, expected, got);
}

Result<SnapshotReplayResult> replay_memory_trace(const MemoryTrace& trace,
                                                 const SnapshotReplayOptions& options) {
  using snapshot_internal::TraceReplayer;
  SnapshotReplayResult result;
  PRISM_ASSIGN_OR_RETURN(result.recorded, account_trace(trace, options.config));
  result.events = trace.events.size();
  // The pass that got furthest (the first of equals) is the one reported.
  snapshot_internal::Choices choices;
  std::unique_ptr<TraceReplayer> best;
  for (int attempt = 0; attempt <= kMaxRetries; ++attempt) {
    auto pass = std::make_unique<TraceReplayer>(trace, options, choices);
    PRISM_RETURN_IF_ERROR(pass->run());
    const auto retry = pass->retry();
    if (!best || pass->matched() > best->matched()) best = std::move(pass);
    if (!retry) break;
    // Later runs may go differently now: their choices start over.
    choices.erase(choices.upper_bound(retry->first), choices.end());
    choices[retry->first] = retry->second;
  }
  result.matched = best->matched();
  result.divergence = best->divergence();
  result.modelled = best->allocator().stats();
  const std::vector<SegmentInfo> modelled = torch_segments(best->allocator().segments());
  result.modelled_segments = modelled.size();
  if (trace.has_final_segments && !result.divergence) {
    result.segments_checked = true;
    result.segments_difference = compare_segments(trace.final_segments, modelled);
  }
  return result;
}

}  // namespace prism
