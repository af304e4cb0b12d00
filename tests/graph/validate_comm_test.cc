// validate_graph(): checks 6-8 (slots resolve, collective members agree,
// sends and receives pair up).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "graph/validate.h"
#include "graph_test_util.h"

namespace prism {
namespace {

using testing::error_of;

using ::testing::HasSubstr;

enum Slot { kTp = 0, kNext = 1, kPrev = 2, kEnd = 3, kPairs = 4 };

Op comm(OpKind kind, int slot, std::int64_t bytes, std::int32_t arg = 0) {
  Op op;
  op.kind = kind;
  op.stream = 0;
  op.ref = slot;
  op.bytes.count = bytes;
  op.arg = arg;
  return op;
}
Op coll(CollectiveKind k, std::int64_t bytes, int slot = kTp) {
  Op op = comm(OpKind::kCollective, slot, bytes);
  op.collective = k;
  return op;
}
Op send(int slot, std::int64_t bytes, std::int32_t tag = 0) {
  return comm(OpKind::kSend, slot, bytes, tag);
}
Op recv(int slot, std::int64_t bytes, std::int32_t tag = 0) {
  return comm(OpKind::kRecv, slot, bytes, tag);
}

// `world` ranks along dim "tp"; slots tp (group over tp), next / prev
// (wrapping peers), end (+1 without wrap), pairs (explicit groups {0,1},
// {2,3}, ...). Rank r runs role roles[role_of[r]], named a, b, c...
ExecutionGraph make(int world, std::vector<std::vector<Op>> roles,
                    std::vector<std::int32_t> role_of) {
  ExecutionGraph g;
  g.layout = Layout(world, {{"tp", world}}, 8);
  std::vector<std::vector<Rank>> pairs;
  for (Rank r = 0; r + 1 < world; r += 2) pairs.push_back({r, r + 1});
  g.slots = {CommSlot::grid_group("tp", {0}), CommSlot::grid_peer("next", 0, 1, true),
             CommSlot::grid_peer("prev", 0, -1, true), CommSlot::grid_peer("end", 0, 1, false),
             CommSlot::explicit_group("pairs", pairs)};
  for (std::size_t i = 0; i < roles.size(); ++i) {
    Role r;
    r.name = std::string(1, static_cast<char>('a' + i));
    r.streams = {"s"};
    r.ops = std::move(roles[i]);
    for (Op& op : r.ops) op.deps_begin = op.deps_end = 0;
    g.roles.push_back(std::move(r));
  }
  g.role_of_rank = std::move(role_of);
  return g;
}

TEST(ValidateCommTest, PeerSlotWithoutWrapDoesNotResolveAtTheEnd) {
  ExecutionGraph g = make(2,
                          {{coll(CollectiveKind::kBarrier, 0), send(kEnd, 8)},
                           {coll(CollectiveKind::kBarrier, 0), recv(kPrev, 8)}},
                          {0, 1});
  EXPECT_EQ(error_of(g), "(ok)");
  g.role_of_rank = {0, 0};
  EXPECT_THAT(error_of(g), HasSubstr("rank 1 (role 'a') op 1: slot 'end' does not resolve"));
}

TEST(ValidateCommTest, GridPeerSlotMustNotResolveToTheRankItself) {
  ExecutionGraph g = make(2, {{send(kPairs + 1, 8), recv(kPairs + 1, 8)}}, {0, 0});
  g.slots.push_back(CommSlot::grid_peer("ring", 0, 2, true));  // wraps once around tp
  EXPECT_THAT(error_of(g), HasSubstr("rank 0 (role 'a') op 0: slot 'ring' resolves to the rank "
                                     "itself"));
  g.slots.back().offset = 3;
  EXPECT_EQ(error_of(g), "(ok)");
  g.layout = Layout(2, {{"tp", 2}, {"pp", 1}}, 8);
  g.slots.back() = CommSlot::grid_peer("ring", 1, 1, true);  // along a dim of size 1
  EXPECT_THAT(error_of(g), HasSubstr("rank 0 (role 'a') op 0: slot 'ring' resolves to the rank "
                                     "itself"));
  // A slot no role uses may resolve to anything.
  g.roles[0].ops = {coll(CollectiveKind::kBarrier, 0)};
  EXPECT_EQ(error_of(g), "(ok)");
}

TEST(ValidateCommTest, ExplicitGroupMustContainTheRank) {
  ExecutionGraph g = make(3, {{coll(CollectiveKind::kAllReduce, 8, kPairs)}}, {0, 0, 0});
  EXPECT_THAT(error_of(g), HasSubstr("rank 2 (role 'a') op 0: slot 'pairs' does not resolve"));
}

TEST(ValidateCommTest, CollectiveKindMismatch) {
  ExecutionGraph g =
      make(2, {{coll(CollectiveKind::kAllReduce, 4096)}, {coll(CollectiveKind::kAllGather, 4096)}},
           {0, 1});
  EXPECT_THAT(error_of(g),
              HasSubstr("slot 'tp': rank 0 (role 'a') op 0 is all_reduce of 4096 B bf16 but "
                        "rank 1 (role 'b') op 0 is all_gather of 4096 B bf16"));
}

TEST(ValidateCommTest, CollectiveSizeDtypeAndRootMismatch) {
  ExecutionGraph g =
      make(2, {{coll(CollectiveKind::kAllReduce, 4096)}, {coll(CollectiveKind::kAllReduce, 2048)}},
           {0, 1});
  EXPECT_THAT(error_of(g),
              HasSubstr("of 4096 B bf16 but rank 1 (role 'b') op 0 is all_reduce of 2048 B bf16"));
  g.roles[1].ops[0].bytes.count = 4096;
  g.roles[1].ops[0].dtype = DType::kFloat32;
  EXPECT_THAT(error_of(g), HasSubstr("is all_reduce of 4096 B fp32"));
  g = make(2, {{coll(CollectiveKind::kBroadcast, 64)}, {coll(CollectiveKind::kBroadcast, 64)}},
           {0, 1});
  g.roles[1].ops[0].arg = 1;
  EXPECT_THAT(error_of(g),
              HasSubstr("op 0 is broadcast of 64 B bf16 root 0 but rank 1 (role 'b') op 0 is "
                        "broadcast of 64 B bf16 root 1"));
}

TEST(ValidateCommTest, CollectiveCountMismatch) {
  ExecutionGraph g =
      make(2,
           {{coll(CollectiveKind::kAllReduce, 8), coll(CollectiveKind::kAllReduce, 8)},
            {coll(CollectiveKind::kAllReduce, 8)}},
           {0, 1});
  EXPECT_THAT(error_of(g),
              HasSubstr("slot 'tp': rank 0 (role 'a') issues 2 collectives but rank 1 "
                        "(role 'b') issues 1 (first unmatched: rank 0 (role 'a') op 1"));
}

TEST(ValidateCommTest, RootOutsideTheGroup) {
  Op b = coll(CollectiveKind::kReduce, 64, kPairs);
  b.arg = 2;
  ExecutionGraph g = make(2, {{b}}, {0, 0});
  EXPECT_THAT(
      error_of(g),
      HasSubstr("slot 'pairs': rank 0 (role 'a') op 0: root 2 is outside its group of 2 ranks"));
}

TEST(ValidateCommTest, OnlyMembersOfOneGroupMustAgree) {
  // pairs {0,1} run role a, {2,3} role b: different programs, different groups.
  ExecutionGraph g = make(4,
                          {{coll(CollectiveKind::kAllReduce, 8, kPairs)},
                           {coll(CollectiveKind::kAllGather, 8, kPairs)}},
                          {0, 0, 1, 1});
  EXPECT_EQ(error_of(g), "(ok)");
  g.role_of_rank = {0, 0, 1, 0};
  EXPECT_THAT(error_of(g),
              HasSubstr("slot 'pairs': rank 2 (role 'b') op 0 is all_gather of 8 B bf16 but "
                        "rank 3 (role 'a') op 0 is all_reduce of 8 B bf16"));
}

TEST(ValidateCommTest, SendRecvBytesMismatch) {
  ExecutionGraph g = make(2, {{send(kNext, 100)}, {recv(kPrev, 200)}}, {0, 1});
  // Rank 1 also sends to rank 0 through next: nothing, and rank 0 receives nothing.
  EXPECT_THAT(error_of(g),
              HasSubstr("rank 0 (role 'a') op 0 sends 100 B with tag 0 to rank 1, but the matching "
                        "receive, rank 1 (role 'b') op 0, expects 200 B"));
}

TEST(ValidateCommTest, SendRecvCountMismatch) {
  ExecutionGraph g = make(2, {{send(kNext, 100), send(kNext, 100)}, {recv(kPrev, 100)}}, {0, 1});
  EXPECT_THAT(error_of(g),
              HasSubstr("rank 0 (role 'a') sends 2 messages with tag 0 to rank 1 (role 'b'), which "
                        "receives 1 with tag 0 from it"));
  g = make(2, {{}, {recv(kPrev, 100)}}, {0, 1});
  EXPECT_THAT(error_of(g),
              HasSubstr("rank 0 (role 'a') sends 0 messages with tag 0 to rank 1 (role 'b'), which "
                        "receives 1 with tag 0 from it"));
}

TEST(ValidateCommTest, SendRecvTagsPairIndependently) {
  // Order across tags does not matter; order within a tag does.
  ExecutionGraph g = make(
      2, {{send(kNext, 1, 0), send(kNext, 2, 1)}, {recv(kPrev, 2, 1), recv(kPrev, 1, 0)}}, {0, 1});
  EXPECT_EQ(error_of(g), "(ok)");
  g = make(2, {{send(kNext, 1, 0), send(kNext, 2, 1)}, {recv(kPrev, 1, 0), recv(kPrev, 2, 2)}},
           {0, 1});
  EXPECT_THAT(error_of(g),
              HasSubstr("rank 0 (role 'a') sends 1 messages with tag 1 to rank 1 (role 'b'), which "
                        "receives 0 with tag 1 from it"));
}

TEST(ValidateCommTest, MessagesOverSeveralSlotsToOnePeerMerge) {
  // With two ranks and wrap, next and prev both lead to the other rank.
  ExecutionGraph g =
      make(2, {{send(kNext, 100), send(kPrev, 200)}, {recv(kPrev, 100), recv(kNext, 200)}}, {0, 1});
  EXPECT_EQ(error_of(g), "(ok)");
  g = make(2, {{send(kNext, 100), send(kPrev, 200)}, {recv(kNext, 200), recv(kPrev, 100)}}, {0, 1});
  EXPECT_THAT(error_of(g),
              HasSubstr("op 0 sends 100 B with tag 0 to rank 1, but the matching receive, rank 1 "
                        "(role 'b') op 0, expects 200 B"));
}

TEST(ValidateCommTest, RingOfOneRoleIsValid) {
  ExecutionGraph g = make(4, {{send(kNext, 8), recv(kPrev, 8)}}, {0, 0, 0, 0});
  EXPECT_EQ(error_of(g), "(ok)");
}

TEST(ValidateCommTest, PipelineMismatchNamesStagesAndRanks) {
  ExecutionGraph g = testing::make_pipeline(2, 2, 2, 1);  // rank = tp + 2 dp + 4 pp
  ASSERT_EQ(error_of(g), "(ok)");
  Role odd = g.roles[1];
  odd.name = "stage1_odd";
  odd.ops.back().bytes.count = 1024;  // its dp all-reduce
  g.roles.push_back(odd);
  g.role_of_rank[7] = 2;
  EXPECT_THAT(
      error_of(g),
      HasSubstr("slot 'dp': rank 5 (role 'stage1') op 6 is all_reduce of 67108864 B bf16 but "
                "rank 7 (role 'stage1_odd') op 6 is all_reduce of 1024 B bf16"));
  g = testing::make_pipeline(2, 1, 2, 1);
  g.roles[1].ops[0].bytes.count = 5;  // stage1's first recv
  EXPECT_THAT(error_of(g),
              HasSubstr("rank 0 (role 'stage0') op 2 sends 1048576 B with tag 0 to rank 2, but the "
                        "matching receive, rank 2 (role 'stage1') op 0, expects 5 B"));
}

}  // namespace
}  // namespace prism
