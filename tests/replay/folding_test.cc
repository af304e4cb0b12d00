// Folding: the plan's classes, and the property that a folded replay gives
// exactly the unfolded replay's numbers.
#include "replay/folding.h"

#include <algorithm>
#include <numeric>
#include <random>

#include <gtest/gtest.h>

#include "net/flow_network.h"

#include "test_graphs.h"

namespace prism {
namespace {

using testing::group_slot;
using testing::make_graph;
using testing::peer_slot;
using testing::run;
using testing::same_times;

struct Shape {
  int tp, dp, pp, microbatches, gpus_per_node;
  std::vector<RankOverride> stragglers;
};

// A GPipe-style step: all forwards, then all backwards, TP all-reduce per
// micro-batch, PP send/recv between stages, and a DP all-reduce on a second
// stream after the last backward. One role per stage, with per-stage costs.
ExecutionGraph gpipe(const Shape& s, std::uint64_t seed);

// tp 1-4, dp 1-3, pp 1-4, 1-3 micro-batches, 1-8 GPUs per node.
Shape random_shape(std::mt19937_64& rng) {
  return Shape{1 + static_cast<int>(rng() % 4),
               1 + static_cast<int>(rng() % 3),
               1 + static_cast<int>(rng() % 4),
               1 + static_cast<int>(rng() % 3),
               1 << (rng() % 4),
               {}};
}

ExecutionGraph gpipe(const Shape& s, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  enum { kTp, kDp, kNext, kPrev };
  std::vector<Role> roles;
  const Bytes act{4096 * (1 + static_cast<std::int64_t>(rng() % 4))};
  for (int stage = 0; stage < s.pp; ++stage) {
    RoleBuilder b("stage" + std::to_string(stage), {"compute", "comm"});
    const SimTime fwd{1000 + static_cast<std::int64_t>(rng() % 1000)};
    b.marker(0, MarkerKind::kIteration, 0);
    std::vector<int> acts;
    for (int mb = 0; mb < s.microbatches; ++mb) {
      if (stage > 0) b.recv(0, kPrev, act);
      acts.push_back(b.alloc(0, act));
      b.compute(0, fwd, "fwd");
      b.collective(0, kTp, CollectiveKind::kAllReduce, act);
      if (stage + 1 < s.pp) b.send(0, kNext, act);
    }
    for (int mb = 0; mb < s.microbatches; ++mb) {
      if (stage + 1 < s.pp) b.recv(0, kNext, act);
      b.compute(0, SimTime{2 * fwd.ns}, "bwd");
      b.collective(0, kTp, CollectiveKind::kAllReduce, act);
      b.free(0, acts[mb]);
      if (stage > 0) b.send(0, kPrev, act);
    }
    b.record(0, "grads");
    b.wait(1, "grads");
    b.collective(1, kDp, CollectiveKind::kAllReduce, Bytes{1 << 20});
    b.record(1, "reduced");
    b.wait(0, "reduced");
    b.compute(0, SimTime{500}, "optimizer");
    roles.push_back(std::move(b).build());
  }
  const int world = s.tp * s.dp * s.pp;
  std::vector<std::int32_t> role_of_rank(world);
  for (Rank r = 0; r < world; ++r) role_of_rank[r] = r / (s.tp * s.dp);
  return make_graph({{"tp", s.tp}, {"dp", s.dp}, {"pp", s.pp}}, s.gpus_per_node,
                    {group_slot("tp", {0}), group_slot("dp", {1}), peer_slot("pp_next", 2, 1),
                     peer_slot("pp_prev", 2, -1)},
                    std::move(roles), role_of_rank, s.stragglers);
}

void expect_equal_results(const ReplayResult& folded, const ReplayResult& unfolded) {
  EXPECT_EQ(folded.outcome, unfolded.outcome);
  EXPECT_EQ(folded.makespan, unfolded.makespan);
  EXPECT_EQ(folded.iteration_times, unfolded.iteration_times);
  ASSERT_EQ(folded.roles.size(), unfolded.roles.size());
  for (std::size_t i = 0; i < folded.roles.size(); ++i) {
    EXPECT_EQ(folded.roles[i].num_ranks, unfolded.roles[i].num_ranks);
    EXPECT_TRUE(same_times(folded.roles[i].mean, unfolded.roles[i].mean)) << "role " << i;
    EXPECT_TRUE(same_times(folded.roles[i].max, unfolded.roles[i].max)) << "role " << i;
  }
  ASSERT_EQ(folded.trace.size(), unfolded.trace.size());
  for (std::size_t i = 0; i < folded.trace.size(); ++i) {
    EXPECT_EQ(folded.trace[i].rank, unfolded.trace[i].rank);
    EXPECT_EQ(folded.trace[i].op, unfolded.trace[i].op);
    EXPECT_EQ(folded.trace[i].start, unfolded.trace[i].start);
    EXPECT_EQ(folded.trace[i].transfer_start, unfolded.trace[i].transfer_start);
    EXPECT_EQ(folded.trace[i].end, unfolded.trace[i].end);
  }
}

TEST(FoldingTest, OneClassPerStageWithoutStragglers) {
  auto g = gpipe({4, 2, 3, 2, 8, {}}, 1);
  FoldPlan plan = plan_folding(g, true);
  EXPECT_EQ(plan.num_classes(), 3);
  EXPECT_EQ(plan.representative, (std::vector<Rank>{0, 8, 16}));
  EXPECT_EQ(plan.class_size, (std::vector<std::int32_t>{8, 8, 8}));
  FoldPlan identity = plan_folding(g, false);
  EXPECT_EQ(identity.num_classes(), 24);
}

TEST(FoldingTest, GeometrySplitsClasses) {
  // 2 GPUs per node: TP groups of 4 span two nodes, and ranks whose pipeline
  // peer sits on their own node differ from those whose peer does not.
  auto g = gpipe({2, 1, 3, 1, 3, {}}, 2);
  FoldPlan plan = plan_folding(g, true);
  EXPECT_GT(plan.num_classes(), 3);
}

TEST(FoldingTest, StragglerSplitsItsClassAndThoseItTouches) {
  auto g = gpipe({2, 2, 2, 2, 8, {RankOverride{1, 1'300'000}}}, 3);
  FoldPlan plan = plan_folding(g, true);
  EXPECT_GT(plan.num_classes(), 2);
  EXPECT_EQ(plan.class_size[plan.class_of_rank[1]], 1);
  // Rank 0 shares rank 1's TP group, rank 2 does not: they must differ.
  EXPECT_NE(plan.class_of_rank[0], plan.class_of_rank[2]);
}

TEST(FoldingTest, FoldedEqualsUnfoldedOnTpPpDp) {
  auto g = gpipe({2, 2, 2, 3, 8, {}}, 4);
  const std::vector<Rank> traced{0, 3, 5, 7};
  auto folded = run(g, true, traced);
  auto unfolded = run(g, false, traced);
  ASSERT_EQ(folded.outcome, ReplayResult::Outcome::kCompleted);
  EXPECT_EQ(folded.simulated_ranks, 2);
  EXPECT_EQ(unfolded.simulated_ranks, 8);
  EXPECT_LT(folded.op_events, unfolded.op_events);
  expect_equal_results(folded, unfolded);
}

// Two peer slots of one rank reach two different ranks of one class with the
// same tag: folded, their messages must not pair with each other.
TEST(FoldingTest, PeersOfOneClassThroughDifferentSlotsStayApart) {
  enum { kNext, kNext2, kPrev, kPrev2 };
  RoleBuilder b("ring", {"a", "b", "c", "d"});
  b.send(0, kNext, Bytes{100});
  b.send(1, kNext2, Bytes{300});
  b.recv(2, kPrev2, Bytes{300});  // posted first
  b.compute(3, SimTime{50});
  b.recv(3, kPrev, Bytes{100});
  auto g = make_graph({{"cp", 5}}, 8,
                      {peer_slot("next", 0, 1, true), peer_slot("next2", 0, 2, true),
                       peer_slot("prev", 0, -1, true), peer_slot("prev2", 0, -2, true)},
                      {std::move(b).build()}, {0, 0, 0, 0, 0});
  auto folded = run(g, true, {0, 3});
  auto unfolded = run(g, false, {0, 3});
  ASSERT_EQ(unfolded.outcome, ReplayResult::Outcome::kCompleted);
  EXPECT_EQ(folded.simulated_ranks, 1);
  expect_equal_results(folded, unfolded);
}

// A rank whose two peer slots reach the same rank differs from one whose
// slots reach two ranks, even when every peer is of its class.
TEST(FoldingTest, CoincidingPeersSplitClasses) {
  RoleBuilder b("r", {"s", "t"});
  b.send(0, 0, Bytes{100});
  b.recv(1, 1, Bytes{100});
  b.send(0, 2, Bytes{200});
  b.recv(1, 3, Bytes{200});
  // Ranks 0 and 1 pair through both tables; ranks 2, 3, 4 form a 3-ring for
  // the second table, so their "a" and "b" peers differ.
  auto g = make_graph({{"rank", 5}}, 8,
                      {CommSlot::explicit_peer("a", {1, 0, 3, 4, 2}),
                       CommSlot::explicit_peer("a_from", {1, 0, 4, 2, 3}),
                       CommSlot::explicit_peer("b", {1, 0, 4, 2, 3}),
                       CommSlot::explicit_peer("b_from", {1, 0, 3, 4, 2})},
                      {std::move(b).build()}, {0, 0, 0, 0, 0});
  FoldPlan plan = plan_folding(g, true);
  EXPECT_NE(plan.class_of_rank[0], plan.class_of_rank[2]);
  expect_equal_results(run(g, true, {0, 2}), run(g, false, {0, 2}));
}

TEST(FoldingTest, LongChainsGiveUpInsteadOfGoingQuadratic) {
  // A ring of 4,096 ranks with one straggler: the difference spreads one hop
  // per round, so the refinement would take ~2,000 rounds to say what the
  // identity plan says at once.
  RoleBuilder b("r", {"s"});
  b.compute(0, SimTime{10});
  b.set_group(b.send(0, 0, Bytes{8}), 1);
  b.set_group(b.recv(0, 1, Bytes{8}), 1);
  auto g = make_graph(
      {{"cp", 4096}}, 8, {peer_slot("next", 0, 1, true), peer_slot("prev", 0, -1, true)},
      {std::move(b).build()}, std::vector<std::int32_t>(4096, 0), {RankOverride{0, 2'000'000}});
  FoldPlan plan = plan_folding(g, true);
  EXPECT_EQ(plan.num_classes(), 4096);
  expect_equal_results(run(g, true, {0, 2048}), run(g, false, {0, 2048}));
}

// Property: on random 3D shapes, placements, costs and stragglers, folding
// never changes a number.
TEST(FoldingTest, PropertyFoldedEqualsUnfolded) {
  std::mt19937_64 rng(2026);
  for (int trial = 0; trial < 40; ++trial) {
    Shape s = random_shape(rng);
    const int world = s.tp * s.dp * s.pp;
    if (rng() % 2) {
      s.stragglers.push_back(RankOverride{static_cast<Rank>(rng() % world),
                                          1'000'000 + static_cast<std::int64_t>(rng() % 900'000)});
    }
    auto g = gpipe(s, rng());
    std::vector<Rank> traced{0, world - 1};
    if (!s.stragglers.empty()) traced.push_back(s.stragglers[0].rank);
    std::sort(traced.begin(), traced.end());
    traced.erase(std::unique(traced.begin(), traced.end()), traced.end());
    SCOPED_TRACE(::testing::Message() << "trial " << trial << ": tp " << s.tp << " dp " << s.dp
                                      << " pp " << s.pp << " mb " << s.microbatches << " gpn "
                                      << s.gpus_per_node << " stragglers " << s.stragglers.size());
    const AlphaBetaParams net = testing::unit_network(static_cast<std::int64_t>(trial % 7) * 10);
    auto folded = run(g, true, traced, net);
    auto unfolded = run(g, false, traced, net);
    ASSERT_EQ(folded.outcome, ReplayResult::Outcome::kCompleted);
    expect_equal_results(folded, unfolded);
  }
}

// The same property over the flow-level network on a DGX H100 cluster, where
// transfers in flight share NVLink and NIC bandwidth: folding still changes
// nothing (folded copies use other GPUs' links).
ReplayResult run_flow(const ExecutionGraph& g, bool fold, std::vector<Rank> traced) {
  ClusterSpec c = *cluster_preset("dgx-h100");
  c.gpus_per_node = g.layout.gpus_per_node();
  c.nics_per_node = c.gpus_per_node;
  EXPECT_TRUE(size_cluster(&c, 0, g.layout.num_nodes()).is_ok());
  FlowNetwork network(c);
  return testing::run_over(network, g, fold, std::move(traced));
}

TEST(FoldingTest, PropertyFoldedEqualsUnfoldedWithBandwidthSharing) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 30; ++trial) {
    const Shape s = random_shape(rng);
    const int world = s.tp * s.dp * s.pp;
    auto g = gpipe(s, rng());
    SCOPED_TRACE(::testing::Message() << "trial " << trial << ": tp " << s.tp << " dp " << s.dp
                                      << " pp " << s.pp << " gpn " << s.gpus_per_node);
    auto folded = run_flow(g, true, {0, world - 1});
    auto unfolded = run_flow(g, false, {0, world - 1});
    ASSERT_EQ(folded.outcome, ReplayResult::Outcome::kCompleted);
    expect_equal_results(folded, unfolded);
  }
}

// Fan-in: ranks 0 and 1 send to rank 2 through one slot; rank 2 receives
// through a slot per sender. Fan-out is the mirror image. Crossed: two
// senders address two receivers through two tables in opposite orders.
TEST(FoldingTest, FanInFanOutAndCrossedTables) {
  auto sender_role = [](std::vector<int> slots) {
    RoleBuilder b("send", {"s"});
    for (int s : slots) b.send(0, s, Bytes{1 << 20});
    return std::move(b).build();
  };
  auto receiver_role = [](std::vector<int> slots) {
    RoleBuilder b("recv", {"s"});
    for (int s : slots) b.recv(0, s, Bytes{1 << 20});
    return std::move(b).build();
  };
  const std::vector<ExecutionGraph> graphs = {
      make_graph({{"rank", 3}}, 8,
                 {CommSlot::explicit_peer("to_root", {2, 2, -1}),
                  CommSlot::explicit_peer("from_a", {-1, -1, 0}),
                  CommSlot::explicit_peer("from_b", {-1, -1, 1})},
                 {sender_role({0}), receiver_role({1, 2})}, {0, 0, 1}),
      make_graph({{"rank", 3}}, 8,
                 {CommSlot::explicit_peer("to_a", {1, -1, -1}),
                  CommSlot::explicit_peer("to_b", {2, -1, -1}),
                  CommSlot::explicit_peer("from_root", {-1, 0, 0})},
                 {sender_role({0, 1}), receiver_role({2})}, {0, 1, 1}),
      make_graph({{"rank", 4}}, 8,
                 {CommSlot::explicit_peer("s1", {2, 3, -1, -1}),
                  CommSlot::explicit_peer("s2", {3, 2, -1, -1}),
                  CommSlot::explicit_peer("r1", {-1, -1, 0, 0}),
                  CommSlot::explicit_peer("r2", {-1, -1, 1, 1})},
                 {sender_role({0, 1}), receiver_role({2, 3})}, {0, 0, 1, 1}),
  };
  for (const ExecutionGraph& g : graphs) {
    std::vector<Rank> traced(g.world_size());
    std::iota(traced.begin(), traced.end(), 0);
    auto folded = run(g, true, traced);
    ASSERT_EQ(folded.outcome, ReplayResult::Outcome::kCompleted);
    expect_equal_results(folded, run(g, false, traced));
  }
}

// Property: on random point-to-point topologies (explicit peer tables built
// from random permutations, several per graph, with random roles, streams,
// NCCL groups and tags), folding never changes a number, deadlocks included.
TEST(FoldingTest, PropertyRandomPeerTables) {
  std::mt19937_64 rng(77);
  int folded_some = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const int world = 2 + static_cast<int>(rng() % 7);
    const int tables = 1 + static_cast<int>(rng() % 3);
    // Send tables: permutations without fixed points, a random shift of a
    // random order (or, half the time, of the identity order, which folds
    // best). Receive table k names, for each rank, the k-th of its senders in
    // a random per-rank order: that makes fan-ins and crossed pairs.
    std::vector<CommSlot> slots;
    std::vector<std::vector<Rank>> senders(world);
    for (int t = 0; t < tables; ++t) {
      std::vector<Rank> order(world);
      std::iota(order.begin(), order.end(), 0);
      if (rng() % 2) std::shuffle(order.begin(), order.end(), rng);
      const int shift = 1 + static_cast<int>(rng() % (world - 1));
      std::vector<Rank> to(world);
      for (int i = 0; i < world; ++i) to[order[i]] = order[(i + shift) % world];
      for (Rank r = 0; r < world; ++r) senders[to[r]].push_back(r);
      slots.push_back(CommSlot::explicit_peer("to" + std::to_string(t), to));
    }
    const bool shuffle_receives = rng() % 2;
    for (auto& list : senders)
      if (shuffle_receives) std::shuffle(list.begin(), list.end(), rng);
    for (int k = 0; k < tables; ++k) {
      std::vector<Rank> from(world);
      for (Rank r = 0; r < world; ++r) from[r] = senders[r][k];
      slots.push_back(CommSlot::explicit_peer("from" + std::to_string(k), from));
    }
    const int num_roles = 1 + static_cast<int>(rng() % 2);
    std::vector<Role> roles;
    for (int role = 0; role < num_roles; ++role) {
      RoleBuilder b("r" + std::to_string(role), {"a", "b", "c"});
      const int messages = 1 + static_cast<int>(rng() % 3);
      for (int m = 0; m < messages; ++m) {
        // One size and tag per round: any receive order then pairs up.
        const int tag = static_cast<int>(rng() % 2);
        const Bytes bytes{1000 * (1 + m)};
        for (int t = 0; t < tables; ++t) {
          b.compute(static_cast<int>(rng() % 3), SimTime{static_cast<std::int64_t>(rng() % 500)});
          if (rng() % 2) {  // send and receive in one NCCL group
            const std::uint32_t group = static_cast<std::uint32_t>(1 + m * tables + t);
            b.set_group(b.send(2, t, bytes, tag), group);
            b.set_group(b.recv(2, tables + t, bytes, tag), group);
          } else {
            b.send(0, t, bytes, tag);
            b.recv(1, tables + t, bytes, tag);
          }
        }
      }
      roles.push_back(std::move(b).build());
    }
    // Every role must issue the same messages for sends and receives to
    // pair; random roles differ only in their compute, so copy the comm ops
    // of role 0 into the others by building them from one seed.
    if (num_roles == 2) {
      roles[1] = roles[0];
      roles[1].name = "r1";
      for (Op& op : roles[1].ops)
        if (op.kind == OpKind::kCompute)
          op.duration.ns += 1 + static_cast<std::int64_t>(rng() % 300);
    }
    std::vector<std::int32_t> role_of_rank(world);
    for (Rank r = 0; r < world; ++r) role_of_rank[r] = static_cast<std::int32_t>(rng() % num_roles);
    auto g = make_graph({{"rank", world}}, 1 << (rng() % 3), slots, roles, role_of_rank);
    std::vector<Rank> traced(world);
    std::iota(traced.begin(), traced.end(), 0);
    SCOPED_TRACE(::testing::Message() << "trial " << trial << ": world " << world << " tables "
                                      << tables << " roles " << num_roles);
    auto folded = run(g, true, traced, testing::unit_network(7));
    auto unfolded = run(g, false, traced, testing::unit_network(7));
    folded_some += folded.simulated_ranks < world;
    expect_equal_results(folded, unfolded);
    ASSERT_EQ(folded.blocked.size(), unfolded.blocked.size());
    for (std::size_t i = 0; i < folded.blocked.size(); ++i)
      EXPECT_EQ(folded.blocked[i].waiting_for, unfolded.blocked[i].waiting_for);
  }
  EXPECT_GT(folded_some, 20);  // the property is not vacuous
}

}  // namespace
}  // namespace prism
