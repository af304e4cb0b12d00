// The timeline of traced ranks in Chrome's trace-event format, which Perfetto
// (ui.perfetto.dev) and chrome://tracing open (`prism replay --trace FILE`).
//
// One process per traced rank (pid = rank, named "rank 17 (stage1)", sorted by
// rank) and one thread per stream of its role (tid = stream index, named after
// the stream). Every executed op is a complete event ("ph":"X") with "ts" and
// "dur" in microseconds carrying nanosecond precision; markers are instant
// events ("ph":"i"). Communication ops carry their communicator, group, bytes,
// dtype, peers and the time spent waiting for peers in "args". The output is
// deterministic: metadata by rank and stream, then events in ReplayResult::trace
// order, one event per line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "replay/result.h"  // MeasuredSlice

namespace prism {

// `r` must come from replaying `g` (trace records refer to its roles).
// `measured` slices go on their rank's stream's thread, with "cat":
// "compute" and "args": {"measured": true}, after the records.
std::string format_chrome_trace(const ExecutionGraph& g, const ReplayResult& r,
                                const std::vector<MeasuredSlice>& measured = {});

}  // namespace prism
