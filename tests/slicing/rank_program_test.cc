// assemble_graph: role sharing, communicator groups and peer slots from one
// program per rank, and every way a set of programs is refused.
#include "slicing/rank_program.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../replay/test_graphs.h"
#include "graph/role_builder.h"

namespace prism {
namespace {

using ::testing::HasSubstr;

std::vector<Rank> iota(int n, int from = 0, int step = 1) {
  std::vector<Rank> v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = from + i * step;
  return v;
}

Layout flat(int world) {
  return Layout(world, {{"rank", world}}, 8);
}

// compute, all-reduce over comm 0.
RankProgram data_parallel(Rank r, int world) {
  RankProgram p;
  p.rank = r;
  p.source = "trace" + std::to_string(r);
  RoleBuilder b("ignored", {"compute"});
  b.compute(0, SimTime{1000}, "fwd");
  b.collective(0, 0, CollectiveKind::kAllReduce, Bytes{4096});
  p.role = std::move(b).build();
  p.comms.push_back({"world", iota(world)});
  return p;
}

std::vector<RankProgram> data_parallel_world(int world) {
  std::vector<RankProgram> out;
  for (Rank r = world - 1; r >= 0; --r) out.push_back(data_parallel(r, world));  // any order
  return out;
}

TEST(AssembleGraphTest, DataParallelRanksShareOneRole) {
  Result<ExecutionGraph> g = assemble_graph("dp", flat(8), data_parallel_world(8));
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  ASSERT_EQ(g->roles.size(), 1u);
  EXPECT_EQ(g->roles[0].name, "rank0");
  EXPECT_EQ(g->role_of_rank, std::vector<std::int32_t>(8, 0));
  ASSERT_EQ(g->slots.size(), 1u);
  EXPECT_EQ(g->slots[0].name, "world");
  EXPECT_EQ(g->slots[0].explicit_groups, (std::vector<std::vector<Rank>>{iota(8)}));
  EXPECT_EQ(g->roles[0].ops[1].ref, 0);
  EXPECT_EQ(testing::run(g.value()).outcome, ReplayResult::Outcome::kCompleted);
}

TEST(AssembleGraphTest, RolePrefixNamesRoles) {
  Result<ExecutionGraph> g = assemble_graph("dp", flat(2), data_parallel_world(2), "worker");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  EXPECT_EQ(g->roles[0].name, "worker0");
}

// TP 2 x DP 4 (rank = tp + 2 dp). The first DP replica (ranks 0, 1) embeds,
// the others do not: two roles. Odd ranks list their communicators in the
// other order, which changes nothing.
RankProgram tp_dp(Rank r) {
  const int tp = r % 2, dp = r / 2;
  RankProgram p;
  p.rank = r;
  p.source = "tpdp" + std::to_string(r);
  ProgramComm tp_comm{"tp", {2 * dp, 2 * dp + 1}};
  ProgramComm dp_comm{"dp", iota(4, tp, 2)};
  const bool swap = tp == 1;
  p.comms = swap ? std::vector<ProgramComm>{dp_comm, tp_comm}
                 : std::vector<ProgramComm>{tp_comm, dp_comm};
  const int tp_ref = swap ? 1 : 0, dp_ref = swap ? 0 : 1;
  RoleBuilder b("ignored", {"compute", "dp"});
  if (dp == 0) b.compute(0, SimTime{500}, "embedding");
  b.compute(0, SimTime{1000}, "gemm");
  b.collective(0, tp_ref, CollectiveKind::kAllReduce, Bytes{1 << 20});
  b.record(0, "grads");
  b.wait(1, "grads");
  b.collective(1, dp_ref, CollectiveKind::kReduceScatter, Bytes{1 << 22});
  p.role = std::move(b).build();
  return p;
}

TEST(AssembleGraphTest, TensorTimesDataParallelGroupsAndTwoRoles) {
  std::vector<RankProgram> programs;
  for (Rank r = 0; r < 8; ++r) programs.push_back(tp_dp(r));
  Result<ExecutionGraph> g =
      assemble_graph("tpdp", Layout(8, {{"tp", 2}, {"dp", 4}}, 8), std::move(programs));
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  ASSERT_EQ(g->roles.size(), 2u);
  EXPECT_EQ(g->role_of_rank, (std::vector<std::int32_t>{0, 0, 1, 1, 1, 1, 1, 1}));
  ASSERT_EQ(g->slots.size(), 2u);
  EXPECT_EQ(g->slots[0].name, "tp");
  EXPECT_EQ(g->slots[0].explicit_groups,
            (std::vector<std::vector<Rank>>{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(g->slots[1].name, "dp");
  EXPECT_EQ(g->slots[1].explicit_groups,
            (std::vector<std::vector<Rank>>{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  // Collective refs are slot indices, whatever the rank's comms order.
  const Role& role = g->roles[1];
  EXPECT_EQ(role.ops[1].ref, 0);
  EXPECT_EQ(role.ops[4].ref, 1);
  EXPECT_EQ(testing::run(g.value()).outcome, ReplayResult::Outcome::kCompleted);
}

// A 4-stage pipeline: stage s receives from s-1, computes, sends to s+1.
// Middle stages list their peers backwards; the role is the same.
RankProgram stage(Rank s, int stages) {
  RankProgram p;
  p.rank = s;
  p.source = "stage" + std::to_string(s);
  RoleBuilder b("ignored", {"compute"});
  const bool first = s == 0, last = s == stages - 1;
  if (!first && !last) p.peers = {s + 1, s - 1};
  if (first) p.peers = {s + 1};
  if (last) p.peers = {s - 1};
  if (!first) b.recv(0, last ? 0 : 1, Bytes{8192}, 7);
  b.compute(0, SimTime{2000}, "layer");
  if (!last) b.send(0, 0, Bytes{8192}, 7);
  p.role = std::move(b).build();
  return p;
}

TEST(AssembleGraphTest, PipelineSendsAndReceivesBecomePeerSlots) {
  std::vector<RankProgram> programs;
  for (Rank s = 0; s < 4; ++s) programs.push_back(stage(s, 4));
  Result<ExecutionGraph> g = assemble_graph("pp", flat(4), std::move(programs));
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  ASSERT_EQ(g->roles.size(), 3u);
  EXPECT_EQ(g->role_of_rank, (std::vector<std::int32_t>{0, 1, 1, 2}));
  std::vector<std::string> names;
  for (const CommSlot& s : g->slots) names.push_back(s.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"rank0.peer0", "rank1.peer0", "rank1.peer1", "rank2.peer0"}));
  // The middle role's first peer is the one it receives from.
  EXPECT_EQ(g->slots[1].explicit_peers, (std::vector<Rank>{kNone, 0, 1, kNone}));
  EXPECT_EQ(g->slots[2].explicit_peers, (std::vector<Rank>{kNone, 2, 3, kNone}));
  EXPECT_EQ(g->slots[0].explicit_peers, (std::vector<Rank>{1, kNone, kNone, kNone}));
  const Role& middle = g->roles[1];
  EXPECT_EQ(middle.ops[0].kind, OpKind::kRecv);
  EXPECT_EQ(middle.ops[0].ref, 1);
  EXPECT_EQ(middle.ops[2].ref, 2);
  const ReplayResult r = testing::run(g.value());
  EXPECT_EQ(r.outcome, ReplayResult::Outcome::kCompleted);
}

// 1,024 ranks of a few thousand ops each: hashing keeps this linear (the
// timing itself belongs to benchmarks, not here).
TEST(AssembleGraphTest, ThousandRanksOfThousandsOfOps) {
  constexpr int kWorld = 1024;
  std::vector<RankProgram> programs;
  for (Rank r = 0; r < kWorld; ++r) {
    RankProgram p;
    p.rank = r;
    p.comms.push_back({"world", iota(kWorld)});
    p.comms.push_back({"pair", {r & ~1, r | 1}});
    RoleBuilder b("ignored", {"compute"});
    for (int i = 0; i < 1000; ++i) {
      b.compute(0, SimTime{1000 + (r == kWorld - 1 ? 1 : 0)}, "gemm");
      b.collective(0, 1, CollectiveKind::kAllReduce, Bytes{1 << 20});
      b.collective(0, 0, CollectiveKind::kAllReduce, Bytes{1 << 10});
    }
    p.role = std::move(b).build();
    programs.push_back(std::move(p));
  }
  Result<ExecutionGraph> g = assemble_graph("big", flat(kWorld), std::move(programs));
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  EXPECT_EQ(g->roles.size(), 2u);  // the last rank is slower by a nanosecond
  EXPECT_EQ(g->slots[1].explicit_groups.size(), static_cast<std::size_t>(kWorld / 2));
}

// --- rejections ---

std::string error_of(std::vector<RankProgram> programs, int world = 4) {
  Result<ExecutionGraph> g = assemble_graph("job", flat(world), std::move(programs));
  EXPECT_FALSE(g.is_ok());
  return g.is_ok() ? "" : g.status().message();
}

TEST(AssembleGraphRejectsTest, MissingRank) {
  std::vector<RankProgram> p = data_parallel_world(4);
  p.erase(p.begin() + 1);  // rank 2
  EXPECT_THAT(error_of(std::move(p)), HasSubstr("no program for rank 2"));
}

TEST(AssembleGraphRejectsTest, DuplicateRank) {
  std::vector<RankProgram> p = data_parallel_world(4);
  p.push_back(data_parallel(1, 4));
  p.back().source = "again";
  EXPECT_THAT(error_of(std::move(p)),
              HasSubstr("again: rank 1: a second program for rank 1 (the first is from trace1)"));
}

TEST(AssembleGraphRejectsTest, RankOutsideTheWorld) {
  std::vector<RankProgram> p = data_parallel_world(4);
  p[0].rank = 4;
  EXPECT_THAT(error_of(std::move(p)), HasSubstr("trace3: rank 4 is outside the world of 4"));
}

TEST(AssembleGraphRejectsTest, EmptyWorld) {
  Result<ExecutionGraph> g = assemble_graph("job", Layout(), {});
  ASSERT_FALSE(g.is_ok());
  EXPECT_THAT(g.status().message(), HasSubstr("world size 0"));
}

TEST(AssembleGraphRejectsTest, CollectiveOnMissingCommunicator) {
  std::vector<RankProgram> p = data_parallel_world(4);
  p[1].role.ops[1].ref = 3;  // rank 2
  EXPECT_THAT(error_of(std::move(p)),
              HasSubstr("trace2: rank 2 op 1: collective on communicator 3, but the rank has 1"));
}

TEST(AssembleGraphRejectsTest, SendToMissingPeer) {
  std::vector<RankProgram> p;
  for (Rank s = 0; s < 4; ++s) p.push_back(stage(s, 4));
  p[0].role.ops[1].ref = 5;
  EXPECT_THAT(error_of(std::move(p)), HasSubstr("stage0: rank 0 op 1: send to peer 5"));
}

TEST(AssembleGraphRejectsTest, SendToItselfOrOutsideTheWorld) {
  std::vector<RankProgram> p;
  for (Rank s = 0; s < 4; ++s) p.push_back(stage(s, 4));
  p[0].peers = {0};
  EXPECT_THAT(error_of(p), HasSubstr("stage0: rank 0 op 1: send with rank 0, which is the rank "
                                     "itself"));
  p[0].peers = {9};
  EXPECT_THAT(error_of(p), HasSubstr("with rank 9, which is outside the world"));
}

TEST(AssembleGraphRejectsTest, EmptyOrRepeatedKey) {
  std::vector<RankProgram> p = data_parallel_world(4);
  p[0].comms[0].key = "";
  EXPECT_THAT(error_of(p), HasSubstr("trace3: rank 3: communicator 0 has an empty key"));
  p[0].comms[0].key = "world";
  p[0].comms.push_back(p[0].comms[0]);
  EXPECT_THAT(error_of(p), HasSubstr("communicators 0 and 1 have the same key 'world'"));
}

TEST(AssembleGraphRejectsTest, MemberOutsideTheWorld) {
  std::vector<RankProgram> p = data_parallel_world(4);
  p[3].comms[0].members = {0, 1, 2, 3, 4};  // rank 0
  EXPECT_THAT(error_of(std::move(p)),
              HasSubstr("trace0: rank 0: communicator 'world' lists rank 4, outside the world"));
}

TEST(AssembleGraphRejectsTest, RankNotInItsOwnGroup) {
  std::vector<RankProgram> p = data_parallel_world(4);
  p[3].comms[0].members = {1, 2, 3};  // rank 0
  EXPECT_THAT(error_of(std::move(p)),
              HasSubstr("has members [1,2,3], which do not include rank 0"));
}

TEST(AssembleGraphRejectsTest, MembersInAnotherOrder) {
  std::vector<RankProgram> p = data_parallel_world(4);
  p[0].comms[0].members = {3, 2, 1, 0};  // rank 3
  EXPECT_THAT(error_of(std::move(p)),
              HasSubstr("trace3: rank 3: communicator 'world' has members [3,2,1,0], but rank 0 "
                        "reports that group as [0,1,2,3]"));
}

TEST(AssembleGraphRejectsTest, RankInTwoGroups) {
  std::vector<RankProgram> p = data_parallel_world(4);
  p[3].comms[0].members = {0, 1};  // rank 0
  p[2].comms[0].members = {1, 0};  // rank 1 disagrees on the order
  EXPECT_THAT(error_of(p), HasSubstr("rank 1: communicator 'world' has members [1,0], but rank 0"));
  p[2].comms[0].members = {0, 1};
  p[1].comms[0].members = {1, 2};  // rank 2 claims rank 1
  EXPECT_THAT(error_of(p), HasSubstr("trace2: rank 2: communicator 'world' has members [1,2], but "
                                     "rank 0 reports rank 1 in the group [0,1]"));
}

TEST(AssembleGraphRejectsTest, MemberListedTwice) {
  std::vector<RankProgram> p = data_parallel_world(4);
  p[3].comms[0].members = {0, 1, 1};
  EXPECT_THAT(error_of(std::move(p)), HasSubstr("communicator 'world' lists rank 1 twice"));
}

TEST(AssembleGraphRejectsTest, ValidationFailureNamesTheProgram) {
  std::vector<RankProgram> p = data_parallel_world(4);
  p[1].role.ops[1].bytes = Bytes{8};  // rank 2's all-reduce disagrees
  const std::string e = error_of(std::move(p));
  EXPECT_THAT(e, HasSubstr("job: the assembled graph: slot 'world'"));
  EXPECT_THAT(e, HasSubstr("role 'rank1' is the program of trace2: rank 2"));
}

TEST(AssembleGraphRejectsTest, UnpairedSend) {
  std::vector<RankProgram> p;
  for (Rank s = 0; s < 4; ++s) p.push_back(stage(s, 4));
  p[3].role.ops[0].bytes = Bytes{1};
  EXPECT_THAT(error_of(std::move(p)), HasSubstr("expects 1 B"));
}

}  // namespace
}  // namespace prism
