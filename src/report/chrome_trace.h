// The timeline of traced ranks in Chrome's trace-event format, which Perfetto
// (ui.perfetto.dev) and chrome://tracing open (`prism replay --trace FILE`).
//
// One process per traced rank (pid = rank, named "rank 17 (stage1, virtual)"
// with a `real` / `virtual` process label, sorted by rank). Its threads (tid):
// one per stream of its role (0..S-1, named after the stream), then
// "events" (S: zero-length ops, instant events), "iterations" (S+1: one span
// "iteration N" per iteration, N the marker's index, from 0; for a rank whose
// records hold no iteration marker, an emulation's real rank, from its
// RankTimeline in ReplayResult::timelines) and, on a real
// rank of an emulation, "host" (S+2: the compute it reported and its waits
// between, filling its host timeline). Ops with a duration are complete
// events ("ph":"X") with "ts" and "dur" in microseconds carrying nanosecond
// precision. Communication ops carry their communicator, group, bytes, dtype,
// peers and the time spent waiting for peers in "args". Memory is a counter
// track "memory (MiB)" per rank. TraceLevel drops per-op detail for large
// jobs. The output is deterministic, one event per line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "graph/graph.h"
#include "replay/result.h"  // MeasuredSlice
#include "util/status.h"

namespace prism {

// How much of each rank's timeline the trace holds.
enum class TraceLevel : std::uint8_t {
  kOps,         // every op: slices, instant events, iterations, memory
  kPhases,      // per stream, its ops between two markers of the rank (iteration,
                // micro-batch, phase) as one slice; iterations; memory thinned
  kIterations,  // iteration spans and memory (thinned) only
};

// "ops", "phases" or "iterations"; anything else is an error naming
// --trace-level and the valid values.
Result<TraceLevel> parse_trace_level(std::string_view text);
std::string_view to_string(TraceLevel level);
// The default: a 4-rank trace of a 70B job stays near 1 MB (docs/benchmarks.md).
inline constexpr TraceLevel kDefaultTraceLevel = TraceLevel::kPhases;

struct TraceOptions {
  TraceLevel level = kDefaultTraceLevel;
  // The ranks that ran for real (an emulation's); every other rank is
  // labelled virtual. Ascending.
  std::vector<Rank> real_ranks;
  // Non-empty: only these ranks are traced (ascending), when the replay
  // traced more for another output (the HTML report's stages).
  std::vector<Rank> ranks;
};

// `r` must come from replaying `g` (trace records refer to its roles).
// `measured` slices (a real rank's reported compute) go on their rank's
// stream's thread, with "cat": "compute" and "args": {"measured": true}, and
// fill its "host" thread, at the ops and phases levels.
std::string format_chrome_trace(const ExecutionGraph& g, const ReplayResult& r,
                                const std::vector<MeasuredSlice>& measured = {},
                                const TraceOptions& options = {});

}  // namespace prism
