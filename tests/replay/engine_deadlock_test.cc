// A replay that cannot progress is a result: every blocked rank is reported
// with the op it waits on and why.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_graphs.h"

namespace prism {
namespace {

using testing::explicit_group_slot;
using ::testing::HasSubstr;
using testing::make_graph;
using testing::peer_slot;
using testing::run;

TEST(EngineDeadlockTest, CollectivesOrderedDifferentlyAcrossCommunicators) {
  // Each communicator on its own sees the same sequence, so the graph is
  // valid; but rank 0 enters x first and rank 1 enters y first.
  RoleBuilder a("a", {"s"});
  a.collective(0, 0, CollectiveKind::kAllReduce, Bytes{64});
  a.collective(0, 1, CollectiveKind::kAllReduce, Bytes{64});
  RoleBuilder b("b", {"s"});
  b.collective(0, 1, CollectiveKind::kAllReduce, Bytes{64});
  b.collective(0, 0, CollectiveKind::kAllReduce, Bytes{64});
  auto g = make_graph({{"rank", 2}}, 8,
                      {explicit_group_slot("x", {{0, 1}}), explicit_group_slot("y", {{0, 1}})},
                      {std::move(a).build(), std::move(b).build()}, {0, 1});
  for (bool fold : {true, false}) {
    auto r = run(g, fold);
    ASSERT_EQ(r.outcome, ReplayResult::Outcome::kDeadlock);
    ASSERT_EQ(r.blocked.size(), 2u);
    EXPECT_EQ(r.blocked[0].rank, 0);
    EXPECT_EQ(r.blocked[0].op, 0);
    EXPECT_THAT(r.blocked[0].waiting_for, HasSubstr("collective all_reduce #0 on 'x'"));
    EXPECT_THAT(r.blocked[0].waiting_for, HasSubstr("rank 1 not arrived"));
    EXPECT_EQ(r.blocked[1].rank, 1);
    EXPECT_THAT(r.blocked[1].waiting_for, HasSubstr("on 'y': rank 0 not arrived"));
  }
}

TEST(EngineDeadlockTest, BlockingSendsInBothDirections) {
  // Both ranks send first, then receive: with rendezvous semantics neither
  // send finds its receive.
  RoleBuilder b("r", {"s"});
  b.send(0, 0, Bytes{100});
  b.recv(0, 0, Bytes{100});
  auto g =
      make_graph({{"pp", 2}}, 8, {peer_slot("peer", 0, 1, true)}, {std::move(b).build()}, {0, 0});
  auto r = run(g, false);
  ASSERT_EQ(r.outcome, ReplayResult::Outcome::kDeadlock);
  ASSERT_EQ(r.blocked.size(), 2u);
  EXPECT_EQ(r.blocked[0].waiting_for, "send to rank 1 (tag 0): no matching recv");
  EXPECT_EQ(r.blocked[1].waiting_for, "send to rank 0 (tag 0): no matching recv");
}

TEST(EngineDeadlockTest, FoldedDeadlockNamesEveryBlockedRank) {
  RoleBuilder b("r", {"s"});
  b.send(0, 0, Bytes{100});
  b.recv(0, 1, Bytes{100});
  auto g =
      make_graph({{"pp", 4}}, 8, {peer_slot("next", 0, 1, true), peer_slot("prev", 0, -1, true)},
                 {std::move(b).build()}, {0, 0, 0, 0});
  auto r = run(g, true);
  ASSERT_EQ(r.outcome, ReplayResult::Outcome::kDeadlock);
  EXPECT_EQ(r.simulated_ranks, 1);  // the timings came from one class...
  ASSERT_EQ(r.blocked.size(), 4u);  // ...the report names all four ranks
  for (Rank rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(r.blocked[rank].rank, rank);
    EXPECT_EQ(r.blocked[rank].num_ranks, 1);
    EXPECT_EQ(r.blocked[rank].waiting_for,
              "send to rank " + std::to_string((rank + 1) % 4) + " (tag 0): no matching recv");
  }
}

TEST(EngineDeadlockTest, StreamWaitingOnAStuckStreamIsReported) {
  RoleBuilder a("a", {"comm", "compute"});
  a.collective(0, 0, CollectiveKind::kAllReduce, Bytes{64});
  a.collective(0, 1, CollectiveKind::kAllReduce, Bytes{64});
  a.record(0, "done");
  a.wait(1, "done");
  a.compute(1, SimTime{10});
  RoleBuilder b("b", {"comm"});
  b.collective(0, 1, CollectiveKind::kAllReduce, Bytes{64});
  b.collective(0, 0, CollectiveKind::kAllReduce, Bytes{64});
  auto g = make_graph({{"rank", 2}}, 8,
                      {explicit_group_slot("x", {{0, 1}}), explicit_group_slot("y", {{0, 1}})},
                      {std::move(a).build(), std::move(b).build()}, {0, 1});
  auto r = run(g);
  ASSERT_EQ(r.outcome, ReplayResult::Outcome::kDeadlock);
  ASSERT_EQ(r.blocked.size(), 3u);
  EXPECT_EQ(r.blocked[1].rank, 0);
  EXPECT_EQ(r.blocked[1].stream, 1);
  EXPECT_EQ(r.blocked[1].op, 3);
  EXPECT_EQ(r.blocked[1].waiting_for, "op 2 (event_record on stream 'comm') to complete");
}

}  // namespace
}  // namespace prism
