// util/interrupt.h: the first SIGTERM is recorded, not acted on.
#include "util/interrupt.h"

#include <signal.h>

#include <gtest/gtest.h>

namespace prism {
namespace {

TEST(InterruptTest, TheFirstSignalIsRecordedAndNamed) {
  EXPECT_EQ(caught_signal(), 0);
  EXPECT_TRUE(interruption().is_ok());
  catch_termination_signals();
  ASSERT_EQ(::raise(SIGTERM), 0);  // the process goes on
  EXPECT_EQ(caught_signal(), SIGTERM);
  const Status s = interruption();
  EXPECT_EQ(s.code(), StatusCode::kAborted);
  EXPECT_EQ(s.message(), "interrupted by SIGTERM");
}

}  // namespace
}  // namespace prism
