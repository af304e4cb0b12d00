// finalize_graph(): explicit group tables, event waits resolved into
// dependencies, frees sized from their allocs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "graph/validate.h"
#include "graph_test_util.h"

namespace prism {
namespace {

using testing::make_op;

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

ExecutionGraph one_role(std::vector<Op> ops) {
  ExecutionGraph g;
  g.layout = Layout(1, {{"rank", 1}}, 8);
  Role r;
  r.name = "r";
  r.streams = {"s", "c"};
  r.events = {"e", "f"};
  r.ops = std::move(ops);
  g.roles = {r};
  g.role_of_rank = {0};
  return g;
}

std::vector<std::int32_t> deps_of(const Role& role, std::size_t op) {
  const Op& o = role.ops[op];
  return {role.deps.begin() + o.deps_begin, role.deps.begin() + o.deps_end};
}

constexpr std::int32_t kE = 0, kF = 1;

TEST(FinalizeGraphTest, EventWaitDependsOnTheLatestEarlierRecord) {
  ExecutionGraph g =
      one_role({make_op(OpKind::kEventRecord, 0, kE), make_op(OpKind::kEventRecord, 0, kF),
                make_op(OpKind::kEventRecord, 0, kE), make_op(OpKind::kEventWait, 1, kE),
                make_op(OpKind::kEventRecord, 0, kE), make_op(OpKind::kEventWait, 1, kF),
                make_op(OpKind::kEventWait, 1, kE)});
  ASSERT_TRUE(finalize_graph(g).is_ok());
  const Role& r = g.roles[0];
  EXPECT_THAT(deps_of(r, 3), ElementsAre(2));
  EXPECT_THAT(deps_of(r, 5), ElementsAre(1));
  EXPECT_THAT(deps_of(r, 6), ElementsAre(4));
  EXPECT_THAT(deps_of(r, 4), IsEmpty());
  EXPECT_TRUE(validate_graph(g).is_ok());
}

TEST(FinalizeGraphTest, EventWaitKeepsItsExplicitDeps) {
  ExecutionGraph g = one_role({make_op(OpKind::kMarker, 1), make_op(OpKind::kEventRecord, 0, kE),
                               make_op(OpKind::kEventWait, 1, kE)});
  Role& r = g.roles[0];
  r.deps = {0};
  r.ops[2].deps_begin = 0;
  r.ops[2].deps_end = 1;
  r.ops[0].deps_begin = r.ops[0].deps_end = 1;  // ranges need not be in op order
  ASSERT_TRUE(finalize_graph(g).is_ok());
  EXPECT_THAT(deps_of(g.roles[0], 2), ElementsAre(0, 1));
  EXPECT_THAT(deps_of(g.roles[0], 0), IsEmpty());
}

TEST(FinalizeGraphTest, RunningTwiceChangesNothing) {
  ExecutionGraph g =
      one_role({make_op(OpKind::kEventRecord, 0, kE), make_op(OpKind::kEventWait, 1, kE),
                make_op(OpKind::kAlloc, 0), make_op(OpKind::kFree, 0, 2)});
  g.roles[0].ops[2].bytes.count = 4096;
  ASSERT_TRUE(finalize_graph(g).is_ok());
  const std::string once = testing::dump_graph(g);
  ASSERT_TRUE(finalize_graph(g).is_ok());
  EXPECT_EQ(testing::dump_graph(g), once);
  EXPECT_THAT(deps_of(g.roles[0], 1), ElementsAre(0));
}

TEST(FinalizeGraphTest, DanglingEventWait) {
  ExecutionGraph g = one_role({make_op(OpKind::kMarker, 0), make_op(OpKind::kEventWait, 1, kE),
                               make_op(OpKind::kEventRecord, 0, kE)});
  EXPECT_THAT(finalize_graph(g).message(),
              HasSubstr("role 'r' op 1: event_wait on event 'e' with no earlier event_record"));
}

TEST(FinalizeGraphTest, EventOutOfRange) {
  ExecutionGraph g = one_role({make_op(OpKind::kEventWait, 1, 5)});
  EXPECT_THAT(finalize_graph(g).message(),
              HasSubstr("role 'r' op 0: event 5 does not exist (the role has 2 events)"));
}

TEST(FinalizeGraphTest, FreeTakesItsAllocSize) {
  ExecutionGraph g = one_role({make_op(OpKind::kAlloc, 0), make_op(OpKind::kAlloc, 0),
                               make_op(OpKind::kFree, 1, 0), make_op(OpKind::kFree, 0, 1)});
  g.roles[0].ops[0].bytes.count = 100;
  g.roles[0].ops[1].bytes.count = 200;
  ASSERT_TRUE(finalize_graph(g).is_ok());
  EXPECT_EQ(g.roles[0].ops[2].bytes.count, 100);
  EXPECT_EQ(g.roles[0].ops[3].bytes.count, 200);
}

TEST(FinalizeGraphTest, FreeRejections) {
  ExecutionGraph g = one_role({make_op(OpKind::kFree, 0, 1), make_op(OpKind::kAlloc, 0)});
  EXPECT_THAT(finalize_graph(g).message(),
              HasSubstr("role 'r' op 0: free of op 1, which comes later"));
  g = one_role({make_op(OpKind::kMarker, 0), make_op(OpKind::kFree, 0, 0)});
  EXPECT_THAT(finalize_graph(g).message(),
              HasSubstr("role 'r' op 1: free of op 0, which is a marker op, not an alloc"));
  g = one_role(
      {make_op(OpKind::kAlloc, 0), make_op(OpKind::kFree, 0, 0), make_op(OpKind::kFree, 0, 0)});
  EXPECT_THAT(finalize_graph(g).message(),
              HasSubstr("role 'r' op 2: free of op 0, which op 1 already freed"));
  g = one_role({make_op(OpKind::kFree, 0, 9)});
  EXPECT_THAT(finalize_graph(g).message(),
              HasSubstr("role 'r' op 0: free of op 9, which does not exist"));
}

TEST(FinalizeGraphTest, ExplicitGroupTable) {
  ExecutionGraph g = one_role({});
  g.layout = Layout(4, {{"rank", 4}}, 8);
  g.role_of_rank = {0, 0, 0, 0};
  g.slots = {CommSlot::explicit_group("x", {{3, 1}, {0}})};
  ASSERT_TRUE(finalize_graph(g).is_ok());
  EXPECT_THAT(g.slots[0].group_of_rank, ElementsAre(1, 0, kNone, 0));
  g.slots[0].explicit_groups = {{3, 1}, {0, 3}};
  EXPECT_THAT(finalize_graph(g).message(), HasSubstr("slot 'x': rank 3 is in group 0 and group 1"));
}

}  // namespace
}  // namespace prism
