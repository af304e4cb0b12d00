// PyTorch's split colors: abs(hash(tuple(ranks))) % 2**31 as CPython 3.11
// computes it. The expected values were printed by /usr/bin/python3 (3.11)
// on Debian 12; the test also asks that interpreter when it is there.
#include "runtime/split_color.h"

#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

namespace prism::runtime {
namespace {

std::vector<std::int32_t> iota(int from, int n) {
  std::vector<std::int32_t> v;
  for (int i = 0; i < n; ++i) v.push_back(from + i);
  return v;
}

TEST(SplitColorTest, MatchesCPythonsTupleHash) {
  EXPECT_EQ(torch_split_color(std::vector<std::int32_t>{0, 1, 2, 3}), 2003953581);
  EXPECT_EQ(torch_split_color(std::vector<std::int32_t>{0}), 59908776);
  EXPECT_EQ(torch_split_color(std::vector<std::int32_t>{}), 750394491);
  EXPECT_EQ(torch_split_color(iota(0, 64)), 2047566134);
  EXPECT_EQ(torch_split_color(iota(8, 8)), 2064315024);
  EXPECT_EQ(torch_split_color(std::vector<std::int32_t>{3, 1027}), 325758372);
}

TEST(SplitColorTest, AgreesWithThePythonHere) {
  const std::vector<std::vector<std::int32_t>> groups = {
      iota(0, 1024), iota(4096, 16), {5, 1029, 2053, 3077}, {7}};
  std::string script = "import sys\n";
  for (const auto& g : groups)
    script += fmt::format("print(abs(hash(({},))) % 2**31)\n", fmt::join(g, ","));
  FILE* p = ::popen(fmt::format("/usr/bin/python3 -c '{}' 2>/dev/null", script).c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::vector<long> got;
  long v = 0;
  while (std::fscanf(p, "%ld", &v) == 1) got.push_back(v);
  if (::pclose(p) != 0 || got.empty()) GTEST_SKIP() << "no /usr/bin/python3";
  ASSERT_EQ(got.size(), groups.size());
  for (std::size_t i = 0; i < groups.size(); ++i)
    EXPECT_EQ(torch_split_color(groups[i]), got[i]) << "group " << i;
}

// The odd ranks of 16 as a parent of 8, rank 11 at position 5: a 2 x 4 or
// 2 x 2 x 2 mesh over the parent has these groups holding it, mapped to the
// parent's members.
TEST(SplitColorTest, MeshGroupsAreEveryStrideAndSizeThatDivideTheParent) {
  const std::vector<std::int32_t> odd = {1, 3, 5, 7, 9, 11, 13, 15};
  std::vector<std::string> got;
  for (const MeshGroup& g : mesh_groups_of(odd, 5))
    got.push_back(fmt::format("t{} s{} {}", g.stride, g.size, fmt::join(g.ranks, ",")));
  EXPECT_EQ(got, (std::vector<std::string>{"t1 s1 11", "t1 s2 9,11", "t1 s4 9,11,13,15",
                                           "t1 s8 1,3,5,7,9,11,13,15", "t2 s2 11,15",
                                           "t2 s4 3,7,11,15", "t4 s2 3,11"}));
}

// split_group's color is the lowest position in the parent, not the lowest
// global rank; a member outside the parent has none.
TEST(SplitColorTest, SplitGroupColorIsTheLowestPositionInTheParent) {
  const std::vector<std::int32_t> world = iota(0, 16);
  EXPECT_EQ(torch_split_group_color(std::vector<std::int32_t>{13, 5, 9}, world), 5);
  const std::vector<std::int32_t> odd = {1, 3, 5, 7, 9, 11, 13, 15};
  EXPECT_EQ(torch_split_group_color(std::vector<std::int32_t>{11, 15}, odd), 5);
  const std::vector<std::int32_t> unsorted = {7, 3, 5};
  EXPECT_EQ(torch_split_group_color(std::vector<std::int32_t>{3, 5}, unsorted), 1);
  EXPECT_EQ(torch_split_group_color(std::vector<std::int32_t>{2, 3}, odd), -1);
}

// A (dp 128, tp 8) job: rank 5's groups, dp (outer) before tp.
TEST(SplitColorTest, GridGroupsAreTheRanksDimensionsOutermostFirst) {
  const Layout l(1024, {{"tp", 8}, {"cp", 1}, {"dp", 128}, {"pp", 1}}, 8);
  const std::vector<std::vector<std::int32_t>> groups = grid_groups_of(l, 5);
  ASSERT_EQ(groups.size(), 2u);
  std::vector<std::int32_t> dp;
  for (int r = 5; r < 1024; r += 8) dp.push_back(r);
  EXPECT_EQ(groups[0], dp);
  EXPECT_EQ(groups[1], iota(0, 8));
}

}  // namespace
}  // namespace prism::runtime
