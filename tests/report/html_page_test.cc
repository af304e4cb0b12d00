// The HTML report: escaping, the Pareto front, the sections of a replay's
// and a search's page, the numbers drawn from a hand-made replay, and the
// same bytes for the same input.
#include "report/html_page.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "net/cluster_yaml.h"
#include "report/replay_html.h"
#include "report_fixtures.h"

namespace prism {
namespace {

using ::testing::HasSubstr;
using testing::kAlloc;
using testing::kFwd;
using testing::kIterationMarker;
using testing::kSendAct;
using testing::kTpAllReduce;
using ::testing::Not;

TEST(HtmlEscape, EscapesMarkupAndQuotes) {
  EXPECT_EQ(html_escape(R"(<script>alert("x" & 'y')</script>)"),
            "&lt;script&gt;alert(&quot;x&quot; &amp; &#39;y&#39;)&lt;/script&gt;");
  EXPECT_EQ(html_escape("plain stage0"), "plain stage0");
}

HtmlPoint point(double tps, std::int64_t mem, bool oom = false) {
  return HtmlPoint{"c", tps, Bytes{mem}, oom, ""};
}

TEST(ParetoFront, KeepsTheUndominatedFittingPoints) {
  const std::vector<HtmlPoint> points = {
      point(100, 10),       // 0: front (least memory)
      point(150, 20),       // 1: front
      point(90, 15),        // 2: beaten by 0 (faster with less)
      point(150, 20),       // 3: identical to 1: front too
      point(140, 30),       // 4: beaten by 1
      point(500, 5, true),  // 5: out of memory: never on it
      point(300, 40),       // 6: front (fastest)
      point(100, 12),       // 7: as fast as 0 with more memory
      point(300, 40),       // 8: identical to 6
  };
  EXPECT_EQ(pareto_front(points), (std::vector<std::size_t>{0, 1, 3, 6, 8}));
  EXPECT_TRUE(pareto_front({point(1, 1, true)}).empty());
  EXPECT_TRUE(pareto_front({}).empty());
}

// Stage0's rank 0 runs fwd [0, 1000), its tp all-reduce arrives at 1000,
// moves data [1200, 2000), sends to the next stage [2000, 2500) and
// finishes at 3000; rank 2 (the other role) receives [0, 2500).
ReplayResult traced_result() {
  ReplayResult r = testing::make_completed_result();
  r.makespan = SimTime{3000};
  r.iteration_times = {SimTime{3000}};
  r.iteration_time = SimTime{3000};
  auto rec = [](Rank rank, int role, int op, int stream, std::int64_t start, std::int64_t transfer,
                std::int64_t end) {
    return TraceRecord{rank,
                       role,
                       op,
                       static_cast<std::uint16_t>(stream),
                       SimTime{start},
                       SimTime{transfer},
                       SimTime{end}};
  };
  r.trace = {
      rec(0, 0, kIterationMarker, 0, 0, 0, 0),  rec(0, 0, kFwd, 0, 0, 0, 1000),
      rec(0, 0, kAlloc, 0, 500, 500, 500),      rec(0, 0, kTpAllReduce, 1, 1000, 1200, 2000),
      rec(0, 0, kSendAct, 1, 2000, 2000, 2500), rec(2, 1, 0, 1, 0, 2000, 2500),
  };
  r.memory_trace = {
      MemorySample{0, SimTime{500}, Bytes{4096}, Bytes{2 << 20}, Bytes{(2 << 20) + 1000}},
      MemorySample{0, SimTime{2500}, Bytes{0}, Bytes{2 << 20}, Bytes{(2 << 20) + 1000}},
  };
  IterationMarks marks;
  marks.record(MarkerKind::kIteration, SimTime{0});
  r.timelines = {RankTimeline{0, marks, SimTime{3000}}, RankTimeline{2, {}, SimTime{2500}}};
  return r;
}

ReplayHtmlOptions options() {
  ReplayHtmlOptions o;
  o.title = "prism replay: <tiny & 'quoted'>";
  o.facts = {{"graph", "<b>bold</b>"}};
  o.cluster = resolve_cluster("dgx-h100").value();
  EXPECT_TRUE(size_cluster(&o.cluster, 8, 0).is_ok());
  o.capacity = Bytes{80 * testing::kGiB};
  return o;
}

TEST(ReplayHtml, StagesTileTheIterationByCategory) {
  const ExecutionGraph g = testing::make_report_graph();
  EXPECT_EQ(html_ranks(g), (std::vector<Rank>{0, 2}));
  EXPECT_EQ(with_html_ranks(g, {3, 0}), (std::vector<Rank>{0, 2, 3}));
  const HtmlPage page = replay_html_page(g, traced_result(), options());
  EXPECT_EQ(page.window_begin, SimTime{0});
  EXPECT_EQ(page.window_end, SimTime{3000});
  ASSERT_EQ(page.stages.size(), 2u);
  EXPECT_EQ(page.stages[0].name, "stage0: rank 0 of 2");
  EXPECT_EQ(page.stages[1].name, "stage_one_long: rank 2 of 2");
  const std::vector<HtmlSpan>& s = page.stages[0].spans;
  ASSERT_EQ(s.size(), 5u);
  const std::vector<std::tuple<std::int64_t, std::int64_t, TimeCategory>> want = {
      {0, 1000, TimeCategory::kCompute},
      {1000, 1200, TimeCategory::kBubble},
      {1200, 2000, TimeCategory::kTp},
      {2000, 2500, TimeCategory::kPp},
      {2500, 3000, TimeCategory::kBubble}};
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(s[i].begin.ns, std::get<0>(want[i])) << i;
    EXPECT_EQ(s[i].end.ns, std::get<1>(want[i])) << i;
    EXPECT_EQ(s[i].category, std::get<2>(want[i])) << i;
  }
  EXPECT_EQ(page.stages[0].breakdown[TimeCategory::kBubble], SimTime{700});
  EXPECT_EQ(page.stages[1].breakdown[TimeCategory::kPp], SimTime{500});
  EXPECT_EQ(page.stages[0].memory.size(), 2u);

