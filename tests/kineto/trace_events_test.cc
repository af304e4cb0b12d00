// Reading a trace: both document shapes, time conversion, argument readers,
// rank lists, distributedInfo, and each malformed input.
#include "kineto/trace_events.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kineto/kineto.h"
#include "kineto_test_util.h"

namespace prism::kineto {
namespace {

using kineto_test::TraceJson;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string error_of(const std::string& text) {
  Result<ParsedTrace> t = parse_trace(text, "t.json");
  return t.is_ok() ? "ok" : t.status().message();
}

// A value nested 100,000 deep where a number belongs once overflowed the
// stack while its error was printed.
TEST(KinetoTraceEventsTest, DeepNestingIsRefusedBeforeParsing) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(error_of(R"({"traceEvents": [{"ph": "X", "name": "x", "ts": )" + deep + "}]}"),
            "t.json: values nested deeper than 64 levels");
}

TEST(KinetoTraceEventsTest, ReadsLegacyArrayAndKinetoObject) {
  Result<ParsedTrace> legacy = parse_trace(
      R"([{"name": "aten::mm", "ph": "X", "ts": 731, "dur": 12, "tid": 1, "pid": "CPU functions", "args": {}}])",
      "legacy.json");
  ASSERT_TRUE(legacy.is_ok()) << legacy.status().message();
  ASSERT_EQ(legacy->events.size(), 1u);
  EXPECT_EQ(legacy->events[0].cls, EventClass::kHostOp);
  EXPECT_EQ(legacy->events[0].ts_ns, 731000);
  EXPECT_EQ(legacy->events[0].thread, "\"CPU functions\"/1");

  TraceJson t;
  t.kernel("k", 1.0005, 2.25, 7, {{"correlation", 3}, {"External id", 9}});
  t.add("cuda_runtime", "cudaLaunchKernel", 0.5, 0.1, {{"correlation", 3}});
  t.add("Trace", "PyTorch Profiler (0)", 0, 10);  // not used
  t.events().push_back({{"ph", "f"}, {"id", 3}, {"ts", 1}, {"cat", "ac2g"}, {"name", "ac2g"}});
  Result<ParsedTrace> k = parse_trace(t.text(), "k.json");
  ASSERT_TRUE(k.is_ok()) << k.status().message();
  ASSERT_EQ(k->events.size(), 2u);
  const TraceEvent& kernel = k->events[0];
  EXPECT_EQ(kernel.cls, EventClass::kKernel);
  EXPECT_EQ(kernel.ts_ns, 1001);  // 1000.5 ns rounds away from zero
  EXPECT_EQ(kernel.dur_ns, 2250);
  EXPECT_EQ(kernel.stream, 7);
  EXPECT_EQ(kernel.device, 0);
  EXPECT_EQ(kernel.correlation, 3);
  EXPECT_EQ(kernel.external_id, 9);
  EXPECT_EQ(k->events[1].cls, EventClass::kRuntime);
}

TEST(KinetoTraceEventsTest, ReadsDistributedInfo) {
  TraceJson t;
  t.doc["distributedInfo"] = {{"rank", 3},
                              {"world_size", 8},
                              {"pg_config",
                               {{{"pg_name", "0"}, {"ranks", {0, 1, 2, 3, 4, 5, 6, 7}}},
                                {{"pg_name", "5"}, {"ranks", "[2, 3]"}},
                                {{"pg_name", "6"}, {"ranks", "[0, 1, ...]"}}}}};
  Result<ParsedTrace> p = parse_trace(t.text(), "t.json");
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  EXPECT_EQ(p->dist.rank, 3);
  EXPECT_EQ(p->dist.world_size, 8);
  EXPECT_EQ(p->dist.pg_ranks.size(), 2u);  // the truncated list is no use
  EXPECT_EQ(p->dist.pg_ranks.at("5"), (std::vector<Rank>{2, 3}));
}

TEST(KinetoTraceEventsTest, ParsesRankLists) {
  const auto ranks = [](const Json& j) { return parse_ranks(j); };
  ASSERT_TRUE(ranks("[0, 1, 2]"));
  EXPECT_THAT(ranks("[0, 1, 2]")->ranks, ElementsAre(0, 1, 2));
  EXPECT_FALSE(ranks("[0, 1, 2]")->truncated);
  EXPECT_THAT(ranks("[]")->ranks, ElementsAre());
  EXPECT_TRUE(ranks("[0, 1, ..., 63]")->truncated);
  EXPECT_THAT(ranks("[0, 1, ..., 63]")->ranks, ElementsAre(0, 1, 63));
  EXPECT_TRUE(ranks("[4, 5, ...]")->truncated);
  EXPECT_THAT(ranks(Json::array({3, 1}))->ranks, ElementsAre(3, 1));
  EXPECT_FALSE(ranks("[0, x]"));
  EXPECT_FALSE(ranks("[0, -1]"));
  EXPECT_FALSE(ranks("0, 1"));
  EXPECT_FALSE(ranks(Json::array({0.5})));
  EXPECT_FALSE(ranks(7));
}

TEST(KinetoTraceEventsTest, ReadsIntegersInEveryProfilerSpelling) {
  EXPECT_EQ(arg_int(nullptr), std::nullopt);
  const Json i = 5, f = 5.0, s = "5", neg = "-2", frac = 5.5, word = "five";
  EXPECT_EQ(arg_int(&i), 5);
  EXPECT_EQ(arg_int(&f), 5);
  EXPECT_EQ(arg_int(&s), 5);
  EXPECT_EQ(arg_int(&neg), -2);
  EXPECT_EQ(arg_int(&frac), std::nullopt);
  EXPECT_EQ(arg_int(&word), std::nullopt);
}

TEST(KinetoTraceEventsTest, RejectsWhatIsNoTrace) {
  EXPECT_EQ(error_of("{\"traceEvents\": [\n  {]}"),
            "t.json:2:4: malformed JSON: unexpected ']'");
  EXPECT_EQ(error_of("{\"schemaVersion\": 1}"),
            "t.json: no \"traceEvents\" (not a PyTorch profiler trace)");
  EXPECT_EQ(error_of("{\"traceEvents\": 3}"),
            "t.json: \"traceEvents\" is not an array (not a PyTorch profiler trace)");
  EXPECT_EQ(error_of("42"), "t.json: a JSON number, not a PyTorch profiler trace");
  EXPECT_EQ(error_of(std::string("\x1f\x8b\x08\x00", 4)),
            "t.json: gzip-compressed; decompress it first (gunzip), as torch writes .json.gz");
}

TEST(KinetoTraceEventsTest, RejectsMalformedEventsNamingTheirIndex) {
  const auto with = [](Json ev) {
    TraceJson t;
    t.kernel("ok", 0, 1, 7);
    t.events().push_back(std::move(ev));
    return error_of(t.text());
  };
  EXPECT_EQ(with(7), "t.json: event 1: not a JSON object");
  Json k = {{"ph", "X"}, {"cat", "kernel"}, {"name", "k"}, {"ts", 1}, {"pid", 0}, {"tid", 7}};
  EXPECT_EQ(with(k), "t.json: event 1 ('k'): no \"dur\"");
  k["dur"] = -1.5;
  EXPECT_EQ(with(k), "t.json: event 1 ('k'): negative \"dur\" -1.5 us");
  k["dur"] = "3";
  EXPECT_EQ(with(k), "t.json: event 1 ('k'): \"dur\" is not a number: \"3\"");
  k["dur"] = 2e12;
  EXPECT_EQ(with(k),
            "t.json: event 1 ('k'): \"dur\" 2000000000000 us exceeds the limit of 2^50 ns");
  k["dur"] = 1;
  k["ts"] = nullptr;
  EXPECT_EQ(with(k), "t.json: event 1 ('k'): \"ts\" is not a number: null");
  k["ts"] = 1;
  k["args"] = "none";
  EXPECT_EQ(with(k), "t.json: event 1 ('k'): \"args\" is not an object");
  k["args"] = {{"stream", "seven"}};
  EXPECT_EQ(with(k), "t.json: event 1 ('k'): args \"stream\" is not an integer: \"seven\"");
  k["args"] = Json::object();
  k.erase("tid");
  EXPECT_EQ(with(k), "t.json: event 1 ('k'): no \"stream\" (neither in args nor as \"tid\")");
}

TEST(KinetoTraceEventsTest, RejectsTimesBeyondTheNanosecondRange) {
  TraceJson t;
  t.kernel("k", 5e15, 1, 7);
  EXPECT_EQ(error_of(t.text()), "t.json: event 0 ('k'): \"ts\" 5000000000000000 is out of range");
}

TEST(KinetoTraceEventsTest, RejectsBadDistributedInfo) {
  TraceJson t;
  t.doc["distributedInfo"] = {{"rank", 4}, {"world_size", 4}};
  EXPECT_EQ(error_of(t.text()), "t.json: distributedInfo: rank 4 is not an integer in [0, 4)");
  t.doc["distributedInfo"] = {{"rank", 0}, {"world_size", 0}};
  EXPECT_EQ(error_of(t.text()),
            "t.json: distributedInfo: world_size 0 is not an integer in [1, 2^24]");
  t.doc["distributedInfo"] = "rank 0";
  EXPECT_EQ(error_of(t.text()), "t.json: distributedInfo: not an object");
}

}  // namespace
}  // namespace prism::kineto
