#include "report/chrome_trace.h"

#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "report_fixtures.h"

namespace prism {
namespace {

using Json = nlohmann::json;
using testing::make_completed_result;
using testing::make_report_graph;
namespace fx = testing;

TraceRecord record(Rank rank, int role, int op_index, int stream, std::int64_t start,
                   std::int64_t transfer_start, std::int64_t end) {
  return TraceRecord{rank,           role,
                     op_index,       static_cast<std::uint16_t>(stream),
                     SimTime{start}, SimTime{transfer_start},
                     SimTime{end}};
}

// Rank 1 (stage0) and rank 2 (stage_one_long), sorted by (rank, start, op).
ReplayResult traced_result() {
  ReplayResult r = make_completed_result();
  r.trace = {
      record(1, 0, fx::kIterationMarker, 0, 0, 0, 0),
      record(1, 0, fx::kFwd, 0, 0, 0, 1000),
      record(1, 0, fx::kAlloc, 0, 1000, 1000, 1000),
      record(1, 0, fx::kFree, 0, 1000, 1000, 1000),
      record(1, 0, fx::kTpAllReduce, 1, 1000, 1500, 2501),
      record(1, 0, fx::kSendAct, 1, 2501, 2600, 3000),
      record(1, 0, fx::kBroadcast, 1, 3000, 3000, 3100),
      record(2, 1, 0, 1, 0, 2600, 3000),
  };
  return r;
}

std::vector<Json> events_with(const Json& trace, const std::string& ph) {
  std::vector<Json> out;
  for (const Json& e : trace["traceEvents"])
    if (e["ph"] == ph) out.push_back(e);
  return out;
}

TEST(ChromeTraceTest, ProcessPerRankAndThreadPerStream) {
  const Json t = Json::parse(format_chrome_trace(make_report_graph(), traced_result()));
  EXPECT_EQ(t["displayTimeUnit"], "ns");
  const std::vector<Json> meta = events_with(t, "M");
  ASSERT_EQ(meta.size(), 12u);  // per rank: name, sort index, and 2 x (thread name, sort index)
  EXPECT_EQ(meta[0], Json::parse(R"j({"name": "process_name", "ph": "M", "pid": 1, "tid": 0,
                                      "args": {"name": "rank 1 (stage0)"}})j"));
  EXPECT_EQ(meta[1]["name"], "process_sort_index");
  EXPECT_EQ(meta[1]["args"]["sort_index"], 1);
  EXPECT_EQ(meta[2], Json::parse(R"j({"name": "thread_name", "ph": "M", "pid": 1, "tid": 0,
                                      "args": {"name": "compute"}})j"));
  EXPECT_EQ(meta[4]["tid"], 1);
  EXPECT_EQ(meta[4]["args"]["name"], "comm");
  EXPECT_EQ(meta[6]["args"]["name"], "rank 2 (stage_one_long)");
}

TEST(ChromeTraceTest, ComputeIsACompleteEventInMicroseconds) {
  const Json t = Json::parse(format_chrome_trace(make_report_graph(), traced_result()));
  const std::vector<Json> x = events_with(t, "X");
  ASSERT_EQ(x.size(), 7u);
  EXPECT_EQ(x[0], Json::parse(R"j({"name": "fwd", "cat": "compute", "ph": "X", "ts": 0.0,
                                   "dur": 1.0, "pid": 1, "tid": 0, "args": {"op": 1}})j"));
  EXPECT_EQ(x[1]["name"], "alloc");
  EXPECT_EQ(x[1]["args"]["bytes"], 4096);
  EXPECT_EQ(x[2]["name"], "free");
  EXPECT_EQ(x[2]["args"]["alloc_op"], fx::kAlloc);
}

TEST(ChromeTraceTest, CollectiveArgsNameCommunicatorPeersAndWait) {
  const Json t = Json::parse(format_chrome_trace(make_report_graph(), traced_result()));
  const Json ar = events_with(t, "X")[3];
  EXPECT_EQ(ar["name"], "all_reduce");
  EXPECT_EQ(ar["cat"], "collective");
  EXPECT_EQ(ar["pid"], 1);
  EXPECT_EQ(ar["tid"], 1);
  EXPECT_EQ(ar["ts"].get<double>(), 1.0);
  EXPECT_EQ(ar["dur"].get<double>(), 1.501);  // nanosecond precision
  EXPECT_EQ(ar["args"], Json::parse(R"j({"op": 2, "communicator": "tp", "collective": "all_reduce",
      "group": 0, "peers": [0, 1], "bytes": 1024, "dtype": "fp32", "wait_us": 0.5})j"));

  const Json bcast = events_with(t, "X")[5];
  EXPECT_EQ(bcast["args"]["root"], 1);  // root index 1 of group {0, 1}
}

TEST(ChromeTraceTest, PointToPointArgsNamePeerAndTag) {
  const Json t = Json::parse(format_chrome_trace(make_report_graph(), traced_result()));
  const std::vector<Json> x = events_with(t, "X");
  EXPECT_EQ(x[4]["args"], Json::parse(R"j({"op": 3, "communicator": "pp_next", "peer": 3,
      "tag": 7, "bytes": 2048, "dtype": "bf16", "nccl_group": 5, "wait_us": 0.099})j"));
  EXPECT_EQ(x[6]["name"], "recv");
  EXPECT_EQ(x[6]["pid"], 2);
  EXPECT_EQ(x[6]["args"]["peer"], 0);
  EXPECT_EQ(x[6]["args"]["wait_us"].get<double>(), 2.6);
}

TEST(ChromeTraceTest, MarkersAreInstantEvents) {
  const Json t = Json::parse(format_chrome_trace(make_report_graph(), traced_result()));
  const std::vector<Json> i = events_with(t, "i");
  ASSERT_EQ(i.size(), 1u);
  EXPECT_EQ(i[0], Json::parse(R"j({"name": "iteration 0", "cat": "marker", "ph": "i", "s": "t",
      "ts": 0.0, "pid": 1, "tid": 0, "args": {"op": 0, "marker": "iteration", "index": 0}})j"));
}

TEST(ChromeTraceTest, OneEventPerLineAndDeterministic) {
  const ExecutionGraph g = make_report_graph();
  const std::string text = format_chrome_trace(g, traced_result());
  EXPECT_EQ(text, format_chrome_trace(g, traced_result()));
  EXPECT_EQ(text.rfind("{\"traceEvents\":[\n{\"name\":\"process_name\"", 0), 0u);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 12 + 8 + 3);
}

TEST(ChromeTraceTest, MemoryIsACounterTrackPerTracedRank) {
  ReplayResult r = traced_result();
  r.memory_trace = {
      MemorySample{1, SimTime{1000}, Bytes{4096}, Bytes{2 << 20}, Bytes{3 << 20}},
      MemorySample{1, SimTime{1000}, Bytes{0}, Bytes{2 << 20}, Bytes{3 << 20}},
      MemorySample{3, SimTime{5}, Bytes{1}, Bytes{1}, Bytes{1}},  // not a traced rank
  };
  const Json t = Json::parse(format_chrome_trace(make_report_graph(), r));
  const std::vector<Json> counters = events_with(t, "C");
  ASSERT_EQ(counters.size(), 2u);
  EXPECT_EQ(counters[0], Json::parse(R"j({"name": "memory", "ph": "C", "ts": 1.0, "pid": 1,
      "args": {"allocated": 4096, "reserved": 2097152, "device": 3145728}})j"));
  EXPECT_EQ(counters[1]["args"]["allocated"], 0);
}

TEST(ChromeTraceTest, EmptyTraceIsValid) {
  const Json t = Json::parse(format_chrome_trace(make_report_graph(), make_completed_result()));
  EXPECT_TRUE(t["traceEvents"].empty());
}

}  // namespace
}  // namespace prism
