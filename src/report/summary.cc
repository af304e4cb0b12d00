#include "report/summary.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "report/failure_report.h"
#include "report/memory_report.h"
#include "report/op_label.h"

namespace prism {
namespace {

constexpr int kLabelWidth = 17;  // "iteration time:  " and the values line up after it

void append_field(std::string* out, std::string_view label, std::string_view value) {
  fmt::format_to(std::back_inserter(*out), "{:<{}}{}\n", fmt::format("{}:", label), kLabelWidth,
                 value);
}

// Milliseconds with three decimals, rounded half up in integer arithmetic so
// that the text never depends on floating-point rounding.
std::string ms3(SimTime t) {
  const std::int64_t us = (t.ns + 500) / 1000;
  return fmt::format("{}.{:03}", us / 1000, us % 1000);
}

std::string format_ms(SimTime t) {
  return ms3(t) + " ms";
}

std::string plural(std::int64_t n, std::string_view word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

// Ranks, not streams: a rank may be blocked on several streams (the list is
// sorted by rank).
int blocked_rank_count(const ReplayResult& r) {
  int n = 0;
  for (std::size_t i = 0; i < r.blocked.size(); ++i)
    if (i == 0 || r.blocked[i].rank != r.blocked[i - 1].rank) n += r.blocked[i].num_ranks;
  return n;
}

void append_header(const ExecutionGraph& g, const ReplayResult& r, std::string* out) {
  append_field(out, "graph",
               fmt::format("{} ({}, {})", g.name, plural(r.world_size, "rank"),
                           plural(static_cast<std::int64_t>(g.roles.size()), "role")));
  append_field(out, "replay",
               fmt::format("{}: {} of {} ranks simulated, {}", r.folded ? "folded" : "unfolded",
                           r.simulated_ranks, r.world_size,
                           plural(static_cast<std::int64_t>(r.op_events), "op event")));
  if (r.outcome == ReplayResult::Outcome::kOutOfMemory) {
    append_field(out, "outcome", "out of memory (the replay stopped there)");
    append_field(out, "stopped at", format_ms(r.oom.front().at));
    return;
  }
  if (r.outcome == ReplayResult::Outcome::kDeadlock && r.failure) {
    append_field(out, "outcome", fmt::format("hung: node {} failed", r.failure->node));
    append_field(out, "stalled at", format_ms(r.makespan));
    return;
  }
  if (r.outcome == ReplayResult::Outcome::kDeadlock) {
    append_field(out, "outcome",
                 fmt::format("deadlock ({} blocked)", plural(blocked_rank_count(r), "rank")));
    append_field(out, "stalled at", format_ms(r.makespan));
    return;
  }
  append_field(out, "outcome", "completed");
  const std::size_t n = r.iteration_times.size();
  const std::string count = n > 1 ? fmt::format("mean of {} iterations", n) : "1 iteration";
  append_field(out, "iteration time", fmt::format("{}  ({})", format_ms(r.iteration_time), count));
  append_field(out, "makespan", format_ms(r.makespan));
}

// Columns are as wide as their widest cell, so large jobs stay aligned.
void append_role_table(const ReplayResult& r, std::string* out) {
  using Row = std::array<std::string, 9>;
  std::vector<Row> rows = {{"role", "ranks", "compute_ms", "exposed_comm_ms", "idle_ms",
                            "allocated_GiB", "reserved_GiB", "frag_GiB", "device_GiB"}};
  auto gib3 = [](Bytes b) { return fmt::format("{:.3f}", b.gib()); };
  for (const RoleSummary& s : r.roles) {
    rows.push_back({s.name, std::to_string(s.num_ranks), ms3(s.mean.compute),
                    ms3(s.mean.exposed_comm), ms3(s.mean.idle), gib3(s.max.peak_allocated),
                    gib3(s.max.peak_reserved), gib3(s.max.fragmentation), gib3(s.max.peak_device)});
  }
  const std::size_t cols = rows[0].size();
  std::vector<std::size_t> width(cols, 0);
  for (const Row& row : rows)
    for (std::size_t c = 0; c < cols; ++c) width[c] = std::max(width[c], row[c].size());
  for (const Row& row : rows) {
    // The role name is left-aligned, numbers right-aligned, two spaces apart.
    std::string line = fmt::format("{:<{}}", row[0], width[0]);
    for (std::size_t c = 1; c < cols; ++c) line += fmt::format("  {:>{}}", row[c], width[c]);
    out->append(line).append("\n");
  }
  out->append(
      "(times: mean over the role's ranks; memory: peaks, max over the role's ranks; frag = "
      "reserved - allocated when reserved peaked; device = reserved + NCCL + context)\n");
}

// A deadlock of thousands of ranks would bury the table: the summary shows
// the first kShownBlocked streams, the JSON report all of them.
constexpr std::size_t kShownBlocked = 16;

void append_blocked(const ExecutionGraph& g, const ReplayResult& r, std::string* out) {
  out->append("\nblocked ranks:\n");
  for (std::size_t i = 0; i < r.blocked.size() && i < kShownBlocked; ++i) {
    const BlockedRank& b = r.blocked[i];
    const Role& role = g.roles[b.role];
    const std::string alike =
        b.num_ranks > 1 ? fmt::format("; {} ranks in this state", b.num_ranks) : "";
    fmt::format_to(std::back_inserter(*out), "  rank {} (role {}{}): op {} ({}) on stream {}: {}\n",
                   b.rank, role.name, alike, b.op, op_label(role, role.ops[b.op]),
                   role.streams[b.stream], b.waiting_for);
  }
  if (r.blocked.size() > kShownBlocked) {
    fmt::format_to(std::back_inserter(*out),
                   "  ... and {} more blocked streams (the --report file lists them all)\n",
                   r.blocked.size() - kShownBlocked);
  }
}

}  // namespace

WhatIfComparison what_if_comparison(const ReplayResult& r) {
  WhatIfComparison w;
  if (!r.what_if) return w;
  w.options = r.what_if->options;
  if (r.outcome == ReplayResult::Outcome::kCompleted) w.perturbed = r.iteration_time;
  if (r.what_if->unperturbed_completed) w.unperturbed = r.what_if->unperturbed;
  return w;
}

std::string format_summary(const ExecutionGraph& g, const ReplayResult& r) {
  std::string out;
  append_header(g, r, &out);
  if (r.what_if) append_field(&out, "what-if", what_if_text(what_if_comparison(r)));
  if (r.failure) out += node_failure_text(*r.failure, kLabelWidth);
  out.push_back('\n');
  append_role_table(r, &out);
  if (r.outcome == ReplayResult::Outcome::kDeadlock) append_blocked(g, r, &out);
  if (r.outcome == ReplayResult::Outcome::kOutOfMemory) {
    out += '\n';
    out += format_oom_text(g, r.oom.front());
  }
  if (r.past_oom) {
    const PastOomReplay& p = *r.past_oom;
    out += fmt::format(
        "\npast the OOM: with unlimited memory the iteration takes {}; memory it needs per role "
        "(GiB; device peak, and by how much it passes the {:.2f} GiB per GPU):\n",
        format_ms(p.iteration_time), p.capacity.gib());
    out += fmt::format("{:<10}{:>9}{:>9}\n", "role", "needs", "over");
    for (std::size_t i = 0; i < p.role_needed.size() && i < g.roles.size(); ++i) {
      const std::int64_t over = p.role_needed[i].count - p.capacity.count;
      out += fmt::format("{:<10}{:>9.2f}{:>9}\n", g.roles[i].name, p.role_needed[i].gib(),
                         over > 0 ? fmt::format("{:.2f}", Bytes{over}.gib()) : "-");
    }
  }
  return out;
}

}  // namespace prism
