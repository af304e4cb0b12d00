#include "runtime/op_matcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "../replay/test_graphs.h"
#include "runtime/split_color.h"

namespace prism::runtime {
namespace {

using ::testing::HasSubstr;

// 2 x 2 grid: tp groups {0,1},{2,3}; dp groups {0,2},{1,3}. Every rank
// all-reduces on tp, broadcasts on dp from root 1, then sends to its dp
// peer (+1, wrapping) and receives from it with tag 7.
ExecutionGraph grid() {
  RoleBuilder b("r", {"s"});
  b.collective(0, 0, CollectiveKind::kAllReduce, Bytes{64});
  b.collective(0, 1, CollectiveKind::kBroadcast, Bytes{32}, DType::kFloat32, 1);
  b.send(0, 2, Bytes{16}, 7);
  b.recv(0, 2, Bytes{16}, 7);
  return testing::make_graph({{"tp", 2}, {"dp", 2}}, 8,
                             {testing::group_slot("tp", {0}), testing::group_slot("dp", {1}),
                              testing::peer_slot("dp_next", 1, 1, true)},
                             {std::move(b).build()}, {0, 0, 0, 0});
}

wire::Op op(std::uint32_t comm, wire::OpCode code, std::int64_t bytes, std::int32_t peer = 0,
            DType dtype = DType::kBFloat16, std::int32_t tag = 0) {
  return wire::Op{0, comm, 0, code, dtype, bytes, peer, tag, 0, 0};
}

TEST(OpMatcherTest, CommunicatorsByMembersOrBySizeAndPosition) {
  const ExecutionGraph g = grid();
  OpMatcher m(g, 2);
  ASSERT_TRUE(m.declare(wire::CommInit{5, 2, 0, 0, {2, 3}}).is_ok());  // tp
  ASSERT_TRUE(m.declare(wire::CommInit{6, 2, 1, 0, {}}).is_ok());      // dp: 2 ranks, position 1
  EXPECT_EQ(m.remaining(), 4);
  Result<std::int32_t> a = m.match(op(5, wire::OpCode::kAllReduce, 64));
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  EXPECT_EQ(a.value(), 0);
  Result<std::int32_t> b = m.match(op(6, wire::OpCode::kBroadcast, 32, 1, DType::kFloat32));
  ASSERT_TRUE(b.is_ok()) << b.status().message();
  EXPECT_EQ(b.value(), 1);
  EXPECT_EQ(m.describe(1), "broadcast #0 on 'dp' (op 1)");
}

TEST(OpMatcherTest, SendsAndReceivesByGlobalPeerAndTag) {
  const ExecutionGraph g = grid();
  OpMatcher m(g, 0);
  // A world communicator is no slot's group: it carries point-to-point only.
  ASSERT_TRUE(m.declare(wire::CommInit{9, 4, 0, 0, {0, 1, 2, 3}}).is_ok());
  Result<std::int32_t> s = m.match(op(9, wire::OpCode::kSend, 16, 2, DType::kBFloat16, 7));
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_EQ(s.value(), 2);
  Result<std::int32_t> r = m.match(op(9, wire::OpCode::kRecv, 16, 2, DType::kBFloat16, 7));
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r.value(), 3);
  EXPECT_EQ(m.describe(2), "send #0 to rank 2 tag 7 (op 2)");
  const Result<std::int32_t> again =
      m.match(op(9, wire::OpCode::kSend, 16, 2, DType::kBFloat16, 7));
  ASSERT_FALSE(again.is_ok());
  EXPECT_THAT(again.status().message(),
              HasSubstr("the graph has no more sends to rank 2 with tag 7"));
  const Result<std::int32_t> coll = m.match(op(9, wire::OpCode::kAllReduce, 64));
  ASSERT_FALSE(coll.is_ok());
  EXPECT_THAT(coll.status().message(),
              HasSubstr("the graph has no collectives on a communicator of these members"));
}

TEST(OpMatcherTest, RejectsWhatTheGraphDoesNotHave) {
  const ExecutionGraph g = grid();
  OpMatcher m(g, 1);
  EXPECT_THAT(m.declare(wire::CommInit{1, 3, 0, 0, {}}).message(),
              HasSubstr("no communicator of the graph left with that size and position"));
  EXPECT_THAT(m.declare(wire::CommInit{1, 2, 0, 0, {0, 2}}).message(),
              HasSubstr("do not hold this rank at its position"));
  ASSERT_TRUE(m.declare(wire::CommInit{1, 2, 1, 0, {0, 1}}).is_ok());
  EXPECT_THAT(m.declare(wire::CommInit{1, 2, 1, 0, {0, 1}}).message(), HasSubstr("declared twice"));
  EXPECT_THAT(m.match(op(4, wire::OpCode::kAllReduce, 64)).status().message(),
              HasSubstr("the communicator was never declared"));
  EXPECT_THAT(m.match(op(1, wire::OpCode::kAllGather, 64)).status().message(),
              HasSubstr("the graph has all_reduce of 64 bytes of bf16 here: all_reduce #0 on "
                        "'tp' (op 0)"));
  ASSERT_TRUE(m.match(op(1, wire::OpCode::kAllReduce, 64)).is_ok());
  EXPECT_THAT(m.match(op(1, wire::OpCode::kAllReduce, 64)).status().message(),
              HasSubstr("the graph has only 1 collectives on 'tp'"));
}

TEST(OpMatcherTest, BroadcastRootMustMatch) {
  const ExecutionGraph g = grid();
  OpMatcher m(g, 0);
  ASSERT_TRUE(m.declare(wire::CommInit{1, 2, 0, 0, {0, 2}}).is_ok());
  EXPECT_THAT(m.match(op(1, wire::OpCode::kBroadcast, 32, 0, DType::kFloat32)).status().message(),
              HasSubstr("from root 1"));
}

}  // namespace
}  // namespace prism::runtime

