#include "report/summary.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "report_fixtures.h"

namespace prism {
namespace {

using ::testing::HasSubstr;
using testing::make_completed_result;
using testing::make_deadlock_result;
using testing::make_oom_result;
using testing::make_report_graph;

// The role table of make_completed_result() and make_deadlock_result().
constexpr const char* kRoleTable =
    "role            ranks  compute_ms  exposed_comm_ms  idle_ms  allocated_GiB  reserved_GiB  "
    "frag_GiB  device_GiB\n"
    "stage0              2      10.000            1.000    1.346          1.500         1.502    "
    " 0.001       2.502\n"
    "stage_one_long      2       0.002            0.000   12.345          0.000         0.002    "
    " 0.001       1.002\n"
    "(times: mean over the role's ranks; memory: peaks, max over the role's ranks; frag = "
    "reserved - allocated when reserved peaked; device = reserved + NCCL + context)\n";

TEST(SummaryTest, CompletedReplay) {
  EXPECT_EQ(format_summary(make_report_graph(), make_completed_result()),
            "graph:           tiny (4 ranks, 2 roles)\n"
            "replay:          folded: 2 of 4 ranks simulated, 9 op events\n"
            "outcome:         completed\n"
            "iteration time:  12.346 ms  (1 iteration)\n"
            "makespan:        12.346 ms\n"
            "\n" +
                std::string(kRoleTable));
}

TEST(SummaryTest, ColumnsWidenForLargeValues) {
  ReplayResult r = make_completed_result();
  r.roles[0].num_ranks = 16384;
  r.roles[0].mean.idle = SimTime{12'345'678'901};          // 12345.679 ms
  r.roles[1].mean.exposed_comm = SimTime{98'765'432'109};  // 98765.432 ms
  const std::string text = format_summary(make_report_graph(), r);
  EXPECT_NE(text.find("role            ranks  compute_ms  exposed_comm_ms    idle_ms  "
                      "allocated_GiB  reserved_GiB  frag_GiB  device_GiB\n"
                      "stage0          16384      10.000            1.000  12345.679          "
                      "1.500         1.502     0.001       2.502\n"
                      "stage_one_long      2       0.002        98765.432     12.345          "
                      "0.000         0.002     0.001       1.002\n"),
            std::string::npos)
      << text;
}

TEST(SummaryTest, UnfoldedReplayWithSeveralIterations) {
  ReplayResult r = make_completed_result();
  r.folded = false;
  r.simulated_ranks = 4;
  r.op_events = 1;
  r.iteration_times = {SimTime{1'000'000}, SimTime{2'000'000}, SimTime{3'000'000}};
  r.iteration_time = SimTime{2'000'000};
  const std::string text = format_summary(make_report_graph(), r);
  EXPECT_NE(text.find("replay:          unfolded: 4 of 4 ranks simulated, 1 op event\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("iteration time:  2.000 ms  (mean of 3 iterations)\n"), std::string::npos)
      << text;
}

TEST(SummaryTest, LongDeadlockListsAreCutAndRanksCountedOnce) {
  ReplayResult r = make_deadlock_result();
  r.blocked.clear();
  for (Rank rank = 0; rank < 10; ++rank) {
    for (std::uint16_t stream = 0; stream < 2; ++stream)  // two blocked streams per rank
      r.blocked.push_back(BlockedRank{rank, 1, 1, 0, stream, "waiting"});
  }
  const std::string text = format_summary(make_report_graph(), r);
  EXPECT_NE(text.find("outcome:         deadlock (10 ranks blocked)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  rank 7 (role stage_one_long): op 0"), std::string::npos) << text;
  EXPECT_EQ(text.find("  rank 8 (role"), std::string::npos) << text;  // 16 lines shown
  EXPECT_NE(text.find("  ... and 4 more blocked streams (the --report file lists them all)\n"),
            std::string::npos)
      << text;
}

TEST(SummaryTest, DeadlockListsEveryBlockedRank) {
  EXPECT_EQ(
      format_summary(make_report_graph(), make_deadlock_result()),
      "graph:           tiny (4 ranks, 2 roles)\n"
      "replay:          folded: 2 of 4 ranks simulated, 9 op events\n"
      "outcome:         deadlock (3 ranks blocked)\n"
      "stalled at:      1.500 ms\n"
      "\n" +
          std::string(kRoleTable) +
          "\n"
          "blocked ranks:\n"
          "  rank 0 (role stage0; 2 ranks in this state): op 2 (all_reduce) on stream comm: "
          "collective all_reduce #0 on tp: rank 9 not arrived\n"
          "  rank 2 (role stage_one_long): op 0 (recv) on stream comm: recv from rank 0 tag 7: "
          "no matching send\n");
}

TEST(SummaryTest, OutOfMemoryNamesTheRankAndTheMemory) {
  const std::string text = format_summary(make_report_graph(), make_oom_result());
  EXPECT_THAT(text, HasSubstr("outcome:         out of memory (the replay stopped there)\n"
                              "stopped at:      1.000 ms\n"));
  EXPECT_THAT(text, HasSubstr("\nout of memory on rank 2 (role stage_one_long, and 1 more rank in "
                              "the same state) at 1.000 ms, op 1 'compute' on stream 'compute':\n"
                              "  Tried to allocate 3.00 GiB (3221225472 bytes; 3221225472 bytes in "
                              "the allocator's 3072 MiB segment).\n"
                              "  The GPU has a total capacity of 80.00 GiB of which 1.00 GiB is "
                              "free. In use: 78.00 GiB reserved by PyTorch (77.00 GiB allocated), "
                              "0.50 GiB NCCL, 0.50 GiB CUDA context.\n"));
}

TEST(SummaryTest, SingleRankGraphUsesSingularWords) {
  ExecutionGraph g = make_report_graph();
  g.roles.resize(1);
  ReplayResult r = make_completed_result();
  r.world_size = 1;
  r.simulated_ranks = 1;
  r.roles.resize(1);
  EXPECT_EQ(format_summary(g, r).substr(0, 42), "graph:           tiny (1 rank, 1 role)\nrep");
}

}  // namespace
}  // namespace prism
