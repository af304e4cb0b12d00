// A search run end to end on the small job: every valid configuration
// simulated, ranked, the same whatever the thread count; OOM configurations
// with the memory they need; the three outputs.
#include "planning/search.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "planning/search_report.h"
#include "simulation/memory_settings.h"

namespace prism {
namespace {

using ::testing::HasSubstr;

PreparedJob small_job() {
  JobInput input;
  input.job_path = PRISM_SOURCE_DIR "/tests/cli/data/job_small.yaml";
  input.no_kernel_db = true;
  Result<PreparedJob> p = read_job(input);
  EXPECT_TRUE(p.is_ok()) << p.status().message();
  return std::move(p).value();
}

SearchSpace space_of(const PreparedJob& p, SearchAxesText t) {
  Result<SearchAxes> a = search_axes(t, p.job);
  EXPECT_TRUE(a.is_ok()) << a.status().message();
  Result<SearchSpace> s = enumerate_space(a.value(), p.job);
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  return std::move(s).value();
}

SearchOptions options(const PreparedJob& p, int jobs, std::optional<double> fraction = {}) {
  MemorySettings m;
  m.memory_fraction = fraction;
  SearchOptions o;
  o.device = m.device(p.gpu.name).value();
  o.jobs = jobs;
  return o;
}

SearchAxesText some_axes() {
  SearchAxesText t;
  t.tp = "1,2,4";
  t.pp = "1,2,4";
  t.vpp = "1,2";
  t.cp = "1,2";
  t.mbs = "1,2";
  t.recompute = "none,full";
  return t;
}

TEST(SearchTest, RanksEveryValidConfigurationByIterationTime) {
  const PreparedJob p = small_job();
  SearchSpace space = space_of(p, some_axes());
  const std::size_t valid = space.valid.size();
  std::int64_t calls = 0, last = 0;
  SearchOptions o = options(p, 2);
  o.on_progress = [&](std::int64_t done, std::int64_t total) {
    ++calls;
    EXPECT_EQ(total, static_cast<std::int64_t>(valid));
    EXPECT_GT(done, last);
    last = done;
  };
  Result<SearchOutput> out = run_search(p, std::move(space), o);
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  EXPECT_EQ(calls, static_cast<std::int64_t>(valid));
  const SearchOutput& s = out.value();
  ASSERT_EQ(s.ranked.size(), valid);
  EXPECT_EQ(s.fits, static_cast<std::int64_t>(valid));
  EXPECT_EQ(s.oom, 0);
  for (std::size_t i = 1; i < s.ranked.size(); ++i)
    EXPECT_LE(s.ranked[i - 1].iteration_time, s.ranked[i].iteration_time) << i;
  for (const SearchResult& r : s.ranked) {
    EXPECT_GT(r.tokens_per_s_per_gpu, 0);
    EXPECT_GT(r.mfu, 0);
    EXPECT_EQ(static_cast<int>(r.stages.size()), r.config.pp);
    // The busiest stage's breakdown covers its whole iteration.
    EXPECT_EQ((r.compute + r.comm + r.bubble).ns, r.iteration_time.ns);
    // tokens/s per GPU from the iteration: 16 sequences of 2048 on 16 GPUs.
    EXPECT_NEAR(r.tokens_per_s_per_gpu, 16.0 * 2048 / r.iteration_time.seconds() / 16, 1e-6);
  }
}

TEST(SearchTest, TheThreadCountChangesNothing) {
  const PreparedJob p = small_job();
  Result<SearchOutput> one = run_search(p, space_of(p, some_axes()), options(p, 1));
  Result<SearchOutput> three = run_search(p, space_of(p, some_axes()), options(p, 3));
  ASSERT_TRUE(one.is_ok() && three.is_ok());
  EXPECT_EQ(format_search_csv(one.value()), format_search_csv(three.value()));
  EXPECT_EQ(format_search_json(p, one.value()), format_search_json(p, three.value()));
  EXPECT_EQ(format_search_text(p, one.value(), 5), format_search_text(p, three.value(), 5));
  EXPECT_EQ(format_search_html(p, one.value(), 5), format_search_html(p, three.value(), 5));
}

TEST(SearchTest, AConfigurationThatDoesNotFitReportsWhatItNeeds) {
  const PreparedJob p = small_job();
  SearchAxesText t = some_axes();
  // 0.8% of 80 GB for the allocator: some configurations fit, some not.
  Result<SearchOutput> out = run_search(p, space_of(p, t), options(p, 2, 0.008));
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  const SearchOutput& s = out.value();
  ASSERT_GT(s.oom, 0);
  ASSERT_GT(s.fits, 0);
  const Bytes limit{static_cast<std::int64_t>(0.008 * s.capacity.count)};
  for (std::size_t i = 0; i < s.ranked.size(); ++i) {
    const SearchResult& r = s.ranked[i];
    EXPECT_EQ(r.oom, i >= static_cast<std::size_t>(s.fits)) << i;  // fits first
    if (!r.oom) continue;
    EXPECT_THAT(r.oom_at, HasSubstr("GiB requested"));
    EXPECT_EQ(static_cast<int>(r.stages.size()), r.config.pp);
    // It needs more than the allocator may take (context and NCCL aside).
    EXPECT_GT(r.peak.count, limit.count) << to_string(r.config);
    if (i > static_cast<std::size_t>(s.fits)) EXPECT_LE(s.ranked[i - 1].peak, r.peak);
  }
  const std::string json = format_search_json(p, s);
  EXPECT_THAT(json, HasSubstr("\"outcome\": \"out_of_memory\""));
  EXPECT_THAT(json, HasSubstr("\"required_bytes\""));
  EXPECT_THAT(format_search_csv(s), HasSubstr(",oom,"));
  // The page: every configuration a point, out-of-memory ones as crosses,
  // the front marked.
  const std::string html = format_search_html(p, s, 5);
  auto count = [&](const std::string& what) {
    std::size_t n = 0;
    for (std::size_t at = html.find(what); at != std::string::npos; at = html.find(what, at + 1))
      ++n;
    return static_cast<std::int64_t>(n);
  };
  const std::int64_t front = count("<circle class=\"front-point\"");
  EXPECT_GT(front, 0);
  EXPECT_EQ(count("<circle class=\"point\"") + front, s.fits);
  EXPECT_EQ(count("<path class=\"oom\""), s.oom);
  EXPECT_EQ(count("Pareto front #"), front);
}

TEST(SearchTest, NothingFittingIsAResultNotAnError) {
  const PreparedJob p = small_job();
  SearchAxesText t;
  t.tp = "2";
  t.pp = "2";
  t.vpp = "1";
  t.cp = "1";
  t.mbs = "1";
  t.recompute = "none";
  Result<SearchOutput> out = run_search(p, space_of(p, t), options(p, 1, 0.001));
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  EXPECT_EQ(out.value().fits, 0);
  EXPECT_EQ(out.value().oom, 1);
  EXPECT_THAT(format_search_text(p, out.value(), 10), HasSubstr("no configuration fits"));
}

}  // namespace
}  // namespace prism
