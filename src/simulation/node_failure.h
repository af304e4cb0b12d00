// A node failure's replay (--fail-node N@TIME, simulation/what_if.h): which
// ranks stop, how folding keeps them apart, and what the failure did to the
// replay that ran with it (replay/result.h NodeFailureReplay). simulate_graph
// builds it after the replay without real ranks; the coordinator of `prism
// emulate` (runtime/coordinator.h) after the replay with them, where the
// real ranks waiting in the blocked collectives are among the waiting ranks.
#pragma once

#include <cstdint>
#include <vector>

#include "graph/graph.h"
#include "replay/result.h"
#include "simulation/what_if.h"
#include "util/status.h"

namespace prism {

// The failed node's ranks in `g`, ascending. The error names the option and
// the graph's nodes ("--fail-node 5@1ms: node 5 does not exist: the graph
// has nodes 0-1").
Result<std::vector<Rank>> node_failure_ranks(const ExecutionGraph& g, const NodeFailure& f);

// Each failed rank in a fold class of its own (ReplayOptions::fold_tags:
// negative tags are free), `tags` sized to the world first.
void add_failure_fold_tags(const std::vector<Rank>& failed, int world_size,
                           std::vector<std::int64_t>& tags);

// The failure's effect on `r`, the replay that ran with it: the blocked
// communication ops with their surviving waiting ranks and since-times, the
// hang (the replay's last completion) and the first watchdog (the earliest
// arrival + `timeout`).
NodeFailureReplay node_failure_replay(const NodeFailure& f, const std::vector<Rank>& ranks,
                                      SimTime timeout, const ReplayResult& r);

}  // namespace prism