  // The collectives: stage0's all-reduce on tp and its send, rank 2's recv.
  ASSERT_EQ(page.collectives.size(), 3u);
  const HtmlCollective& ar = page.collectives[0];
  EXPECT_EQ(ar.kind, "all_reduce");
  EXPECT_EQ(ar.group, "tp");
  EXPECT_EQ(ar.group_ranks, 2);
  EXPECT_EQ(ar.group_nodes, 1);
  EXPECT_EQ(ar.bytes, Bytes{1024});
  EXPECT_EQ(ar.calls, 1);
  EXPECT_EQ(ar.transfer, SimTime{800});
  EXPECT_EQ(ar.wait, SimTime{200});
  EXPECT_NE(ar.algorithm, "-");
  EXPECT_NE(ar.protocol, "-");
  EXPECT_GT(ar.channels, 0);
  EXPECT_EQ(page.collectives[1].kind, "send");
  EXPECT_EQ(page.collectives[1].group, "pp_next");
  EXPECT_EQ(page.collectives[1].algorithm, "P2P");
  EXPECT_EQ(page.collectives[2].stage, "stage_one_long: rank 2 of 2");
  EXPECT_EQ(page.collectives[2].kind, "recv");
  EXPECT_EQ(page.collectives[2].wait, SimTime{2000});
}

TEST(ReplayHtml, PageHasEverySectionEscapedAndRepeatsExactly) {
  const ExecutionGraph g = testing::make_report_graph();
  const ReplayResult r = traced_result();
  const std::string html = format_replay_html(g, r, options());
  EXPECT_EQ(html, format_replay_html(g, r, options()));
  EXPECT_THAT(html, HasSubstr("<!DOCTYPE html>"));
  for (const char* id : {"summary", "timeline", "breakdown", "memory", "collectives"})
    EXPECT_THAT(html, HasSubstr(fmt::format("<section id=\"{}\">", id))) << id;
  EXPECT_THAT(html, Not(HasSubstr("id=\"search\"")));
  EXPECT_THAT(html, HasSubstr("<title>prism replay: &lt;tiny &amp; &#39;quoted&#39;&gt;</title>"));
  EXPECT_THAT(html, HasSubstr("&lt;b&gt;bold&lt;/b&gt;"));
  EXPECT_THAT(html, Not(HasSubstr("<b>")));
  EXPECT_THAT(html, Not(HasSubstr("<tiny")));
  // Self-contained: nothing fetched at view time.
  EXPECT_THAT(html, Not(HasSubstr("http://www.w3.org/2000/svg\"/>")));
  for (const char* fetch : {"src=\"http", "href=\"http", "@import", "url("})
    EXPECT_THAT(html, Not(HasSubstr(fetch))) << fetch;
  EXPECT_THAT(html, HasSubstr("data-prism"));
  EXPECT_THAT(html, HasSubstr("<ul id=\"prism-errors\" hidden></ul>"));
  // The memory lines, the timeline's tp span and the collectives' row.
  EXPECT_THAT(html, HasSubstr("<polyline class=\"allocated\""));
  EXPECT_THAT(html, HasSubstr("<polyline class=\"reserved\""));
  EXPECT_THAT(html,
              HasSubstr("<title>stage0: rank 0 of 2: 1.2 us to 2.0 us: tp comm 100%</title>"));
  EXPECT_THAT(html, HasSubstr("<td class=\"l\">all_reduce</td><td class=\"l\">tp</td>"));
}

TEST(ReplayHtml, OutOfMemoryIsNoted) {
  const ExecutionGraph g = testing::make_report_graph();
  ReplayResult r = traced_result();
  r.outcome = ReplayResult::Outcome::kOutOfMemory;
  r.oom = testing::make_oom_result().oom;
  const HtmlPage page = replay_html_page(g, r, options());
  ASSERT_EQ(page.notes.size(), 1u);
  EXPECT_THAT(page.notes[0], HasSubstr("out of memory"));
}

TEST(SearchHtml, ScatterMarksTheFrontAndOutOfMemory) {
  HtmlPage page;
  page.title = "prism search: job";
  page.capacity = Bytes{80 * testing::kGiB};
  page.points = {point(100, 10 * testing::kGiB), point(150, 20 * testing::kGiB),
                 point(90, 15 * testing::kGiB), point(0, 90 * testing::kGiB, true)};
  page.points[0].label = "tp=<8>";
  const std::string html = format_html_page(page);
  EXPECT_EQ(html, format_html_page(page));
  EXPECT_THAT(html, HasSubstr("<section id=\"search\">"));
  EXPECT_THAT(html, Not(HasSubstr("<section id=\"timeline\">")));
  EXPECT_THAT(html, HasSubstr("<polyline class=\"front\""));
  EXPECT_THAT(html, HasSubstr("class=\"oom\""));
  EXPECT_THAT(html, HasSubstr("tp=&lt;8&gt;"));
  // Two configurations on the front, two rows in its table.
  std::size_t rows = 0;
  for (std::size_t at = 0;
       (at = html.find("<circle class=\"front-point\"", at)) != std::string::npos; ++at)
    ++rows;
  EXPECT_EQ(rows, 2u);
}

}  // namespace
}  // namespace prism
