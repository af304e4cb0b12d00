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

TraceOptions at(TraceLevel level, std::vector<Rank> real = {}) {
  return TraceOptions{level, std::move(real), {}};
}

std::string ops_trace(const ReplayResult& r, const std::vector<MeasuredSlice>& measured = {},
                      std::vector<Rank> real = {}) {
  return format_chrome_trace(make_report_graph(), r, measured, at(TraceLevel::kOps, real));
}

std::vector<std::string> thread_names(const Json& trace, Rank pid) {
  std::vector<std::string> out;
  for (const Json& e : trace["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["pid"] == pid)
      out.push_back(e["args"]["name"]);
  return out;
}

// Stage0 with a second iteration marker (op 7, index 1) and an iteration
// end (op 8): rank 1 runs iteration 0 (fwd), iteration 1 (fwd), then a
// broadcast after the end.
ExecutionGraph two_iteration_graph() {
  ExecutionGraph g = make_report_graph();
  g.roles[0].ops.push_back(fx::make_op(OpKind::kMarker, 0, kNone, {}, 1));
  g.roles[0].ops.push_back(fx::make_op(OpKind::kMarker, 0, kNone, {}, 1));
  g.roles[0].ops[8].marker = MarkerKind::kIterationEnd;
  return g;
}

ReplayResult two_iteration_result() {
  ReplayResult r = make_completed_result();
  r.trace = {
      record(1, 0, fx::kIterationMarker, 0, 0, 0, 0),
      record(1, 0, fx::kFwd, 0, 0, 0, 1000),
      record(1, 0, 7, 0, 1000, 1000, 1000),
      record(1, 0, fx::kFwd, 0, 1000, 1000, 2000),
      record(1, 0, 8, 0, 2000, 2000, 2000),
      record(1, 0, fx::kBroadcast, 1, 2500, 2500, 2600),
  };
  return r;
}

MemorySample mem(std::int64_t at_ns, std::int64_t allocated_mib) {
  return MemorySample{1, SimTime{at_ns}, Bytes{allocated_mib << 20}, Bytes{8 << 20},
                      Bytes{9 << 20}};
}

TEST(ChromeTraceTest, ProcessPerRankLabelledVirtualWithItsThreads) {
  const Json t = Json::parse(ops_trace(traced_result()));
  EXPECT_EQ(t["displayTimeUnit"], "ns");
  const std::vector<Json> meta = events_with(t, "M");
  // Per rank: name, labels, sort index, and 4 x (thread name, sort index).
  ASSERT_EQ(meta.size(), 22u);
  EXPECT_EQ(meta[0], Json::parse(R"j({"name": "process_name", "ph": "M", "pid": 1, "tid": 0,
                                      "args": {"name": "rank 1 (stage0, virtual)"}})j"));
  EXPECT_EQ(meta[1], Json::parse(R"j({"name": "process_labels", "ph": "M", "pid": 1, "tid": 0,
                                      "args": {"labels": "virtual"}})j"));
  EXPECT_EQ(meta[2]["name"], "process_sort_index");
  EXPECT_EQ(meta[2]["args"]["sort_index"], 1);
  EXPECT_EQ(meta[3], Json::parse(R"j({"name": "thread_name", "ph": "M", "pid": 1, "tid": 0,
                                      "args": {"name": "compute"}})j"));
  EXPECT_EQ(meta[7]["tid"], 2);
  EXPECT_EQ(meta[7]["args"]["name"], "events");
  EXPECT_EQ(meta[9]["tid"], 3);
  EXPECT_EQ(meta[9]["args"]["name"], "iterations");
  EXPECT_EQ(thread_names(t, 1),
            (std::vector<std::string>{"compute", "comm", "events", "iterations"}));
  EXPECT_EQ(meta[11]["args"]["name"], "rank 2 (stage_one_long, virtual)");
}

TEST(ChromeTraceTest, RealRanksAreLabelledReal) {
  const Json t = Json::parse(ops_trace(traced_result(), {}, {1}));
  const std::vector<Json> meta = events_with(t, "M");
  EXPECT_EQ(meta[0]["args"]["name"], "rank 1 (stage0, real)");
  EXPECT_EQ(meta[1]["args"]["labels"], "real");
  EXPECT_EQ(meta[11]["args"]["name"], "rank 2 (stage_one_long, virtual)");
  EXPECT_EQ(meta[12]["args"]["labels"], "virtual");
}

TEST(ChromeTraceTest, ComputeIsACompleteEventInMicroseconds) {
  const Json t = Json::parse(ops_trace(traced_result()));
  const std::vector<Json> x = events_with(t, "X");
  ASSERT_EQ(x.size(), 6u);  // 5 ops with a duration and rank 1's iteration
  EXPECT_EQ(x[0], Json::parse(R"j({"name": "fwd", "cat": "compute", "ph": "X", "ts": 0.0,
                                   "dur": 1.0, "pid": 1, "tid": 0, "args": {"op": 1}})j"));
  for (const Json& e : x) EXPECT_GT(e["dur"].get<double>(), 0.0) << e;
}

TEST(ChromeTraceTest, ZeroLengthOpsAreInstantEventsOnTheEventsThread) {
  const Json t = Json::parse(ops_trace(traced_result()));
  const std::vector<Json> i = events_with(t, "i");
  ASSERT_EQ(i.size(), 3u);
  EXPECT_EQ(i[0], Json::parse(R"j({"name": "iteration 0", "cat": "marker", "ph": "i", "s": "t",
      "ts": 0.0, "pid": 1, "tid": 2,
      "args": {"op": 0, "marker": "iteration", "index": 0, "stream": "compute"}})j"));
  EXPECT_EQ(i[1], Json::parse(R"j({"name": "alloc", "cat": "alloc", "ph": "i", "s": "t",
      "ts": 1.0, "pid": 1, "tid": 2, "args": {"op": 4, "bytes": 4096, "stream": "compute"}})j"));
  EXPECT_EQ(i[2]["name"], "free");
  EXPECT_EQ(i[2]["args"]["alloc_op"], fx::kAlloc);
}

TEST(ChromeTraceTest, CollectiveArgsNameCommunicatorPeersAndWait) {
  const Json t = Json::parse(ops_trace(traced_result()));
  const Json ar = events_with(t, "X")[1];
  EXPECT_EQ(ar["name"], "all_reduce");
  EXPECT_EQ(ar["cat"], "collective");
  EXPECT_EQ(ar["pid"], 1);
  EXPECT_EQ(ar["tid"], 1);
  EXPECT_EQ(ar["ts"].get<double>(), 1.0);
  EXPECT_EQ(ar["dur"].get<double>(), 1.501);  // nanosecond precision
  EXPECT_EQ(ar["args"], Json::parse(R"j({"op": 2, "communicator": "tp", "collective": "all_reduce",
      "group": 0, "peers": [0, 1], "bytes": 1024, "dtype": "fp32", "wait_us": 0.5})j"));

  const Json bcast = events_with(t, "X")[3];
  EXPECT_EQ(bcast["args"]["root"], 1);  // root index 1 of group {0, 1}
}

TEST(ChromeTraceTest, PointToPointArgsNamePeerAndTag) {
  const Json t = Json::parse(ops_trace(traced_result()));
  const std::vector<Json> x = events_with(t, "X");
  EXPECT_EQ(x[2]["args"], Json::parse(R"j({"op": 3, "communicator": "pp_next", "peer": 3,
      "tag": 7, "bytes": 2048, "dtype": "bf16", "nccl_group": 5, "wait_us": 0.099})j"));
  EXPECT_EQ(x[5]["name"], "recv");
  EXPECT_EQ(x[5]["pid"], 2);
  EXPECT_EQ(x[5]["args"]["peer"], 0);
  EXPECT_EQ(x[5]["args"]["wait_us"].get<double>(), 2.6);
}

TEST(ChromeTraceTest, IterationSpansAreNamedOnTheirOwnThread) {
  const Json t = Json::parse(ops_trace(traced_result()));
  // Rank 1's only iteration runs to its last op's end; rank 2 has no marker.
  EXPECT_EQ(events_with(t, "X")[4], Json::parse(R"j({"name": "iteration 0", "cat": "iteration",
      "ph": "X", "ts": 0.0, "dur": 3.1, "pid": 1, "tid": 3, "args": {"index": 0}})j"));

  const Json two = Json::parse(
      format_chrome_trace(two_iteration_graph(), two_iteration_result(), {}, at(TraceLevel::kOps)));
  std::vector<Json> spans;
  for (const Json& e : events_with(two, "X"))
    if (e["cat"] == "iteration") spans.push_back(e);
  ASSERT_EQ(spans.size(), 2u);  // nothing after the iteration end
  EXPECT_EQ(spans[0]["name"], "iteration 0");
  EXPECT_EQ(spans[0]["dur"].get<double>(), 1.0);
  EXPECT_EQ(spans[1]["name"], "iteration 1");
  EXPECT_EQ(spans[1]["ts"].get<double>(), 1.0);
  EXPECT_EQ(spans[1]["dur"].get<double>(), 1.0);
  EXPECT_EQ(spans[1]["args"]["index"], 1);
}

// An emulation's real rank reports its markers: they are no records, the
// replay keeps them in the rank's timeline.
TEST(ChromeTraceTest, IterationsOfARankWithoutMarkerRecordsComeFromItsTimeline) {
  ReplayResult r = traced_result();
  RankTimeline t2{2, {}, SimTime{3000}};
  t2.iteration_marks.record(MarkerKind::kIteration, SimTime{0});
  t2.iteration_marks.record(MarkerKind::kMicrobatch, SimTime{500});
  t2.iteration_marks.record(MarkerKind::kIteration, SimTime{1000});
  RankTimeline t1{1, {}, SimTime{9000}};  // its records have a marker: they win
  t1.iteration_marks.record(MarkerKind::kIteration, SimTime{0});
  r.timelines = {t1, t2};
  std::vector<Json> spans;
  for (const Json& e : events_with(Json::parse(ops_trace(r)), "X"))
    if (e["cat"] == "iteration") spans.push_back(e);
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0]["pid"], 1);
  EXPECT_EQ(spans[0]["dur"].get<double>(), 3.1);
  EXPECT_EQ(spans[1], Json::parse(R"j({"name": "iteration 0", "cat": "iteration", "ph": "X",
      "ts": 0.0, "dur": 1.0, "pid": 2, "tid": 3, "args": {"index": 0}})j"));
  EXPECT_EQ(spans[2]["name"], "iteration 1");
  EXPECT_EQ(spans[2]["ts"].get<double>(), 1.0);
  EXPECT_EQ(spans[2]["dur"].get<double>(), 2.0);  // to the rank's finish
}

