#include "util/status.h"

#include <gtest/gtest.h>

namespace prism {
namespace {

Result<int> parse_positive(int x) {
  if (x <= 0) return Status::invalid_argument("x must be positive");
  return x;
}

Status twice(int x, int* out) {
  PRISM_ASSIGN_OR_RETURN(int v, parse_positive(x));
  *out = 2 * v;
  return Status::ok();
}

TEST(StatusTest, OkIsCheapAndEmpty) {
  Status s;
  EXPECT_TRUE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.message(), "");
}

TEST(StatusTest, ErrorCarriesCodeAndContext) {
  Status s = Status::not_found("graph.json: no such file").with_context("loading");
  EXPECT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "loading: graph.json: no such file");
}

TEST(StatusTest, ResultHoldsValueOrStatus) {
  Result<int> good = parse_positive(3);
  ASSERT_TRUE(good.is_ok());
  EXPECT_EQ(*good, 3);
  Result<int> bad = parse_positive(-1);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().message(), "x must be positive");
}

TEST(StatusTest, MacrosPropagate) {
  int out = 0;
  EXPECT_TRUE(twice(4, &out).is_ok());
  EXPECT_EQ(out, 8);
  Status s = twice(0, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(out, 8);
}

TEST(StatusTest, EachCodeHasItsFactoryAndName) {
  EXPECT_EQ(Status::unavailable("x").code(), StatusCode::kUnavailable);
  EXPECT_EQ(Status::deadline_exceeded("x").code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(Status::failed_precondition("x").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Status::aborted("x").code(), StatusCode::kAborted);
  EXPECT_EQ(Status::unimplemented("x").code(), StatusCode::kUnimplemented);
  EXPECT_EQ(Status::internal("x").code(), StatusCode::kInternal);
  EXPECT_EQ(status_code_name(StatusCode::kDeadlineExceeded), "deadline_exceeded");
  EXPECT_EQ(status_code_name(StatusCode::kUnavailable), "unavailable");
  EXPECT_EQ(Status::unavailable("gone").with_context("rank 3").code(), StatusCode::kUnavailable);
  const Status detailed = Status::deadline_exceeded("rank 3 hung").with_detail("; rank 4 exited");
  EXPECT_EQ(detailed.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(detailed.message(), "rank 3 hung; rank 4 exited");
}

TEST(StatusDeathTest, ValueOfFailedResultIsABug) {
  Result<int> bad = parse_positive(0);
  EXPECT_DEATH((void)bad.value(), "value\\(\\) of a failed Result");
}

}  // namespace
}  // namespace prism
