#include "simulation/node_failure.h"

#include <algorithm>
#include <map>
#include <string>

#include <fmt/format.h>

namespace prism {

Result<std::vector<Rank>> node_failure_ranks(const ExecutionGraph& g, const NodeFailure& f) {
  const int nodes = g.layout.num_nodes();
  if (f.node >= nodes)
    return Status::invalid_argument(
        fmt::format("{}: node {} does not exist: the graph has nodes {}", describe(f), f.node,
                    nodes == 1 ? "0" : fmt::format("0-{}", nodes - 1)));
  std::vector<Rank> failed;
  for (Rank r = 0; r < g.world_size(); ++r)
    if (g.layout.node_of(r) == f.node) failed.push_back(r);
  return failed;
}

void add_failure_fold_tags(const std::vector<Rank>& failed, int world_size,
                           std::vector<std::int64_t>& tags) {
  tags.resize(world_size, 0);
  for (Rank r : failed) tags[r] = -1 - r;
}

NodeFailureReplay node_failure_replay(const NodeFailure& f, const std::vector<Rank>& ranks,
                                      SimTime timeout, const ReplayResult& r) {
  NodeFailureReplay out;
  out.node = f.node;
  out.ranks = ranks;
  out.at = f.at;
  out.timeout = timeout;
  out.hung = r.outcome == ReplayResult::Outcome::kDeadlock;
  out.hang_at = r.makespan;
  std::map<std::string, NodeFailureReplay::Blocked> by_what;
  for (const BlockedRank& b : r.blocked) {
    if (b.failed) continue;
    if (b.since.ns < 0) {
      ++out.other_blocked_streams;
      continue;
    }
    auto [it, fresh] = by_what.try_emplace(b.waiting_for);
    NodeFailureReplay::Blocked& x = it->second;
    if (fresh) {
      x.what = b.waiting_for;
      x.since = b.since;
    }
    x.waiting.push_back(b.rank);
    x.since = min(x.since, b.since);
    if (!out.watchdog_at || b.since + timeout < *out.watchdog_at ||
        (b.since + timeout == *out.watchdog_at && b.rank < out.watchdog_rank)) {
      out.watchdog_at = b.since + timeout;
      out.watchdog_rank = b.rank;
      out.watchdog_what = b.waiting_for;
    }
  }
  for (auto& [what, x] : by_what) {
    std::sort(x.waiting.begin(), x.waiting.end());
    x.waiting.erase(std::unique(x.waiting.begin(), x.waiting.end()), x.waiting.end());
    out.blocked.push_back(std::move(x));
  }
  std::stable_sort(out.blocked.begin(), out.blocked.end(),
                   [](const auto& a, const auto& b) { return a.since < b.since; });
  return out;
}

}  // namespace prism
