// The coordinator's run loop and its ends: timeouts, failures with messages
// that name the rank and its last op, and the reports of a finished run.
#include <algorithm>

#include <fmt/format.h>

#include "runtime/coordinator_impl.h"
#include "runtime/launcher.h"
#include "simulation/node_failure.h"

namespace prism::runtime {
namespace {

std::string ms(SimTime t) {
  return fmt::format("{:.6f} ms", static_cast<double>(t.ns) / 1e6);
}

// The length of the union of `spans` within [lo, hi).
SimTime covered(std::vector<Interval> spans, SimTime lo, SimTime hi) {
  std::sort(spans.begin(), spans.end());
  SimTime total, reach = lo;
  for (const auto& [a, b] : spans) {
    const SimTime from = max(a, reach), to = min(b, hi);
    if (to > from) total += to - from;
    reach = max(reach, min(b, hi));
  }
  return total;
}

}  // namespace

Result<CoordinatorResult> Coordinator::Impl::run(const std::function<Status()>& tick) {
  PRISM_CHECK(!ranks_.empty(), "an emulation needs at least one live rank");
  progress();
  PRISM_RETURN_IF_ERROR(live_.run(tick));
  CoordinatorResult out;
  if (hung_) {
    out.replay = std::move(*hung_);
  } else {
    out.replay = replay_.finish(live_times());
    // Every live rank said goodbye, and virtual ranks still wait: on the
    // failed node, when it failed.
    if (options_.failure)
      out.replay.failure = node_failure_replay(*options_.failure, options_.failed_ranks,
                                               options_.nccl_timeout, out.replay);
  }
  // A rank that left with ops of the graph not entered is at fault, not the
  // failure.
  const bool left_early = std::any_of(ranks_.begin(), ranks_.end(), [](const LiveRank& s) {
    return s.done && s.matcher.remaining() > 0;
  });
  if (out.replay.outcome == ReplayResult::Outcome::kDeadlock && (!out.replay.failure || left_early))
    return deadlock_error(out.replay);
  for (const LiveRank& s : ranks_) {
    out.live.push_back(report_of(s));
    if (options_.capture) out.captures.push_back(s.capture);
    out.computed.insert(out.computed.end(), s.computed.begin(), s.computed.end());
  }
  return out;
}

// A rank that ran out of memory stopped the replay: the ones still running
// are told.
void Coordinator::Impl::finishing() {
  if (!replay_.stopped()) return;
  for (LiveRank& s : ranks_) {
    if (!live_.open(s.rank)) continue;
    send(s,
         wire::Error{wire::ErrorCode::kAborted, "the emulation ended: a rank ran out of memory"});
    live_.close(s.rank);
  }
}

std::string Coordinator::Impl::last_op_text(const LiveRank& s) const {
  if (s.last_op == kNone) {
    return fmt::format("it had entered no op ({} ahead in the graph)", s.matcher.remaining());
  }
  return fmt::format("its last op: {}, entered at {}", s.matcher.describe(s.last_op),
                     ms(s.last_op_at));
}

std::string Coordinator::Impl::waiting_text(const LiveRank& s) const {
  if (!s.wait.active || s.wait.op_id == wire::kAnyOp) {
    std::vector<std::string> ops;
    for (const auto& [op_id, gop] : s.entered)
      if (!s.answered.contains(op_id)) ops.push_back(s.matcher.describe(gop));
    std::sort(ops.begin(), ops.end());
    return fmt::format("live rank {} waits for any of: {}", s.rank, fmt::join(ops, "; "));
  }
  return fmt::format("live rank {} waits for {} since {}", s.rank,
                     s.matcher.describe(s.entered.at(s.wait.op_id)), ms(s.wait.at));
}

// Only silence the emulation waits on counts: a rank in a wait the replay
// has not ended yet is silent by right. (LiveSession waits for every rank
// to connect first.)
Status Coordinator::Impl::check(SteadyClock::time_point now) {
  const SimTime h = horizon();
  for (const LiveRank& s : ranks_) {
    if (s.done || bound(s) != h || (s.wait.active && !s.wait.woken)) continue;
    if (now - live_.last_heard(s.rank) > options_.timeout) {
      return Status::deadline_exceeded(fmt::format(
          "live rank {} (pid {}) sent nothing for {} while the emulation waited for it{}; {}",
          s.rank, s.pid, live_.seconds_of_timeout(),
          process_stopped(s.pid) ? " (the process is stopped: SIGSTOP, job control or a debugger)"
                                 : "",
          last_op_text(s)));
    }
  }
  return Status::ok();
}

// The rank's measured span, its complete iterations (from its first
// iteration marker, or 0, to its last end marker, or its goodbye), and its
// compute in that span: the union of the compute it reported, or, for a
// rank that reports none, whenever it was not held in a wait for a
// completion.
Coordinator::Impl::Measured Coordinator::Impl::measure(const LiveRank& s) const {
  Measured m;
  m.finish = s.done ? s.finish : s.last_at;
  const SimTime end = s.marks.last_end(m.finish);
  const std::vector<SimTime> begins = s.marks.complete();
  const SimTime lo = begins.empty() ? SimTime::zero() : begins.front();
  m.span = max(end - lo, SimTime::zero());
  if (s.computed.empty()) {
    m.compute = m.span - covered(s.held, lo, end);
  } else {
    std::vector<Interval> spans;
    for (const LiveCompute& c : s.computed) spans.emplace_back(c.start, c.end);
    m.compute = covered(std::move(spans), lo, end);
  }
  return m;
}

std::vector<LiveRankTimes> Coordinator::Impl::live_times() const {
  std::vector<LiveRankTimes> out;
  for (const LiveRank& s : ranks_) {
    const Measured m = measure(s);
    out.push_back(LiveRankTimes{m.compute, m.span - m.compute, m.finish});
  }
  return out;
}

// Per iteration: the measured span divided by the rank's iterations.
LiveRankReport Coordinator::Impl::report_of(const LiveRank& s) const {
  const Measured m = measure(s);
  LiveRankReport r;
  r.rank = s.rank;
  r.pid = s.pid;
  r.exit_code = s.exit_code;
  r.said_bye = s.done;
  r.finish = m.finish;
  r.iterations = s.marks.count();
  r.iteration_times = iteration_lengths(s.marks, m.finish);
  r.iteration_time = mean_length(r.iteration_times);
  r.compute = SimTime{m.compute.ns / r.iterations};
  r.wait = max(r.iteration_time - r.compute, SimTime::zero());
  r.ops = s.ops;
  r.bytes = s.bytes;
  for (const Op& op : g_.roles[g_.role_of_rank[s.rank]].ops) {
    if (!is_communication(op.kind)) continue;
    ++r.graph_ops;
    r.graph_bytes += op.bytes.count;
  }
  r.waits = s.waits;
  r.peak_allocated = Bytes{s.peak_allocated};
  r.nccl = Bytes{s.nccl_bytes};
  return r;
}

// What a live rank is told when the node failure hung the job: the op it
// waits in and when its ProcessGroupNCCL watchdog would have aborted it.
std::string Coordinator::Impl::hang_text(const LiveRank& s, const NodeFailureReplay& f) const {
  std::optional<SimTime> since;
  for (const NodeFailureReplay::Blocked& b : f.blocked)
    if (std::binary_search(b.waiting.begin(), b.waiting.end(), s.rank))
      since = since ? min(*since, b.since) : b.since;
  std::string out = fmt::format(
      "the emulation ended: node {} failed at {} and the job hangs (no op completes after {}); "
      "{}",
      f.node, ms(f.at), ms(f.hang_at), waiting_text(s));
  if (since)
    out += fmt::format("; its NCCL watchdog (--nccl-timeout {:g} s) would abort it at {:.6f} s",
                       static_cast<double>(f.timeout.ns) / 1e9, (*since + f.timeout).seconds());
  return out;
}

Status Coordinator::Impl::deadlock_error(const ReplayResult& r) const {
  std::string why;
  for (const LiveRank& s : ranks_) {
    if (!s.done) {
      why += waiting_text(s) + "; ";
    } else if (s.matcher.remaining() > 0) {
      why += fmt::format(
          "live rank {} said goodbye with {} communication ops of the graph not "
          "entered; ",
          s.rank, s.matcher.remaining());
    }
  }
  if (!r.blocked.empty()) {
    const BlockedRank& b = r.blocked.front();
    why += fmt::format("rank {}{} waits for {}", b.rank,
                       b.num_ranks > 1 ? fmt::format(" (and {} like it)", b.num_ranks - 1) : "",
                       b.waiting_for);
  }
  return Status::invalid_argument(fmt::format("the emulation cannot go on: {}", why));
}

}  // namespace prism::runtime
