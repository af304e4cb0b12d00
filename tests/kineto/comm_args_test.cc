// Collective metadata -> kind, bytes (the graph format's convention), dtype,
// communicator key and members, root and peer; and each rejection.
#include "kineto/comm_args.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kineto_test_util.h"

namespace prism::kineto {
namespace {

using kineto_test::comm_args;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class CommArgsTest : public ::testing::Test {
 protected:
  Result<CommCall> read(const Json& args, std::string_view kernel = {},
                        const Json* host = nullptr) {
    return read_comm_call(&args, host, kernel, ctx_, "t.json: event 5 ('k')");
  }
  std::string error(const Json& args, std::string_view kernel = {}) {
    Result<CommCall> c = read(args, kernel);
    return c.is_ok() ? "ok" : c.status().message();
  }
  DistributedInfo dist_;
  CommContext ctx_{0, 8, &dist_};
};

TEST_F(CommArgsTest, BytesFollowTheGraphFormat) {
  Json a = comm_args("allreduce", 1024, "BFloat16", "[0, 1, 2, 3]");
  Result<CommCall> c = read(a);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->kind, OpKind::kCollective);
  EXPECT_EQ(c->collective, CollectiveKind::kAllReduce);
  EXPECT_EQ(c->bytes.count, 2048);
  EXPECT_EQ(c->dtype, DType::kBFloat16);
  EXPECT_EQ(c->comm.key, "default_pg");
  EXPECT_THAT(c->comm.members, ElementsAre(0, 1, 2, 3));

  a = comm_args("_allgather_base", 0, "Float", "[0, 1, 2, 3]");
  a["In msg nelems"] = 100;
  a["Out msg nelems"] = 400;
  EXPECT_EQ(read(a)->collective, CollectiveKind::kAllGather);
  EXPECT_EQ(read(a)->bytes.count, 1600);  // the gathered output
  a.erase("Out msg nelems");
  a["Group size"] = 4;
  EXPECT_EQ(read(a)->bytes.count, 1600);  // input x group size

  a = comm_args("reduce_scatter_tensor_coalesced", 0, "Half", "[0, 1]");
  a["In msg nelems"] = 64;
  a["Out msg nelems"] = 32;
  EXPECT_EQ(read(a)->collective, CollectiveKind::kReduceScatter);
  EXPECT_EQ(read(a)->bytes.count, 128);  // the reduced input

  a = comm_args("all_to_allv", 10, "Long", "[0, 1]");
  EXPECT_EQ(read(a)->collective, CollectiveKind::kAllToAll);
  EXPECT_EQ(read(a)->bytes.count, 80);

  a = comm_args("barrier", 0, "", "[0, 1]");
  a.erase("dtype");
  EXPECT_EQ(read(a)->collective, CollectiveKind::kBarrier);
  EXPECT_EQ(read(a)->bytes.count, 0);
  EXPECT_EQ(read(a)->dtype, DType::kBFloat16);

  a = comm_args("allreduce", 3, "Float8_e4m3fn", "[0, 1]");
  EXPECT_EQ(read(a)->dtype, DType::kFloat8E4M3);
  EXPECT_EQ(read(a)->bytes.count, 3);
  a["dtype"] = "Short";  // no int16 in the graph: same width, exact bytes
  EXPECT_EQ(read(a)->bytes.count, 6);
}

TEST_F(CommArgsTest, KindFromTheKernelWhenTheNameSaysNone) {
  Json a = comm_args("coalesced", 8, "Float", "[0, 1]");
  Result<CommCall> c = read(a, "ncclDevKernel_ReduceScatter_Sum_f32_RING_LL");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->collective, CollectiveKind::kReduceScatter);
  EXPECT_EQ(error(a, "ncclDevKernel_SendRecv"),
            "t.json: event 5 ('k'): unsupported collective 'coalesced'");
  EXPECT_EQ(error(comm_args("gather", 8, "Float", "[0, 1]")),
            "t.json: event 5 ('k'): unsupported collective 'gather'");
}

TEST_F(CommArgsTest, KeyIsTheDescriptionElseTheNameElseTheMembers) {
  Json a = comm_args("allreduce", 8, "Float", "[0, 2]", "DATA_PARALLEL_GROUP", "7");
  EXPECT_EQ(read(a)->comm.key, "DATA_PARALLEL_GROUP");
  a["Process Group Description"] = "undefined";
  EXPECT_EQ(read(a)->comm.key, "pg7");
  a.erase("Process Group Description");
  a.erase("Process Group Name");
  EXPECT_EQ(read(a)->comm.key, "ranks:0,2");
}