TEST(ChromeTraceTest, OneEventPerLineAndDeterministic) {
  const std::string text = ops_trace(traced_result());
  EXPECT_EQ(text, ops_trace(traced_result()));
  EXPECT_EQ(text.rfind("{\"traceEvents\":[\n{\"name\":\"process_name\"", 0), 0u);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 22 + 8 + 1 + 3);
}

TEST(ChromeTraceTest, MemoryIsACounterTrackInMiBPerTracedRank) {
  ReplayResult r = traced_result();
  r.memory_trace = {
      MemorySample{1, SimTime{1000}, Bytes{4096}, Bytes{2 << 20}, Bytes{3 << 20}},
      MemorySample{1, SimTime{1000}, Bytes{0}, Bytes{2 << 20}, Bytes{3 << 20}},
      MemorySample{3, SimTime{5}, Bytes{1}, Bytes{1}, Bytes{1}},  // not a traced rank
  };
  const Json t = Json::parse(ops_trace(r));
  const std::vector<Json> counters = events_with(t, "C");
  ASSERT_EQ(counters.size(), 2u);
  EXPECT_EQ(counters[0], Json::parse(R"j({"name": "memory (MiB)", "ph": "C", "ts": 1.0, "pid": 1,
      "args": {"allocated": 0.004, "reserved": 2.0, "device": 3.0}})j"));
  EXPECT_EQ(counters[1]["args"]["allocated"], 0.0);
}

