#include "workload/synthetic.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "compute/compute_model.h"
#include "mem/memory_model.h"
#include "net/alpha_beta.h"
#include "replay/replay.h"

namespace prism {
namespace {

Synthetic3DOptions small(int tp, int pp, int dp, int microbatches) {
  Synthetic3DOptions o;
  o.tp = tp;
  o.pp = pp;
  o.dp = dp;
  o.microbatches = microbatches;
  o.layers_per_stage = 2;
  o.layers_per_bucket = 1;
  return o;
}

// The op count of stage `s`, from the program's description in synthetic.h.
std::int64_t expected_ops(const Synthetic3DOptions& o, int s) {
  const int prev = s > 0 ? 1 : 0, next = s < o.pp - 1 ? 1 : 0;
  const int per_layer = (o.memory_ops ? 1 : 0) + 2 + (o.tp > 1 ? 2 : 0);
  const std::int64_t per_mb = 1 + 2 * per_layer * o.layers_per_stage + 2 * (prev + next);
  const int buckets = (o.layers_per_stage + o.layers_per_bucket - 1) / o.layers_per_bucket;
  const int dp_ops = o.dp > 1 ? 3 * buckets + 2 + (o.distributed_optimizer ? buckets + 4 : 0) : 0;
  return o.iterations * (1 + o.microbatches * per_mb + dp_ops + 1);
}

int count_kind(const Role& role, OpKind kind) {
  return static_cast<int>(std::count_if(role.ops.begin(), role.ops.end(),
                                        [&](const Op& op) { return op.kind == kind; }));
}

std::string_view name_of(const Role& role, const Op& op) {
  return role.names[op.name];
}

// The role's schedule as a string: 'F' per forward micro-batch, 'B' per
// backward (each backward starts with its last layer's MLP gradient).
std::string schedule(const Role& role, int layers) {
  std::string out;
  int mlp_bwd = 0;
  for (const Op& op : role.ops) {
    if (op.kind == OpKind::kMarker && op.marker == MarkerKind::kMicrobatch) {
      out += 'F';
    }
    if (op.kind == OpKind::kCompute && name_of(role, op) == "mlp_bwd" && mlp_bwd++ % layers == 0) {
      out += 'B';
    }
  }
  return out;
}

// The expected 1F1B string for stage s of P with M micro-batches.
std::string one_f_one_b(int p, int s, int m) {
  const int warmup = std::min(p - s - 1, m);
  std::string out(warmup, 'F');
  for (int i = 0; i < m - warmup; ++i) {
    out += "FB";
  }
  return out + std::string(warmup, 'B');
}

ReplayResult run(const ExecutionGraph& g, bool fold) {
  AlphaBetaModel net;
  RooflineModel compute;
  AllocatorMemoryModel memory(DeviceMemoryOptions{});
  ReplayOptions options;
  options.fold = fold;
  Result<ReplayResult> r = replay(g, options, ReplayModels{&net, &compute, &memory});
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return std::move(r).value();
}

void expect_same_times(const RankTimes& a, const RankTimes& b, const std::string& where) {
  EXPECT_EQ(a.compute, b.compute) << where;
  EXPECT_EQ(a.exposed_comm, b.exposed_comm) << where;
  EXPECT_EQ(a.idle, b.idle) << where;
  EXPECT_EQ(a.finish, b.finish) << where;
  EXPECT_EQ(a.peak_allocated, b.peak_allocated) << where;
  EXPECT_EQ(a.peak_reserved, b.peak_reserved) << where;
}

void expect_same_result(const ReplayResult& folded, const ReplayResult& unfolded) {
  ASSERT_EQ(folded.outcome, ReplayResult::Outcome::kCompleted);
  ASSERT_EQ(unfolded.outcome, ReplayResult::Outcome::kCompleted);
  EXPECT_EQ(folded.makespan, unfolded.makespan);
  EXPECT_EQ(folded.iteration_times, unfolded.iteration_times);
  EXPECT_EQ(folded.iteration_time, unfolded.iteration_time);
  ASSERT_EQ(folded.roles.size(), unfolded.roles.size());
  for (std::size_t r = 0; r < folded.roles.size(); ++r) {
    const RoleSummary& a = folded.roles[r];
    const RoleSummary& b = unfolded.roles[r];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.num_ranks, b.num_ranks) << a.name;
    expect_same_times(a.mean, b.mean, a.name + " mean");
    expect_same_times(a.max, b.max, a.name + " max");
  }
}

TEST(Synthetic3D, BuildsAValidGraphWithOneRolePerStage) {
  Result<ExecutionGraph> g = make_synthetic_3d(small(2, 4, 2, 8));
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  EXPECT_EQ(g->world_size(), 16);
  ASSERT_EQ(g->roles.size(), 4u);
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(g->roles[s].name, "stage" + std::to_string(s));
  }
  // Megatron order: tp innermost, pp outermost.
  for (Rank r = 0; r < 16; ++r) {
    EXPECT_EQ(g->role_of_rank[r], r / 4) << r;
  }
  for (const char* slot : {"tp", "dp", "pp_next", "pp_prev"}) {
    EXPECT_GE(g->find_slot(slot), 0);
  }
}

