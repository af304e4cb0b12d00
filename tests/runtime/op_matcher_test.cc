#include "runtime/op_matcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "../replay/test_graphs.h"

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