TEST(ChromeTraceTest, CoarseLevelsKeepEachSegmentsFirstPeakAndLastMemorySample) {
  ReplayResult r = two_iteration_result();
  // Markers at 0, 1000 and 2000 cut rank 1's timeline into segments.
  r.memory_trace = {mem(500, 1),  mem(700, 2),  mem(800, 3), mem(900, 2),
                    mem(1500, 1), mem(2500, 5), mem(2600, 4)};
  const ExecutionGraph g = two_iteration_graph();
  for (TraceLevel level : {TraceLevel::kPhases, TraceLevel::kIterations}) {
    const Json t = Json::parse(format_chrome_trace(g, r, {}, at(level)));
    std::vector<double> times, allocated;
    for (const Json& c : events_with(t, "C")) {
      times.push_back(c["ts"]);
      allocated.push_back(c["args"]["allocated"]);
    }
    // Each segment's first, highest and last: 0.7 us is none of them.
    EXPECT_EQ(times, (std::vector<double>{0.5, 0.8, 0.9, 1.5, 2.5, 2.6})) << to_string(level);
    EXPECT_EQ(allocated, (std::vector<double>{1, 3, 2, 1, 5, 4})) << to_string(level);
  }
  const Json all = Json::parse(format_chrome_trace(g, r, {}, at(TraceLevel::kOps)));
  EXPECT_EQ(events_with(all, "C").size(), 7u);
}