TEST(Synthetic3D, RejectsSizesBelowOne) {
  Synthetic3DOptions o = small(2, 2, 2, 4);
  o.microbatches = 0;
  Result<ExecutionGraph> g = make_synthetic_3d(o);
  ASSERT_FALSE(g.is_ok());
  EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(g.status().message().find("microbatches"), std::string::npos);
}

TEST(Synthetic3D, OpCountsPerRole) {
  for (bool dist : {false, true}) {
    Synthetic3DOptions o = small(2, 4, 2, 8);
    o.layers_per_stage = 3;
    o.layers_per_bucket = 2;
    o.distributed_optimizer = dist;
    o.iterations = 2;
    Result<ExecutionGraph> g = make_synthetic_3d(o);
    ASSERT_TRUE(g.is_ok()) << g.status().message();
    for (int s = 0; s < o.pp; ++s) {
      const Role& role = g->roles[s];
      EXPECT_EQ(static_cast<std::int64_t>(role.ops.size()), expected_ops(o, s)) << s;
      const int p2p = o.microbatches * o.iterations * ((s > 0) + (s < o.pp - 1));
      EXPECT_EQ(count_kind(role, OpKind::kSend), p2p) << s;
      EXPECT_EQ(count_kind(role, OpKind::kRecv), p2p) << s;
      EXPECT_EQ(count_kind(role, OpKind::kAlloc), 8 * 3 * 2) << s;
      EXPECT_EQ(count_kind(role, OpKind::kFree), 8 * 3 * 2) << s;
      // 4 TP all-reduces per layer and micro-batch, 2 DP buckets (x2 with all-gather).
      EXPECT_EQ(count_kind(role, OpKind::kCollective), 2 * (8 * 3 * 4 + (dist ? 4 : 2))) << s;
    }
  }
}