TEST_F(CommArgsTest, TruncatedGroupsAreCompleted) {
  ctx_.world_size = 64;
  ctx_.rank = 40;
  Json a = comm_args("allreduce", 8, "Float", "[0, 2, ..., 62]", "dp", "3");
  a["Group size"] = 32;
  EXPECT_THAT(error(a), HasSubstr("does not list the group"));
  a["Global rank start"] = 0;
  a["Global rank stride"] = 2;
  Result<CommCall> c = read(a);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->comm.members.size(), 32u);
  EXPECT_EQ(c->comm.members.back(), 62);
  a.erase("Global rank start");
  std::vector<Rank> evens;
  for (Rank r = 0; r < 64; r += 2) evens.push_back(r);
  dist_.pg_ranks["3"] = evens;
  EXPECT_EQ(read(a)->comm.members, evens);
  // "[]" with the world's size: the default group.
  Json w = comm_args("allreduce", 8, "Float", "[]");
  w["Group size"] = 64;
  EXPECT_EQ(read(w)->comm.members.size(), 64u);
}

TEST_F(CommArgsTest, RootAndPeers) {
  Json host = {{"Rank", 1}};
  Json a = comm_args("broadcast", 8, "Float", "[4, 0]");
  Result<CommCall> c = read(a, "ncclDevKernel_Broadcast_RING_LL", &host);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->root, 1);

  Json s = comm_args("send", 8, "Float", "[0, 3, 5]");
  s["Dst Rank"] = 5;
  EXPECT_EQ(read(s)->kind, OpKind::kSend);
  EXPECT_EQ(read(s)->peer, 5);
  EXPECT_EQ(read(s)->bytes.count, 32);
  Json r = comm_args("recv", 8, "Float", "[0, 3, 5]");
  Json host_rank = {{"Rank", 1}};  // a group rank
  EXPECT_EQ(read(r, "ncclDevKernel_SendRecv", &host_rank)->peer, 3);
  EXPECT_EQ(error(r),
            "t.json: event 5 ('k'): a recv without its peer: no \"Src Rank\" and no \"Rank\"");
  Json self = {{"Rank", 0}};
  EXPECT_EQ(read(r, {}, &self).status().message(),
            "t.json: event 5 ('k'): a recv with rank 0 itself");
}

TEST_F(CommArgsTest, RejectsBadMetadata) {
  EXPECT_EQ(error(Json::object()), "t.json: event 5 ('k'): no \"Collective name\" in the args");
  Json a = comm_args("allreduce", 8, "Quad", "[0, 1]");
  EXPECT_EQ(error(a), "t.json: event 5 ('k'): unknown dtype 'Quad'");
  a.erase("dtype");
  EXPECT_EQ(error(a), "t.json: event 5 ('k'): no \"dtype\" in the args");
  a = comm_args("allreduce", 8, "Float", "[0, 1]");
  a.erase("In msg nelems");
  a.erase("Out msg nelems");
  EXPECT_EQ(error(a),
            "t.json: event 5 ('k'): no \"In msg nelems\" or \"Out msg nelems\" in the args");
  a = comm_args("allreduce", -8, "Float", "[0, 1]");
  EXPECT_THAT(error(a), HasSubstr("args \"In msg nelems\" is -8; expected an integer in [0, "));
  a = comm_args("allreduce", std::int64_t{1} << 49, "Double", "[0, 1]");
  EXPECT_THAT(error(a), HasSubstr("exceed the limit of 2^50 bytes"));
  a = comm_args("allreduce", 8, "Float", "[0, 9]");
  EXPECT_THAT(error(a), HasSubstr("process group rank 9 is outside the world of 8 ranks"));
  a = comm_args("allreduce", 8, "Float", "[1, 2]");
  EXPECT_EQ(error(a),
            "t.json: event 5 ('k'): rank 0 (this trace's) is not in its process group \"[1, 2]\"");
  a = comm_args("allreduce", 8, "Float", "[0, 1]");
  a["Group size"] = 3;
  EXPECT_EQ(error(a), "t.json: event 5 ('k'): \"Group size\" 3 but the process group has 2 ranks");
  a = comm_args("allreduce", 8, "Float", "0 and 1");
  EXPECT_EQ(error(a),
            "t.json: event 5 ('k'): \"Process Group Ranks\" \"0 and 1\" is not a rank list");
  a.erase("Process Group Ranks");
  EXPECT_EQ(error(a), "t.json: event 5 ('k'): no \"Process Group Ranks\" in the collective's args");
  Json b = comm_args("broadcast", 8, "Float", "[0, 1]");
  b["Rank"] = 2;
  EXPECT_THAT(error(b), HasSubstr("args \"Rank\" is 2; expected an integer in [0, 1]"));
}

}  // namespace
}  // namespace prism::kineto
