#include "replay/replay.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_graphs.h"

namespace prism {
namespace {

using testing::group_slot;
using testing::make_graph;
using testing::peer_slot;
using testing::run;

TEST(EngineTest, StreamRunsOpsInOrder) {
  RoleBuilder b("solo", {"compute"});
  b.compute(0, SimTime{100});
  b.compute(0, SimTime{200});
  b.compute(0, SimTime{300});
  auto g = make_graph({{"rank", 1}}, 8, {}, {std::move(b).build()}, {0});
  auto r = run(g, true, {0});
  EXPECT_EQ(r.outcome, ReplayResult::Outcome::kCompleted);
  EXPECT_EQ(r.makespan.ns, 600);
  EXPECT_EQ(r.iteration_time.ns, 600);
  EXPECT_EQ(r.op_events, 3u);
  ASSERT_EQ(r.trace.size(), 3u);
  EXPECT_EQ(r.trace[1].start.ns, 100);
  EXPECT_EQ(r.trace[1].end.ns, 300);
  EXPECT_EQ(r.roles[0].mean.compute.ns, 600);
  EXPECT_EQ(r.roles[0].mean.idle.ns, 0);
}

TEST(EngineTest, StreamsOverlapAndEventsOrderThem) {
  RoleBuilder b("r", {"compute", "side"});
  b.compute(0, SimTime{100});
  b.record(0, "e");
  b.compute(0, SimTime{400});
  b.wait(1, "e");
  const int side = b.compute(1, SimTime{50});
  auto g = make_graph({{"rank", 1}}, 8, {}, {std::move(b).build()}, {0});
  auto r = run(g, true, {0});
  EXPECT_EQ(r.makespan.ns, 500);
  const auto it = std::find_if(r.trace.begin(), r.trace.end(),
                               [&](const TraceRecord& t) { return t.op == side; });
  ASSERT_NE(it, r.trace.end());
  EXPECT_EQ(it->start.ns, 100);  // waited for the record, then overlapped
  EXPECT_EQ(it->end.ns, 150);
  EXPECT_EQ(r.roles[0].mean.compute.ns, 500);  // union of overlapping compute
}

TEST(EngineTest, ExplicitDependencyAcrossStreams) {
  RoleBuilder b("r", {"a", "b"});
  const int first = b.compute(0, SimTime{300});
  b.compute(1, SimTime{10}, "after", {first});
  auto g = make_graph({{"rank", 1}}, 8, {}, {std::move(b).build()}, {0});
  auto r = run(g, true, {0});
  EXPECT_EQ(r.makespan.ns, 310);
}

TEST(EngineTest, CollectiveCompletesWhenTheLastMemberArrives) {
  // Rank 0 arrives at 100, rank 1 at 300; a 2-rank all-reduce of 1000 B at
  // 1 byte/ns moves 2(n-1)/n * 1000 = 1000 B: done at 1300.
  RoleBuilder early("early", {"s"});
  early.compute(0, SimTime{100});
  early.collective(0, 0, CollectiveKind::kAllReduce, Bytes{1000});
  RoleBuilder late("late", {"s"});
  late.compute(0, SimTime{300});
  late.collective(0, 0, CollectiveKind::kAllReduce, Bytes{1000});
  auto g = make_graph({{"tp", 2}}, 8, {group_slot("tp", {0})},
                      {std::move(early).build(), std::move(late).build()}, {0, 1});
  auto r = run(g, true, {0, 1});
  EXPECT_EQ(r.makespan.ns, 1300);
  EXPECT_EQ(r.roles[0].mean.compute.ns, 100);
  EXPECT_EQ(r.roles[0].mean.idle.ns, 200);  // waiting for rank 1
  EXPECT_EQ(r.roles[0].mean.exposed_comm.ns, 1000);
  EXPECT_EQ(r.roles[1].mean.idle.ns, 0);
  ASSERT_EQ(r.trace.size(), 4u);
  EXPECT_EQ(r.trace[1].start.ns, 100);           // rank 0 arrived
  EXPECT_EQ(r.trace[1].transfer_start.ns, 300);  // rank 1 arrived
  EXPECT_EQ(r.trace[1].end.ns, 1300);
}

TEST(EngineTest, CollectivesMatchBySequenceNumber) {
  // Two all-reduces on one communicator pair first-with-first.
  RoleBuilder a("a", {"s"});
  a.collective(0, 0, CollectiveKind::kAllReduce, Bytes{100});
  a.collective(0, 0, CollectiveKind::kAllReduce, Bytes{400});
  auto g =
      make_graph({{"dp", 4}}, 8, {group_slot("dp", {0})}, {std::move(a).build()}, {0, 0, 0, 0});
  auto r = run(g, false, {2});
  // 2(n-1)/n = 1.5: 150 ns then 600 ns.
  EXPECT_EQ(r.makespan.ns, 750);
  ASSERT_EQ(r.trace.size(), 2u);
  EXPECT_EQ(r.trace[0].end.ns, 150);
}

TEST(EngineTest, SendAndRecvMatchAndCrossNodes) {
  // Rank 0 (node 0) sends 500 B at time 0; rank 1 (node 1) posts its recv at
  // 200. Across nodes: 0.5 byte/ns and 2 * 10 ns latency.
  RoleBuilder sender("sender", {"s"});
  sender.send(0, 0, Bytes{500});
  RoleBuilder receiver("receiver", {"s"});
  receiver.compute(0, SimTime{200});
  receiver.recv(0, 1, Bytes{500});
  auto g = make_graph({{"pp", 2}}, 1, {peer_slot("pp_next", 0, 1), peer_slot("pp_prev", 0, -1)},
                      {std::move(sender).build(), std::move(receiver).build()}, {0, 1});
  auto r = run(g, true, {0}, testing::unit_network(10));
  EXPECT_EQ(r.makespan.ns, 200 + 20 + 1000);
  ASSERT_EQ(r.trace.size(), 1u);
  EXPECT_EQ(r.trace[0].start.ns, 0);
  EXPECT_EQ(r.trace[0].transfer_start.ns, 200);
}

TEST(EngineTest, MessagesWithDifferentTagsPairIndependently) {
  // Rank 0 sends tag 0 then tag 1; rank 1 receives tag 1 then tag 0, on one
  // stream or in one NCCL group: each tag is its own ordered channel.
  for (bool grouped : {false, true}) {
    RoleBuilder s("sender", {"a", "b"});
    s.send(0, 0, Bytes{100}, /*tag=*/0);
    s.send(grouped ? 0 : 1, 0, Bytes{200}, /*tag=*/1);
    RoleBuilder r("receiver", {"a"});
    const int first = r.recv(0, 1, Bytes{200}, /*tag=*/1);
    const int second = r.recv(0, 1, Bytes{100}, /*tag=*/0);
    if (grouped) {
      s.set_group(0, 1);
      s.set_group(1, 1);
      r.set_group(first, 1);
      r.set_group(second, 1);
    }
    auto g = make_graph({{"pp", 2}}, 8, {peer_slot("next", 0, 1), peer_slot("prev", 0, -1)},
                        {std::move(s).build(), std::move(r).build()}, {0, 1});
    auto res = run(g, true, {1});
    ASSERT_EQ(res.outcome, ReplayResult::Outcome::kCompleted) << (grouped ? "grouped" : "streams");
  }
}

TEST(EngineTest, NcclGroupStartsTogether) {
  // Both ranks send to and receive from each other in one group; as separate
  // blocking ops on one stream this would deadlock (see the deadlock tests).
  auto make = [](std::string name) {
    RoleBuilder b(std::move(name), {"s"});
    b.set_group(b.send(0, 0, Bytes{100}), 1);
    b.set_group(b.recv(0, 0, Bytes{100}), 1);
    b.compute(0, SimTime{5});
    return std::move(b).build();
  };
  auto g =
      make_graph({{"pp", 2}}, 8, {peer_slot("peer", 0, 1, /*wrap=*/true)}, {make("r")}, {0, 0});
  auto r = run(g);
  EXPECT_EQ(r.outcome, ReplayResult::Outcome::kCompleted);
  EXPECT_EQ(r.makespan.ns, 105);
}

TEST(EngineTest, IterationMarkersSplitTheReplay) {
  RoleBuilder b("r", {"s"});
  b.marker(0, MarkerKind::kIteration, 0);
  b.compute(0, SimTime{100});
  b.marker(0, MarkerKind::kIteration, 1);
  b.compute(0, SimTime{250});
  auto g = make_graph({{"rank", 1}}, 8, {}, {std::move(b).build()}, {0});
  auto r = run(g);
  EXPECT_EQ(r.iteration_times, (std::vector<SimTime>{SimTime{100}, SimTime{250}}));
  EXPECT_EQ(r.iteration_time.ns, 175);
}

// An end marker closes the last iteration: what follows it (a program's
// shutdown) and a begin marker after it are no iteration.
TEST(EngineTest, AnIterationEndMarkerLeavesTheTailOut) {
  RoleBuilder b("r", {"s"});
  b.compute(0, SimTime{1000});  // start-up
  b.marker(0, MarkerKind::kIteration, 0);
  b.compute(0, SimTime{100});
  b.marker(0, MarkerKind::kIterationEnd, 0);
  b.marker(0, MarkerKind::kIteration, 1);
  b.compute(0, SimTime{300});
  b.marker(0, MarkerKind::kIterationEnd, 1);
  b.marker(0, MarkerKind::kIteration, 2);  // begins nothing complete
  b.compute(0, SimTime{5000});             // shutdown
  auto g = make_graph({{"rank", 1}}, 8, {}, {std::move(b).build()}, {0});
  auto r = run(g, true, {0});
  EXPECT_EQ(r.iteration_times, (std::vector<SimTime>{SimTime{100}, SimTime{300}}));
  EXPECT_EQ(r.iteration_time.ns, 200);
  ASSERT_EQ(r.timelines.size(), 1u);
  EXPECT_EQ(r.timelines[0].iteration_marks.count(), 2);
  EXPECT_EQ(iteration_lengths(r.timelines[0].iteration_marks, r.timelines[0].finish),
            (std::vector<SimTime>{SimTime{100}, SimTime{300}}));
  EXPECT_EQ(mean_iteration(r.timelines[0].iteration_marks, r.timelines[0].finish).ns, 200);
}

TEST(EngineTest, MemoryPeakFollowsAllocAndFree) {
  RoleBuilder b("r", {"s"});
  const int a = b.alloc(0, Bytes{100});
  b.alloc(0, Bytes{50});
  b.compute(0, SimTime{10});
  b.free(0, a);
  b.alloc(0, Bytes{200});
  auto g = make_graph({{"rank", 1}}, 8, {}, {std::move(b).build()}, {0});
  auto r = run(g);
  // 100, 50 and 200 bytes are 512-byte blocks of one 2 MiB small segment.
  EXPECT_EQ(r.roles[0].max.peak_allocated.count, 1024);
  EXPECT_EQ(r.roles[0].max.peak_reserved.count, 2 << 20);
  EXPECT_EQ(r.roles[0].max.peak_device.count, 2 << 20);  // no context, no NCCL
}

TEST(EngineTest, ComputeScaleAndCostDescriptors) {
  RoleBuilder b("r", {"s"});
  b.compute(0, SimTime{1000});
  b.compute_cost(0, KernelCost{KernelClass::kGemm, 989.4e12 / 1e6, Bytes{0}});  // 1 us at peak
  auto g = make_graph({{"rank", 2}}, 8, {}, {std::move(b).build()}, {0, 0},
                      {RankOverride{1, 1'500'000}});
  auto r = run(g, true, {0, 1});
  EXPECT_EQ(r.roles[0].max.finish.ns, 3000);   // rank 1: 1.5 x (1000 + 1000)
  EXPECT_EQ(r.roles[0].mean.finish.ns, 2500);  // (2000 + 3000) / 2
  EXPECT_EQ(r.simulated_ranks, 2);             // the straggler is its own class
}

TEST(EngineTest, TimeBucketsAddUpToTheMakespan) {
  RoleBuilder a("a", {"c", "comm"});
  a.compute(0, SimTime{100});
  a.record(0, "x");
  a.compute(0, SimTime{1000});
  a.wait(1, "x");
  a.collective(1, 0, CollectiveKind::kAllReduce, Bytes{2000});
  RoleBuilder b("b", {"c", "comm"});
  b.compute(0, SimTime{700});
  b.collective(1, 0, CollectiveKind::kAllReduce, Bytes{2000});
  auto g = make_graph({{"dp", 2}}, 8, {group_slot("dp", {0})},
                      {std::move(a).build(), std::move(b).build()}, {0, 1});
  auto r = run(g);
  for (const RoleSummary& role : r.roles) {
    const RankTimes& t = role.mean;
    EXPECT_EQ((t.compute + t.exposed_comm + t.idle).ns, r.makespan.ns) << role.name;
  }
  // Rank 1's comm stream arrives at 0, rank 0's after its event at 100: the
  // transfer runs 100..2100, and rank 0 computes until 1100, so 1000 ns of
  // it are exposed.
  EXPECT_EQ(r.makespan.ns, 2100);
  EXPECT_EQ(r.roles[0].mean.compute.ns, 1100);
  EXPECT_EQ(r.roles[0].mean.exposed_comm.ns, 1000);
}

TEST(EngineTest, RoleMeansOfManyLongRanksDoNotOverflow) {
  // 8,192 ranks x 2^51 ns sums to 2^64: the mean must still be 2^51.
  RoleBuilder b("r", {"s"});
  b.compute(0, kMaxOpDuration);
  b.compute(0, kMaxOpDuration);
  auto g = make_graph({{"rank", 8192}}, 8, {}, {std::move(b).build()},
                      std::vector<std::int32_t>(8192, 0));
  auto r = run(g);
  EXPECT_EQ(r.roles[0].mean.finish.ns, 2 * kMaxOpDuration.ns);
  EXPECT_EQ(r.roles[0].mean.compute.ns, 2 * kMaxOpDuration.ns);
}

TEST(EngineTest, SameInputsGiveIdenticalResults) {
  RoleBuilder a("a", {"c", "comm"});
  for (int i = 0; i < 20; ++i) {
    a.compute(0, SimTime{100 + i});
    a.record(0, "x");
    a.wait(1, "x");
    a.collective(1, 0, CollectiveKind::kAllReduce, Bytes{1000 * (i + 1)});
  }
  auto g = make_graph({{"tp", 4}, {"dp", 2}}, 4, {group_slot("tp", {0}), group_slot("dp", {1})},
                      {std::move(a).build()}, std::vector<std::int32_t>(8, 0));
  auto r1 = run(g, false, {0, 5});
  auto r2 = run(g, false, {0, 5});
  ASSERT_EQ(r1.trace.size(), r2.trace.size());
  for (std::size_t i = 0; i < r1.trace.size(); ++i) {
    EXPECT_EQ(r1.trace[i].start, r2.trace[i].start);
    EXPECT_EQ(r1.trace[i].end, r2.trace[i].end);
  }
  EXPECT_EQ(r1.makespan, r2.makespan);
}

}  // namespace
}  // namespace prism
