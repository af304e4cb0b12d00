// validate_graph(): checks 1-5 (layout, slots, roles and ops, dependency
// cycles, rank assignment), on graphs built in memory.
#include "graph/validate.h"

#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "graph_test_util.h"

namespace prism {
namespace {

using testing::error_of;
using testing::make_op;
using testing::set_deps;

using ::testing::HasSubstr;

// Two ranks along dim "tp"; slots "tp" (group) and "next" (peer, wrapping);
// one role "r" with streams s, c and events e, f, holding `ops`.
ExecutionGraph one_role(std::vector<Op> ops) {
  ExecutionGraph g;
  g.layout = Layout(2, {{"tp", 2}}, 8);
  g.slots = {CommSlot::grid_group("tp", {0}), CommSlot::grid_peer("next", 0, 1, true)};
  Role r;
  r.name = "r";
  r.streams = {"s", "c"};
  r.events = {"e", "f"};
  r.ops = std::move(ops);
  g.roles = {r};
  g.role_of_rank = {0, 0};
  return g;
}

ExecutionGraph simple() {
  Op compute = make_op(OpKind::kCompute);
  compute.duration.ns = 10;
  Op coll = make_op(OpKind::kCollective, 1, 0);
  coll.bytes.count = 64;
  return one_role({compute, coll});
}

TEST(ValidateTest, SimpleGraphIsValid) {
  EXPECT_EQ(error_of(simple()), "(ok)");
}

TEST(ValidateTest, PipelineBuiltInMemoryIsValid) {
  const ExecutionGraph g = testing::make_pipeline(2, 2, 4, 3);
  const Status st = validate_graph(g);
  EXPECT_TRUE(st.is_ok()) << st.message();
}

TEST(ValidateTest, LayoutRejections) {
  ExecutionGraph g = simple();
  g.layout = Layout(0, {}, 8);
  g.role_of_rank.clear();
  EXPECT_THAT(error_of(g), HasSubstr("layout: world_size must be >= 1, got 0"));
  g = simple();
  g.layout = Layout(2, {{"tp", 2}}, 0);
  EXPECT_THAT(error_of(g), HasSubstr("layout: gpus_per_node must be >= 1, got 0"));
  g = simple();
  g.layout = Layout(2, {{"tp", 2}, {"pp", 0}}, 8);
  EXPECT_THAT(error_of(g), HasSubstr("layout: dim 'pp' has size 0; must be >= 1"));
  g = simple();
  g.layout = Layout(2, {{"tp", 2}, {"tp", 1}}, 8);
  EXPECT_THAT(error_of(g), HasSubstr("layout: dim 'tp' appears twice"));
  g = simple();
  g.layout = Layout(2, {{"tp", 2}, {"pp", 2}}, 8);
  EXPECT_THAT(error_of(g), HasSubstr("layout: the product of the dim sizes (4) must equal "
                                     "world_size (2)"));
}

TEST(ValidateTest, GridSlotRejections) {
  ExecutionGraph g = simple();
  g.slots[0].dims = {3};
  EXPECT_THAT(error_of(g), HasSubstr("slot 'tp': dim index 3 does not exist"));
  g.slots[0].dims = {0, 0};
  EXPECT_THAT(error_of(g), HasSubstr("slot 'tp': dim 'tp' listed twice"));
  g = simple();
  g.slots[1].peer_dim = 1;
  EXPECT_THAT(error_of(g), HasSubstr("slot 'next': peer dim index 1 does not exist"));
  g = simple();
  g.slots[1].offset = 0;
  EXPECT_THAT(error_of(g), HasSubstr("slot 'next': offset must not be 0"));
  g = simple();
  g.slots[1].name = "tp";
  EXPECT_THAT(error_of(g), HasSubstr("slot 'tp' is defined twice"));
}

TEST(ValidateTest, ExplicitSlotRejections) {
  ExecutionGraph g = simple();
  g.slots[1].explicit_peers = {1};
  EXPECT_THAT(error_of(g), HasSubstr("slot 'next': peer table has 1 entries for world_size 2"));
  g.slots[1].explicit_peers = {1, 1};
  EXPECT_THAT(error_of(g), HasSubstr("slot 'next': rank 1 has peer 1; must be another rank or -1"));
  g.slots[1].explicit_peers = {1, 2};
  EXPECT_THAT(error_of(g), HasSubstr("slot 'next': rank 1 has peer 2"));
  g = simple();
  g.slots[0].explicit_groups = {{0, 1}, {}};
  EXPECT_THAT(error_of(g), HasSubstr("slot 'tp': group 1 is empty"));
  g.slots[0].explicit_groups = {{0, 2}};
  EXPECT_THAT(error_of(g), HasSubstr("slot 'tp': group 0 lists rank 2, outside [0, 2)"));
  g.slots[0].explicit_groups = {{0}, {1, 0}};
  EXPECT_THAT(error_of(g), HasSubstr("slot 'tp': rank 0 is in group 0 and group 1"));
  g.slots[0].explicit_groups = {{0, 1}};
  EXPECT_THAT(validate_graph(g).message(), HasSubstr("slot 'tp': group table not built"));
}

TEST(ValidateTest, RoleRejections) {
  ExecutionGraph g = simple();
  g.roles[0].streams.clear();
  EXPECT_THAT(error_of(g), HasSubstr("role 'r': needs at least one stream"));
  g = simple();
  g.roles[0].events = {"e", "e"};
  EXPECT_THAT(error_of(g), HasSubstr("role 'r': event 'e' is defined twice"));
  g = simple();
  g.roles.push_back(g.roles[0]);
  EXPECT_THAT(error_of(g), HasSubstr("role 'r' is defined twice"));
}

TEST(ValidateTest, RecordStreamMaskNamesTheRolesStreams) {
  Op alloc = make_op(OpKind::kAlloc);
  alloc.bytes.count = 8;
  Op free = make_op(OpKind::kFree, 0, 0);
  free.bytes.count = 8;
  free.arg = 0b11;  // streams s and c
  ExecutionGraph g = one_role({alloc, free});
  EXPECT_EQ(error_of(g), "(ok)");
  g.roles[0].ops[1].arg = 0b100;
  EXPECT_THAT(error_of(g), HasSubstr("role 'r' op 1: record-stream mask 0x4 names a stream the "
                                     "role does not have"));
  g.roles[0].ops[1].arg = -1;
  EXPECT_THAT(error_of(g), HasSubstr("record-stream mask 0xffffffff"));
}

TEST(ValidateTest, OpReferenceRejections) {
  ExecutionGraph g = simple();
  g.roles[0].ops[1].stream = 2;
  EXPECT_THAT(error_of(g), HasSubstr("role 'r' op 1: stream 2 does not exist (the role has 2)"));
  g = simple();
  g.roles[0].ops[1].ref = 1;
  EXPECT_THAT(error_of(g), HasSubstr("role 'r' op 1: collective on slot 'next', which is not a "
                                     "group slot"));
  g = simple();
  g.roles[0].ops[1].ref = 7;
  EXPECT_THAT(error_of(g), HasSubstr("role 'r' op 1: slot 7 does not exist"));
  g = simple();
  g.roles[0].ops[1].kind = OpKind::kSend;
  EXPECT_THAT(error_of(g), HasSubstr("role 'r' op 1: send on slot 'tp', which is not a peer slot"));
  g = simple();
  g.roles[0].ops.push_back(make_op(OpKind::kEventRecord, 0, 2));
  EXPECT_THAT(error_of(g),
              HasSubstr("role 'r' op 2: event 2 does not exist (the role has 2 events)"));
  g = simple();
  g.roles[0].ops[0].name = 0;
  EXPECT_THAT(error_of(g), HasSubstr("role 'r' op 0: name index 0 does not exist"));
  g.roles[0].names = {"fwd"};
  EXPECT_EQ(error_of(g), "(ok)");
}

TEST(ValidateTest, ComputeAndFieldRejections) {
  ExecutionGraph g = simple();
  g.roles[0].ops[0].cost = 0;
  EXPECT_THAT(error_of(g), HasSubstr("role 'r' op 0: cost index 0 does not exist"));
  g.roles[0].costs = {KernelCost{KernelClass::kGemm, 1e9, Bytes{10}}};
  EXPECT_THAT(error_of(g), HasSubstr("role 'r' op 0: has both a duration and a cost"));
  g.roles[0].ops[0].duration.ns = 0;
  EXPECT_EQ(error_of(g), "(ok)");
  g.roles[0].costs[0].flops = -1;
  EXPECT_THAT(error_of(g), HasSubstr("role 'r' op 0: cost has flops -1"));
  g.roles[0].costs[0] = KernelCost{KernelClass::kGemm, 1, Bytes{-1}};
  EXPECT_THAT(error_of(g), HasSubstr("role 'r' op 0: cost has negative bytes -1"));
  g = simple();
  g.roles[0].ops[1].cost = 0;
  EXPECT_THAT(error_of(g), HasSubstr("role 'r' op 1: only compute ops have a cost"));
  g = simple();
  g.roles[0].ops[0].duration.ns = -5;
  EXPECT_THAT(error_of(g), HasSubstr("role 'r' op 0: negative duration -5 ns"));
  g = simple();
  g.roles[0].ops[1].bytes.count = -64;
  EXPECT_THAT(error_of(g), HasSubstr("role 'r' op 1: negative bytes -64"));
  g = simple();
  Op marker = make_op(OpKind::kMarker);
  marker.arg = -1;
  g.roles[0].ops.push_back(marker);
  EXPECT_THAT(error_of(g), HasSubstr("role 'r' op 2: negative marker index -1"));
  g = simple();
  g.roles[0].ops[1].arg = -1;
  EXPECT_THAT(error_of(g), HasSubstr("role 'r' op 1: negative root -1"));
  g = simple();
  g.roles[0].ops[0].group = 2;
  EXPECT_THAT(error_of(g), HasSubstr("role 'r' op 0: group 2 on a compute op"));
  g.roles[0].ops[0].group = 0;
  g.roles[0].ops[1].group = 2;
  EXPECT_EQ(error_of(g), "(ok)");
}

TEST(ValidateTest, ValuesPastTheLimitsAreRejected) {
  ExecutionGraph g = simple();
  g.roles[0].ops[0].duration = kMaxOpDuration;
  g.roles[0].ops[1].bytes = kMaxBytes;
  EXPECT_EQ(error_of(g), "(ok)");
  g.roles[0].ops[0].duration.ns += 1;
  EXPECT_THAT(error_of(g), HasSubstr("role 'r' op 0: duration 1125899906842625 ns exceeds the "
                                     "limit of 1125899906842624 ns"));
  g = simple();
  g.roles[0].ops[1].bytes.count = kMaxBytes.count + 1;
  EXPECT_THAT(error_of(g), HasSubstr("role 'r' op 1: bytes 1125899906842625 exceed the limit of "
                                     "1125899906842624"));
  g = simple();
  Op alloc = make_op(OpKind::kAlloc);
  alloc.bytes.count = kMaxBytes.count + 1;
  g.roles[0].ops.push_back(alloc);
  EXPECT_THAT(error_of(g), HasSubstr("role 'r' op 2: bytes 1125899906842625 exceed the limit"));
}

TEST(ValidateTest, CostsPastTheLimitsAreRejected) {
  ExecutionGraph g = simple();
  g.roles[0].ops[0].duration.ns = 0;
  g.roles[0].ops[0].cost = 0;
  g.roles[0].costs = {KernelCost{KernelClass::kGemm, kMaxCostFlops, kMaxBytes}};
  EXPECT_EQ(error_of(g), "(ok)");
  g.roles[0].costs[0].flops = 1e31;
  EXPECT_THAT(error_of(g), HasSubstr("role 'r' op 0: cost has flops 1e+31; must be finite, >= 0 "
                                     "and <= 1e+30"));
  g.roles[0].costs[0].flops = std::numeric_limits<double>::infinity();
  EXPECT_THAT(error_of(g), HasSubstr("role 'r' op 0: cost has flops inf"));
  g.roles[0].costs[0] = KernelCost{KernelClass::kGemm, 1, Bytes{kMaxBytes.count + 1}};
  EXPECT_THAT(error_of(g), HasSubstr("role 'r' op 0: cost has bytes 1125899906842625, above the "
                                     "limit of 1125899906842624"));
}

TEST(ValidateTest, DependencyRejections) {
  ExecutionGraph g = simple();
  set_deps(g.roles[0], 1, {2});
  EXPECT_THAT(error_of(g), HasSubstr("role 'r' op 1: depends on op 2, which does not exist"));
  g = simple();
  set_deps(g.roles[0], 1, {1});
  EXPECT_THAT(error_of(g), HasSubstr("role 'r' op 1: depends on itself"));
  g = simple();
  g.roles[0].ops[1].deps_end = 3;
  EXPECT_THAT(error_of(g),
              HasSubstr("role 'r' op 1: deps range [0, 3) is outside the role's 0 deps"));
}

TEST(ValidateTest, CycleThroughStreamOrderAndDeps) {
  Op a = make_op(OpKind::kCompute, 0), b = make_op(OpKind::kCompute, 0);
  Op c = make_op(OpKind::kCompute, 1);
  ExecutionGraph g = one_role({make_op(OpKind::kMarker, 1), a, b, c});
  set_deps(g.roles[0], 1, {3});  // 3 -> 1, 1 -> 2 on stream s, 2 -> 3:
  set_deps(g.roles[0], 3, {2});
  EXPECT_THAT(error_of(g), HasSubstr("role 'r': dependency cycle: op 1 -> op 2 -> op 3 -> op 1"));
}

TEST(ValidateTest, LongCycleIsElided) {
  ExecutionGraph g = one_role(std::vector<Op>(30, make_op(OpKind::kMarker)));
  set_deps(g.roles[0], 0, {29});
  EXPECT_THAT(error_of(g),
              HasSubstr("role 'r': dependency cycle: op 0 -> op 1 -> op 2 -> op 3 -> "
                        "op 4 -> op 5 -> op 6 -> op 7 -> ... (18 more ops) -> op 26 -> "
                        "op 27 -> op 28 -> op 29 -> op 0"));
}

TEST(ValidateTest, DepsOnLaterOpsAreFine) {
  ExecutionGraph g = simple();
  set_deps(g.roles[0], 0, {1});  // compute after the collective on the other stream
  EXPECT_EQ(error_of(g), "(ok)");
}

TEST(ValidateTest, AssignmentRejections) {
  ExecutionGraph g = simple();
  g.role_of_rank = {0};
  EXPECT_THAT(error_of(g), HasSubstr("role_of_rank has 1 entries for world_size 2"));
  g.role_of_rank = {0, kNone};
  EXPECT_THAT(error_of(g), HasSubstr("rank 1 has no role"));
  g.role_of_rank = {3, 0};
  EXPECT_THAT(error_of(g), HasSubstr("rank 0: role index 3 does not exist"));
}

TEST(ValidateTest, OverrideRejections) {
  ExecutionGraph g = simple();
  g.overrides = {{1, 1'500'000}, {0, 1'000'000}};
  EXPECT_THAT(error_of(g), HasSubstr("override of rank 0: overrides must be sorted by rank"));
  g.overrides = {{2, 1'000'000}};
  EXPECT_THAT(error_of(g), HasSubstr("override of rank 2: no such rank"));
  g.overrides = {{1, 0}};
  EXPECT_THAT(error_of(g), HasSubstr("override of rank 1: compute_scale_ppm must be > 0"));
  g.overrides = {{1, kMaxComputeScalePpm}};
  EXPECT_EQ(error_of(g), "(ok)");
  g.overrides = {{1, kMaxComputeScalePpm + 1}};
  EXPECT_THAT(error_of(g), HasSubstr("override of rank 1: compute_scale_ppm must be > 0 and <= "
                                     "1000000000 (x1000), got 1000000001"));
}

}  // namespace
}  // namespace prism
