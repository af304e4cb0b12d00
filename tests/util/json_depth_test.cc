#include "util/json_depth.h"

#include <string>

#include <gtest/gtest.h>

namespace prism {
namespace {

std::string nested(std::size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

TEST(JsonDepthTest, ShallowDocumentsPass) {
  EXPECT_TRUE(check_json_depth(R"({"a": [1, {"b": [2]}]})", "x.json").is_ok());
  EXPECT_TRUE(check_json_depth(nested(kMaxJsonDepth), "x.json").is_ok());
  EXPECT_TRUE(check_json_depth("", "x.json").is_ok());
}

TEST(JsonDepthTest, DeepDocumentsAreRefusedWithTheSource) {
  const Status s = check_json_depth(nested(kMaxJsonDepth + 1), "trace.json");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "trace.json: values nested deeper than 64 levels");
  EXPECT_FALSE(check_json_depth(nested(200000), "t").is_ok());
  EXPECT_FALSE(check_json_depth("{\"a\":{\"b\":{\"c\":1}}}", "t", 2).is_ok());
}

TEST(JsonDepthTest, BracketsInStringsDoNotCount) {
  const std::string text = "{\"name\": \"" + nested(100) + "\\\"[[[[\"}";
  EXPECT_TRUE(check_json_depth(text, "t").is_ok());
}

TEST(JsonDepthTest, ClosingBracketsDoNotGoBelowZero) {
  EXPECT_TRUE(check_json_depth("]]]]" + nested(10), "t", 10).is_ok());
}

}  // namespace
}  // namespace prism
