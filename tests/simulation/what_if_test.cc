// What-if perturbations (simulation/what_if.h): --straggler and --jitter
// parsed (every rejection names its option), applied to a replay, compared
// with the unperturbed run; folding stays exact; jitter is deterministic;
// a perturbation never makes the iteration faster, and a straggler on a
// compute-bound path slows it by exactly its factor.
#include "simulation/what_if.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "graph/graph_json.h"
#include "graph/role_builder.h"
#include "simulation/memory_settings.h"
#include "simulation/simulation.h"
#include "what_if_graphs.h"

namespace prism {
namespace {

using ::testing::HasSubstr;

const std::string kJob = PRISM_SOURCE_DIR "/tests/cli/data/job_small.yaml";

std::string straggler_error(std::string_view text, int world = 8) {
  Result<Straggler> s = parse_straggler(text, world);
  EXPECT_FALSE(s.is_ok()) << text;
  return s.is_ok() ? "" : s.status().message();
}

std::string jitter_error(std::string_view text) {
  Result<Jitter> j = parse_jitter(text);
  EXPECT_FALSE(j.is_ok()) << text;
  return j.is_ok() ? "" : j.status().message();
}

TEST(WhatIfTest, StragglersParse) {
  Result<Straggler> s = parse_straggler("0,5-7:1.5", 8);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_EQ(s.value().ranks, (std::vector<Rank>{0, 5, 6, 7}));
  EXPECT_EQ(s.value().factor, 1.5);
  s = parse_straggler("3:0.5", 4);  // faster is a what-if too
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(s.value().factor, 0.5);
  WhatIf w;
  w.stragglers = {parse_straggler("0,5-7:1.5", 8).value(), parse_straggler("2:2", 8).value()};
  w.jitter = parse_jitter("2.5").value();
  EXPECT_EQ(w.describe(), "--straggler 0,5-7:1.5 --straggler 2:2 --jitter 2.5:1");
  EXPECT_FALSE(w.empty());
  EXPECT_TRUE(WhatIf{}.empty());
}

TEST(WhatIfTest, EveryBadStragglerIsRefusedNamingTheOption) {
  EXPECT_EQ(straggler_error("5"), "--straggler 5: expected RANKS:FACTOR, e.g. 5:1.5 or 0,4-7:2");
  EXPECT_EQ(straggler_error("5:x"), "--straggler 5:x: the factor \"x\" is not a number");
  EXPECT_EQ(straggler_error("5:"), "--straggler 5:: the factor \"\" is not a number");
  EXPECT_EQ(straggler_error("5:1.5x"), "--straggler 5:1.5x: the factor \"1.5x\" is not a number");
  EXPECT_EQ(straggler_error("5:inf"), "--straggler 5:inf: the factor \"inf\" is not a number");
  EXPECT_EQ(straggler_error("5:nan"), "--straggler 5:nan: the factor \"nan\" is not a number");
  EXPECT_EQ(straggler_error("5:0"),
            "--straggler 5:0: the factor must be > 0 and at most 1000 (got 0)");
  EXPECT_EQ(straggler_error("5:-1"),
            "--straggler 5:-1: the factor must be > 0 and at most 1000 (got -1)");
  EXPECT_EQ(straggler_error("5:1001"),
            "--straggler 5:1001: the factor must be > 0 and at most 1000 (got 1001)");
  EXPECT_EQ(straggler_error("8:2"), "--straggler 8:2: rank 8 is outside [0, 8)");
  EXPECT_EQ(straggler_error("0-9:2"), "--straggler 0-9:2: rank 9 is outside [0, 8)");
  EXPECT_EQ(straggler_error(":2"), "--straggler :2: empty rank list");
  EXPECT_THAT(straggler_error("5-3:2"), HasSubstr("--straggler 5-3:2: "));
  EXPECT_THAT(straggler_error("a:2"), HasSubstr("--straggler a:2: \"a\" is not a rank"));
}

TEST(WhatIfTest, JitterParses) {
  Result<Jitter> j = parse_jitter("5");
  ASSERT_TRUE(j.is_ok());
  EXPECT_EQ(j.value().pct, 5);
  EXPECT_EQ(j.value().seed, Jitter::kDefaultSeed);
  j = parse_jitter("0.5:18446744073709551615");
  ASSERT_TRUE(j.is_ok());
  EXPECT_EQ(j.value().pct, 0.5);
  EXPECT_EQ(j.value().seed, 18446744073709551615ULL);
  EXPECT_EQ(jitter_ppm(j.value()), 5000);
  EXPECT_TRUE(parse_jitter("0").is_ok());
}

TEST(WhatIfTest, EveryBadJitterIsRefusedNamingTheOption) {
  EXPECT_EQ(jitter_error(""),
            "--jitter : \"\" is not a percentage (expected PCT[:SEED], e.g. 5:42)");
  EXPECT_EQ(jitter_error("abc"),
            "--jitter abc: \"abc\" is not a percentage (expected PCT[:SEED], e.g. 5:42)");
  EXPECT_EQ(jitter_error("5%"),
            "--jitter 5%: \"5%\" is not a percentage (expected PCT[:SEED], e.g. 5:42)");
  EXPECT_EQ(jitter_error("100"), "--jitter 100: PCT must be in [0, 100) (got 100)");
  EXPECT_EQ(jitter_error("-1"), "--jitter -1: PCT must be in [0, 100) (got -1)");
  EXPECT_EQ(jitter_error("5:"), "--jitter 5:: the seed \"\" is not an integer in [0, 2^64)");
  EXPECT_EQ(jitter_error("5:x"), "--jitter 5:x: the seed \"x\" is not an integer in [0, 2^64)");
  EXPECT_EQ(jitter_error("5:-3"), "--jitter 5:-3: the seed \"-3\" is not an integer in [0, 2^64)");
  EXPECT_EQ(jitter_error("5:1.5"),
            "--jitter 5:1.5: the seed \"1.5\" is not an integer in [0, 2^64)");
  EXPECT_EQ(jitter_error("5:18446744073709551616"),
            "--jitter 5:18446744073709551616: the seed \"18446744073709551616\" is not an integer "
            "in [0, 2^64)");
  EXPECT_EQ(jitter_error("5:1:2"),
            "--jitter 5:1:2: the seed \"1:2\" is not an integer in [0, 2^64)");
}

// One rank, one stream of compute: the iteration is the sum of the ops.
ExecutionGraph single_rank() {
  RoleBuilder b("solo", {"compute"});
  for (int i = 0; i < 10; ++i) b.compute(0, SimTime{1000 + 400 * i});
  return testing::make_graph({{"rank", 1}}, 1, {}, {std::move(b).build()}, {0});
}

// Four ranks on one node: compute, then an all-reduce over all of them.
ExecutionGraph compute_then_allreduce() {
  return testing::compute_then_allreduce(4);
}

using testing::gpt;

ReplayResult simulate(const ExecutionGraph& g, const WhatIf& w, bool fold = true,
                      std::vector<Rank> trace = {}) {
  Result<ClusterSpec> cluster = graph_cluster(g, std::nullopt, "test");
  EXPECT_TRUE(cluster.is_ok()) << cluster.status().message();
  SimulationOptions o;
  o.fold = fold;
  o.what_if = w;
  o.trace_ranks = std::move(trace);
  Result<ReplayResult> r = simulate_graph(g, cluster.value(), o);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r.value().outcome, ReplayResult::Outcome::kCompleted);
  return std::move(r).value();
}

WhatIf stragglers(std::string_view text, int world) {
  WhatIf w;
  w.stragglers.push_back(parse_straggler(text, world).value());
  return w;
}

WhatIf jitter(std::string_view text) {
  WhatIf w;
  w.jitter = parse_jitter(text).value();
  return w;
}

TEST(WhatIfTest, TheResultComparesWithTheUnperturbedRun) {
  const ExecutionGraph g = gpt();
  const ReplayResult plain = simulate(g, {});
  EXPECT_FALSE(plain.what_if);
  const ReplayResult r = simulate(g, stragglers("5:1.5", 8));
  ASSERT_TRUE(r.what_if);
  EXPECT_EQ(r.what_if->options, "--straggler 5:1.5");
  EXPECT_TRUE(r.what_if->unperturbed_completed);
  EXPECT_EQ(r.what_if->unperturbed, plain.iteration_time);
  EXPECT_GT(r.iteration_time, plain.iteration_time);
}

TEST(WhatIfTest, AStragglerOnAComputeBoundPathSlowsItByExactlyItsFactor) {
  const ExecutionGraph g = single_rank();
  const ReplayResult plain = simulate(g, {});
  ASSERT_EQ(plain.iteration_time.ns, 28000);
  for (double factor : {1.0, 1.25, 1.5, 2.0, 3.0, 0.5}) {
    WhatIf w;
    w.stragglers.push_back(Straggler{{0}, factor});
    const ReplayResult r = simulate(g, w);
    EXPECT_EQ(r.iteration_time.ns, static_cast<std::int64_t>(28000 * factor)) << factor;
  }
  // Behind an all-reduce: the straggler arrives (factor - 1) x its compute
  // later, and the collective, the same once all have arrived, ends that
  // much later.
  const ExecutionGraph ar = compute_then_allreduce();
  const ReplayResult base = simulate(ar, {});
  for (double factor : {1.25, 1.5, 2.0}) {
    const ReplayResult r = simulate(ar, stragglers(fmt::format("2:{}", factor), 4));
    EXPECT_EQ(r.iteration_time.ns - base.iteration_time.ns,
              static_cast<std::int64_t>(12000 * (factor - 1)))
        << factor;
  }
}

TEST(WhatIfTest, TheTraceShowsThePerturbedRun) {
  const ExecutionGraph g = single_rank();
  const ReplayResult plain = simulate(g, {}, true, {0});
  WhatIf w;
  w.stragglers.push_back(Straggler{{0}, 1.5});
  const ReplayResult slow = simulate(g, w, true, {0});
  const ReplayResult jittered = simulate(g, jitter("20:9"), true, {0});
  ASSERT_EQ(plain.trace.size(), 10u);
  ASSERT_EQ(slow.trace.size(), 10u);
  ASSERT_EQ(jittered.trace.size(), 10u);
  int longer = 0;
  for (std::size_t i = 0; i < plain.trace.size(); ++i) {
    const std::int64_t d = (plain.trace[i].end - plain.trace[i].start).ns;
    EXPECT_EQ((slow.trace[i].end - slow.trace[i].start).ns, d * 3 / 2);
    const std::int64_t j = (jittered.trace[i].end - jittered.trace[i].start).ns;
    EXPECT_GE(j, d);
    EXPECT_LE(j, d * 6 / 5);
    longer += j > d;
  }
  EXPECT_GE(longer, 8);  // the factors differ from op to op
}

TEST(WhatIfTest, AStragglerKeepsFoldingExact) {
  const ExecutionGraph g = gpt();
  for (const char* s : {"5:1.5", "0:2", "0-3:1.1", "7:1.01"}) {
    const ReplayResult folded = simulate(g, stragglers(s, 8), true, {0, 5});
    const ReplayResult unfolded = simulate(g, stragglers(s, 8), false, {0, 5});
    EXPECT_TRUE(folded.folded);
    EXPECT_FALSE(unfolded.folded);
    testing::expect_same_replay(folded, unfolded, s);
  }
}

TEST(WhatIfTest, AStragglersClassIsItsOwnAndOthersStillFold) {
  // The job's 16 ranks fold into a few classes; a straggler splits its own
  // and its partners' classes, and the replay still equals the unfolded one.
  JobInput input;
  input.job_path = kJob;
  input.no_kernel_db = true;
  const PreparedJob p = prepare_job(input).value();
  SimulationOptions o;
  o.models.device = MemorySettings{}.device(p.gpu.name).value();
  const JobSimulation plain = simulate_job(p, o).value();
  o.what_if = stragglers("3:1.5", 16);
  const JobSimulation folded = simulate_job(p, o).value();
  o.fold = false;
  const JobSimulation unfolded = simulate_job(p, o).value();
  EXPECT_GT(folded.replay.simulated_ranks, plain.replay.simulated_ranks);
  EXPECT_LT(folded.replay.simulated_ranks, 16);
  EXPECT_EQ(unfolded.replay.simulated_ranks, 16);
  EXPECT_EQ(folded.summary.iteration_time, unfolded.summary.iteration_time);
  ASSERT_TRUE(folded.summary.what_if);
  EXPECT_EQ(folded.summary.what_if->unperturbed, plain.summary.iteration_time);
  EXPECT_EQ(folded.summary.what_if->perturbed, folded.summary.iteration_time);
  EXPECT_GE(folded.summary.iteration_time, plain.summary.iteration_time);
}

TEST(WhatIfTest, JitterIsDeterministicAndSeeded) {
  const ExecutionGraph g = gpt();
  const ReplayResult a = simulate(g, jitter("10:7"), true, {0, 3});
  const ReplayResult b = simulate(g, jitter("10:7"), true, {0, 3});
  const ReplayResult c = simulate(g, jitter("10:8"), true, {0, 3});
  EXPECT_FALSE(a.folded);  // every rank differs: jitter does not fold
  EXPECT_EQ(a.simulated_ranks, 8);
  ASSERT_EQ(a.trace.size(), b.trace.size());
  for (std::size_t i = 0; i < a.trace.size(); ++i) {
    EXPECT_EQ(a.trace[i].start, b.trace[i].start);
    EXPECT_EQ(a.trace[i].end, b.trace[i].end);
  }
  EXPECT_EQ(a.iteration_time, b.iteration_time);
  EXPECT_NE(a.iteration_time, c.iteration_time);
  // Asking for folding or not makes no difference.
  EXPECT_EQ(simulate(g, jitter("10:7"), false).iteration_time, a.iteration_time);
  // Zero jitter is no perturbation, and folds.
  const ReplayResult zero = simulate(g, jitter("0"));
  EXPECT_TRUE(zero.folded);
  EXPECT_EQ(zero.iteration_time, zero.what_if->unperturbed);
}

TEST(WhatIfTest, JitterStaysWithinItsBound) {
  const ExecutionGraph g = single_rank();  // 28000 ns in 10 ops
  for (const char* j : {"1", "10:3", "50:99", "99.9:5"}) {
    const Jitter parsed = parse_jitter(j).value();
    const ReplayResult r = simulate(g, jitter(j));
    EXPECT_GE(r.iteration_time.ns, 28000) << j;
    EXPECT_LE(r.iteration_time.ns, static_cast<std::int64_t>(28000 * (1 + parsed.pct / 100)) + 10)
        << j;  // + rounding, 1 ns per op
  }
}

// The property: a straggler factor >= 1 or any jitter never makes the
// iteration faster than the unperturbed run.
TEST(WhatIfTest, APerturbationNeverMakesTheIterationFaster) {
  const std::vector<ExecutionGraph> graphs = {single_rank(), compute_then_allreduce(), gpt()};
  for (const ExecutionGraph& g : graphs) {
    const int world = g.world_size();
    std::vector<WhatIf> cases;
    for (Rank r = 0; r < world; ++r)
      for (double f : {1.0, 1.001, 1.3, 4.0}) {
        WhatIf w;
        w.stragglers.push_back(Straggler{{r}, f});
        cases.push_back(w);
      }
    for (const char* j : {"0.1:1", "5:2", "30:3", "90:4"}) cases.push_back(jitter(j));
    WhatIf both = jitter("20:5");
    both.stragglers.push_back(Straggler{{world - 1}, 1.7});
    cases.push_back(both);
    for (const WhatIf& w : cases) {
      const ReplayResult r = simulate(g, w);
      ASSERT_TRUE(r.what_if);
      EXPECT_GE(r.iteration_time, r.what_if->unperturbed) << g.name << " " << w.describe();
    }
  }
}

TEST(WhatIfTest, StragglersMultiplyIntoTheGraphsOverrides) {
  ExecutionGraph g = single_rank();
  g.overrides = {RankOverride{0, 2'000'000}};
  Result<ExecutionGraph> out = apply_stragglers(g, {Straggler{{0}, 1.5}, Straggler{{0}, 2}});
  ASSERT_TRUE(out.is_ok());
  ASSERT_EQ(out.value().overrides.size(), 1u);
  EXPECT_EQ(out.value().overrides[0].compute_scale_ppm, 6'000'000);
  Result<ExecutionGraph> too_slow = apply_stragglers(g, {Straggler{{0}, 600}});
  ASSERT_FALSE(too_slow.is_ok());
  EXPECT_EQ(too_slow.status().message(),
            "--straggler: rank 0 would compute 1200 times as long (with the graph's own scale): "
            "must be > 0 and at most 1000");
}

TEST(WhatIfTest, TheComparisonSaysWhichRunDidNotComplete) {
  WhatIfComparison w{"--jitter 5:1", SimTime{2'100'000}, SimTime{2'000'000}};
  EXPECT_EQ(what_if_text(w), "--jitter 5:1: iteration 2.100 ms vs 2.000 ms unperturbed (+5.00%)");
  EXPECT_EQ(what_if_json(w).dump(),
            R"({"options":"--jitter 5:1","iteration_time_s":0.0021,)"
            R"("unperturbed_iteration_time_s":0.002,"delta_s":0.0001,"delta_pct":5.0})");
  w.perturbed.reset();
  EXPECT_EQ(what_if_text(w), "--jitter 5:1: iteration did not complete vs 2.000 ms unperturbed");
  EXPECT_EQ(what_if_json(w).dump(),
            R"({"options":"--jitter 5:1","iteration_time_s":null,)"
            R"("unperturbed_iteration_time_s":0.002,"delta_s":null,"delta_pct":null})");
  w.perturbed = SimTime{2'100'000};
  w.unperturbed.reset();
  EXPECT_EQ(what_if_text(w),
            "--jitter 5:1: iteration 2.100 ms vs an unperturbed run that did not complete");
}

}  // namespace
}  // namespace prism
