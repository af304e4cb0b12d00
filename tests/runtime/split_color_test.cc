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

}  // namespace
}  // namespace prism::runtime
