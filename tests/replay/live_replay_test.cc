#include "replay/live_replay.h"

#include <gtest/gtest.h>

#include "replay/nccl_memory.h"
#include "test_graphs.h"

namespace prism {
namespace {

using testing::group_slot;
using testing::make_graph;
using testing::unit_network;

// Records completions; the horizon is set by the test.
class Listener : public LiveListener {
 public:
  void completed(Rank rank, std::int32_t op, SimTime at) override {
    done.push_back({rank, op, at});
  }
  SimTime horizon() const override { return h; }
  void nccl_allocated(Rank rank, std::int32_t op, std::int64_t bytes) override {
    nccl.push_back({rank, op, bytes});
  }

  struct Nccl {
    Rank rank;
    std::int32_t op;
    std::int64_t bytes;
  };
  std::vector<Nccl> nccl;
  struct Done {
    Rank rank;
    std::int32_t op;
    SimTime at;
  };
  std::vector<Done> done;
  SimTime h = SimTime::zero();
};

// Four ranks compute 100 * (rank + 1) ns, then all-reduce 1000 B, compute
// 50 ns, and all-reduce again.
struct Job {
  Job() {
    std::vector<Role> roles;
    for (int r = 0; r < 4; ++r) {
      RoleBuilder b("r" + std::to_string(r), {"s"});
      b.compute(0, SimTime{100 * (r + 1)});
      first = b.collective(0, 0, CollectiveKind::kAllReduce, Bytes{1000});
      b.compute(0, SimTime{50});
      second = b.collective(0, 0, CollectiveKind::kAllReduce, Bytes{1000});
      roles.push_back(std::move(b).build());
    }
    g = make_graph({{"dp", 4}}, 8, {group_slot("dp", {0})}, std::move(roles), {0, 1, 2, 3});
  }
  ExecutionGraph g;
  int first = 0, second = 0;
};

struct Live {
  explicit Live(const ExecutionGraph& g, std::vector<Rank> live, bool fold = true,
                NcclMemory* nccl = nullptr)
      : network(unit_network()), memory(DeviceMemoryOptions{}) {
    ReplayOptions o;
    o.fold = fold;
    o.live_ranks = live;
    o.trace_ranks = live;
    replay = std::make_unique<LiveReplay>(g, o, ReplayModels{&network, &compute, &memory, nccl},
                                          &listener);
  }
  AlphaBetaModel network;
  RooflineModel compute;
  AllocatorMemoryModel memory;
  Listener listener;
  std::unique_ptr<LiveReplay> replay;
};

TEST(LiveReplayTest, LiveRankAtItsReplayedTimesGetsTheReplayedCompletions) {
  Job job;
  const ReplayResult pure = testing::run(job.g, true, {0});
  ASSERT_EQ(pure.trace.size(), 4u);

  Live live(job.g, {0});
  // Nothing runs before the horizon allows it.
  ASSERT_TRUE(live.replay->advance().is_ok());
  EXPECT_EQ(live.replay->now().ns, 0);
  // Rank 0 enters its first all-reduce at 100 (as replayed) and waits.
  live.replay->enter(0, job.first, SimTime{100});
  live.listener.h = SimTime::never();
  ASSERT_TRUE(live.replay->advance().is_ok());
  ASSERT_EQ(live.listener.done.size(), 1u);
  EXPECT_EQ(live.listener.done[0].at, pure.trace[1].end);  // 400 + 1500
  // It computes 50 ns, then enters the second.
  const SimTime second_at = live.listener.done[0].at + SimTime{50};
  live.listener.h = second_at;
  ASSERT_TRUE(live.replay->advance().is_ok());
  live.replay->enter(0, job.second, second_at);
  live.listener.h = SimTime::never();
  ASSERT_TRUE(live.replay->advance().is_ok());
  ASSERT_EQ(live.listener.done.size(), 2u);
  EXPECT_EQ(live.listener.done[1].at, pure.trace[3].end);

  const ReplayResult r =
      live.replay->finish({{SimTime{150}, SimTime{0}, live.listener.done[1].at}});
  EXPECT_EQ(r.outcome, ReplayResult::Outcome::kCompleted);
  EXPECT_EQ(r.makespan, pure.makespan);
  ASSERT_EQ(r.timelines.size(), 1u);
  EXPECT_EQ(r.timelines[0].finish, pure.makespan);
}

TEST(LiveReplayTest, RealTimingWinsAndVirtualRanksShift) {
  Job job;
  Live live(job.g, {0});
  // Rank 0 is 10 us late to the first all-reduce: everyone waits for it.
  live.replay->enter(0, job.first, SimTime{10'000});
  live.listener.h = SimTime::never();
  ASSERT_TRUE(live.replay->advance().is_ok());
  ASSERT_EQ(live.listener.done.size(), 1u);
  EXPECT_EQ(live.listener.done[0].at.ns, 10'000 + 1500);
  live.replay->enter(0, job.second, SimTime{20'000});
  ASSERT_TRUE(live.replay->advance().is_ok());
  ASSERT_EQ(live.listener.done.size(), 2u);
  EXPECT_EQ(live.listener.done[1].at.ns, 20'000 + 1500);
  const ReplayResult r = live.replay->finish({{SimTime{0}, SimTime{0}, SimTime{21'500}}});
  EXPECT_EQ(r.makespan.ns, 21'500);
  // The virtual ranks finished with rank 0, not at their replayed 3450 ns.
  EXPECT_EQ(r.roles[3].max.finish.ns, 21'500);
}

TEST(LiveReplayTest, HorizonHoldsBackEventsAtAndAfterIt) {
  Job job;
  Live live(job.g, {0});
  live.listener.h = SimTime{300};
  const Result<SimTime> next = live.replay->advance();
  ASSERT_TRUE(next.is_ok());
  EXPECT_EQ(next.value().ns, 300);  // rank 2's compute ends there: held
  EXPECT_EQ(live.replay->now().ns, 200);
  live.replay->enter(0, job.first, SimTime{300});  // allowed: not before the horizon
}

TEST(LiveReplayTest, FoldedAndUnfoldedAgreeAroundALiveRank) {
  // 8 ranks of one role; rank 5 live and late: the others fold into classes
  // around it and must still finish exactly when the unfolded replay says.
  RoleBuilder b("r", {"s"});
  b.compute(0, SimTime{100});
  const int ar = b.collective(0, 0, CollectiveKind::kAllReduce, Bytes{800});
  b.compute(0, SimTime{100});
  const ExecutionGraph g =
      make_graph({{"tp", 2}, {"dp", 4}}, 8, {group_slot("tp", {0}), group_slot("dp", {1})},
                 {std::move(b).build()}, std::vector<std::int32_t>(8, 0));
  ReplayResult results[2];
  for (bool fold : {true, false}) {
    Live live(g, {5}, fold);
    live.replay->enter(5, ar, SimTime{700});
    live.listener.h = SimTime::never();
    ASSERT_TRUE(live.replay->advance().is_ok());
    ASSERT_EQ(live.listener.done.size(), 1u);
    results[fold] = live.replay->finish({{SimTime{0}, SimTime{0}, SimTime{2000}}});
    EXPECT_EQ(results[fold].outcome, ReplayResult::Outcome::kCompleted);
  }
  EXPECT_LT(results[1].simulated_ranks, 8);
  EXPECT_EQ(results[1].makespan, results[0].makespan);
  EXPECT_EQ(results[1].roles[0].max.finish, results[0].roles[0].max.finish);
}

// What NCCL allocates on a live rank (replay/nccl_memory.h) is heard with the
// op that made it: the first all-reduce brings the communicator's init and
// its connection, the second, connected already, nothing.
TEST(LiveReplayTest, LiveRankHearsTheNcclMemoryOfItsOps) {
  Job job;
  ClusterSpec c = *cluster_preset("dgx-h100");
  ASSERT_TRUE(size_cluster(&c, 0, 1).is_ok());
  const NcclTuner tuner(c);
  NcclMemory nccl(tuner), alone(tuner);
  alone.reset(1);
  const std::vector<std::int32_t> members = {0, 1, 2, 3};
  Transfer t;
  t.kind = Transfer::Kind::kCollective;
  t.collective = CollectiveKind::kAllReduce;
  t.bytes = Bytes{1000};
  t.ranks = members;
  t.num_nodes = 1;
  t.max_ranks_per_node = 4;
  const std::int64_t want = alone.on_transfer(0, 0, t);
  ASSERT_GT(want, 0);

  Live live(job.g, {0}, true, &nccl);
  live.replay->enter(0, job.first, SimTime{100});
  live.listener.h = SimTime::never();
  ASSERT_TRUE(live.replay->advance().is_ok());
  live.replay->enter(0, job.second, live.listener.done.back().at + SimTime{50});
  ASSERT_TRUE(live.replay->advance().is_ok());
  ASSERT_EQ(live.listener.done.size(), 2u);
  ASSERT_EQ(live.listener.nccl.size(), 1u);  // the virtual ranks' are not heard
  EXPECT_EQ(live.listener.nccl[0].rank, 0);
  EXPECT_EQ(live.listener.nccl[0].op, job.first);
  EXPECT_EQ(live.listener.nccl[0].bytes, want);
}

TEST(LiveReplayTest, LiveRankThatNeverEntersLeavesPeersBlocked) {
  Job job;
  Live live(job.g, {2});
  live.listener.h = SimTime::never();
  ASSERT_TRUE(live.replay->advance().is_ok());
  EXPECT_TRUE(live.listener.done.empty());
  const ReplayResult r = live.replay->finish({{SimTime{0}, SimTime{0}, SimTime{0}}});
  EXPECT_EQ(r.outcome, ReplayResult::Outcome::kDeadlock);
  ASSERT_FALSE(r.blocked.empty());
  EXPECT_NE(r.blocked.front().waiting_for.find("rank 2 not arrived"), std::string::npos)
      << r.blocked.front().waiting_for;
}

}  // namespace
}  // namespace prism
