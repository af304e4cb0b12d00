#include "graph/layout.h"

#include <vector>

#include <gtest/gtest.h>

namespace prism {
namespace {

Layout tp2_dp3_pp2() {
  return Layout(12, {{"tp", 2}, {"dp", 3}, {"pp", 2}}, 4);
}

TEST(LayoutTest, StridesGrowInnermostFirst) {
  const Layout l = tp2_dp3_pp2();
  EXPECT_EQ(l.stride(0), 1);
  EXPECT_EQ(l.stride(1), 2);
  EXPECT_EQ(l.stride(2), 6);
}

TEST(LayoutTest, CoordsOfARank) {
  const Layout l = tp2_dp3_pp2();
  // 11 = tp 1 + dp 2 * 2 + pp 1 * 6
  EXPECT_EQ(l.coord(11, 0), 1);
  EXPECT_EQ(l.coord(11, 1), 2);
  EXPECT_EQ(l.coord(11, 2), 1);
  EXPECT_EQ(l.coord(4, 0), 0);
  EXPECT_EQ(l.coord(4, 1), 2);
  EXPECT_EQ(l.coord(4, 2), 0);
}

TEST(LayoutTest, CoordsRebuildEveryRank) {
  const Layout l = tp2_dp3_pp2();
  for (Rank r = 0; r < l.world_size(); ++r) {
    int sum = 0;
    for (int d = 0; d < static_cast<int>(l.dims().size()); ++d) {
      ASSERT_GE(l.coord(r, d), 0);
      ASSERT_LT(l.coord(r, d), l.dims()[d].size);
      sum += l.coord(r, d) * l.stride(d);
    }
    EXPECT_EQ(sum, r);
  }
}

TEST(LayoutTest, NodesFillInRankOrder) {
  const Layout l(10, {{"rank", 10}}, 4);
  EXPECT_EQ(l.num_nodes(), 3);
  EXPECT_EQ(l.node_of(3), 0);
  EXPECT_EQ(l.node_of(4), 1);
  EXPECT_EQ(l.node_of(9), 2);
  EXPECT_EQ(l.local_gpu(9), 1);
  EXPECT_EQ(l.local_gpu(4), 0);
}

TEST(LayoutTest, FindDim) {
  const Layout l = tp2_dp3_pp2();
  EXPECT_EQ(l.find_dim("tp"), 0);
  EXPECT_EQ(l.find_dim("pp"), 2);
  EXPECT_EQ(l.find_dim("cp"), -1);
}

TEST(LayoutTest, GroupGeometryCountsNodesAndTheFullestOne) {
  const Layout l(16, {{"rank", 16}}, 4);
  const std::vector<Rank> spread{0, 1, 4, 9, 10, 11};  // nodes 0, 0, 1, 2, 2, 2
  EXPECT_EQ(group_geometry(l, spread), (GroupGeometry{6, 3, 3}));
  const std::vector<Rank> one{5};
  EXPECT_EQ(group_geometry(l, one), (GroupGeometry{1, 1, 1}));
  EXPECT_EQ(group_geometry(l, {}), (GroupGeometry{0, 0, 0}));
}

}  // namespace
}  // namespace prism
