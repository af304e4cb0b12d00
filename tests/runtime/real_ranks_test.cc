// What a real rank's environment holds (runtime/real_ranks.h).
#include "runtime/real_ranks.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <string>

#include <gtest/gtest.h>

namespace prism::runtime {
namespace {

std::map<std::string, std::string> as_map(const Env& env) {
  return {env.begin(), env.end()};
}

TEST(RealRanksTest, TheRanksEnvironmentCarriesTheRunsSecret) {
  RankEnvironment e;
  e.world_size = 16;
  e.gpus_per_node = 8;
  e.coordinator = "unix:/tmp/x.sock";
  e.secret = make_run_secret();
  const auto env = as_map(rank_env(e, 11));
  EXPECT_EQ(env.at("RANK"), "11");
  EXPECT_EQ(env.at("LOCAL_RANK"), "3");
  EXPECT_EQ(env.at("NODE_RANK"), "1");
  EXPECT_EQ(env.at("PRISM_COORDINATOR"), "unix:/tmp/x.sock");
  EXPECT_EQ(env.at("PRISM_SECRET"), e.secret);
  // One OpenMP thread per rank, as torchrun sets, unless the user chose.
  if (::getenv("OMP_NUM_THREADS") == nullptr) {
    EXPECT_EQ(env.at("OMP_NUM_THREADS"), "1");
  }
  ::setenv("OMP_NUM_THREADS", "3", 1);
  EXPECT_FALSE(as_map(rank_env(e, 11)).contains("OMP_NUM_THREADS"));  // the inherited 3 stays
  ::unsetenv("OMP_NUM_THREADS");
  EXPECT_EQ(as_map(rank_env(e, 11)).at("OMP_NUM_THREADS"), "1");
}

TEST(RealRanksTest, EachRunHasItsOwnSecret) {
  const std::string a = make_run_secret(), b = make_run_secret();
  EXPECT_EQ(a.size(), 32u);
  EXPECT_TRUE(std::all_of(a.begin(), a.end(), [](char c) { return std::isxdigit(c) != 0; }));
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace prism::runtime
