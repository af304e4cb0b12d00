#include "replay/rendezvous.h"

#include <gtest/gtest.h>

namespace prism {
namespace {

TEST(CollectiveRendezvousTest, CompletesWhenAllMembersArrive) {
  CollectiveRendezvous c(0, {0, 1, 2}, {0, 1, 2}, 1);
  EXPECT_FALSE(c.arrive(0, Arrival{0, 0, 5, SimTime{10}}));
  EXPECT_FALSE(c.arrive(0, Arrival{2, 0, 5, SimTime{20}}));
  EXPECT_EQ(c.incomplete(), (std::vector<std::int64_t>{0}));
  EXPECT_TRUE(c.arrive(0, Arrival{1, 0, 5, SimTime{30}}));
  EXPECT_EQ(c.arrivals(0).size(), 3u);
  c.release(0);
  EXPECT_TRUE(c.incomplete().empty());
}

TEST(CollectiveRendezvousTest, MembersMayRunAheadAndReleaseOutOfOrder) {
  CollectiveRendezvous c(0, {0, 1}, {0, 1}, 1);
  // Member 0 enters collectives 0..9 (on many streams) before member 1 any.
  for (int seq = 0; seq < 10; ++seq) EXPECT_FALSE(c.arrive(seq, Arrival{0, 0, seq, SimTime{}}));
  for (int seq = 9; seq >= 0; --seq) {
    EXPECT_TRUE(c.arrive(seq, Arrival{1, 0, seq, SimTime{}}));
    EXPECT_EQ(c.arrivals(seq)[0].op, seq);
    c.release(seq);
  }
  EXPECT_TRUE(c.incomplete().empty());
  EXPECT_FALSE(c.arrive(10, Arrival{0, 0, 10, SimTime{}}));
  EXPECT_EQ(c.incomplete(), (std::vector<std::int64_t>{10}));
}

TEST(CollectiveRendezvousTest, LaterCollectiveDoneBeforeAnEarlierOneArrives) {
  // Collective 1 (issued second, from another stream) completes before
  // anyone reaches collective 0: 0 must still be accepted afterwards.
  CollectiveRendezvous c(0, {0, 1}, {0, 1}, 1);
  EXPECT_FALSE(c.arrive(1, Arrival{0, 1, 11, SimTime{}}));
  EXPECT_TRUE(c.arrive(1, Arrival{1, 1, 11, SimTime{}}));
  c.release(1);
  EXPECT_FALSE(c.arrive(0, Arrival{0, 0, 10, SimTime{}}));
  EXPECT_EQ(c.incomplete(), (std::vector<std::int64_t>{0}));
  EXPECT_TRUE(c.arrive(0, Arrival{1, 0, 10, SimTime{}}));
  c.release(0);
  EXPECT_TRUE(c.incomplete().empty());
  EXPECT_FALSE(c.arrive(2, Arrival{0, 0, 12, SimTime{}}));  // the ring moved on past 1
}

TEST(CollectiveRendezvousTest, FarJumpsKeepLiveEntriesApart) {
  CollectiveRendezvous c(0, {0, 1}, {0, 1}, 1);
  EXPECT_FALSE(c.arrive(0, Arrival{0, 0, 0, SimTime{}}));
  EXPECT_FALSE(c.arrive(1, Arrival{0, 0, 1, SimTime{}}));
  EXPECT_FALSE(c.arrive(9, Arrival{0, 0, 9, SimTime{}}));  // more than twice the ring ahead
  EXPECT_FALSE(c.arrive(100, Arrival{0, 0, 100, SimTime{}}));
  EXPECT_EQ(c.incomplete(), (std::vector<std::int64_t>{0, 1, 9, 100}));
  for (std::int64_t seq : {100, 1, 9, 0}) {
    ASSERT_TRUE(c.arrive(seq, Arrival{1, 0, static_cast<std::int32_t>(seq), SimTime{}}));
    EXPECT_EQ(c.arrivals(seq)[0].op, seq);
    c.release(seq);
  }
  EXPECT_EQ(c.incomplete(), (std::vector<std::int64_t>{}));
}

TEST(CollectiveRendezvousTest, GeometryFromTheLayout) {
  CollectiveRendezvous c(0, {0, 1, 2, 3}, {0, 1, 8, 9}, 1);
  c.set_layout(Layout(16, {{"rank", 16}}, 8));
  EXPECT_EQ(c.num_nodes(), 2);
  EXPECT_EQ(c.max_ranks_per_node(), 2);
}

TEST(P2PRendezvousTest, PairsTheNthSendWithTheNthRecvPerChannel) {
  P2PRendezvous p;
  P2PRendezvous::Match m;
  const P2PRendezvous::Key ch{0, 1, 0, 0};
  EXPECT_FALSE(p.post(true, ch, 0, Arrival{0, 0, 1, SimTime{1}}, &m));
  EXPECT_FALSE(p.post(true, ch, 1, Arrival{0, 0, 2, SimTime{2}}, &m));
  EXPECT_FALSE(p.post(false, P2PRendezvous::Key{0, 1, 5, 0}, 0, Arrival{1, 0, 9, SimTime{3}}, &m));
  // The receiver's second receive arrives first (another stream): it pairs
  // with the second send, not the first.
  ASSERT_TRUE(p.post(false, ch, 1, Arrival{1, 1, 4, SimTime{4}}, &m));
  EXPECT_EQ(m.send.op, 2);
  EXPECT_EQ(m.recv.op, 4);
  ASSERT_TRUE(p.post(false, ch, 0, Arrival{1, 0, 3, SimTime{5}}, &m));
  EXPECT_EQ(m.send.op, 1);
  // Another route between the same two ranks is another channel.
  EXPECT_FALSE(p.post(true, P2PRendezvous::Key{0, 1, 0, 7}, 0, Arrival{0, 0, 6, SimTime{6}}, &m));
  EXPECT_FALSE(p.post(false, ch, 2, Arrival{1, 0, 7, SimTime{7}}, &m));
  const auto left = p.unmatched();
  ASSERT_EQ(left.size(), 3u);  // sorted by (rank, stream, op)
  EXPECT_TRUE(left[0].is_send);
  EXPECT_EQ(left[0].key.route, 7);
  EXPECT_EQ(left[1].arrival.op, 7);
  EXPECT_EQ(left[2].key.tag, 5);
}

}  // namespace
}  // namespace prism
