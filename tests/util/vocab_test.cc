#include "util/vocab.h"

#include <gtest/gtest.h>

namespace prism {
namespace {

TEST(VocabTest, CollectiveNamesRoundTrip) {
  for (auto k : {CollectiveKind::kAllReduce, CollectiveKind::kAllGather,
                 CollectiveKind::kReduceScatter, CollectiveKind::kBroadcast,
                 CollectiveKind::kReduce, CollectiveKind::kAllToAll, CollectiveKind::kBarrier}) {
    auto back = parse_collective_kind(to_string(k));
    ASSERT_TRUE(back.has_value()) << to_string(k);
    EXPECT_EQ(*back, k);
  }
  EXPECT_FALSE(parse_collective_kind("allreduce").has_value());
}

TEST(VocabTest, DTypeSizes) {
  EXPECT_EQ(dtype_size(*parse_dtype("bf16")), 2);
  EXPECT_EQ(dtype_size(*parse_dtype("fp32")), 4);
  EXPECT_EQ(dtype_size(*parse_dtype("fp8_e4m3")), 1);
  EXPECT_EQ(dtype_size(*parse_dtype("int64")), 8);
  EXPECT_FALSE(parse_dtype("bfloat16").has_value());
}

}  // namespace
}  // namespace prism