namespace prism::runtime {
namespace {

// A split's communicator is a slot within the parent: the one PyTorch's
// color names, else the first left in slot order.
TEST(OpMatcherTest, SplitsTakeTheSlotTheColorNamesOrTheNextOne) {
  const ExecutionGraph g = grid();
  {
    OpMatcher m(g, 3);
    ASSERT_TRUE(m.declare(wire::CommInit{1, 4, 3, 0, {0, 1, 2, 3}}).is_ok());
    const std::vector<std::int32_t> dp = {1, 3};
    Result<OpMatcher::Split> s = m.split(wire::CommSplit{1, 2, torch_split_color(dp), 3});
    ASSERT_TRUE(s.is_ok()) << s.status().message();
    EXPECT_EQ(s.value().info.members, dp);
    EXPECT_EQ(s.value().info.rank_in_comm, 1);
    EXPECT_EQ(s.value().seq, 0);
    EXPECT_EQ(s.value().parent, (std::vector<Rank>{0, 1, 2, 3}));
    // An arbitrary color: the first slot left, tp.
    Result<OpMatcher::Split> t = m.split(wire::CommSplit{1, 3, 77, 3});
    ASSERT_TRUE(t.is_ok()) << t.status().message();
    EXPECT_EQ(t.value().info.members, (std::vector<std::int32_t>{2, 3}));
    EXPECT_EQ(t.value().seq, 1);
    ASSERT_TRUE(m.match(op(3, wire::OpCode::kAllReduce, 64)).is_ok());
    ASSERT_TRUE(m.match(op(2, wire::OpCode::kBroadcast, 32, 1, DType::kFloat32)).is_ok());
    const Result<OpMatcher::Split> none = m.split(wire::CommSplit{1, 4, 5, 3});
    ASSERT_FALSE(none.is_ok());
    EXPECT_THAT(none.status().message(),
                HasSubstr("rank 3 communicator 4 (split of communicator 1 with color 5): the graph "
                          "has no communicator left within the parent's 4 ranks"));
  }
  {
    OpMatcher m(g, 0);
    // Within a parent of {0, 1, 3} (no slot's group) only tp fits, whatever
    // the color.
    ASSERT_TRUE(m.declare(wire::CommInit{1, 3, 0, 0, {0, 1, 3}}).is_ok());
    Result<OpMatcher::Split> s =
        m.split(wire::CommSplit{1, 2, torch_split_color(std::vector<std::int32_t>{0, 2}), 0});
    ASSERT_TRUE(s.is_ok()) << s.status().message();
    EXPECT_EQ(s.value().info.members, (std::vector<std::int32_t>{0, 1}));
  }
}

// torch's split_group (init_device_mesh on NCCL) colors a group by its
// lowest rank in the parent: rank 3's dp {1, 3} is color 1 and tp {2, 3}
// color 2, whatever the slot order (tp first).
TEST(OpMatcherTest, SplitsByTheLowestRankTakeTheSlotItStarts) {
  const ExecutionGraph g = grid();
  OpMatcher m(g, 3);
  ASSERT_TRUE(m.declare(wire::CommInit{1, 4, 3, 0, {0, 1, 2, 3}}).is_ok());
  Result<OpMatcher::Split> dp = m.split(wire::CommSplit{1, 2, 1, 3});
  ASSERT_TRUE(dp.is_ok()) << dp.status().message();
  EXPECT_EQ(dp.value().info.members, (std::vector<std::int32_t>{1, 3}));
  Result<OpMatcher::Split> tp = m.split(wire::CommSplit{1, 3, 2, 3});
  ASSERT_TRUE(tp.is_ok()) << tp.status().message();
  EXPECT_EQ(tp.value().info.members, (std::vector<std::int32_t>{2, 3}));
}

// ncclCommInitRank of the default process group says only its size and the
// rank's position: a communicator of the whole job at the rank's own
// position with no slot left is the world (the parent of device-mesh
// splits, H200 2026-11-27), carrying no collective of its own.
TEST(OpMatcherTest, TheWholeJobWithoutMembersIsTheWorld) {
  const ExecutionGraph g = grid();
  OpMatcher m(g, 3);
  ASSERT_TRUE(m.declare(wire::CommInit{1, 4, 3, 0, {}}).is_ok());
  Result<OpMatcher::Split> dp = m.split(wire::CommSplit{1, 2, 1, 3});
  ASSERT_TRUE(dp.is_ok()) << dp.status().message();
  EXPECT_EQ(dp.value().info.members, (std::vector<std::int32_t>{1, 3}));
  EXPECT_EQ(dp.value().parent, (std::vector<Rank>{0, 1, 2, 3}));
  EXPECT_THAT(m.match(op(1, wire::OpCode::kAllReduce, 64)).status().message(),
              HasSubstr("the graph has no collectives on a communicator of these members"));
  // At another position it is not this rank's world.
  OpMatcher other(g, 3);
  EXPECT_THAT(other.declare(wire::CommInit{1, 4, 2, 0, {}}).message(),
              HasSubstr("no communicator of the graph left with that size and position"));
}

TEST(OpMatcherTest, RejectsSplitsOfUnknownParentsAndKnownHandles) {
  const ExecutionGraph g = grid();
  OpMatcher m(g, 0);
  const Result<OpMatcher::Split> orphan = m.split(wire::CommSplit{1, 2, 0, 0});
  ASSERT_FALSE(orphan.is_ok());
  EXPECT_THAT(orphan.status().message(), HasSubstr("the parent was never declared"));
  ASSERT_TRUE(m.declare(wire::CommInit{1, 4, 0, 0, {0, 1, 2, 3}}).is_ok());
  const Result<OpMatcher::Split> twice = m.split(wire::CommSplit{1, 1, 0, 0});
  ASSERT_FALSE(twice.is_ok());
  EXPECT_THAT(twice.status().message(), HasSubstr("declared twice"));
}

}  // namespace
}  // namespace prism::runtime