TEST(ChromeTraceTest, PhasesLevelIsOneSlicePerStreamBetweenMarkers) {
  const Json t = Json::parse(
      format_chrome_trace(make_report_graph(), traced_result(), {}, at(TraceLevel::kPhases)));
  EXPECT_TRUE(events_with(t, "i").empty());
  EXPECT_EQ(thread_names(t, 1), (std::vector<std::string>{"compute", "comm", "iterations"}));
  const std::vector<Json> x = events_with(t, "X");
  ASSERT_EQ(x.size(), 4u);
  EXPECT_EQ(x[0], Json::parse(R"j({"name": "iteration 0", "cat": "phase", "ph": "X", "ts": 0.0,
      "dur": 1.0, "pid": 1, "tid": 0, "args": {"ops": 1, "first_op": 1, "last_op": 1,
      "compute_us": 1.0, "communication_us": 0.0, "wait_us": 0.0}})j"));
  // all_reduce, send and broadcast: 1.501 us moving data, 0.599 us waiting.
  EXPECT_EQ(x[1], Json::parse(R"j({"name": "iteration 0", "cat": "phase", "ph": "X", "ts": 1.0,
      "dur": 2.1, "pid": 1, "tid": 1, "args": {"ops": 3, "first_op": 2, "last_op": 6,
      "compute_us": 0.0, "communication_us": 1.501, "wait_us": 0.599}})j"));
  EXPECT_EQ(x[2]["cat"], "iteration");
  EXPECT_EQ(x[3]["name"], "start");  // rank 2 has no marker
  EXPECT_EQ(x[3]["pid"], 2);
  EXPECT_EQ(x[3]["args"]["wait_us"].get<double>(), 2.6);

  const Json two = Json::parse(format_chrome_trace(two_iteration_graph(), two_iteration_result(),
                                                   {}, at(TraceLevel::kPhases)));
  std::vector<std::string> names;
  for (const Json& e : events_with(two, "X"))
    if (e["cat"] == "phase") names.push_back(e["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"iteration 0", "iteration 1", "iteration_end 1"}));
}

TEST(ChromeTraceTest, IterationsLevelHoldsOnlyIterationsAndMemory) {
  ReplayResult r = traced_result();
  r.memory_trace = {mem(500, 1)};
  const Json t =
      Json::parse(format_chrome_trace(make_report_graph(), r, {}, at(TraceLevel::kIterations)));
  EXPECT_EQ(thread_names(t, 1), (std::vector<std::string>{"iterations"}));
  EXPECT_TRUE(events_with(t, "i").empty());
  const std::vector<Json> x = events_with(t, "X");
  ASSERT_EQ(x.size(), 1u);
  EXPECT_EQ(x[0]["name"], "iteration 0");
  EXPECT_EQ(events_with(t, "C").size(), 1u);
}

TEST(ChromeTraceTest, RealRanksHostThreadIsFilledWithComputeAndWaits) {
  const std::vector<MeasuredSlice> measured = {
      {1, 0, "step", SimTime{200}, SimTime{400}},
      {1, 0, "step", SimTime{300}, SimTime{600}},  // overlaps: one host slice
      {1, 0, "step", SimTime{1000}, SimTime{1200}},
  };
  const Json t = Json::parse(ops_trace(traced_result(), measured, {1}));
  EXPECT_EQ(thread_names(t, 1),
            (std::vector<std::string>{"compute", "comm", "events", "iterations", "host"}));
  std::vector<Json> host;
  for (const Json& e : events_with(t, "X"))
    if (e["tid"] == 4) host.push_back(e);
  ASSERT_EQ(host.size(), 5u);
  EXPECT_EQ(host[0], Json::parse(R"j({"name": "wait", "cat": "wait", "ph": "X", "ts": 0.0,
      "dur": 0.2, "pid": 1, "tid": 4, "args": {}})j"));
  EXPECT_EQ(host[1], Json::parse(R"j({"name": "compute", "cat": "compute", "ph": "X", "ts": 0.2,
      "dur": 0.4, "pid": 1, "tid": 4, "args": {"intervals": 2}})j"));
  EXPECT_EQ(host[2]["name"], "wait");
  EXPECT_EQ(host[3]["args"]["intervals"], 1);
  EXPECT_EQ(host[4]["name"], "wait");  // to the rank's last op's end
  EXPECT_EQ(host[4]["ts"].get<double>(), 1.2);
  EXPECT_EQ(host[4]["dur"].get<double>(), 1.9);
  // Measured slices stay on their stream too.
  std::size_t on_stream = 0;
  for (const Json& e : events_with(t, "X"))
    if (e["tid"] == 0 && e["args"].contains("measured")) ++on_stream;
  EXPECT_EQ(on_stream, 3u);

  // Not real: no host thread.
  const Json virt = Json::parse(ops_trace(traced_result(), measured));
  EXPECT_EQ(thread_names(virt, 1).size(), 4u);
}

TEST(ChromeTraceTest, TraceLevelParsesItsNamesAndNamesTheValidOnes) {
  EXPECT_EQ(parse_trace_level("ops").value(), TraceLevel::kOps);
  EXPECT_EQ(parse_trace_level("phases").value(), TraceLevel::kPhases);
  EXPECT_EQ(parse_trace_level("iterations").value(), TraceLevel::kIterations);
  const Result<TraceLevel> bad = parse_trace_level("layers");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().message(),
            "--trace-level: unknown level 'layers': valid levels are ops, phases and iterations");
  EXPECT_EQ(kDefaultTraceLevel, TraceLevel::kPhases);
}

TEST(ChromeTraceTest, EmptyTraceIsValid) {
  for (TraceLevel level : {TraceLevel::kOps, TraceLevel::kPhases, TraceLevel::kIterations}) {
    const Json t = Json::parse(
        format_chrome_trace(make_report_graph(), make_completed_result(), {}, at(level)));
    EXPECT_TRUE(t["traceEvents"].empty());
  }
}

}  // namespace
}  // namespace prism
