// Export then import: the graph that comes back runs the same programs over
// the same ranks, and a replay of it gives the same times.
#include <gtest/gtest.h>

#include <set>

#include "../replay/test_graphs.h"
#include "chakra/chakra.h"
#include "chakra_test_util.h"
#include "test_graph.h"
#include "workload/synthetic.h"

namespace prism {
namespace {

using namespace chakra_test;  // NOLINT(google-build-using-namespace)

// Cross-stream dependencies of op `i` (same-stream ones are stream order).
std::set<std::int32_t> cross_deps(const Role& role, std::size_t i) {
  std::set<std::int32_t> out;
  const Op& op = role.ops[i];
  for (std::uint32_t d = op.deps_begin; d < op.deps_end; ++d)
    if (role.ops[role.deps[d]].stream != op.stream) out.insert(role.deps[d]);
  return out;
}

// Rank `r` runs the same ops in `a` and `b`: kinds, streams, sizes, times,
// dependencies, and the concrete ranks its communication reaches.
void expect_same_program(const ExecutionGraph& a, const ExecutionGraph& b, Rank r) {
  const Role& ra = a.roles[a.role_of_rank[r]];
  const Role& rb = b.roles[b.role_of_rank[r]];
  ASSERT_EQ(ra.ops.size(), rb.ops.size()) << "rank " << r;
  EXPECT_EQ(ra.streams, rb.streams);
  EXPECT_EQ(ra.events, rb.events);
  const SlotResolver res_a = a.resolver(), res_b = b.resolver();
  std::vector<Rank> ma, mb;
  for (std::size_t i = 0; i < ra.ops.size(); ++i) {
    const Op& x = ra.ops[i];
    const Op& y = rb.ops[i];
    SCOPED_TRACE("rank " + std::to_string(r) + " op " + std::to_string(i));
    ASSERT_EQ(x.kind, y.kind);
    EXPECT_EQ(x.stream, y.stream);
    EXPECT_EQ(x.duration, y.duration);
    EXPECT_EQ(x.bytes, y.bytes);
    EXPECT_EQ(x.arg, y.arg);
    EXPECT_EQ(x.group, y.group);
    EXPECT_EQ(x.transport, y.transport);
    EXPECT_EQ(x.cost == kNone, y.cost == kNone);
    if (x.name != kNone) {
      EXPECT_EQ(ra.names[x.name], rb.names[y.name]);
    }
    EXPECT_EQ(cross_deps(ra, i), cross_deps(rb, i));
    switch (x.kind) {
      case OpKind::kCollective:
        EXPECT_EQ(x.collective, y.collective);
        EXPECT_EQ(x.dtype, y.dtype);
        res_a.members(x.ref, r, &ma);
        res_b.members(y.ref, r, &mb);
        EXPECT_EQ(ma, mb);
        break;
      case OpKind::kSend:
      case OpKind::kRecv:
        EXPECT_EQ(res_a.peer(x.ref, r), res_b.peer(y.ref, r));
        break;
      case OpKind::kMarker:
        EXPECT_EQ(x.marker, y.marker);
        break;
      case OpKind::kFree:
      case OpKind::kEventRecord:
      case OpKind::kEventWait:
        EXPECT_EQ(x.ref, y.ref);
        break;
      default:
        break;
    }
  }
}

Result<ExecutionGraph> round_trip(const ExecutionGraph& g, const ScratchDir& dir) {
  RooflineModel roofline;
  ChakraExportOptions o;
  o.compute = &roofline;
  Status s = export_chakra(g, dir.path(), o);
  if (!s.is_ok()) return s;
  ChakraImportOptions io;
  io.gpus_per_node = g.layout.gpus_per_node();
  io.name = g.name;
  return import_chakra(dir.path() / "workload", io);
}

TEST(ChakraRoundTripTest, EveryOpKindComesBack) {
  ScratchDir dir;
  const ExecutionGraph g = small_graph();
  Result<ExecutionGraph> back = round_trip(g, dir);
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->roles.size(), 1u);
  for (Rank r = 0; r < 2; ++r) expect_same_program(g, back.value(), r);
  const Role& role = back->roles[0];
  EXPECT_EQ(role.costs[role.ops[7].cost].kernel_class, KernelClass::kGemm);
  EXPECT_EQ(role.costs[role.ops[7].cost].flops, 1e12);
  EXPECT_EQ(role.ops[6].arg, 1 << 1);  // recorded on the comm stream
  EXPECT_EQ(role.ops[8].transport, Transport::kUserbuffers);
  EXPECT_EQ(testing::run(g).makespan, testing::run(back.value()).makespan);
}

TEST(ChakraRoundTripTest, SyntheticThreeDimensionalJobKeepsItsProgramsAndTimes) {
  Synthetic3DOptions o;
  o.tp = 2;
  o.pp = 4;
  o.dp = 2;
  o.microbatches = 4;
  o.layers_per_stage = 2;
  o.layers_per_bucket = 1;
  o.distributed_optimizer = true;
  Result<ExecutionGraph> g = make_synthetic_3d(o);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  ScratchDir dir;
  Result<ExecutionGraph> back = round_trip(g.value(), dir);
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->world_size(), 16);
  EXPECT_EQ(back->roles.size(), g->roles.size());  // one per pipeline stage
  for (Rank r = 0; r < g->world_size(); ++r) expect_same_program(g.value(), back.value(), r);
  const ReplayResult before = testing::run(g.value());
  const ReplayResult after = testing::run(back.value());
  EXPECT_EQ(before.outcome, ReplayResult::Outcome::kCompleted);
  EXPECT_EQ(after.outcome, ReplayResult::Outcome::kCompleted);
  EXPECT_EQ(before.makespan, after.makespan);
  EXPECT_EQ(before.iteration_times, after.iteration_times);
}

}  // namespace
}  // namespace prism
