// Helpers shared by the graph tests.
#pragma once

#include <string>
#include <vector>

#include "graph/graph.h"

namespace prism::testing {

// Path of a file under tests/data/graphs/.
std::string graph_fixture(const std::string& name);

// Every field of the graph, derived ones included, one line per item: two
// graphs are equal iff their dumps are, and a failed EXPECT_EQ shows where.
std::string dump_graph(const ExecutionGraph& g);

// A Megatron-like training step built in memory: dims tp, dp, pp; slots tp
// and dp (groups), pp_next and pp_prev (peers); one role per pipeline stage
// with `microbatches` forward and backward passes (recv, compute, tp
// all-reduce, send) and a final dp all-reduce. Finalized, not validated.
ExecutionGraph make_pipeline(int tp, int dp, int pp, int microbatches);

}  // namespace prism::testing
