#include "report/replay_html.h"

#include <algorithm>
#include <map>
#include <span>
#include <tuple>

#include <fmt/format.h>

#include "report/html_charts.h"
#include "report/memory_report.h"
#include "report/op_label.h"
#include "report/summary.h"

namespace prism {
namespace {

// Past this many stages, the page shows the first ones and says so.
constexpr std::size_t kMaxStages = 64;

std::span<const TraceRecord> records_of(const ReplayResult& r, Rank rank) {
  const auto lo = std::lower_bound(r.trace.begin(), r.trace.end(), rank,
                                   [](const TraceRecord& t, Rank x) { return t.rank < x; });
  const auto hi = std::upper_bound(lo, r.trace.end(), rank,
                                   [](Rank x, const TraceRecord& t) { return x < t.rank; });
  return {lo, hi};
}

std::span<const MemorySample> memory_of(const ReplayResult& r, Rank rank) {
  const auto lo = std::lower_bound(r.memory_trace.begin(), r.memory_trace.end(), rank,
                                   [](const MemorySample& m, Rank x) { return m.rank < x; });
  const auto hi = std::upper_bound(lo, r.memory_trace.end(), rank,
                                   [](Rank x, const MemorySample& m) { return x < m.rank; });
  return {lo, hi};
}

const RankTimeline* timeline_of(const ReplayResult& r, Rank rank) {
  for (const RankTimeline& t : r.timelines)
    if (t.rank == rank) return &t;
  return nullptr;
}

// The shown ranks' last complete iteration: [earliest start, latest end).
std::pair<SimTime, SimTime> iteration_window(const ReplayResult& r,
                                             const std::vector<Rank>& ranks) {
  SimTime begin{-1}, end;
  for (Rank rank : ranks) {
    const RankTimeline* t = timeline_of(r, rank);
    if (t == nullptr) continue;
    const std::vector<SimTime> begins = t->iteration_marks.complete();
    const SimTime b = begins.empty() ? SimTime::zero() : begins.back();
    const SimTime e = begins.empty() ? t->finish : t->iteration_marks.last_end(t->finish);
    begin = begin.ns < 0 ? b : std::min(begin, b);
    end = std::max(end, e);
  }
  if (begin.ns < 0) return {SimTime::zero(), std::max(r.makespan, SimTime{1})};
  return {begin, std::max(end, begin + SimTime{1})};
}

struct CommGeometryOf {
  CommGeometry geometry;
  bool same_node = true;
};

CommGeometryOf geometry_of(const ExecutionGraph& g, const std::vector<Rank>& members) {
  std::map<int, int> per_node;
  for (Rank m : members) ++per_node[g.layout.node_of(m)];
  CommGeometryOf out;
  out.geometry.num_ranks = static_cast<int>(members.size());
  out.geometry.num_nodes = static_cast<int>(per_node.size());
  for (const auto& [node, n] : per_node)
    out.geometry.max_ranks_per_node = std::max(out.geometry.max_ranks_per_node, n);
  out.same_node = per_node.size() <= 1;
  return out;
}

// The stage's communication in the window, one row per (op label, kind,
// group, size), with the tuner's choice for it.
void add_collectives(const ExecutionGraph& g, std::span<const TraceRecord> records,
                     const HtmlStage& stage, SimTime begin, SimTime end, const NcclTuner& tuner,
                     std::vector<HtmlCollective>* out) {
  using Key = std::tuple<std::string, std::string, std::string, std::int64_t>;
  std::map<Key, HtmlCollective> rows;
  const SlotResolver res = g.resolver();
  std::vector<Rank> members;
  for (const TraceRecord& rec : records) {
    const Role& role = g.roles[rec.role];
    const Op& op = role.ops[rec.op];
    if (!is_communication(op.kind) || rec.start < begin || rec.start >= end) continue;
    const bool collective = op.kind == OpKind::kCollective;
    const std::string kind(collective ? to_string(op.collective) : to_string(op.kind));
    const Key key{std::string(op_label(role, op)), kind, g.slots[op.ref].name, op.bytes.count};
    auto [it, fresh] = rows.try_emplace(key);
    HtmlCollective& row = it->second;
    if (fresh) {
      row.stage = stage.name;
      row.op = std::get<0>(key);
      row.kind = kind;
      row.group = std::get<2>(key);
      row.bytes = op.bytes;
      members.clear();
      if (collective) {
        res.members(op.ref, rec.rank, &members);
      } else {
        members = {rec.rank};
        if (const Rank peer = res.peer(op.ref, rec.rank); peer >= 0) members.push_back(peer);
      }
      const CommGeometryOf geo = geometry_of(g, members);
      row.group_ranks = geo.geometry.num_ranks;
      row.group_nodes = geo.geometry.num_nodes;
      std::optional<CollectiveCost> cost;
      if (collective) {
        cost = tuner.collective(op.collective, op.bytes, geo.geometry);
      } else {
        cost = tuner.point_to_point(op.bytes, geo.same_node);
      }
      row.algorithm = cost ? std::string(to_string(cost->algo)) : "-";
      row.protocol = cost ? std::string(to_string(cost->proto)) : "-";
      row.channels = cost ? cost->channels : 0;
    }
    ++row.calls;
    row.transfer += rec.end - rec.transfer_start;
    row.wait += rec.transfer_start - rec.start;
  }
  std::vector<HtmlCollective> sorted;
  for (auto& [key, row] : rows) sorted.push_back(std::move(row));
  // The most transfer time first; the key breaks ties (map order, stable).
  std::stable_sort(
      sorted.begin(), sorted.end(),
      [](const HtmlCollective& a, const HtmlCollective& b) { return a.transfer > b.transfer; });
  out->insert(out->end(), sorted.begin(), sorted.end());
}

std::string stage_name(const ExecutionGraph& g, const ReplayResult& r, Rank rank, bool real) {
  const std::int32_t role = g.role_of_rank[rank];
  const int n = static_cast<std::size_t>(role) < r.roles.size() ? r.roles[role].num_ranks : 0;
  return fmt::format("{}: rank {}{}{}", g.roles[role].name, rank,
                     n > 0 ? fmt::format(" of {}", n) : "", real ? ", real" : "");
}

}  // namespace

std::vector<Rank> html_ranks(const ExecutionGraph& g) {
  std::vector<Rank> reps(g.roles.size(), -1);
  for (Rank r = 0; r < g.world_size(); ++r) {
    Rank& rep = reps[g.role_of_rank[r]];
    if (rep < 0) rep = r;
  }
  std::erase(reps, -1);
  std::sort(reps.begin(), reps.end());
  return reps;
}

std::vector<Rank> with_html_ranks(const ExecutionGraph& g, std::vector<Rank> traced) {
  const std::vector<Rank> reps = html_ranks(g);
  traced.insert(traced.end(), reps.begin(), reps.end());
  std::sort(traced.begin(), traced.end());
  traced.erase(std::unique(traced.begin(), traced.end()), traced.end());
  return traced;
}

std::vector<HtmlFact> simulate_facts(const SimulateSummary& s) {
  std::vector<HtmlFact> f;
  std::string shape =
      fmt::format("tp {}{}, cp {}, pp {}", s.tp, s.sequence_parallel ? " (sp)" : "", s.cp, s.pp);
  if (s.vpp > 1) shape += fmt::format(" (vpp {})", s.vpp);
  shape += fmt::format(", dp {}", s.dp);
  if (s.ep > 1) shape += fmt::format(", ep {}", s.ep);
  f.push_back({"job", fmt::format("{} ({} GPUs: {})", s.job, s.num_gpus, shape)});
  f.push_back({"cluster", fmt::format("{} ({} nodes of {})", s.cluster, s.num_nodes, s.gpu)});
  f.push_back({"batch", fmt::format("{} sequences of {} tokens, {} micro-batches of {} per DP "
                                    "rank, {}, recompute {}",
                                    s.global_batch_size, s.seq_length, s.num_microbatches,
                                    s.micro_batch_size, s.precision, s.recompute)});
  if (s.oom_text.empty()) {
    f.push_back({"tokens/s per GPU", fmt::format("{:.1f}", s.tokens_per_s_per_gpu)});
    f.push_back({"MFU", fmt::format("{:.1f}% of {:.1f} TFLOP/s (dense bf16 peak)", 100 * s.mfu,
                                    s.peak_flops / 1e12)});
  }
  f.push_back(
      {"peak memory", fmt::format("{} of {} per GPU (device, max over ranks)",
                                  html::bytes_text(s.peak_device), html::bytes_text(s.capacity))});
  return f;
}

std::vector<HtmlFact> replay_facts(const ExecutionGraph& g, const ReplayResult& r) {
  std::vector<HtmlFact> f;
  f.push_back({"ranks", fmt::format("{} ({} roles)", r.world_size, g.roles.size())});
  f.push_back({"replay", r.folded
                             ? fmt::format("folded: {} of {} ranks simulated, {} op events",
                                           r.simulated_ranks, r.world_size, r.op_events)
                             : fmt::format("every rank simulated, {} op events", r.op_events)});
  switch (r.outcome) {
    case ReplayResult::Outcome::kCompleted:
      f.push_back({"outcome", "completed"});
      f.push_back(
          {"iteration time",
           fmt::format("{} (mean of {} iteration{})", html::duration_text(r.iteration_time),
                       r.iteration_times.size(), r.iteration_times.size() == 1 ? "" : "s")});
      break;
    case ReplayResult::Outcome::kDeadlock:
      f.push_back({"outcome", fmt::format("deadlock: {} ranks blocked", r.blocked.size())});
      break;
    case ReplayResult::Outcome::kOutOfMemory:
      f.push_back({"outcome", "out of memory"});
      break;
  }
  if (r.what_if) f.push_back({"what-if", what_if_text(what_if_comparison(r))});
  return f;
}

HtmlPage replay_html_page(const ExecutionGraph& g, const ReplayResult& r,
                          const ReplayHtmlOptions& o) {
  HtmlPage page;
  page.title = o.title;
  page.facts = o.facts;
  page.notes = o.notes;
  page.text = o.text;
  page.capacity = o.capacity;
  if (r.outcome == ReplayResult::Outcome::kOutOfMemory && !r.oom.empty()) {
    const std::string text = format_oom_text(g, r.oom.front());
    page.notes.push_back(text.substr(0, text.find('\n')));
  }
  std::vector<Rank> ranks = html_ranks(g);
  ranks.insert(ranks.end(), o.real_ranks.begin(), o.real_ranks.end());
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::erase_if(ranks, [&](Rank rank) {
    return timeline_of(r, rank) == nullptr && records_of(r, rank).empty();
  });
  if (ranks.size() > kMaxStages) {
    page.notes.push_back(
        fmt::format("{} stages; the first {} are shown", ranks.size(), kMaxStages));
    ranks.resize(kMaxStages);
  }
  std::tie(page.window_begin, page.window_end) = iteration_window(r, ranks);
  const NcclTuner tuner(o.cluster, o.nccl);
  for (Rank rank : ranks) {
    const bool real = std::binary_search(o.real_ranks.begin(), o.real_ranks.end(), rank);
    HtmlStage s;
    s.name = stage_name(g, r, rank, real);
    const std::span<const TraceRecord> records = records_of(r, rank);
    s.spans = rank_spans(g, records, rank, page.window_begin, page.window_end, o.measured);
    s.breakdown = sum_spans(s.spans);
    const std::span<const MemorySample> memory = memory_of(r, rank);
    // From the last sample at or before the window (its value when it
    // opens) to the window's end.
    auto first = std::upper_bound(memory.begin(), memory.end(), page.window_begin,
                                  [](SimTime t, const MemorySample& m) { return t < m.at; });
    if (first != memory.begin()) --first;
    for (auto it = first; it != memory.end() && it->at < page.window_end; ++it)
      s.memory.push_back(*it);
    add_collectives(g, records, s, page.window_begin, page.window_end, tuner, &page.collectives);
    page.stages.push_back(std::move(s));
  }
  return page;
}

std::string format_replay_html(const ExecutionGraph& g, const ReplayResult& r,
                               const ReplayHtmlOptions& o) {
  return format_html_page(replay_html_page(g, r, o));
}

}  // namespace prism
