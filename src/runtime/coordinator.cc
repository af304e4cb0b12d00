#include "runtime/coordinator.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/coordinator_impl.h"
#include "simulation/node_failure.h"

namespace prism::runtime {
namespace {

ReplayOptions replay_options(const ExecutionGraph& g, const CoordinatorOptions& o) {
  ReplayOptions r;
  r.fold = o.fold;
  r.live_ranks = o.live_ranks;
  r.trace_ranks = o.trace_ranks;
  r.trace_ranks.insert(r.trace_ranks.end(), o.live_ranks.begin(), o.live_ranks.end());
  std::sort(r.trace_ranks.begin(), r.trace_ranks.end());
  r.trace_ranks.erase(std::unique(r.trace_ranks.begin(), r.trace_ranks.end()), r.trace_ranks.end());
  r.jitter_ppm = o.jitter_ppm;
  r.jitter_seed = o.jitter_seed;
  r.fold_tags = o.fold_tags;
  if (o.failure) {
    add_failure_fold_tags(o.failed_ranks, g.world_size(), r.fold_tags);
    r.failed_ranks = o.failed_ranks;
    r.fail_at = o.failure->at;
  }
  return r;
}

// The graph's marker for a live rank's.
MarkerKind marker_kind(wire::MarkerCode c) {
  switch (c) {
    case wire::MarkerCode::kIterationBegin:
      return MarkerKind::kIteration;
    case wire::MarkerCode::kIterationEnd:
      return MarkerKind::kIterationEnd;
    case wire::MarkerCode::kMicrobatch:
      return MarkerKind::kMicrobatch;
    case wire::MarkerCode::kPhase:
      return MarkerKind::kPhase;
  }
  return MarkerKind::kPhase;
}

// Sums of what a rank reports (bytes entered, memory held): a count of
// non-negative values that stops at the largest int64 instead of wrapping.
std::int64_t saturating_add(std::int64_t a, std::int64_t b) {
  std::int64_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? std::numeric_limits<std::int64_t>::max() : sum;
}

SimTime wire_time(std::int64_t ns) {
  return ns == wire::kNoLimit ? SimTime::never() : SimTime{ns};
}

LiveSessionOptions live_options(const ExecutionGraph& g, const CoordinatorOptions& o) {
  return LiveSessionOptions{o.live_ranks, g.world_size(), "live rank", o.timeout, o.secret};
}

}  // namespace

Coordinator::Impl::Impl(const ExecutionGraph& g, const ReplayModels& models,
                        CoordinatorOptions options)
    : g_(g),
      options_(std::move(options)),
      live_(live_options(g, options_), *this),
      replay_(g, replay_options(g, options_), models, this) {
  ranks_.reserve(options_.live_ranks.size());
  for (Rank r : options_.live_ranks) {
    PRISM_CHECK(r >= 0 && r < g.world_size(), "live rank outside the job");
    PRISM_CHECK(!std::binary_search(options_.failed_ranks.begin(), options_.failed_ranks.end(), r),
                "a live rank on the failed node");
    index_of_[r] = ranks_.size();
    ranks_.emplace_back(g, r);
  }
}

// The earliest virtual time live rank `s` can still send something at.
SimTime Coordinator::Impl::bound(const LiveRank& s) const {
  if (!live_.connected(s.rank)) return SimTime::zero();  // not connected yet
  if (s.done) return SimTime::never();
  if (!s.wait.active) return s.last_at;
  return max(s.last_at, s.wait.woken ? s.wait.wake : s.wait.until);
}

SimTime Coordinator::Impl::horizon() const {
  SimTime h = SimTime::never();
  for (const LiveRank& s : ranks_) h = min(h, bound(s));
  return h;
}

// While `s` stays silent nothing happens before the replay's next event or
// another live rank's next message, so none of its ops can complete earlier.
SimTime Coordinator::Impl::quiet_until(const LiveRank& s) const {
  SimTime q = next_event_;
  for (const LiveRank& other : ranks_)
    if (&other != &s) q = min(q, bound(other));
  return q;
}

void Coordinator::Impl::send(LiveRank& s, const wire::Message& m) {
  if (options_.capture) s.capture.entries.push_back(CaptureEntry{m, kNone});
  live_.send(s.rank, m);
}

std::string Coordinator::Impl::not_expected(Rank r) const {
  return fmt::format("rank {} is not a live rank of this emulation", r);
}

void Coordinator::Impl::hello(Rank r, const wire::Hello& h) {
  LiveRank& s = live_rank(r);
  s.pid = h.pid;
  s.program = h.program;
  s.capture = RankCapture{h.rank, h.world_size, h.pid, h.program, options_.job, {}};
  if (options_.capture) s.capture.entries.push_back(CaptureEntry{h, kNone});
  send(s, wire::Welcome{h.rank, h.world_size, 0, options_.job});
  progress();
}

Status Coordinator::Impl::handle(Rank r, const wire::Message& m) {
  LiveRank& s = live_rank(r);
  if (options_.capture) s.capture.entries.push_back(CaptureEntry{m, kNone});
  PRISM_RETURN_IF_ERROR(dispatch(s, m));
  if (s.done) live_.close(r);  // the rank reads until this close
  progress();
  return Status::ok();
}

wire::ErrorCode Coordinator::Impl::error_code(Rank r) const {
  return live_rank(r).mismatched ? wire::ErrorCode::kMismatch : wire::ErrorCode::kRejected;
}

Status Coordinator::Impl::check_time(const LiveRank& s, SimTime at, std::string_view what) const {
  const SimTime b = bound(s);
  if (at >= b) return Status::ok();
  if (s.wait.active && !s.wait.woken) {
    return Status::failed_precondition(
        fmt::format("live rank {} sent {} at {} ns in the middle of wait {} (it waits from {} ns)",
                    s.rank, what, at.ns, s.wait.wait_id, s.wait.at.ns));
  }
  return Status::invalid_argument(fmt::format(
      "live rank {} sent {} at {} ns, before {} ns, where it already was: its clock went back",
      s.rank, what, at.ns, b.ns));
}

// A communicator declared by size, position and id alone (the NCCL drop-in's
// ncclCommInitRank) with its members, where it has one rank or the
// rendezvous store knows its id (runtime/comm_ids.h); else as it came, for
// the matcher to place by size and position.
wire::CommInit Coordinator::Impl::with_members(const LiveRank& s, const wire::CommInit& c) const {
  wire::CommInit known = c;
  if (!c.members.empty() || c.nranks == g_.world_size()) return known;
  if (c.nranks == 1 && c.rank_in_comm == 0) {
    known.members = {s.rank};
  } else if (options_.comm_ids != nullptr && c.id_hash != 0) {
    known.members = options_.comm_ids->members_of(c.id_hash, c.nranks, c.rank_in_comm, s.rank);
  }
  return known;
}

Status Coordinator::Impl::dispatch(LiveRank& s, const wire::Message& m) {
  if (s.done)
    return Status::failed_precondition(fmt::format("live rank {} spoke after bye", s.rank));
  switch (wire::type_of(m)) {
    case wire::MessageType::kCommInit:
      return s.matcher.declare(with_members(s, std::get<wire::CommInit>(m)));
    case wire::MessageType::kCommSplit:
      return split(s, std::get<wire::CommSplit>(m));
    case wire::MessageType::kOp:
      return enter(s, std::get<wire::Op>(m));
    case wire::MessageType::kWait:
      return start_wait(s, std::get<wire::Wait>(m));
    case wire::MessageType::kMemory: {
      const auto& mem = std::get<wire::Memory>(m);
      PRISM_RETURN_IF_ERROR(step_to(s, SimTime{mem.at}, "a memory event"));
      memory(s, mem);
      return Status::ok();
    }
    case wire::MessageType::kMarker: {
      const auto& mk = std::get<wire::Marker>(m);
      PRISM_RETURN_IF_ERROR(step_to(s, SimTime{mk.at}, "a marker"));
      const MarkerKind kind = marker_kind(mk.code);
      s.marks.record(kind, s.last_at);
      replay_.mark(s.rank, kind, s.last_at);
      return Status::ok();
    }
    case wire::MessageType::kCompute: {
      // Reported when it ended: its start may lie before the rank's bound.
      const auto& c = std::get<wire::Compute>(m);
      std::int64_t end_ns = 0;  // both are non-negative (wire/payload.cc), the sum may not fit
      if (__builtin_add_overflow(c.at, c.duration, &end_ns))
        return Status::invalid_argument(fmt::format(
            "live rank {} sent a compute report at {} ns lasting {} ns: it ends past the "
            "largest time ({} ns)",
            s.rank, c.at, c.duration, SimTime::never().ns));
      const SimTime end{end_ns};
      PRISM_RETURN_IF_ERROR(step_to(s, end, "a compute report"));
      s.computed.push_back(LiveCompute{s.rank, c.stream, c.name, SimTime{c.at}, end});
      return Status::ok();
    }
    case wire::MessageType::kBye: {
      const auto& b = std::get<wire::Bye>(m);
      PRISM_RETURN_IF_ERROR(step_to(s, SimTime{b.at}, "its goodbye"));
      s.finish = s.last_at;
      s.done = true;
      s.exit_code = b.exit_code;
      return Status::ok();
    }
    default:
      return Status::invalid_argument(
          fmt::format("live rank {} sent {}, which only the coordinator sends", s.rank,
                      wire::to_string(wire::type_of(m))));
  }
}

Status Coordinator::Impl::enter(LiveRank& s, const wire::Op& op) {
  const SimTime at{op.at};
  PRISM_RETURN_IF_ERROR(check_time(s, at, fmt::format("op {}", op.op_id)));
  if (s.entered.contains(op.op_id)) {
    return Status::failed_precondition(
        fmt::format("live rank {} entered op {} twice", s.rank, op.op_id));
  }
  Result<std::int32_t> matched = s.matcher.match(op);
  if (!matched.is_ok()) {
    s.mismatched = true;
    return matched.status();
  }
  const std::int32_t gop = matched.value();
  if (options_.capture) s.capture.entries.back().graph_op = gop;
  move_to(s, at);
  s.entered[op.op_id] = gop;
  s.op_id_of[gop] = op.op_id;
  s.last_op = gop;
  s.last_op_at = at;
  ++s.ops;
  s.bytes = saturating_add(s.bytes, op.bytes);
  replay_.enter(s.rank, gop, at);
  return Status::ok();
}

// Live ranks that split the same parent must agree: one color, one group;
// ranks of one group, one color.
Status Coordinator::Impl::split(LiveRank& s, const wire::CommSplit& m) {
  PRISM_ASSIGN_OR_RETURN(OpMatcher::Split got, s.matcher.split(m));
  const std::vector<Rank>& group = got.info.members;
  for (const auto& [key, given] : splits_) {
    const auto& [parent, seq, color] = key;
    const auto& [other, other_group] = given;
    if (parent != got.parent || seq != got.seq || (color == m.color) == (other_group == group))
      continue;
    return Status::invalid_argument(fmt::format(
        "rank {} split #{} of a communicator of {} ranks with color {} is given [{}] by the "
        "graph, but live rank {} passed color {} and was given [{}]: ranks that pass one color "
        "share one group, and the ranks of a group pass one color",
        s.rank, got.seq, parent.size(), m.color, fmt::join(group, ","), other, color,
        fmt::join(other_group, ",")));
  }
  splits_.emplace(std::tuple{std::move(got.parent), got.seq, m.color}, std::pair{s.rank, group});
  send(s, got.info);
  return Status::ok();
}

Status Coordinator::Impl::start_wait(LiveRank& s, const wire::Wait& w) {
  PRISM_RETURN_IF_ERROR(check_time(s, SimTime{w.at}, fmt::format("wait {}", w.wait_id)));
  if (w.op_id != wire::kAnyOp && !s.entered.contains(w.op_id)) {
    return Status::failed_precondition(
        fmt::format("live rank {} waits for op {}, which it never entered", s.rank, w.op_id));
  }
  if (w.answers_seen > s.answers.size()) {
    return Status::invalid_argument(fmt::format("live rank {} has seen {} answers of {} sent",
                                                s.rank, w.answers_seen, s.answers.size()));
  }
  move_to(s, SimTime{w.at});
  s.wait = WaitState{true, false, w.wait_id, w.op_id, SimTime{w.at}, wire_time(w.until), {}};
  ++s.waits;
  // An answer already sent may end the wait at once.
  if (w.op_id != wire::kAnyOp) {
    if (const auto it = s.answered.find(w.op_id); it != s.answered.end()) wake(s, it->second, true);
  } else if (w.answers_seen < s.answers.size()) {
    wake(s, *std::min_element(s.answers.begin() + w.answers_seen, s.answers.end()), true);
  }
  return Status::ok();
}

// The wait ends at `at`: an answer's completion (`answer`: the rank was held
// for communication) or its own deadline.
void Coordinator::Impl::wake(LiveRank& s, SimTime at, bool answer) {
  WaitState& w = s.wait;
  w.woken = true;
  live_.heard(s.rank);  // its silence counts from here
  w.wake = max(w.at, min(at, w.until));
  if (answer && at <= w.until) s.held.emplace_back(w.at, w.wake);
}

// The rank acted at `at`: any wait it was in is over.
void Coordinator::Impl::move_to(LiveRank& s, SimTime at) {
  s.wait.active = false;
  s.last_at = at;
}

Status Coordinator::Impl::step_to(LiveRank& s, SimTime at, std::string_view what) {
  PRISM_RETURN_IF_ERROR(check_time(s, at, what));
  move_to(s, at);
  return Status::ok();
}

void Coordinator::Impl::memory(LiveRank& s, const wire::Memory& m) {
  if (m.action == wire::MemoryAction::kAlloc) {
    std::int64_t& held = s.allocations[m.id];
    held = saturating_add(held, m.bytes);
    s.allocated = saturating_add(s.allocated, m.bytes);
    s.peak_allocated = std::max(s.peak_allocated, s.allocated);
  } else if (const auto it = s.allocations.find(m.id); it != s.allocations.end()) {
    s.allocated = std::max<std::int64_t>(s.allocated - it->second, 0);  // after a saturated sum
    s.allocations.erase(it);
  }
}

void Coordinator::Impl::completed(Rank rank, std::int32_t op, SimTime at) {
  LiveRank& s = live_rank(rank);
  const std::uint32_t op_id = s.op_id_of.at(op);
  s.op_id_of.erase(op);
  s.answered[op_id] = at;
  s.answers.push_back(at);
  std::int64_t nccl = 0;
  if (const auto it = s.nccl_pending.find(op); it != s.nccl_pending.end()) {
    nccl = it->second;
    s.nccl_pending.erase(it);
  }
  s.nccl_bytes = saturating_add(s.nccl_bytes, nccl);
  send(s, wire::Complete{op_id, at.ns, nccl});
  if (s.wait.active && !s.wait.woken && (s.wait.op_id == wire::kAnyOp || s.wait.op_id == op_id))
    wake(s, at, true);
}

void Coordinator::Impl::nccl_allocated(Rank rank, std::int32_t op, std::int64_t bytes) {
  std::int64_t& pending = live_rank(rank).nccl_pending[op];
  pending = saturating_add(pending, bytes);
}

// Runs the replay as far as the live ranks allow, then tells each rank whose
// wait reached its deadline with nothing complete that it may go on.
void Coordinator::Impl::progress() {
  if (live_.ended()) return;
  Result<SimTime> next = replay_.advance();
  if (!next.is_ok()) return live_.fail(next.status());
  next_event_ = next.value();
  const SimTime h = horizon();
  for (LiveRank& s : ranks_) {
    WaitState& w = s.wait;
    if (!w.active || w.woken || w.until == SimTime::never() || h < w.until) continue;
    // A rank with every op answered sleeps to its deadline on its own.
    if (s.answered.size() < s.entered.size())
      send(s, wire::Horizon{w.wait_id, w.until.ns, max(w.until, quiet_until(s)).ns});
    wake(s, w.until, false);
  }
  finish_if_done();
}

void Coordinator::Impl::finish_if_done() {
  const bool all_done =
      std::all_of(ranks_.begin(), ranks_.end(), [](const LiveRank& s) { return s.done; });
  if (all_done || replay_.stopped()) return live_.finish();
  if (next_event_ == SimTime::never() && horizon() == SimTime::never()) {
    // Every live rank waits for an op the replay can no longer complete.
    ReplayResult r = replay_.finish(live_times());
    if (options_.failure && r.outcome == ReplayResult::Outcome::kDeadlock)
      return end_hung(std::move(r));
    live_.fail(deadlock_error(r));
  }
}

// The node failure hung the job: the live ranks still in it are told, as
// their NCCL watchdogs would end them, and the run ends with the result.
void Coordinator::Impl::end_hung(ReplayResult r) {
  r.failure =
      node_failure_replay(*options_.failure, options_.failed_ranks, options_.nccl_timeout, r);
  for (LiveRank& s : ranks_) {
    if (s.done || !live_.open(s.rank)) continue;
    send(s, wire::Error{wire::ErrorCode::kAborted, hang_text(s, *r.failure)});
    live_.close(s.rank);
  }
  hung_ = std::move(r);
  live_.finish();
}

Status Coordinator::Impl::closed(Rank r, const Status& why) {
  const LiveRank& s = live_rank(r);
  if (s.done && why.is_ok()) return Status::ok();
  return Status::unavailable(fmt::format("live rank {} (pid {}): {}; {}", s.rank, s.pid,
                                         why.is_ok() ? "closed by the coordinator" : why.message(),
                                         last_op_text(s)));
}

Coordinator::Coordinator(const ExecutionGraph& g, const ReplayModels& models,
                         CoordinatorOptions options)
    : impl_(std::make_unique<Impl>(g, models, std::move(options))) {}

Coordinator::~Coordinator() = default;

Result<wire::Address> Coordinator::listen(const wire::Address& a) {
  return impl_->listen(a);
}

Result<CoordinatorResult> Coordinator::run(const std::function<Status()>& tick) {
  return impl_->run(tick);
}

bool Coordinator::connected(Rank rank) const {
  return impl_->connected(rank);
}

}  // namespace prism::runtime
