// Small in-memory graphs and a replay runner for the replay tests.
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "compute/compute_model.h"
#include "graph/graph.h"
#include "graph/role_builder.h"
#include "graph/validate.h"
#include "mem/memory_model.h"
#include "net/alpha_beta.h"
#include "replay/replay.h"

namespace prism::testing {

inline CommSlot group_slot(std::string name, std::vector<int> dims) {
  return CommSlot::grid_group(std::move(name), std::move(dims));
}
inline CommSlot explicit_group_slot(std::string name, std::vector<std::vector<Rank>> groups) {
  return CommSlot::explicit_group(std::move(name), std::move(groups));
}
inline CommSlot peer_slot(std::string name, int dim, int offset, bool wrap = false) {
  return CommSlot::grid_peer(std::move(name), dim, offset, wrap);
}

// Finalizes and validates; a test graph that does not validate is a test bug.
inline ExecutionGraph make_graph(std::vector<GridDim> dims, int gpus_per_node,
                                 std::vector<CommSlot> slots, std::vector<Role> roles,
                                 std::vector<std::int32_t> role_of_rank,
                                 std::vector<RankOverride> overrides = {}) {
  ExecutionGraph g;
  g.name = "test";
  int world = 1;
  for (const GridDim& d : dims) world *= d.size;
  g.layout = Layout(world, std::move(dims), gpus_per_node);
  g.slots = std::move(slots);
  g.roles = std::move(roles);
  g.role_of_rank = std::move(role_of_rank);
  g.overrides = std::move(overrides);
  Status s = finalize_graph(g);
  if (s.is_ok()) s = validate_graph(g);
  EXPECT_TRUE(s.is_ok()) << s.message();
  return g;
}

// 1 byte/ns and `alpha` ns per step inside a node; half that bandwidth and
// twice the latency across nodes.
inline AlphaBetaParams unit_network(std::int64_t alpha = 0) {
  AlphaBetaParams p;
  p.intra_node_bw = Bandwidth::from_gbps(1);
  p.inter_node_bw = Bandwidth::from_gbps(0.5);
  p.intra_node_latency = SimTime{alpha};
  p.inter_node_latency = SimTime{2 * alpha};
  return p;
}

// Replays `g` over `network` and `memory` with the roofline compute model.
inline ReplayResult run_over(NetworkModel& network, MemoryModel& memory, const ExecutionGraph& g,
                             bool fold, std::vector<Rank> trace) {
  RooflineModel compute;
  ReplayOptions opts;
  opts.fold = fold;
  opts.trace_ranks = std::move(trace);
  Result<ReplayResult> r = replay(g, opts, ReplayModels{&network, &compute, &memory});
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return std::move(r).value();
}

// The same on an unlimited device with PyTorch's default allocator.
inline ReplayResult run_over(NetworkModel& network, const ExecutionGraph& g, bool fold,
                             std::vector<Rank> trace) {
  AllocatorMemoryModel memory(DeviceMemoryOptions{});
  return run_over(network, memory, g, fold, std::move(trace));
}

inline ReplayResult run(const ExecutionGraph& g, bool fold = true, std::vector<Rank> trace = {},
                        AlphaBetaParams net = unit_network()) {
  AlphaBetaModel network(net);
  return run_over(network, g, fold, std::move(trace));
}

inline bool same_times(const RankTimes& a, const RankTimes& b) {
  return a.compute == b.compute && a.exposed_comm == b.exposed_comm && a.idle == b.idle &&
         a.finish == b.finish && a.peak_allocated == b.peak_allocated &&
         a.peak_reserved == b.peak_reserved && a.peak_device == b.peak_device && a.nccl == b.nccl;
}

}  // namespace prism::testing
