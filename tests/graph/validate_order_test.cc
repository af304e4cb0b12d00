// validate_graph() check 4 (validate_order.cc): an NCCL group is one node of
// the dependency graph, so a group that waits on itself is a cycle; a free
// must follow its alloc in the dependency graph, not only in issue order.
// Cycles without groups are tested in validate_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "graph/validate.h"
#include "graph_test_util.h"

namespace prism {
namespace {

using testing::error_of;
using testing::make_op;
using testing::set_deps;

using ::testing::HasSubstr;

constexpr std::uint16_t kS = 0, kM = 1, kX = 2;  // streams
constexpr std::int32_t kNext = 0;                // peer slot
constexpr std::int32_t kE = 0;                   // event

Op send(std::uint32_t group) {
  return make_op(OpKind::kSend, kM, kNext, group);
}
Op recv(std::uint32_t group) {
  return make_op(OpKind::kRecv, kM, kNext, group);
}

// Two ranks along "tp" exchanging over the wrapping peer slot "next"; both
// run role "r" (streams s, m, x; event e) holding `ops`.
ExecutionGraph one_role(std::vector<Op> ops) {
  ExecutionGraph g;
  g.layout = Layout(2, {{"tp", 2}}, 8);
  g.slots = {CommSlot::grid_peer("next", 0, 1, true)};
  Role r;
  r.name = "r";
  r.streams = {"s", "m", "x"};
  r.events = {"e"};
  r.ops = std::move(ops);
  g.roles = {r};
  g.role_of_rank = {0, 0};
  return g;
}

TEST(ValidateOrderTest, GroupIssuedAfterAllItsDependenciesIsValid) {
  ExecutionGraph g =
      one_role({make_op(OpKind::kCompute, kS), send(1), recv(1), make_op(OpKind::kCompute, kS)});
  set_deps(g.roles[0], 1, {0});
  set_deps(g.roles[0], 3, {2});
  EXPECT_EQ(error_of(g), "(ok)");
}

TEST(ValidateOrderTest, GroupMemberDependingOnAnotherMember) {
  ExecutionGraph g = one_role({make_op(OpKind::kMarker, kS), send(1), recv(1)});
  set_deps(g.roles[0], 2, {1});
  EXPECT_THAT(error_of(g), HasSubstr("role 'r': NCCL group 1 on stream 'm' (ops 1..2): op 2 "
                                     "depends on op 1 of the same group"));
}

TEST(ValidateOrderTest, GroupDependingOnItselfThroughAnotherStream) {
  // send -> compute on s -> recv: acyclic op by op, but the recv holds back
  // the whole group, the send included.
  ExecutionGraph g = one_role({send(1), make_op(OpKind::kCompute, kS), recv(1)});
  set_deps(g.roles[0], 1, {0});
  set_deps(g.roles[0], 2, {1});
  EXPECT_THAT(error_of(g),
              HasSubstr("role 'r': NCCL group 1 on stream 'm' (ops 0, 2) depends on itself "
                        "through op 1"));
  g.roles[0].ops[0].group = g.roles[0].ops[2].group = 0;
  EXPECT_EQ(error_of(g), "(ok)");
}

TEST(ValidateOrderTest, GroupCycleThroughSeveralOpsNamesThemInOrder) {
  ExecutionGraph g = one_role({make_op(OpKind::kMarker, kS), send(7), recv(7),
                               make_op(OpKind::kCompute, kS), make_op(OpKind::kCompute, kX)});
  set_deps(g.roles[0], 3, {1});
  set_deps(g.roles[0], 4, {3});
  set_deps(g.roles[0], 2, {4});
  EXPECT_THAT(error_of(g),
              HasSubstr("role 'r': NCCL group 7 on stream 'm' (ops 1..2) depends on itself "
                        "through op 3 -> op 4"));
}

TEST(ValidateOrderTest, SameGroupIdSplitByAnotherOpIsTwoGroups) {
  ExecutionGraph g = one_role({send(1), make_op(OpKind::kMarker, kM), recv(1)});
  set_deps(g.roles[0], 2, {0});
  EXPECT_EQ(error_of(g), "(ok)");
}

TEST(ValidateOrderTest, FreeOnAnotherStreamMustFollowItsAlloc) {
  ExecutionGraph g = one_role({make_op(OpKind::kAlloc, kS), make_op(OpKind::kFree, kM, 0)});
  EXPECT_THAT(error_of(g), HasSubstr("role 'r' op 1: free of op 0 (alloc on stream 's') is not "
                                     "ordered after it: add an event or a dependency"));
  // An event recorded before the alloc does not order it.
  g = one_role({make_op(OpKind::kEventRecord, kS, kE), make_op(OpKind::kAlloc, kS),
                make_op(OpKind::kEventWait, kM, kE), make_op(OpKind::kFree, kM, 1)});
  EXPECT_THAT(error_of(g), HasSubstr("role 'r' op 3: free of op 1 (alloc on stream 's') is not "
                                     "ordered after it"));
}

TEST(ValidateOrderTest, FreeOrderedByAnEventOrByDependencies) {
  ExecutionGraph g = one_role({make_op(OpKind::kAlloc, kS), make_op(OpKind::kEventRecord, kS, kE),
                               make_op(OpKind::kEventWait, kM, kE), make_op(OpKind::kFree, kM, 0)});
  EXPECT_EQ(error_of(g), "(ok)");
  // Transitively: alloc -> compute on s -> compute on x -> free on m.
  g = one_role({make_op(OpKind::kAlloc, kS), make_op(OpKind::kCompute, kS),
                make_op(OpKind::kCompute, kX), make_op(OpKind::kFree, kM, 0)});
  set_deps(g.roles[0], 2, {1});
  set_deps(g.roles[0], 3, {2});
  EXPECT_EQ(error_of(g), "(ok)");
}

TEST(ValidateOrderTest, FreeOnTheAllocStreamIsAlwaysOrdered) {
  ExecutionGraph g = one_role(
      {make_op(OpKind::kAlloc, kS), make_op(OpKind::kMarker, kM), make_op(OpKind::kFree, kS, 0)});
  EXPECT_EQ(error_of(g), "(ok)");
}

TEST(ValidateOrderTest, FreeOrderedThroughAnNcclGroup) {
  // The free waits for the send, which is issued together with the recv,
  // only once the recv's dependency (the alloc) is done.
  ExecutionGraph g =
      one_role({make_op(OpKind::kAlloc, kS), send(1), recv(1), make_op(OpKind::kFree, kX, 0)});
  set_deps(g.roles[0], 2, {0});
  set_deps(g.roles[0], 3, {1});
  EXPECT_EQ(error_of(g), "(ok)");
  g.roles[0].ops[1].group = g.roles[0].ops[2].group = 0;
  EXPECT_THAT(error_of(g), HasSubstr("role 'r' op 3: free of op 0 (alloc on stream 's')"));
}

}  // namespace
}  // namespace prism
