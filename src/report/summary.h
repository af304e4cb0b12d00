// The human summary of a replay: what ran, how it ended, the iteration time
// and where each role's time went. Fixed decimals and column widths make it
// deterministic, so the CLI's golden tests compare it byte for byte.
//
//   graph:           gpt_tp2_pp2_dp2 (8 ranks, 2 roles)
//   replay:          folded: 2 of 8 ranks simulated, 120 op events
//   outcome:         completed
//   iteration time:  12.345 ms  (1 iteration)
//
//   role      ranks  compute_ms  exposed_comm_ms  idle_ms  peak_mem_GiB
//   stage0        4      10.000            1.000    1.345         1.500
//
// Times in the table are means over the role's ranks; peak memory is the
// maximum. A deadlocked replay also lists every blocked rank.
#pragma once

#include <string>

#include "graph/graph.h"
#include "replay/result.h"
#include "report/simulate_report.h"

namespace prism {

// `r` must come from replaying `g` (role and stream indices refer to it).
std::string format_summary(const ExecutionGraph& g, const ReplayResult& r);

// A what-if replay (r.what_if set) against its unperturbed run, for the
// summary's "what-if:" line and the report's "what_if" object.
WhatIfComparison what_if_comparison(const ReplayResult& r);

}  // namespace prism
