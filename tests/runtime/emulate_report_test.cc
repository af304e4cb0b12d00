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

// A node failure that hung the job (--fail-node): no iteration time, the
// failure's block, and each real rank as it ended: told and stopped
// (aborted), or finished before the hang (bye).
TEST(EmulateReportTest, AHungRunShowsTheFailureAndHowEachRealRankEnded) {
  EmulateSummary s = summary(4);
  s.predicted_completed = false;
  LiveRankReport bye = s.emulated.live[0];
  bye.rank = 5;
  bye.said_bye = true;
  bye.finish = SimTime{2'000'000};
  s.emulated.live[0].ops = 7;
  s.emulated.live[0].graph_ops = 9;
  s.emulated.live[0].finish = SimTime{1'500'000};
  s.emulated.live[0].exit_code = 1;
  s.emulated.live.push_back(bye);
  NodeFailureReplay f;
  f.node = 2;
  f.ranks = {16, 17};
  f.at = SimTime{1'000'000};
  f.timeout = SimTime{30'000'000'000};
  f.hung = true;
  f.hang_at = SimTime{1'500'000};
  f.blocked = {{"recv from rank 16 (tag 1): no matching send", {3}, SimTime{1'200'000}}};
  f.watchdog_at = SimTime{31'200'000'000};
  f.watchdog_rank = 3;
  f.watchdog_what = f.blocked[0].what;
  s.emulated.replay.failure = f;
  ASSERT_TRUE(s.hung());
  const std::string text = format_emulate_text(s);
  EXPECT_THAT(text, HasSubstr("outcome:            hung: node 2 failed (the iteration did not "
                              "complete)\n"));
  EXPECT_THAT(text, Not(HasSubstr("iteration time:")));
  EXPECT_THAT(text, HasSubstr("node failure:       node 2 (ranks 16-17) stops at 1.000 ms\n"));
  EXPECT_THAT(text, HasSubstr("recv from rank 16 (tag 1): no matching send; rank 3 waits since "
                              "1.200 ms\n"));
  EXPECT_THAT(text, HasSubstr("watchdog:           --nccl-timeout 30 s: rank 3's fires at "
                              "31.200 s"));
  EXPECT_THAT(text, HasSubstr("3              7         9   0.001500 s  aborted     1\n"
                              "5              0         0   0.002000 s      bye     0\n"));
  const std::string json = format_emulate_json(s);
  EXPECT_THAT(json, HasSubstr("\"outcome\": \"node_failure\",\n  \"iteration_time_s\": null,\n"
                              "  \"predicted_iteration_time_s\": null,"));
  EXPECT_THAT(json, HasSubstr("\"aborted\": true"));
  EXPECT_THAT(json, HasSubstr("\"aborted\": false"));
  EXPECT_THAT(json, HasSubstr("\"node_failure\": {\n    \"node\": 2,"));
  // Without a failure: completed, and no per-rank "aborted".
  EXPECT_THAT(format_emulate_json(summary(4)), HasSubstr("\"outcome\": \"completed\""));
  EXPECT_THAT(format_emulate_json(summary(4)), Not(HasSubstr("aborted")));
}

}  // namespace
}  // namespace prism::runtime
