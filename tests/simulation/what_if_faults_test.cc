// What-ifs on the network and on faults (simulation/what_if.h):
// --link-degrade slows the parts of the network it names, never speeds the
// iteration up, and keeps folding exact; --fail-node hangs the job as NCCL
// would, naming the blocked collectives, the waiting ranks, the hang and
// the watchdog; every bad input is one error naming its option.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "graph/graph_json.h"
#include "graph/role_builder.h"
#include "net/cluster_yaml.h"
#include "report/summary.h"
#include "simulation/memory_settings.h"
#include "simulation/simulation.h"
#include "simulation/what_if.h"
#include "what_if_graphs.h"

namespace prism {
namespace {

using ::testing::HasSubstr;

const std::string kJob = PRISM_SOURCE_DIR "/tests/cli/data/job_small.yaml";

using testing::gpt;

// Four ranks on two nodes of two GPUs: compute, then an all-reduce over all of them.
ExecutionGraph compute_then_allreduce() {
  return testing::compute_then_allreduce(2);
}

ClusterSpec cluster_of(const ExecutionGraph& g, const char* preset = nullptr) {
  Result<ClusterSpec> c =
      graph_cluster(g, preset ? std::optional<std::string>(preset) : std::nullopt, "test");
  EXPECT_TRUE(c.is_ok()) << c.status().message();
  return c.value();
}

Result<ReplayResult> run(const ExecutionGraph& g, const WhatIf& w, bool fold = true,
                         std::vector<Rank> trace = {}) {
  SimulationOptions o;
  o.fold = fold;
  o.what_if = w;
  o.trace_ranks = std::move(trace);
  return simulate_graph(g, cluster_of(g), o);
}

WhatIf links(std::initializer_list<const char*> texts) {
  WhatIf w;
  for (const char* t : texts) {
    Result<LinkDegradation> d = parse_link_degrade(t);
    EXPECT_TRUE(d.is_ok()) << d.status().message();
    w.links.push_back(d.value());
  }
  return w;
}

WhatIf failure(const char* text) {
  WhatIf w;
  Result<NodeFailure> f = parse_fail_node(text);
  EXPECT_TRUE(f.is_ok()) << f.status().message();
  w.failure = f.value();
  return w;
}

std::string parse_error(Status s) {
  EXPECT_FALSE(s.is_ok());
  return s.message();
}
template <typename T>
std::string parse_error(const Result<T>& r) {
  EXPECT_FALSE(r.is_ok());
  return r.is_ok() ? "" : r.status().message();
}

TEST(WhatIfFaultsTest, LinkDegradationsParse) {
  const LinkDegradation d = parse_link_degrade("node:1:2.5").value();
  EXPECT_EQ(d.part, LinkDegradation::Part::kNode);
  EXPECT_EQ(d.index, 1);
  EXPECT_EQ(d.factor, 2.5);
  EXPECT_EQ(parse_link_degrade("rail:3:1").value().part, LinkDegradation::Part::kRail);
  EXPECT_EQ(parse_link_degrade("leaf:0:4").value().part, LinkDegradation::Part::kLeaf);
  EXPECT_EQ(parse_link_degrade("nvlink:7:1000").value().part, LinkDegradation::Part::kNvlink);
  EXPECT_EQ(links({"node:1:2", "nvlink:0:3"}).describe(),
            "--link-degrade node:1:2 --link-degrade nvlink:0:3");
}

TEST(WhatIfFaultsTest, AnUnknownLinkPartIsRefused) {
  EXPECT_EQ(
      parse_error(parse_link_degrade("spine:1:2")),
      "--link-degrade spine:1:2: unknown part \"spine\": expected node, rail, leaf or nvlink");
}

TEST(WhatIfFaultsTest, ALinkDegradeWithoutAnIndexIsRefused) {
  EXPECT_EQ(parse_error(parse_link_degrade("node:2")),
            "--link-degrade node:2: expected WHAT:FACTOR with WHAT one of node:N, rail:R, leaf:L, "
            "nvlink:N, e.g. node:1:2");
  EXPECT_EQ(parse_error(parse_link_degrade("node:x:2")),
            "--link-degrade node:x:2: the node \"x\" is not an index (an integer >= 0)");
  EXPECT_EQ(parse_error(parse_link_degrade("rail:-1:2")),
            "--link-degrade rail:-1:2: the rail \"-1\" is not an index (an integer >= 0)");
}

TEST(WhatIfFaultsTest, ALinkDegradeFactorBelowOneOrNotANumberIsRefused) {
  EXPECT_EQ(parse_error(parse_link_degrade("node:1:0.5")),
            "--link-degrade node:1:0.5: the factor must be at least 1 (the bandwidth is divided "
            "by it) and at most 1000 (got 0.5)");
  EXPECT_EQ(parse_error(parse_link_degrade("node:1:fast")),
            "--link-degrade node:1:fast: the factor \"fast\" is not a number");
}

TEST(WhatIfFaultsTest, ALinkThatDoesNotExistIsRefusedWithTheValidRange) {
  const ClusterSpec c = cluster_of(gpt());  // 2 nodes of 4 GPUs, 4 NICs each
  EXPECT_EQ(parse_error(check_link_degradations(links({"node:2:2"}).links, c)),
            "--link-degrade node:2:2: node 2 does not exist: the cluster dgx-h100 has nodes 0-1");
  EXPECT_EQ(parse_error(check_link_degradations(links({"rail:4:2"}).links, c)),
            "--link-degrade rail:4:2: rail 4 does not exist: the cluster dgx-h100 has rails 0-3");
  EXPECT_EQ(parse_error(check_link_degradations(links({"nvlink:9:2"}).links, c)),
            "--link-degrade nvlink:9:2: nvlink 9 does not exist: the cluster dgx-h100 has nodes "
            "0-1");
  EXPECT_EQ(parse_error(check_link_degradations(links({"leaf:4:2"}).links, c)),
            "--link-degrade leaf:4:2: leaf 4 does not exist: the cluster dgx-h100 has leaves 0-3");
  // The replay refuses it too, before replaying anything.
  EXPECT_EQ(parse_error(run(gpt(), links({"node:2:2"}))),
            "--link-degrade node:2:2: node 2 does not exist: the cluster dgx-h100 has nodes 0-1");
  ClusterSpec one_switch = c;
  one_switch.fabric_tiers = 1;
  EXPECT_EQ(parse_error(check_link_degradations(links({"leaf:0:2"}).links, one_switch)),
            "--link-degrade leaf:0:2: the cluster dgx-h100 has no leaf switches (its fabric is a "
            "single switch)");
}

TEST(WhatIfFaultsTest, ADegradedNicSlowsTheTrafficThatCrossesIt) {
  // gpt: stage 0 on node 0, stage 1 on node 1; the pipeline's sends cross
  // both nodes' NICs, the tp and dp collectives stay on NVLink.
  const ExecutionGraph g = gpt();
  const ReplayResult plain = run(g, {}).value();
  const ReplayResult nic = run(g, links({"node:1:8"})).value();
  EXPECT_GT(nic.iteration_time, plain.iteration_time);
  EXPECT_EQ(nic.what_if->unperturbed, plain.iteration_time);
  EXPECT_EQ(nic.what_if->options, "--link-degrade node:1:8");
  // A worse degradation is never faster.
  EXPECT_GE(run(g, links({"node:1:16"})).value().iteration_time, nic.iteration_time);
  // The all-reduce of four ranks on two nodes crosses the NICs too.
  const ExecutionGraph ar = compute_then_allreduce();
  EXPECT_GT(run(ar, links({"node:0:4"})).value().iteration_time,
            run(ar, {}).value().iteration_time);
  // NVLink only carries intra-node traffic: degrading it slows gpt's tp.
  EXPECT_GT(run(g, links({"nvlink:0:8"})).value().iteration_time, plain.iteration_time);
}

// The property: a degraded part (factor >= 1) never makes the iteration faster.
TEST(WhatIfFaultsTest, ADegradedLinkNeverMakesTheIterationFaster) {
  for (const ExecutionGraph& g : {gpt(), compute_then_allreduce()}) {
    for (const char* d : {"node:0:1", "node:0:1.5", "node:1:3", "rail:0:2", "rail:1:10",
                          "nvlink:0:2", "nvlink:1:50", "leaf:0:4", "leaf:1:2"}) {
      Result<ReplayResult> r = run(g, links({d}));
      ASSERT_TRUE(r.is_ok()) << r.status().message();
      EXPECT_GE(r.value().iteration_time, r.value().what_if->unperturbed) << g.name << " " << d;
    }
    const ReplayResult all = run(g, links({"node:0:2", "rail:1:2", "nvlink:1:2"})).value();
    EXPECT_GE(all.iteration_time, all.what_if->unperturbed) << g.name;
  }
}

TEST(WhatIfFaultsTest, ADegradedLinkKeepsFoldingExact) {
  const ExecutionGraph g = gpt();
  for (const char* d : {"node:1:4", "rail:0:3", "nvlink:0:2", "leaf:1:8"}) {
    const ReplayResult folded = run(g, links({d}), true, {0, 5}).value();
    const ReplayResult unfolded = run(g, links({d}), false, {0, 5}).value();
    testing::expect_same_replay(folded, unfolded, d);
  }
  // The job's 16 ranks fold into a few classes; node 1's ranks and their
  // partners split, and the replay still equals the unfolded one.
  JobInput input;
  input.job_path = kJob;
  input.no_kernel_db = true;
  const PreparedJob p = prepare_job(input).value();
  SimulationOptions o;
  o.models.device = MemorySettings{}.device(p.gpu.name).value();
  const JobSimulation plain = simulate_job(p, o).value();
  o.what_if = links({"rail:2:4"});
  const JobSimulation folded = simulate_job(p, o).value();
  o.fold = false;
  const JobSimulation unfolded = simulate_job(p, o).value();
  EXPECT_TRUE(folded.replay.folded);
  EXPECT_GT(folded.replay.simulated_ranks, plain.replay.simulated_ranks);
  EXPECT_LT(folded.replay.simulated_ranks, 16);
  EXPECT_EQ(folded.summary.iteration_time, unfolded.summary.iteration_time);
  EXPECT_GT(folded.summary.iteration_time, plain.summary.iteration_time);
}

TEST(WhatIfFaultsTest, DurationsParse) {
  EXPECT_EQ(parse_duration("1.5s").value().ns, 1'500'000'000);
  EXPECT_EQ(parse_duration("200ms").value().ns, 200'000'000);
  EXPECT_EQ(parse_duration("3us").value().ns, 3'000);
  EXPECT_EQ(parse_duration("250000").value().ns, 250'000);
  EXPECT_EQ(parse_duration("7ns").value().ns, 7);
  EXPECT_EQ(parse_duration("10min").value().ns, 600'000'000'000);
  EXPECT_EQ(format_duration(SimTime{600'000'000'000}), "10min");
  EXPECT_EQ(format_duration(SimTime{1'500'000'000}), "1500ms");
  EXPECT_EQ(format_duration(SimTime{7}), "7ns");
  EXPECT_EQ(format_duration(SimTime{0}), "0ns");
  const NodeFailure f = parse_fail_node("3@12ms").value();
  EXPECT_EQ(f.node, 3);
  EXPECT_EQ(f.at.ns, 12'000'000);
  EXPECT_EQ(describe(f), "--fail-node 3@12ms");
  EXPECT_EQ(parse_nccl_timeout("30s").value().ns, 30'000'000'000);
  EXPECT_EQ(kDefaultNcclTimeout.ns, 600'000'000'000);  // torch's default_pg_nccl_timeout
}

TEST(WhatIfFaultsTest, AMalformedFailNodeIsRefused) {
  EXPECT_EQ(parse_error(parse_fail_node("1")),
            "--fail-node 1: expected N@TIME, e.g. 1@1.5s or 3@200ms");
  EXPECT_EQ(parse_error(parse_fail_node("x@1s")),
            "--fail-node x@1s: the node \"x\" is not an index (an integer >= 0)");
  EXPECT_EQ(parse_error(parse_fail_node("1@soon")),
            "--fail-node 1@soon: \"soon\" is not a duration (a number with ns, us, ms, s or min, "
            "or integer nanoseconds)");
  EXPECT_EQ(parse_error(parse_fail_node("1@1.5")),
            "--fail-node 1@1.5: \"1.5\" is not a duration (a number with ns, us, ms, s or min, "
            "or integer nanoseconds)");
  EXPECT_EQ(parse_error(parse_fail_node("1@-2ms")),
            "--fail-node 1@-2ms: \"-2ms\" is outside [0, 2305843009 s]");
}

TEST(WhatIfFaultsTest, ANcclTimeoutOfZeroIsRefused) {
  EXPECT_EQ(parse_error(parse_nccl_timeout("0s")), "--nccl-timeout 0s: must be > 0");
  EXPECT_EQ(parse_error(parse_nccl_timeout("ten")),
            "--nccl-timeout ten: \"ten\" is not a duration (a number with ns, us, ms, s or min, "
            "or integer nanoseconds)");
}

TEST(WhatIfFaultsTest, AFailedNodeThatDoesNotExistIsRefused) {
  EXPECT_EQ(parse_error(run(gpt(), failure("2@1ms"))),
            "--fail-node 2@1ms: node 2 does not exist: the graph has nodes 0-1");
}

TEST(WhatIfFaultsTest, AFailTimeAfterTheIterationIsRefused) {
  EXPECT_EQ(parse_error(run(gpt(), failure("1@1s"))),
            "--fail-node 1@1s: 1.000000 s is after the run ends: the unperturbed replay ends at "
            "0.020876 s (iteration 0.020876 s)");
}

TEST(WhatIfFaultsTest, ANodeThatFailsBeforeACollectiveLeavesItsPeersWaiting) {
  // Node 1 (ranks 2, 3) fails at 5 us, in their second compute op: they
  // never reach the all-reduce; ranks 0 and 1 arrive at 12 us and wait.
  for (bool fold : {true, false}) {
    const ReplayResult r = run(compute_then_allreduce(), failure("1@5us"), fold).value();
    EXPECT_EQ(r.outcome, ReplayResult::Outcome::kDeadlock);
    ASSERT_TRUE(r.failure);
    const NodeFailureReplay& f = *r.failure;
    EXPECT_EQ(f.node, 1);
    EXPECT_EQ(f.ranks, (std::vector<Rank>{2, 3}));
    EXPECT_EQ(f.at.ns, 5000);
    EXPECT_TRUE(f.hung);
    EXPECT_EQ(f.hang_at.ns, 12000);
    ASSERT_EQ(f.blocked.size(), 1u);
    EXPECT_EQ(f.blocked[0].what, "collective all_reduce #0 on 'world': ranks 2, 3 not arrived");
    EXPECT_EQ(f.blocked[0].waiting, (std::vector<Rank>{0, 1}));
    EXPECT_EQ(f.blocked[0].since.ns, 12000);
    EXPECT_EQ(f.other_blocked_streams, 0);
    ASSERT_TRUE(f.watchdog_at);
    EXPECT_EQ(f.watchdog_at->ns, 12000 + kDefaultNcclTimeout.ns);
    EXPECT_EQ(f.watchdog_rank, 0);
    ASSERT_TRUE(r.what_if);
    EXPECT_FALSE(what_if_comparison(r).perturbed);  // did not complete
  }
}

TEST(WhatIfFaultsTest, ANodeThatFailsDuringACollectiveBlocksItsMembersInIt) {
  WhatIf w = failure("0@12001");  // the all-reduce began at 12 us
  w.nccl_timeout = SimTime{30'000'000'000};
  const ReplayResult r = run(compute_then_allreduce(), w, true, {0, 2}).value();
  ASSERT_TRUE(r.failure);
  const NodeFailureReplay& f = *r.failure;
  EXPECT_EQ(f.ranks, (std::vector<Rank>{0, 1}));
  EXPECT_EQ(f.hang_at.ns, 12000);
  ASSERT_EQ(f.blocked.size(), 1u);
  EXPECT_EQ(f.blocked[0].what,
            "collective all_reduce #0 on 'world': ranks 0, 1 failed after arriving");
  EXPECT_EQ(f.blocked[0].waiting, (std::vector<Rank>{2, 3}));
  EXPECT_EQ(f.blocked[0].since.ns, 12000);
  EXPECT_EQ(f.watchdog_at->ns, 12000 + 30'000'000'000);
  EXPECT_EQ(f.watchdog_rank, 2);
  // The failed ranks are listed as such, not as waiting.
  int failed = 0;
  for (const BlockedRank& b : r.blocked) failed += b.failed;
  EXPECT_EQ(failed, 2);
}

TEST(WhatIfFaultsTest, AFailureFoldsExactly) {
  const ExecutionGraph g = gpt();
  for (const char* text : {"1@3ms", "0@10ms", "0@20ms", "1@15ms"}) {
    const ReplayResult folded = run(g, failure(text), true).value();
    const ReplayResult unfolded = run(g, failure(text), false).value();
    ASSERT_TRUE(folded.failure && unfolded.failure) << text;
    EXPECT_EQ(folded.failure->hang_at, unfolded.failure->hang_at) << text;
    ASSERT_EQ(folded.failure->blocked.size(), unfolded.failure->blocked.size()) << text;
    for (std::size_t i = 0; i < folded.failure->blocked.size(); ++i) {
      EXPECT_EQ(folded.failure->blocked[i].what, unfolded.failure->blocked[i].what) << text;
      EXPECT_EQ(folded.failure->blocked[i].waiting, unfolded.failure->blocked[i].waiting) << text;
      EXPECT_EQ(folded.failure->blocked[i].since, unfolded.failure->blocked[i].since) << text;
    }
    EXPECT_EQ(folded.failure->watchdog_at, unfolded.failure->watchdog_at) << text;
    EXPECT_TRUE(folded.failure->hung) << text;
    // At 20 ms only node 0 has work left: nobody waits on it.
    EXPECT_EQ(folded.failure->blocked.empty(), std::string_view(text) == "0@20ms") << text;
  }
}

TEST(WhatIfFaultsTest, AFailureAfterTheNodesWorkDoesNotHang) {
  // Node 1 of gpt is the last pipeline stage: it has finished by 20 ms,
  // and the others complete without it.
  const ReplayResult plain = run(gpt(), {}).value();
  const ReplayResult late = run(gpt(), failure("1@20ms")).value();
  EXPECT_EQ(late.outcome, ReplayResult::Outcome::kCompleted);
  ASSERT_TRUE(late.failure);
  EXPECT_FALSE(late.failure->hung);
  EXPECT_TRUE(late.failure->blocked.empty());
  EXPECT_EQ(late.iteration_time, plain.iteration_time);
  // Node 0 runs to the end: a failure at the last instant stops its last op.
  WhatIf w;
  w.failure = NodeFailure{0, plain.makespan};
  EXPECT_TRUE(run(gpt(), w).value().failure->hung);
}

}  // namespace
}  // namespace prism
