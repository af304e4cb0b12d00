#include "graph/comm_slot.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "graph/graph.h"
#include "graph/validate.h"

namespace prism {
namespace {

using ::testing::ElementsAre;

// tp 2 x dp 2 x pp 2: rank = tp + 2 dp + 4 pp.
Layout grid() {
  return Layout(8, {{"tp", 2}, {"dp", 2}, {"pp", 2}}, 8);
}

CommSlot group_slot(std::vector<int> dims) {
  return CommSlot::grid_group("g", std::move(dims));
}

CommSlot peer_slot(int dim, int offset, bool wrap) {
  return CommSlot::grid_peer("p", dim, offset, wrap);
}

TEST(CommSlotTest, GridGroupAlongOneDim) {
  const Layout l = grid();
  const std::vector<CommSlot> slots = {group_slot({1})};  // dp
  const SlotResolver res(l, slots);
  std::vector<Rank> m;
  res.members(0, 7, &m);
  EXPECT_THAT(m, ElementsAre(5, 7));
  EXPECT_EQ(res.group_id(0, 7), 5);
  EXPECT_EQ(res.group_id(0, 5), 5);
  EXPECT_EQ(res.group_size(0, 7), 2);
  EXPECT_EQ(res.index_in_group(0, 5), 0);
  EXPECT_EQ(res.index_in_group(0, 7), 1);
}

TEST(CommSlotTest, GridGroupOverTwoDimsIsAscendingInAnyListedOrder) {
  const Layout l = grid();
  for (std::vector<int> dims : {std::vector<int>{0, 2}, std::vector<int>{2, 0}}) {
    const std::vector<CommSlot> slots = {group_slot(dims)};
    const SlotResolver res(l, slots);
    std::vector<Rank> m;
    res.members(0, 6, &m);
    EXPECT_THAT(m, ElementsAre(2, 3, 6, 7));
    EXPECT_EQ(res.group_id(0, 6), 2);
    EXPECT_EQ(res.group_size(0, 6), 4);
    for (Rank r = 0; r < l.world_size(); ++r) {
      res.members(0, r, &m);
      ASSERT_EQ(m[res.index_in_group(0, r)], r) << "rank " << r;
    }
  }
}

TEST(CommSlotTest, GridPeerWithoutWrapStopsAtTheEnds) {
  const Layout l = grid();
  const std::vector<CommSlot> slots = {peer_slot(2, 1, false), peer_slot(2, -1, false)};
  const SlotResolver res(l, slots);
  EXPECT_EQ(res.peer(0, 1), 5);
  EXPECT_EQ(res.peer(0, 5), kNone);
  EXPECT_EQ(res.peer(1, 5), 1);
  EXPECT_EQ(res.peer(1, 1), kNone);
}

TEST(CommSlotTest, GridPeerWithWrap) {
  const Layout l(12, {{"tp", 2}, {"pp", 6}}, 8);
  const std::vector<CommSlot> slots = {peer_slot(1, 1, true), peer_slot(1, -2, true)};
  const SlotResolver res(l, slots);
  EXPECT_EQ(res.peer(0, 10), 0);  // pp 5 -> pp 0
  EXPECT_EQ(res.peer(0, 3), 5);   // pp 1 -> pp 2, tp kept
  EXPECT_EQ(res.peer(1, 1), 9);   // pp 0 -> pp 4
  EXPECT_EQ(res.peer(1, 11), 7);  // pp 5 -> pp 3
}

TEST(CommSlotTest, ExplicitGroupsKeepCommunicatorOrder) {
  ExecutionGraph g;
  g.layout = Layout(6, {{"rank", 6}}, 8);
  CommSlot s;
  s.name = "x";
  s.explicit_groups = {{4, 0, 2}, {1, 5}};  // rank 3 in no group
  g.slots = {s};
  ASSERT_TRUE(finalize_graph(g).is_ok());
  EXPECT_THAT(g.slots[0].group_of_rank, ElementsAre(0, 1, 0, kNone, 0, 1));
  const SlotResolver res = g.resolver();
  std::vector<Rank> m;
  res.members(0, 2, &m);
  EXPECT_THAT(m, ElementsAre(4, 0, 2));
  EXPECT_EQ(res.index_in_group(0, 4), 0);
  EXPECT_EQ(res.index_in_group(0, 2), 2);
  EXPECT_EQ(res.group_id(0, 5), 1);
  EXPECT_EQ(res.group_size(0, 5), 2);
  EXPECT_EQ(res.group_id(0, 3), kNone);
  EXPECT_EQ(res.group_size(0, 3), 0);
  EXPECT_EQ(res.index_in_group(0, 3), kNone);
  res.members(0, 3, &m);
  EXPECT_TRUE(m.empty());
}

TEST(CommSlotTest, ExplicitPeers) {
  const Layout l(4, {{"rank", 4}}, 8);
  const std::vector<CommSlot> slots = {CommSlot::explicit_peer("p", {1, 0, kNone, 0})};
  const SlotResolver res(l, slots);
  EXPECT_EQ(res.peer(0, 0), 1);
  EXPECT_EQ(res.peer(0, 2), kNone);
  EXPECT_EQ(res.peer(0, 3), 0);
}

}  // namespace
}  // namespace prism
