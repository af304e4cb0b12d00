// prism_bench_net: the collective model's speed (docs/benchmarks.md).
//
// 1. Collective-time queries: one million NcclTuner::collective() calls over
//    a mix of operations, sizes (8 B - 8 GiB) and communicator geometries on
//    a DGX H100 cluster. Target: <= 1 s.
// 2. Re-rating: a 16,384-GPU DGX H100 fat tree (3 tiers, 4:1 oversubscribed,
//    so leaf and pod uplinks are shared), 10,000 transfers in flight (send/
//    recv between random GPUs and 8-rank all-reduces), then one more start and
//    the finishes, each timed. Target: <= 10 ms per start or finish event.
// Prints medians over --repeats runs, and pass/fail against the targets.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <random>
#include <vector>

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include "net/cluster_spec.h"
#include "net/flow_network.h"
#include "net/nccl_tuner.h"

namespace prism {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double query_seconds(int queries) {
  ClusterSpec c = *cluster_preset("dgx-h100");
  (void)size_cluster(&c, 0, 2048);
  const NcclTuner tuner(c);
  constexpr CollectiveKind kinds[] = {CollectiveKind::kAllReduce, CollectiveKind::kAllGather,
                                      CollectiveKind::kReduceScatter, CollectiveKind::kAllToAll,
                                      CollectiveKind::kBroadcast};
  const std::array<CommGeometry, 6> geometries{
      {{8, 1, 8}, {64, 8, 8}, {64, 64, 1}, {512, 64, 8}, {2048, 2048, 1}, {16384, 2048, 8}}};
  std::int64_t sink = 0;
  const auto t0 = Clock::now();
  for (int i = 0; i < queries; ++i) {
    const auto cost = tuner.collective(kinds[i % 5], Bytes{std::int64_t{8} << (i % 31)},
                                       geometries[(i / 5) % geometries.size()]);
    sink += cost->time().ns;
  }
  const double s = seconds_since(t0);
  if (sink == 42) fmt::print("");  // keep the loop
  return s;
}

struct RerateRun {
  double start_ms = 0;   // median over the timed starts
  double finish_ms = 0;  // median over the finish events
  int resources = 0;
};

RerateRun rerate(int transfers, std::uint64_t seed) {
  ClusterSpec c = *cluster_preset("dgx-h100");
  c.fabric_tiers = 3;
  c.nodes_per_leaf = 32;
  c.leaves_per_pod = 8;
  c.oversubscription = 4;
  (void)size_cluster(&c, 16384, 0);
  FlowNetwork net(c);
  std::mt19937_64 rng(seed);
  std::vector<std::array<std::int32_t, 2>> pairs(transfers);
  std::vector<std::vector<std::int32_t>> groups;
  groups.reserve(transfers / 10 + 1);
  std::vector<double> start_ms;
  for (int i = 0; i < transfers; ++i) {
    Transfer t;
    if (i % 10 == 9) {  // an 8-rank all-reduce across 8 nodes (one rail)
      const int rail = static_cast<int>(rng() % 8);
      std::vector<std::int32_t> g;
      for (int k = 0; k < 8; ++k) g.push_back(static_cast<std::int32_t>((rng() % 2048) * 8 + rail));
      std::sort(g.begin(), g.end());
      g.erase(std::unique(g.begin(), g.end()), g.end());
      groups.push_back(g);
      t.collective = CollectiveKind::kAllReduce;
      t.ranks = groups.back();
      t.num_nodes = static_cast<int>(g.size());
      t.max_ranks_per_node = 1;
    } else {
      const auto a = static_cast<std::int32_t>(rng() % 16384);
      auto b = static_cast<std::int32_t>(rng() % 16384);
      if (a / 8 == b / 8) b = (b + 8) % 16384;
      pairs[i] = {a, b};
      t.kind = Transfer::Kind::kPointToPoint;
      t.ranks = pairs[i];
      t.num_nodes = 2;
    }
    t.bytes = Bytes{std::int64_t{1} << (20 + rng() % 10)};
    const auto t0 = Clock::now();
    net.start(t, SimTime{0});
    (void)t0;
  }
  // Everything leaves its latency phase together (one event, 10,000 flows
  // joining). From then on each event is timed: a transfer's data starting
  // (its latency over) or finishing; each finish is replaced by a new send,
  // so about `transfers` stay in flight.
  std::vector<TransferId> done;
  SimTime t = net.next_completion();
  net.take_completed(t, &done);
  std::vector<double> finish_ms;
  start_ms.clear();
  std::vector<std::array<std::int32_t, 2>> extra(400);
  int added = 0;
  for (int k = 0; k < 400 && (t = net.next_completion()) != SimTime::never(); ++k) {
    done.clear();
    const auto t0 = Clock::now();
    net.take_completed(t, &done);
    (done.empty() ? start_ms : finish_ms).push_back(seconds_since(t0) * 1e3);
    for (std::size_t d = 0; d < done.size() && added < 400; ++d, ++added) {
      const auto a = static_cast<std::int32_t>(rng() % 16384);
      extra[added] = {a, static_cast<std::int32_t>((a + 8 * (1 + rng() % 2047)) % 16384)};
      Transfer x;
      x.kind = Transfer::Kind::kPointToPoint;
      x.ranks = extra[added];
      x.num_nodes = 2;
      x.bytes = Bytes{std::int64_t{1} << (20 + rng() % 10)};
      net.start(x, t);
    }
  }
  if (start_ms.empty()) start_ms.push_back(0);
  if (finish_ms.empty()) finish_ms.push_back(0);
  return RerateRun{median(start_ms), median(finish_ms), net.num_resources()};
}

}  // namespace
}  // namespace prism

int main(int argc, char** argv) {
  CLI::App app("prism_bench_net: collective model speed (docs/benchmarks.md)");
  int queries = 1'000'000;
  int transfers = 10'000;
  int repeats = 3;
  app.add_option("--queries", queries, "Collective-time queries")->capture_default_str();
  app.add_option("--transfers", transfers, "Concurrent transfers")->capture_default_str();
  app.add_option("--repeats", repeats, "Runs of each part (medians)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  std::vector<double> q, s, f;
  int resources = 0;
  for (int r = 0; r < repeats; ++r) {
    q.push_back(prism::query_seconds(queries));
    const prism::RerateRun run = prism::rerate(transfers, 2026 + static_cast<std::uint64_t>(r));
    s.push_back(run.start_ms);
    f.push_back(run.finish_ms);
    resources = run.resources;
  }
  const double qs = prism::median(q), ss = prism::median(s), fs = prism::median(f);
  fmt::print("collective queries: {} in {:.3f} s ({:.0f} ns each)   target <= 1 s: {}\n", queries,
             qs, qs * 1e9 / queries, qs <= 1.0 ? "pass" : "FAIL");
  fmt::print("re-rating, 16,384 GPUs ({} resources), {} transfers in flight:\n", resources,
             transfers);
  fmt::print("  start event   median {:.3f} ms   target <= 10 ms: {}\n", ss,
             ss <= 10 ? "pass" : "FAIL");
  fmt::print("  finish event  median {:.3f} ms   target <= 10 ms: {}\n", fs,
             fs <= 10 ? "pass" : "FAIL");
  return 0;
}
