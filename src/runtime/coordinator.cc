#include "runtime/coordinator.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/coordinator_impl.h"

namespace prism::runtime {
namespace {

ReplayOptions replay_options(const CoordinatorOptions& o) {
  ReplayOptions r;
  r.fold = o.fold;
  r.live_ranks = o.live_ranks;
  r.trace_ranks = o.trace_ranks;
  r.trace_ranks.insert(r.trace_ranks.end(), o.live_ranks.begin(), o.live_ranks.end());
  std::sort(r.trace_ranks.begin(), r.trace_ranks.end());
  r.trace_ranks.erase(std::unique(r.trace_ranks.begin(), r.trace_ranks.end()), r.trace_ranks.end());
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

SimTime wire_time(std::int64_t ns) {
  return ns == wire::kNoLimit ? SimTime::never() : SimTime{ns};
}

}  // namespace

Coordinator::Impl::Impl(const ExecutionGraph& g, const ReplayModels& models,
                        CoordinatorOptions options)
    : g_(g),
      options_(std::move(options)),
      server_(*this, wire::ServerOptions{}),
      replay_(g, replay_options(options_), models, this) {
  sessions_.reserve(options_.live_ranks.size());
  for (Rank r : options_.live_ranks) {
    PRISM_CHECK(r >= 0 && r < g.world_size(), "live rank outside the job");
    session_of_rank_[r] = sessions_.size();
    sessions_.emplace_back(g, r);
  }
}

// The earliest virtual time live rank `s` can still send something at.
SimTime Coordinator::Impl::bound(const Session& s) const {
  if (!s.peer) return SimTime::zero();  // not connected yet
  if (s.done) return SimTime::never();
  if (!s.wait.active) return s.last_at;
  return max(s.last_at, s.wait.woken ? s.wait.wake : s.wait.until);
}

SimTime Coordinator::Impl::horizon() const {
  SimTime h = SimTime::never();
  for (const Session& s : sessions_) h = min(h, bound(s));
  return h;
}

bool Coordinator::Impl::connected(Rank rank) const {
  const auto it = session_of_rank_.find(rank);
  return it != session_of_rank_.end() && sessions_[it->second].peer.has_value();
}

Session* Coordinator::Impl::session_of(wire::PeerId peer) {
  const auto it = session_of_peer_.find(peer);
  return it == session_of_peer_.end() ? nullptr : &sessions_[it->second];
}

void Coordinator::Impl::send(Session& s, const wire::Message& m) {
  if (options_.capture) s.capture.entries.push_back(CaptureEntry{m, kNone});
  server_.send(*s.peer, m);
}

void Coordinator::Impl::on_message(wire::PeerId peer, wire::Message m) {
  if (!failed_.is_ok()) return;
  if (const auto* h = std::get_if<wire::Hello>(&m)) return hello(peer, *h);
  Session* s = session_of(peer);
  if (s == nullptr) {
    server_.send(peer, wire::Error{wire::ErrorCode::kRejected, "the first message must be hello"});
    server_.close(peer);
    return;
  }
  s->last_heard = SteadyClock::now();
  if (options_.capture) s->capture.entries.push_back(CaptureEntry{m, kNone});
  Status st = handle(*s, m);
  if (st.is_ok() && s->done) server_.close(peer);  // the rank reads until this close
  if (!st.is_ok()) {
    return fail(std::move(st), s,
                s->mismatched ? wire::ErrorCode::kMismatch : wire::ErrorCode::kRejected);
  }
  progress();
}

void Coordinator::Impl::hello(wire::PeerId peer, const wire::Hello& h) {
  std::string why;
  const auto it = session_of_rank_.find(h.rank);
  if (h.world_size != g_.world_size()) {
    why = fmt::format("world size {}, the job has {}", h.world_size, g_.world_size());
  } else if (it == session_of_rank_.end()) {
    why = fmt::format("rank {} is not a live rank of this emulation", h.rank);
  } else if (sessions_[it->second].peer) {
    why = fmt::format("rank {} is connected already", h.rank);
  }
  if (!why.empty()) {
    server_.send(peer, wire::Error{wire::ErrorCode::kRejected, why});
    server_.close(peer);
    return;
  }
  Session& s = sessions_[it->second];
  s.peer = peer;
  s.pid = h.pid;
  s.program = h.program;
  s.last_heard = SteadyClock::now();
  session_of_peer_[peer] = it->second;
  s.capture = RankCapture{h.rank, h.world_size, h.pid, h.program, options_.job, {}};
  if (options_.capture) s.capture.entries.push_back(CaptureEntry{h, kNone});
  send(s, wire::Welcome{h.rank, h.world_size, 0, options_.job});
  progress();
}

Status Coordinator::Impl::check_time(const Session& s, SimTime at, std::string_view what) const {
  const SimTime b = bound(s);
  if (at >= b) return Status::ok();
  if (s.wait.active && !s.wait.woken) {
    return Status::invalid_argument(
        fmt::format("live rank {} sent {} at {} ns in the middle of wait {} (it waits from {} ns)",
                    s.rank, what, at.ns, s.wait.wait_id, s.wait.at.ns));
  }
  return Status::invalid_argument(fmt::format(
      "live rank {} sent {} at {} ns, before {} ns, where it already was: its clock went back",
      s.rank, what, at.ns, b.ns));
}

Status Coordinator::Impl::handle(Session& s, const wire::Message& m) {
  if (s.done) return Status::invalid_argument(fmt::format("live rank {} spoke after bye", s.rank));
  switch (wire::type_of(m)) {
    case wire::MessageType::kCommInit:
      return s.matcher.declare(std::get<wire::CommInit>(m));
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
      const SimTime end{c.at + c.duration};
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

Status Coordinator::Impl::enter(Session& s, const wire::Op& op) {
  const SimTime at{op.at};
  PRISM_RETURN_IF_ERROR(check_time(s, at, fmt::format("op {}", op.op_id)));
  if (s.entered.contains(op.op_id)) {
    return Status::invalid_argument(
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
  s.bytes += op.bytes;
  replay_.enter(s.rank, gop, at);
  return Status::ok();
}

// Live ranks that split the same parent must agree: one color, one group;
// ranks of one group, one color.
Status Coordinator::Impl::split(Session& s, const wire::CommSplit& m) {
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

Status Coordinator::Impl::start_wait(Session& s, const wire::Wait& w) {
  PRISM_RETURN_IF_ERROR(check_time(s, SimTime{w.at}, fmt::format("wait {}", w.wait_id)));
  if (w.op_id != wire::kAnyOp && !s.entered.contains(w.op_id)) {
    return Status::invalid_argument(
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
void Coordinator::Impl::wake(Session& s, SimTime at, bool answer) {
  WaitState& w = s.wait;
  w.woken = true;
  s.last_heard = SteadyClock::now();  // its silence counts from here
  w.wake = max(w.at, min(at, w.until));
  if (answer && at <= w.until) s.held.emplace_back(w.at, w.wake);
}

// The rank acted at `at`: any wait it was in is over.
void Coordinator::Impl::move_to(Session& s, SimTime at) {
  s.wait.active = false;
  s.last_at = at;
}

Status Coordinator::Impl::step_to(Session& s, SimTime at, std::string_view what) {
  PRISM_RETURN_IF_ERROR(check_time(s, at, what));
  move_to(s, at);
  return Status::ok();
}

void Coordinator::Impl::memory(Session& s, const wire::Memory& m) {
  if (m.action == wire::MemoryAction::kAlloc) {
    s.allocations[m.id] += m.bytes;
    s.allocated += m.bytes;
    s.peak_allocated = std::max(s.peak_allocated, s.allocated);
  } else if (const auto it = s.allocations.find(m.id); it != s.allocations.end()) {
    s.allocated -= it->second;
    s.allocations.erase(it);
  }
}

void Coordinator::Impl::completed(Rank rank, std::int32_t op, SimTime at) {
  Session& s = sessions_[session_of_rank_.at(rank)];
  const std::uint32_t op_id = s.op_id_of.at(op);
  s.op_id_of.erase(op);
  s.answered[op_id] = at;
  s.answers.push_back(at);
  send(s, wire::Complete{op_id, at.ns});
  if (s.wait.active && !s.wait.woken && (s.wait.op_id == wire::kAnyOp || s.wait.op_id == op_id))
    wake(s, at, true);
}

// Runs the replay as far as the live ranks allow, then tells each rank whose
// wait reached its deadline with nothing complete that it may go on.
void Coordinator::Impl::progress() {
  if (!failed_.is_ok() || finished_) return;
  Result<SimTime> next = replay_.advance();
  if (!next.is_ok()) return fail(next.status());
  next_event_ = next.value();
  const SimTime h = horizon();
  for (Session& s : sessions_) {
    WaitState& w = s.wait;
    if (!w.active || w.woken || w.until == SimTime::never() || h < w.until) continue;
    // A rank with every op answered sleeps to its deadline on its own.
    if (s.answered.size() < s.entered.size()) send(s, wire::Horizon{w.wait_id, w.until.ns});
    wake(s, w.until, false);
  }
  finish_if_done();
}

void Coordinator::Impl::finish_if_done() {
  const bool all_done =
      std::all_of(sessions_.begin(), sessions_.end(), [](const Session& s) { return s.done; });
  if (all_done || replay_.stopped()) {
    finished_ = true;
    server_.stop();
    return;
  }
  if (next_event_ == SimTime::never() && horizon() == SimTime::never()) {
    // Every live rank waits for an op the replay can no longer complete.
    fail(deadlock_error(replay_.finish(live_times())));
  }
}

void Coordinator::Impl::on_close(wire::PeerId peer, const Status& why) {
  Session* s = session_of(peer);
  session_of_peer_.erase(peer);
  if (!failed_.is_ok()) return;
  if (s == nullptr) {
    // Only PrismLLM's ranks know the private socket: garbage there means
    // something is badly wrong.
    if (!why.is_ok())
      fail(
          Status::invalid_argument(fmt::format("a peer that never said hello: {}", why.message())));
    return;
  }
  if (s->done && why.is_ok()) return;
  fail(Status::invalid_argument(
      fmt::format("live rank {} (pid {}): {}; {}", s->rank, s->pid,
                  why.is_ok() ? "closed by the coordinator" : why.message(), last_op_text(*s))));
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
