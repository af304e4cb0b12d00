// What prism emulate prints and writes, from a summary made by hand: the
// headline iteration, and the host mark when the real ranks and the
// coordinator outnumber the cores.
#include "runtime/emulate_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace prism::runtime {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

EmulateSummary summary(int host_cores) {
  EmulateSummary s;
  s.job = "j";
  s.world_size = 64;
  s.program = "p";
  s.emulated.replay.iteration_time = SimTime{100'000'000};
  LiveRankReport r;
  r.rank = 3;
  r.iteration_time = SimTime{100'000'000};
  s.emulated.live = {r};
  s.predicted_iteration_time = SimTime{100'000'000};
  s.predicted = {SimTime{100'000'000}};
  s.host_cores = host_cores;
  return s;
}

TEST(EmulateReportTest, RealRanksAndTheCoordinatorPastTheCoresAreMarked) {
  const EmulateSummary alone = summary(2);  // 1 real rank + the coordinator on 2 cores
  EXPECT_FALSE(alone.oversubscribed());
  EXPECT_THAT(format_emulate_text(alone), Not(HasSubstr("host:")));
  EXPECT_THAT(format_emulate_json(alone),
              HasSubstr("\"host\": {\n    \"cores\": 2,\n    \"oversubscribed\": false\n  }"));

  const EmulateSummary crowded = summary(1);
  EXPECT_TRUE(crowded.oversubscribed());
  EXPECT_THAT(format_emulate_text(crowded),
              HasSubstr("(+0.00%)\nhost:               1 real ranks and the coordinator on 1 "
                        "cores: oversubscribed, the real ranks' times are upper bounds\n\nreal "
                        "ranks"));
  EXPECT_THAT(format_emulate_json(crowded), HasSubstr("\"oversubscribed\": true"));
}

// The headline is never below a real rank's own row.
TEST(EmulateReportTest, TheHeadlineIsAtLeastEachRealRanksIteration) {
  EmulateSummary s = summary(4);
  EXPECT_EQ(s.iteration_time(), SimTime{100'000'000});
  s.emulated.live[0].iteration_time = SimTime{120'000'000};
  EXPECT_EQ(s.iteration_time(), SimTime{120'000'000});
  EXPECT_THAT(format_emulate_text(s), HasSubstr("iteration time:     0.120000 s emulated"));
  EXPECT_THAT(format_emulate_json(s), HasSubstr("\"iteration_time_s\": 0.12,"));
}

}  // namespace
}  // namespace prism::runtime
