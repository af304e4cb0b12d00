#include "graph/rank_list.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace prism {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(RankListTest, ParsesRangesAndSingles) {
  Result<std::vector<Rank>> r = parse_rank_list("8, 0-3,10-11", 16);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_THAT(*r, ElementsAre(0, 1, 2, 3, 8, 10, 11));
}

TEST(RankListTest, Rejections) {
  EXPECT_THAT(parse_rank_list("0-8", 8).status().message(), HasSubstr("rank 8 is outside [0, 8)"));
  EXPECT_THAT(parse_rank_list("5-3", 8).status().message(), HasSubstr("reversed"));
  EXPECT_THAT(parse_rank_list("0-3,2", 8).status().message(), HasSubstr("rank 2 is listed twice"));
  EXPECT_THAT(parse_rank_list("1,,2", 8).status().message(), HasSubstr("is not a rank"));
  EXPECT_THAT(parse_rank_list("x", 8).status().message(), HasSubstr("\"x\" is not a rank"));
  EXPECT_THAT(parse_rank_list("1.5", 8).status().message(), HasSubstr("is not a rank"));
  EXPECT_THAT(parse_rank_list("", 8).status().message(), HasSubstr("empty"));
}

TEST(RankListTest, FormatsCompressedRanges) {
  EXPECT_EQ(format_rank_list({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(format_rank_list({5}), "5");
  EXPECT_EQ(format_rank_list({}), "");
}

TEST(RankListTest, FormatThenParseIsIdentity) {
  const std::vector<Rank> ranks = {1, 2, 4, 6, 7, 8, 15};
  Result<std::vector<Rank>> r = parse_rank_list(format_rank_list(ranks), 16);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(*r, ranks);
}

}  // namespace
}  // namespace prism
