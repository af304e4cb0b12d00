#include "report/report_json.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "report_fixtures.h"

namespace prism {
namespace {

using Json = nlohmann::ordered_json;
using testing::kGiB;
using testing::make_completed_result;
using testing::make_deadlock_result;
using testing::make_oom_result;
using testing::make_report_graph;

TEST(ReportJsonTest, TopLevelFieldsInAFixedOrder) {
  const std::string text = format_report_json(make_report_graph(), make_completed_result());
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  const Json j = Json::parse(text);
  std::vector<std::string> keys;
  for (const auto& [key, value] : j.items()) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"format_version", "graph", "world_size", "outcome",
                                            "folded", "simulated_ranks", "op_events", "makespan_s",
                                            "iteration_time_s", "iteration_times_s", "roles",
                                            "blocked", "out_of_memory"}));
  EXPECT_EQ(j["format_version"], kReportFormatVersion);
  EXPECT_EQ(j["graph"], "tiny");
  EXPECT_EQ(j["world_size"], 4);
  EXPECT_EQ(j["outcome"], "completed");
  EXPECT_EQ(j["folded"], true);
  EXPECT_EQ(j["simulated_ranks"], 2);
  EXPECT_EQ(j["op_events"], 9);
  EXPECT_EQ(j["makespan_s"].get<double>(), 0.012345678);
  EXPECT_EQ(j["iteration_time_s"].get<double>(), 0.012345678);
  EXPECT_EQ(j["iteration_times_s"], Json::parse("[0.012345678]"));
  EXPECT_TRUE(j["blocked"].empty());
}

TEST(ReportJsonTest, SecondsPrintExactlyFromNanoseconds) {
  // 12,345,678 ns is 0.012345678 s, not 0.012345678000000001.
  const std::string text = format_report_json(make_report_graph(), make_completed_result());
  EXPECT_NE(text.find("\"makespan_s\": 0.012345678,"), std::string::npos) << text;
}

TEST(ReportJsonTest, RolesHaveMeanAndMax) {
  const Json j = Json::parse(format_report_json(make_report_graph(), make_completed_result()));
  ASSERT_EQ(j["roles"].size(), 2u);
  const Json& s0 = j["roles"][0];
  EXPECT_EQ(s0["name"], "stage0");
  EXPECT_EQ(s0["num_ranks"], 2);
  EXPECT_EQ(s0["compute_s"]["mean"].get<double>(), 0.01);
  EXPECT_EQ(s0["exposed_comm_s"]["max"].get<double>(), 0.001);
  EXPECT_EQ(s0["idle_s"]["mean"].get<double>(), 0.001345678);
  EXPECT_EQ(s0["finish_s"]["max"].get<double>(), 0.012345678);
  EXPECT_EQ(s0["peak_allocated_bytes"]["max"], 3 * kGiB / 2);
  EXPECT_EQ(s0["peak_reserved_bytes"]["max"], 3 * kGiB / 2 + (2 << 20));
  EXPECT_EQ(s0["peak_device_bytes"]["max"], 5 * kGiB / 2 + (2 << 20));
  EXPECT_EQ(s0["nccl_bytes"]["mean"], 256 << 20);
  EXPECT_EQ(s0["fragmentation_bytes"]["max"], 3 << 19);
  EXPECT_EQ(s0["inactive_split_peak_bytes"]["mean"], 1 << 19);
  const Json& s1 = j["roles"][1];
  EXPECT_EQ(s1["name"], "stage_one_long");
  EXPECT_EQ(s1["compute_s"]["mean"].get<double>(), 2e-6);
  EXPECT_EQ(s1["compute_s"]["max"].get<double>(), 501e-9);
  EXPECT_EQ(s1["finish_s"]["mean"].get<double>(), 0.012);
  EXPECT_EQ(s1["peak_allocated_bytes"]["mean"], 1234);
  EXPECT_EQ(s1["peak_allocated_bytes"]["max"], 2048);
}

TEST(ReportJsonTest, OutOfMemoryNamesRankOpAndState) {
  const Json j = Json::parse(format_report_json(make_report_graph(), make_oom_result()));
  EXPECT_EQ(j["outcome"], "out_of_memory");
  ASSERT_EQ(j["out_of_memory"].size(), 1u);
  const Json& o = j["out_of_memory"][0];
  EXPECT_EQ(o["rank"], 2);
  EXPECT_EQ(o["num_ranks"], 2);
  EXPECT_EQ(o["role"], "stage_one_long");
  EXPECT_EQ(o["op"], 1);
  EXPECT_EQ(o["stream"], "compute");
  EXPECT_EQ(o["in_nccl"], false);
  EXPECT_EQ(o["requested_bytes"], 3 * kGiB);
  EXPECT_EQ(o["segment_bytes"], 3 * kGiB);
  EXPECT_EQ(o["capacity_bytes"], 80 * kGiB);
  EXPECT_EQ(o["reserved_bytes"], 78 * kGiB);
  EXPECT_EQ(o["nccl_bytes"], kGiB / 2);
  EXPECT_TRUE(j["blocked"].empty());
}

TEST(ReportJsonTest, DeadlockListsBlockedRanks) {
  const Json j = Json::parse(format_report_json(make_report_graph(), make_deadlock_result()));
  EXPECT_EQ(j["outcome"], "deadlock");
  ASSERT_EQ(j["blocked"].size(), 2u);
  EXPECT_EQ(j["blocked"][0], Json::parse(R"j({"rank": 0, "num_ranks": 2, "role": "stage0",
      "op": 2, "op_name": "all_reduce", "stream": "comm",
      "waiting_for": "collective all_reduce #0 on tp: rank 9 not arrived"})j"));
  EXPECT_EQ(j["blocked"][1]["role"], "stage_one_long");
  EXPECT_EQ(j["blocked"][1]["op_name"], "recv");
}

TEST(ReportJsonTest, SameInputSameBytes) {
  const ExecutionGraph g = make_report_graph();
  EXPECT_EQ(format_report_json(g, make_deadlock_result()),
            format_report_json(g, make_deadlock_result()));
}

}  // namespace
}  // namespace prism