// The benchmark's shape: programs depend on tp and dp only through "> 1", so
// TP2 x PP16 x DP2 has the same role programs as TP8 x PP16 x DP64.
TEST(Synthetic3D, DefaultsGiveOver10kOpsPerRank) {
  Synthetic3DOptions o;
  o.tp = 2;
  o.dp = 2;
  o.gpus_per_node = 2;
  Result<ExecutionGraph> g = make_synthetic_3d(o);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  ASSERT_EQ(g->roles.size(), 16u);
  EXPECT_EQ(g->roles[0].ops.size(), 10'640u);
  EXPECT_EQ(g->roles[15].ops.size(), 10'640u);
  for (int s = 1; s < 15; ++s) {
    EXPECT_EQ(g->roles[s].ops.size(), 10'896u) << s;
  }
  for (int s = 0; s < 16; ++s) {
    EXPECT_EQ(g->roles[s].ops.size(), expected_ops(o, s)) << s;
  }
}

TEST(Synthetic3D, OneFOneBScheduleOrder) {
  for (int m : {1, 2, 3, 8}) {
    const Synthetic3DOptions o = small(2, 4, 2, m);
    Result<ExecutionGraph> g = make_synthetic_3d(o);
    ASSERT_TRUE(g.is_ok()) << g.status().message();
    for (int s = 0; s < o.pp; ++s) {
      EXPECT_EQ(schedule(g->roles[s], o.layers_per_stage), one_f_one_b(o.pp, s, m))
          << "stage " << s << " M " << m;
    }
  }
  // Spelled out once: stage 0 of 4 with 6 micro-batches warms up with 3 forwards.
  EXPECT_EQ(one_f_one_b(4, 0, 6), "FFFFBFBFBBBB");
}

// Steady-state sends and receives go as NCCL groups of one send and one receive
// on the same peer, so blocking p2p on one stream cannot deadlock.
TEST(Synthetic3D, SteadyStateP2PIsGroupedInPairs) {
  Result<ExecutionGraph> g = make_synthetic_3d(small(2, 4, 2, 8));
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  for (const Role& role : g->roles) {
    int grouped = 0;
    for (std::size_t i = 0; i < role.ops.size(); ++i) {
      const Op& op = role.ops[i];
      if (op.group == 0) {
        continue;
      }
      ++grouped;
      ASSERT_EQ(op.kind, OpKind::kSend) << role.name << " op " << i;
      ASSERT_LT(i + 1, role.ops.size());
      const Op& partner = role.ops[i + 1];
      EXPECT_EQ(partner.kind, OpKind::kRecv) << role.name << " op " << i;
      EXPECT_EQ(partner.group, op.group) << role.name << " op " << i;
      EXPECT_EQ(partner.ref, op.ref) << role.name << " op " << i;
      ++i;
    }
    EXPECT_GT(grouped, 0) << role.name;
  }
}

// The control: the same program without the NCCL groups deadlocks, stage s
// blocked in send_forward while stage s + 1 is blocked in send_backward.
TEST(Synthetic3D, UngroupedP2PWouldDeadlock) {
  Result<ExecutionGraph> g = make_synthetic_3d(small(2, 4, 2, 8));
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  for (Role& role : g->roles) {
    for (Op& op : role.ops) {
      op.group = 0;
    }
  }
  const ReplayResult r = run(*g, /*fold=*/false);
  EXPECT_EQ(r.outcome, ReplayResult::Outcome::kDeadlock);
  EXPECT_FALSE(r.blocked.empty());
}

TEST(Synthetic3D, SmallConfigReplaysToCompletion) {
  const Synthetic3DOptions o = small(2, 4, 2, 8);
  Result<ExecutionGraph> g = make_synthetic_3d(o);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  const ReplayResult r = run(*g, /*fold=*/false);
  ASSERT_EQ(r.outcome, ReplayResult::Outcome::kCompleted);
  EXPECT_EQ(r.simulated_ranks, 16);
  std::uint64_t ops = 0;
  for (Rank rank = 0; rank < 16; ++rank) {
    ops += expected_ops(o, g->role_of_rank[rank]);
  }
  EXPECT_EQ(r.op_events, ops);
  EXPECT_GT(r.makespan, SimTime::zero());
  // 1F1B keeps at most P - s micro-batches of activations alive on stage s.
  for (int s = 0; s < o.pp; ++s) {
    const Bytes expected{o.activation_bytes.count * o.layers_per_stage * (o.pp - s)};
    EXPECT_EQ(r.roles[s].max.peak_allocated, expected) << s;  // 256 MiB: no rounding
    EXPECT_EQ(r.roles[s].num_ranks, 4) << s;
  }
}

TEST(Synthetic3D, FoldedEqualsUnfolded) {
  struct Shape {
    int tp, pp, dp, m, gpus_per_node;
    bool distributed_optimizer;
  };
  for (const Shape& sh : {Shape{2, 2, 2, 4, 8, false}, Shape{2, 4, 2, 8, 8, false},
                          Shape{4, 2, 2, 3, 4, true}, Shape{2, 3, 4, 5, 4, true}}) {
    Synthetic3DOptions o = small(sh.tp, sh.pp, sh.dp, sh.m);
    o.gpus_per_node = sh.gpus_per_node;
    o.distributed_optimizer = sh.distributed_optimizer;
    o.iterations = 2;
    Result<ExecutionGraph> g = make_synthetic_3d(o);
    ASSERT_TRUE(g.is_ok()) << g.status().message();
    SCOPED_TRACE(g->name);
    const ReplayResult folded = run(*g, true);
    const ReplayResult unfolded = run(*g, false);
    EXPECT_TRUE(folded.folded);
    EXPECT_LT(folded.simulated_ranks, g->world_size());
    EXPECT_EQ(unfolded.simulated_ranks, g->world_size());
    expect_same_result(folded, unfolded);
  }
}

// A straggler splits its class and those of the ranks it can touch; in a
// TP2 x DP4 stage the DP peers of the straggler stay symmetric, so folding
// still saves work.
TEST(Synthetic3D, FoldedEqualsUnfoldedWithAStraggler) {
  const Synthetic3DOptions o = small(2, 4, 4, 8);
  Result<ExecutionGraph> g = make_synthetic_3d(o);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  const ReplayResult baseline = run(*g, true);
  g->overrides.push_back(RankOverride{9, 1'300'000});  // tp 1, dp 0, stage 1
  const ReplayResult folded = run(*g, true);
  const ReplayResult unfolded = run(*g, false);
  EXPECT_GT(folded.simulated_ranks, baseline.simulated_ranks);
  EXPECT_LT(folded.simulated_ranks, g->world_size());
  expect_same_result(folded, unfolded);
  // The straggler slows the step and its stage's slowest rank down.
  EXPECT_GT(folded.makespan, baseline.makespan);
  EXPECT_GT(folded.roles[1].max.compute, baseline.roles[1].max.compute);
}

}  // namespace
}  // namespace prism
