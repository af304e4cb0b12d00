// Turning the engine's final state into a ReplayResult: per-role timings,
// iteration times, traces, and, when the replay could not finish, who is
// blocked on what.
#include <algorithm>
#include <array>
#include <functional>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "replay/engine.h"

namespace prism {
namespace {

std::string rank_list(const std::vector<Rank>& ranks) {
  constexpr std::size_t kShown = 8;
  std::string s;
  for (std::size_t i = 0; i < ranks.size() && i < kShown; ++i)
    s += fmt::format("{}{}", i ? ", " : "", ranks[i]);
  if (ranks.size() > kShown) s += fmt::format(" and {} more", ranks.size() - kShown);
  return s;
}

// RankTimes's fields, by unit: sums, maxima and means walk these tables.
constexpr std::array<SimTime RankTimes::*, 4> kTimeFields{
    &RankTimes::compute, &RankTimes::exposed_comm, &RankTimes::idle, &RankTimes::finish};
constexpr std::array<Bytes RankTimes::*, 6> kByteFields{
    &RankTimes::peak_allocated, &RankTimes::peak_reserved, &RankTimes::peak_device,
    &RankTimes::nccl,           &RankTimes::fragmentation, &RankTimes::inactive_split_peak};

// A field added to RankTimes must be added to a table.
static_assert(sizeof(RankTimes) ==
              sizeof(SimTime) * kTimeFields.size() + sizeof(Bytes) * kByteFields.size());

// Sums of a role's ranks in 128 bits: 16,384 ranks x 2^50 ns overflows 64.
struct TimeSums {
  std::array<Int128, kTimeFields.size()> time{};
  std::array<Int128, kByteFields.size()> bytes{};
};

void add_times(TimeSums* sum, RankTimes* mx, const RankTimes& t, std::int64_t times) {
  for (std::size_t i = 0; i < kTimeFields.size(); ++i) {
    sum->time[i] += static_cast<Int128>((t.*kTimeFields[i]).ns) * times;
    mx->*kTimeFields[i] = max(mx->*kTimeFields[i], t.*kTimeFields[i]);
  }
  for (std::size_t i = 0; i < kByteFields.size(); ++i) {
    sum->bytes[i] += static_cast<Int128>((t.*kByteFields[i]).count) * times;
    mx->*kByteFields[i] = std::max(mx->*kByteFields[i], t.*kByteFields[i]);
  }
}

// The integer mean of `n` ranks; a mean is at most the maximum, so it fits
// 64 bits again.
RankTimes mean_times(const TimeSums& sum, std::int64_t n) {
  RankTimes m;
  for (std::size_t i = 0; i < kTimeFields.size(); ++i)
    m.*kTimeFields[i] = SimTime{static_cast<std::int64_t>(sum.time[i] / n)};
  for (std::size_t i = 0; i < kByteFields.size(); ++i)
    m.*kByteFields[i] = Bytes{static_cast<std::int64_t>(sum.bytes[i] / n)};
  return m;
}

}  // namespace

std::vector<SimTime> IterationMarks::complete() const {
  if (!has_end()) return begins;
  std::vector<SimTime> out(begins.begin(), begins.begin() + static_cast<long>(begins_at_end));
  if (out.empty()) out.push_back(SimTime::zero());  // only end markers: from the start
  return out;
}

int IterationMarks::count() const {
  return std::max<int>(1, static_cast<int>(complete().size()));
}

std::vector<SimTime> iteration_lengths(const IterationMarks& m, SimTime finish_time) {
  const std::vector<SimTime> marks = m.complete();
  const SimTime finish = m.last_end(finish_time);
  if (marks.empty()) return {finish};
  std::vector<SimTime> out;
  for (std::size_t k = 0; k < marks.size(); ++k)
    out.push_back((k + 1 < marks.size() ? marks[k + 1] : max(finish, marks[k])) - marks[k]);
  return out;
}

SimTime mean_length(const std::vector<SimTime>& lengths) {
  std::int64_t sum = 0;
  for (SimTime t : lengths) sum += t.ns;
  return SimTime{sum / static_cast<std::int64_t>(lengths.size())};
}

SimTime mean_iteration(const IterationMarks& m, SimTime finish_time) {
  return mean_length(iteration_lengths(m, finish_time));
}

ReplayResult Engine::collect() {
  ReplayResult r;
  r.world_size = g_.world_size();
  r.folded = options_.fold && options_.jitter_ppm == 0;  // jitter turns folding off
  r.simulated_ranks = static_cast<int>(sranks_.size());
  r.op_events = op_events_;
  for (const SimRank& sr : sranks_) r.makespan = max(r.makespan, sr.finish);
  now_ = r.makespan;
  for (SimRank& sr : sranks_) account(sr, 0, 0);  // the tail after a rank's last op is idle
  collect_iterations(&r);
  collect_roles(&r);
  if (stopped_) {
    r.outcome = ReplayResult::Outcome::kOutOfMemory;
    r.oom = oom_;
  } else {
    collect_blocked(&r);
    r.outcome =
        r.blocked.empty() ? ReplayResult::Outcome::kCompleted : ReplayResult::Outcome::kDeadlock;
  }
  // Each traced rank gets its class representative's records under its own number.
  for (Rank rank : options_.trace_ranks) {
    const Rank rep = fold_.representative[fold_.class_of_rank[rank]];
    for (const TraceRecord& t : trace_) {
      if (t.rank != rep) continue;
      r.trace.push_back(t);
      r.trace.back().rank = rank;
    }
  }
  std::sort(r.trace.begin(), r.trace.end(), [](const TraceRecord& a, const TraceRecord& b) {
    return std::tie(a.rank, a.start, a.op) < std::tie(b.rank, b.start, b.op);
  });
  r.trace.erase(std::unique(r.trace.begin(), r.trace.end(),
                            [](const TraceRecord& a, const TraceRecord& b) {
                              return a.rank == b.rank && a.op == b.op;
                            }),
                r.trace.end());
  collect_memory_trace(&r);
  collect_timelines(&r);
  return r;
}

void Engine::collect_timelines(ReplayResult* r) const {
  std::vector<Rank> ranks = options_.trace_ranks;
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  for (Rank rank : ranks) {
    const SimRank& sr = sranks_[fold_.class_of_rank[rank]];
    r->timelines.push_back(RankTimeline{rank, sr.iteration_marks, sr.finish});
  }
}

// Memory samples of the traced ranks, as their representatives' samples
// under their own numbers; of several samples at one time the last stays.
void Engine::collect_memory_trace(ReplayResult* r) const {
  std::vector<Rank> ranks = options_.trace_ranks;
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  for (Rank rank : ranks) {
    const Rank rep = fold_.representative[fold_.class_of_rank[rank]];
    for (const MemorySample& m : memory_trace_) {
      if (m.rank != rep) continue;
      if (!r->memory_trace.empty() && r->memory_trace.back().rank == rank &&
          r->memory_trace.back().at == m.at) {
        r->memory_trace.back() = m;
      } else {
        r->memory_trace.push_back(m);
      }
      r->memory_trace.back().rank = rank;
    }
  }
}

// Iteration k starts when the slowest rank passes its k-th iteration marker
// and ends when the slowest passes the next one (the last ends at the
// slowest rank's last end marker, or without end markers at the makespan).
// Without markers the whole replay is one iteration.
void Engine::collect_iterations(ReplayResult* r) const {
  std::vector<SimTime> starts;
  SimTime last_end{-1};  // the slowest rank's last end marker
  for (const SimRank& sr : sranks_) {
    const std::vector<SimTime> marks = sr.iteration_marks.complete();
    if (marks.size() > starts.size()) starts.resize(marks.size());
    for (std::size_t k = 0; k < marks.size(); ++k) starts[k] = max(starts[k], marks[k]);
    if (sr.iteration_marks.has_end()) last_end = max(last_end, sr.iteration_marks.end);
  }
  if (starts.empty()) starts.push_back(SimTime::zero());
  for (std::size_t k = 0; k < starts.size(); ++k) {
    const SimTime end = k + 1 < starts.size() ? starts[k + 1]
                        : last_end.ns >= 0    ? last_end
                                              : r->makespan;
    r->iteration_times.push_back(end - starts[k]);
  }
  std::int64_t sum = 0;
  for (SimTime t : r->iteration_times) sum += t.ns;
  r->iteration_time = SimTime{sum / static_cast<std::int64_t>(r->iteration_times.size())};
}

// Sums over ranks (a class counts once per rank it stands for), so folded and
// unfolded replays produce the same integers.
void Engine::collect_roles(ReplayResult* r) const {
  r->roles.resize(g_.roles.size());
  std::vector<TimeSums> sums(g_.roles.size());
  for (std::size_t i = 0; i < g_.roles.size(); ++i) r->roles[i].name = g_.roles[i].name;
  for (std::size_t c = 0; c < sranks_.size(); ++c) {
    const SimRank& sr = sranks_[c];
    const MemoryPeaks p = models_.memory->peaks(static_cast<int>(c));
    SimTime compute = sr.compute, exposed = sr.exposed, idle = sr.idle;
    if (sr.live) {
      // What the live rank measured: computing, waiting, and the rest idle.
      const auto it = std::find(options_.live_ranks.begin(), options_.live_ranks.end(), sr.rank);
      const LiveRankTimes& lt = live_times_[it - options_.live_ranks.begin()];
      compute = lt.compute;
      exposed = lt.wait;
      idle = max(r->makespan - compute - exposed, SimTime::zero());
    }
    const RankTimes t{compute,
                      exposed,
                      idle,
                      sr.finish,
                      p.allocated,
                      p.reserved,
                      p.device,
                      models_.memory->usage(static_cast<int>(c)).external,
                      p.cached_at_reserved_peak,
                      p.inactive_split};
    RoleSummary& role = r->roles[sr.role];
    role.num_ranks += fold_.class_size[c];
    add_times(&sums[sr.role], &role.max, t, fold_.class_size[c]);
  }
  for (std::size_t i = 0; i < g_.roles.size(); ++i) {
    RoleSummary& role = r->roles[i];
    if (role.num_ranks > 0) role.mean = mean_times(sums[i], role.num_ranks);
  }
}

void Engine::collect_blocked(ReplayResult* r) const {
  // What each waiting communication op waits for, keyed by (srank, stream).
  std::map<std::pair<std::int32_t, std::uint16_t>, std::pair<std::int32_t, std::string>> why;
  std::map<std::pair<std::int32_t, std::uint16_t>, SimTime> since;
  const auto wait = [&](const Arrival& a, std::string text) {
    why[{a.srank, a.stream}] = {a.op, std::move(text)};
    since[{a.srank, a.stream}] = a.at;
  };
  collect_failed_transfers(wait);
  for (const CollectiveRendezvous& c : comms_) {
    for (std::int64_t seq : c.incomplete()) {
      const auto& arrived = c.arrivals(seq);
      std::vector<Rank> missing;
      for (std::int32_t m : c.members()) {
        const bool here = std::any_of(arrived.begin(), arrived.end(),
                                      [&](const Arrival& a) { return a.srank == m; });
        if (!here) missing.push_back(sranks_[m].rank);
      }
      for (const Arrival& a : arrived) {
        const Op& op = g_.roles[sranks_[a.srank].role].ops[a.op];
        wait(a, fmt::format("collective {} #{} on '{}': rank{} {} not arrived",
                            to_string(op.collective), seq, g_.slots[c.slot()].name,
                            missing.size() > 1 ? "s" : "", rank_list(missing)));
      }
    }
  }
  for (const P2PRendezvous::Unmatched& u : p2p_.unmatched()) {
    const SimRank& sr = sranks_[u.arrival.srank];
    const Rank peer = resolver_.peer(g_.roles[sr.role].ops[u.arrival.op].ref, sr.rank);
    wait(u.arrival,
         u.is_send ? fmt::format("send to rank {} (tag {}): no matching recv", peer, u.key.tag)
                   : fmt::format("recv from rank {} (tag {}): no matching send", peer, u.key.tag));
  }
  for (std::uint32_t s = 0; s < sranks_.size(); ++s) {
    const SimRank& sr = sranks_[s];
    const Role& role = g_.roles[sr.role];
    for (std::uint16_t st = 0; st < role.streams.size(); ++st) {
      const StreamState& ss = streams_[sr.first_stream + st];
      if (ss.finished) continue;
      // A live rank's streams are the real process's: it is blocked only
      // where one of its ops waits at a rendezvous.
      if (sr.live && !why.contains({static_cast<std::int32_t>(s), st})) continue;
      BlockedRank b{sr.rank, fold_.class_size[s], sr.role, kNone, st, ""};
      const std::vector<std::int32_t>& list = tables_[sr.role].stream_ops[st];
      if (sr.failed) {  // its node failed (now_ is the last completion, maybe before)
        if (list.empty()) continue;
        // The op it was running or would have started next.
        b.op = list[ss.pos < list.size() && ss.in_flight == 0 ? ss.pos : ss.pos - 1];
        b.waiting_for = "nothing: its node failed";
        b.failed = true;
      } else if (auto it = why.find({static_cast<std::int32_t>(s), st}); it != why.end()) {
        std::tie(b.op, b.waiting_for) = it->second;
        b.since = since.at({static_cast<std::int32_t>(s), st});
      } else {
        b.op = tables_[sr.role].stream_ops[st][ss.pos];
        b.waiting_for = describe_dep_wait(sr, st);
      }
      r->blocked.push_back(std::move(b));
    }
  }
  std::sort(r->blocked.begin(), r->blocked.end(), [](const BlockedRank& a, const BlockedRank& b) {
    return std::tie(a.rank, a.stream) < std::tie(b.rank, b.stream);
  });
}

// What the members of each transfer a node failure stopped wait for.
void Engine::collect_failed_transfers(
    const std::function<void(const Arrival&, std::string)>& wait) const {
  for (const InFlight& rec : failed_transfers_) {
    if (!rec.collective) {
      const std::int32_t s = rec.match.send.srank, d = rec.match.recv.srank;
      const Rank gone = sranks_[sranks_[s].failed ? s : d].rank;
      wait(rec.match.send, fmt::format("send to rank {}: rank {} failed", sranks_[d].rank, gone));
      wait(rec.match.recv, fmt::format("recv from rank {}: rank {} failed", sranks_[s].rank, gone));
      continue;
    }
    const CollectiveRendezvous& c = comms_[rec.comm];
    std::vector<Rank> gone;
    for (std::int32_t m : c.members())
      if (sranks_[m].failed) gone.push_back(sranks_[m].rank);
    for (const Arrival& a : c.arrivals(rec.seq)) {
      const Op& op = g_.roles[sranks_[a.srank].role].ops[a.op];
      wait(a, fmt::format("collective {} #{} on '{}': rank{} {} failed after arriving",
                          to_string(op.collective), rec.seq, g_.slots[c.slot()].name,
                          gone.size() > 1 ? "s" : "", rank_list(gone)));
    }
  }
}

// The first unmet dependency of the op (or, for an NCCL group, of any op of
// the group) at which stream `st` stopped.
std::string Engine::describe_dep_wait(const SimRank& sr, std::uint16_t st) const {
  const Role& role = g_.roles[sr.role];
  const auto& list = tables_[sr.role].stream_ops[st];
  const std::uint32_t pos = streams_[sr.first_stream + st].pos;
  const std::uint32_t group = role.ops[list[pos]].group;
  for (std::uint32_t i = pos; i < list.size(); ++i) {
    const Op& op = role.ops[list[i]];
    if (i > pos && (group == 0 || op.group != group)) break;
    for (std::uint32_t k = op.deps_begin; k < op.deps_end; ++k) {
      const std::int32_t d = role.deps[k];
      if (dep_done_[sr.first_dep + tables_[sr.role].dep_index[d]] != SimTime::never()) continue;
      return fmt::format("op {} ({} on stream '{}') to complete", d, to_string(role.ops[d].kind),
                         role.streams[role.ops[d].stream]);
    }
  }
  return "nothing it can name (an NCCL group whose ops wait on each other?)";
}

}  // namespace prism
