// Graphs the what-if tests perturb (what_if_test.cc, what_if_faults_test.cc).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include <gtest/gtest.h>

#include "../replay/test_graphs.h"
#include "graph/graph_json.h"
#include "graph/role_builder.h"

namespace prism::testing {

// The shipped example graph: tp 2, pp 2, dp 2.
inline ExecutionGraph gpt() {
  Result<ExecutionGraph> g = load_graph(PRISM_SOURCE_DIR "/examples/graphs/gpt_tp2_pp2_dp2.json");
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  return std::move(g).value();
}

// Four ranks, `gpus_per_node` to a node: compute (4 us, then 8 us), then an
// all-reduce of 1 MiB over all of them.
inline ExecutionGraph compute_then_allreduce(int gpus_per_node) {
  RoleBuilder b("r", {"compute"});
  b.compute(0, SimTime{4000});
  b.compute(0, SimTime{8000});
  b.collective(0, 0, CollectiveKind::kAllReduce, Bytes{1 << 20});
  return make_graph({{"rank", 4}}, gpus_per_node, {group_slot("world", {0})},
                    {std::move(b).build()}, {0, 0, 0, 0});
}

// A folded replay equals the unfolded one: iteration, each role's mean
// times and every traced op's end.
inline void expect_same_replay(const ReplayResult& folded, const ReplayResult& unfolded,
                               std::string_view what) {
  EXPECT_EQ(folded.iteration_time, unfolded.iteration_time) << what;
  ASSERT_EQ(folded.roles.size(), unfolded.roles.size()) << what;
  for (std::size_t i = 0; i < folded.roles.size(); ++i)
    EXPECT_TRUE(same_times(folded.roles[i].mean, unfolded.roles[i].mean)) << what;
  ASSERT_EQ(folded.trace.size(), unfolded.trace.size()) << what;
  for (std::size_t i = 0; i < folded.trace.size(); ++i)
    EXPECT_EQ(folded.trace[i].end, unfolded.trace[i].end) << what;
}

}  // namespace prism::testing
