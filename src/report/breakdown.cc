#include "report/breakdown.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace prism {

std::string_view to_string(TimeCategory c) {
  switch (c) {
    case TimeCategory::kCompute:
      return "compute";
    case TimeCategory::kOptimizer:
      return "optimizer";
    case TimeCategory::kTp:
      return "tp";
    case TimeCategory::kCp:
      return "cp";
    case TimeCategory::kEp:
      return "ep";
    case TimeCategory::kPp:
      return "pp";
    case TimeCategory::kDp:
      return "dp";
    case TimeCategory::kBubble:
      return "bubble";
  }
  return "?";
}

std::optional<TimeCategory> comm_category(std::string_view s) {
  if (s == "tp") return TimeCategory::kTp;
  if (s == "cp" || s.starts_with("cp_")) return TimeCategory::kCp;
  if (s == "ep" || s == "etp") return TimeCategory::kEp;
  if (s.starts_with("pp")) return TimeCategory::kPp;
  if (s.starts_with("dp") || s == "edp" || s == "embd") return TimeCategory::kDp;
  return std::nullopt;
}

std::vector<CategorySpan> rank_spans(const ExecutionGraph& g, std::span<const TraceRecord> records,
                                     Rank rank, SimTime begin, SimTime end,
                                     std::span<const MeasuredSlice> measured) {
  // Sweep over interval boundaries: +1 at a start, -1 at an end, per category.
  struct Edge {
    SimTime at;
    int category;
    int delta;
  };
  std::vector<Edge> edges;
  auto add = [&](SimTime from, SimTime to, TimeCategory c) {
    const SimTime lo = max(from, begin), hi = min(to, end);
    if (lo >= hi) return;
    edges.push_back({lo, static_cast<int>(c), +1});
    edges.push_back({hi, static_cast<int>(c), -1});
  };
  for (const TraceRecord& rec : records) {
    if (rec.rank != rank) continue;
    const Role& role = g.roles[rec.role];
    const Op& op = role.ops[rec.op];
    if (op.kind == OpKind::kCompute) {
      const bool optimizer = op.name >= 0 && role.names[op.name] == "optimizer";
      add(rec.start, rec.end, optimizer ? TimeCategory::kOptimizer : TimeCategory::kCompute);
    } else if (is_communication(op.kind)) {
      if (std::optional<TimeCategory> c = comm_category(g.slots[op.ref].name))
        add(rec.transfer_start, rec.end, *c);
    }
  }
  for (const MeasuredSlice& m : measured)
    if (m.rank == rank) add(m.start, m.end, TimeCategory::kCompute);
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) { return a.at < b.at; });
  std::vector<CategorySpan> out;
  std::array<int, kNumTimeCategories> active{};
  SimTime at = begin;
  auto charge = [&](SimTime until) {
    if (until <= at) return;
    auto c = TimeCategory::kBubble;
    for (int i = 0; i < static_cast<int>(TimeCategory::kBubble); ++i) {
      if (active[i] > 0) {
        c = static_cast<TimeCategory>(i);
        break;
      }
    }
    if (!out.empty() && out.back().category == c && out.back().end == at) {
      out.back().end = until;
    } else {
      out.push_back({at, until, c});
    }
    at = until;
  };
  for (const Edge& e : edges) {
    charge(e.at);
    active[e.category] += e.delta;
  }
  charge(end);
  return out;
}

Breakdown sum_spans(std::span<const CategorySpan> spans) {
  Breakdown out;
  for (const CategorySpan& s : spans) out[s.category] += s.end - s.begin;
  return out;
}

Breakdown rank_breakdown(const ExecutionGraph& g, std::span<const TraceRecord> records, Rank rank,
                         SimTime begin, SimTime end) {
  return sum_spans(rank_spans(g, records, rank, begin, end));
}

}  // namespace prism
