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

// An op of `kind` on `stream` with `ref` (slot, event, alloc) and NCCL `group`.
Op make_op(OpKind kind, std::uint16_t stream = 0, std::int32_t ref = kNone,
           std::uint32_t group = 0);

// Sets op `op`'s explicit dependencies (appended to Role::deps).
void set_deps(Role& role, std::size_t op, const std::vector<std::int32_t>& deps);

// finalize_graph() then validate_graph(): "(ok)" or the error message.
std::string error_of(ExecutionGraph g);

// A Megatron-like training step built in memory: dims tp, dp, pp; slots tp
// and dp (groups), pp_next and pp_prev (peers); one role per pipeline stage
// with `microbatches` forward and backward passes (recv, compute, tp
// all-reduce, send) and a final dp all-reduce. Finalized, not validated.
ExecutionGraph make_pipeline(int tp, int dp, int pp, int microbatches);

}  // namespace prism::testing
