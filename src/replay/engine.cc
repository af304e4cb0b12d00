#include "replay/engine.h"

#include "replay/nccl_memory.h"

#include <algorithm>
#include <array>
#include <map>
#include <tuple>

#include <fmt/format.h>

namespace prism {
namespace {

// SplitMix64's finalizer: a well-mixed 64-bit hash of `x`.
std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

Result<ReplayResult> replay(const ExecutionGraph& g, const ReplayOptions& options,
                            const ReplayModels& models) {
  PRISM_CHECK(models.network && models.compute && models.memory, "replay needs all three models");
  if (options.fold && !models.network->folding_exact()) {
    // Folded copies would share resources the model cannot see: replay all.
    ReplayOptions unfolded = options;
    unfolded.fold = false;
    return replay(g, unfolded, models);
  }
  PRISM_ASSIGN_OR_RETURN(ReplayResult r, Engine(g, options, models).run());
  if (r.outcome == ReplayResult::Outcome::kDeadlock && r.simulated_ranks < r.world_size) {
    // Folded, a blocked class names only its representative. A deadlock is
    // rare and worth the unfolded replay that names every blocked rank and
    // the exact peers it waits for.
    ReplayOptions exact = options;
    exact.fold = false;
    exact.trace_ranks.clear();
    PRISM_ASSIGN_OR_RETURN(ReplayResult unfolded, Engine(g, exact, models).run());
    r.blocked = std::move(unfolded.blocked);
  }
  return r;
}

Result<ReplayResult> Engine::run() {
  start();
  PRISM_ASSIGN_OR_RETURN(const SimTime left, step());
  PRISM_CHECK(left == SimTime::never() || stopped_, "a replay without live ranks stopped early");
  return collect();
}

void Engine::start() {
  for (std::uint32_t s = 0; s < sranks_.size(); ++s) {
    if (sranks_[s].live) continue;  // live ranks' ops come from outside
    for (std::uint16_t st = 0; st < g_.roles[sranks_[s].role].streams.size(); ++st)
      wakes_.emplace_back(s, st);
  }
  drain_wakes();
}

// Runs events in time order until none is left, the replay stopped, or the
// next one is at or after the live ranks' horizon (asked after every event:
// a live rank's completion can lower it). Returns the next event's time.
Result<SimTime> Engine::step() {
  while (!stopped_) {
    const SimTime horizon = listener_ != nullptr ? listener_->horizon() : SimTime::never();
    const SimTime tn = models_.network->next_completion();
    const SimTime tq = queue_.next_time();
    const SimTime next = min(tn, tq);
    if (next == SimTime::never() || next >= horizon) return next;
    if (next > kTimeHorizon) {
      return Status::invalid_argument(fmt::format(
          "simulated time passed {} s (the limit): the graph's durations add up to too much",
          kTimeHorizon.ns / 1'000'000'000));
    }
    if (tn <= tq) {  // transfers before compute at equal times: a fixed rule
      queue_.advance_to(tn);
      now_ = tn;
      done_.clear();
      models_.network->take_completed(tn, &done_);
      for (TransferId id : done_) finish_transfer(id);
    } else {
      const auto e = queue_.pop();
      now_ = e.time;
      if (e.priority() == kLiveArrival) {
        arrive_live(e.payload.srank, e.payload.op);
      } else {
        StreamState& ss = streams_[sranks_[e.payload.srank].first_stream + e.payload.stream];
        if (!dead(e.payload.srank))  // else its node failed: the op never ends
          complete(Arrival{static_cast<std::int32_t>(e.payload.srank), e.payload.stream,
                           e.payload.op, ss.issued_at},
                   ss.issued_at);
      }
    }
    drain_wakes();
  }
  if (!error_.is_ok()) return error_;
  return SimTime::never();
}

void Engine::drain_wakes() {
  for (std::size_t i = 0; i < wakes_.size(); ++i) try_advance(wakes_[i].first, wakes_[i].second);
  wakes_.clear();
}

void Engine::try_advance(std::uint32_t s, std::uint16_t st) {
  SimRank& sr = sranks_[s];
  StreamState& ss = streams_[sr.first_stream + st];
  const std::vector<std::int32_t>& list = tables_[sr.role].stream_ops[st];
  const Role& role = g_.roles[sr.role];
  while (ss.in_flight == 0 && !ss.finished && !stopped_ && !dead(s)) {
    if (ss.pos == list.size()) {
      ss.finished = true;
      return;
    }
    const std::int32_t oi = list[ss.pos];
    const Op& op = role.ops[oi];
    if (op.group != 0) {
      ss.waiting_dep = !issue_group(s, st);
      return;
    }
    if (!deps_done(sr, op)) {
      ss.waiting_dep = true;
      return;
    }
    ss.waiting_dep = false;
    ++ss.pos;
    if (start_op(s, st, oi)) ss.in_flight = 1;
  }
}

bool Engine::deps_done(const SimRank& sr, const Op& op) const {
  const Role& role = g_.roles[sr.role];
  const RoleTables& t = tables_[sr.role];
  for (std::uint32_t i = op.deps_begin; i < op.deps_end; ++i)
    if (dep_done_[sr.first_dep + t.dep_index[role.deps[i]]] == SimTime::never()) return false;
  return true;
}

// Issues the NCCL group starting at the stream's position if every op of it
// is ready; the stream moves on when all of them have completed.
bool Engine::issue_group(std::uint32_t s, std::uint16_t st) {
  SimRank& sr = sranks_[s];
  StreamState& ss = streams_[sr.first_stream + st];
  const std::vector<std::int32_t>& list = tables_[sr.role].stream_ops[st];
  const Role& role = g_.roles[sr.role];
  const std::uint32_t group = role.ops[list[ss.pos]].group;
  std::uint32_t end = ss.pos;
  while (end < list.size() && role.ops[list[end]].group == group) {
    if (!deps_done(sr, role.ops[list[end]])) return false;
    ++end;
  }
  const std::uint32_t begin = ss.pos;
  ss.pos = end;
  ss.in_flight = end - begin;
  for (std::uint32_t i = begin; i < end; ++i)
    PRISM_CHECK(start_op(s, st, list[i]), "NCCL group holds a non-communication op");
  return true;
}

SimTime Engine::compute_duration(const SimRank& sr, std::int32_t oi, const Op& op) const {
  const SimTime d =
      op.cost == kNone ? op.duration : models_.compute->duration(g_.roles[sr.role].costs[op.cost]);
  SimTime scaled = scale_duration(d, sr.scale_ppm);
  if (sr.nccl_sms > 0) {
    // The kernel gets the SMs NCCL leaves it: sm_count / (sm_count - held).
    const std::int64_t sms = options_.sm_count;
    const std::int64_t free = std::max<std::int64_t>(sms - sr.nccl_sms, 1);
    scaled = scale_duration(scaled, (sms * 1'000'000 + free - 1) / free);
  }
  if (options_.jitter_ppm <= 0) return scaled;
  // A factor in [1, 1 + jitter_ppm / 1e6] from (seed, rank, op) alone: the
  // same in every replay, whatever the order of events.
  std::uint64_t h = mix64(options_.jitter_seed);
  h = mix64(h ^ static_cast<std::uint64_t>(sr.rank));
  h = mix64(h ^ static_cast<std::uint64_t>(oi));
  const auto extra =
      static_cast<std::int64_t>(h % static_cast<std::uint64_t>(options_.jitter_ppm + 1));
  return scale_duration(scaled, 1'000'000 + extra);
}

bool Engine::start_op(std::uint32_t s, std::uint16_t st, std::int32_t oi) {
  SimRank& sr = sranks_[s];
  const Op& op = g_.roles[sr.role].ops[oi];
  switch (op.kind) {
    case OpKind::kCompute:
      streams_[sr.first_stream + st].issued_at = now_;
      account(sr, +1, 0);
      queue_.push(now_ + compute_duration(sr, oi, op), 0, Event{s, st, oi});
      return true;
    case OpKind::kCollective:
      arrive_collective(s, st, oi, op);
      return true;
    case OpKind::kSend:
    case OpKind::kRecv:
      post_p2p(s, st, oi, op);
      return true;
    case OpKind::kAlloc:
      if (!alloc_op(s, st, oi, op)) return true;  // out of memory: the replay stops
      break;
    case OpKind::kFree:
      free_op(s, oi, op);
      break;
    case OpKind::kMarker:
      sr.iteration_marks.record(op.marker, now_);
      break;
    case OpKind::kEventRecord:
    case OpKind::kEventWait:
      break;
  }
  // Instantaneous ops complete now; the stream goes on without an event.
  record_completion(Arrival{static_cast<std::int32_t>(s), st, oi, now_}, now_);
  return false;
}

void Engine::arrive_collective(std::uint32_t s, std::uint16_t st, std::int32_t oi, const Op& op) {
  const SimRank& sr = sranks_[s];
  const std::int32_t comm = comm_of_slot_[sr.first_slot + op.ref];
  const std::int64_t seq = tables_[sr.role].comm_index[oi];
  CollectiveRendezvous& c = comms_[comm];
  if (!c.arrive(seq, Arrival{static_cast<std::int32_t>(s), st, oi, now_})) return;
  Transfer t;
  t.kind = Transfer::Kind::kCollective;
  t.collective = op.collective;
  t.dtype = op.dtype;
  t.bytes = op.bytes;
  t.ranks = c.real_ranks();
  t.num_nodes = c.num_nodes();
  t.max_ranks_per_node = c.max_ranks_per_node();
  t.multiplicity = c.multiplicity();
  if (!c.admitted(op.collective)) {
    if (Status s = models_.network->admit(t); !s.is_ok()) {
      error_ = s;
      stopped_ = true;
      return;
    }
    c.set_admitted(op.collective);
  }
  InFlight rec;
  rec.comm = comm;
  rec.seq = seq;
  rec.nccl = op.transport == Transport::kNccl;
  if (models_.nccl != nullptr && rec.nccl) {
    const NcclMemory::GroupConnect g =
        models_.nccl->connect_group(comm, models_.nccl->collective_need(t));
    if (g.bytes != 0 || g.init) {
      for (const Arrival& a : c.arrivals(seq))
        add_nccl(a, models_.nccl->member_bytes(static_cast<std::uint32_t>(a.srank), g));
    }
  }
  start_transfer(t, rec, c.arrivals(seq));
}

void Engine::post_p2p(std::uint32_t s, std::uint16_t st, std::int32_t oi, const Op& op) {
  const SimRank& sr = sranks_[s];
  Rank peer = kNone;
  const P2PRendezvous::Key channel = p2p_channel(s, op, &peer);
  P2PRendezvous::Match m;
  if (!p2p_.post(op.kind == OpKind::kSend, channel,
                 p2p_seq_[sr.first_p2p + tables_[sr.role].comm_index[oi]],
                 Arrival{static_cast<std::int32_t>(s), st, oi, now_}, &m))
    return;
  // Geometry from the real pair around the sender (folded: its representative).
  const SimRank& sender = sranks_[m.send.srank];
  const Rank src = sender.rank;
  const Rank dst = resolver_.peer(g_.roles[sender.role].ops[m.send.op].ref, src);
  const std::array<std::int32_t, 2> pair{src, dst};
  Transfer t;
  t.kind = Transfer::Kind::kPointToPoint;
  t.dtype = op.dtype;
  t.bytes = op.bytes;
  t.ranks = pair;
  t.num_nodes = g_.layout.node_of(src) == g_.layout.node_of(dst) ? 1 : 2;
  t.max_ranks_per_node = 3 - t.num_nodes;
  t.multiplicity = fold_.class_size[m.send.srank];
  const bool nccl = op.transport == Transport::kNccl;
  if (models_.nccl != nullptr && nccl) {
    add_nccl(m.send, models_.nccl->on_transfer(static_cast<std::uint32_t>(m.send.srank), dst, t));
    add_nccl(m.recv, models_.nccl->on_transfer(static_cast<std::uint32_t>(m.recv.srank), src, t));
  }
  InFlight rec;
  rec.collective = false;
  rec.match = m;
  rec.nccl = nccl;
  start_transfer(t, rec, {m.send, m.recv});
}

void Engine::start_transfer(const Transfer& t, InFlight rec, const std::vector<Arrival>& arrivals) {
  rec.start = now_;
  // Userbuffers' copies and kernels are the program's own (its graph charges
  // the GEMMs beside them); only NCCL's kernels take SMs here.
  if (options_.sm_count > 0 && rec.nccl) rec.sms = models_.network->sms_held(t);
  for (const Arrival& a : arrivals) {
    account(sranks_[a.srank], 0, +1);
    sranks_[a.srank].nccl_sms += rec.sms;
  }
  in_flight_.emplace(models_.network->start(t, now_), rec);
}

void Engine::finish_transfer(TransferId id) {
  auto it = in_flight_.find(id);
  PRISM_CHECK(it != in_flight_.end(), "network model completed an unknown transfer");
  const InFlight rec = it->second;
  in_flight_.erase(it);
  if (drop_failed_transfer(rec)) return;
  if (!rec.collective) {
    sranks_[rec.match.send.srank].nccl_sms -= rec.sms;
    sranks_[rec.match.recv.srank].nccl_sms -= rec.sms;
    complete(rec.match.send, rec.start);
    complete(rec.match.recv, rec.start);
    return;
  }
  CollectiveRendezvous& c = comms_[rec.comm];
  for (const Arrival& a : c.arrivals(rec.seq)) {
    sranks_[a.srank].nccl_sms -= rec.sms;
    complete(a, rec.start);
  }
  c.release(rec.seq);
}

// A transfer with a member whose node has failed never completes: its
// members stay blocked in it, as NCCL's would. Returns whether it was one.
bool Engine::drop_failed_transfer(const InFlight& rec) {
  if (options_.failed_ranks.empty() || now_ < options_.fail_at) return false;
  bool failed = false;
  if (!rec.collective) {
    failed = dead(rec.match.send.srank) || dead(rec.match.recv.srank);
  } else {
    for (std::int32_t m : comms_[rec.comm].members()) failed = failed || dead(m);
  }
  if (failed) failed_transfers_.push_back(rec);
  return failed;
}

// Asynchronous op `a.op` of simulated rank `a.srank` finishes now. Streams
// that can move on are queued, never advanced from here, so no rendezvous is
// re-entered.
void Engine::complete(const Arrival& a, SimTime transfer_start) {
  SimRank& sr = sranks_[a.srank];
  if (sr.live) {
    complete_live(a, transfer_start);
    return;
  }
  const Op& op = g_.roles[sr.role].ops[a.op];
  if (op.kind == OpKind::kCompute) {
    account(sr, -1, 0);
  } else {
    account(sr, 0, -1);
  }
  record_completion(a, transfer_start);
  if (--streams_[sr.first_stream + a.stream].in_flight == 0) wakes_.emplace_back(a.srank, a.stream);
}

void Engine::record_completion(const Arrival& a, SimTime transfer_start) {
  SimRank& sr = sranks_[a.srank];
  ++op_events_;
  const std::uint32_t si = sr.first_stream + a.stream;
  ++streams_[si].done;
  if (!release_waits_[si].empty()) stream_progress(static_cast<std::uint32_t>(a.srank), a.stream);
  sr.finish = now_;
  if (sr.traced)
    trace_.push_back(TraceRecord{sr.rank, sr.role, a.op, a.stream, a.at, transfer_start, now_});
  const std::int32_t dep = tables_[sr.role].dep_index[a.op];
  if (dep == kNone) return;
  dep_done_[sr.first_dep + dep] = now_;
  const auto n = static_cast<std::uint16_t>(g_.roles[sr.role].streams.size());
  for (std::uint16_t k = 0; k < n; ++k)
    if (k != a.stream && streams_[sr.first_stream + k].waiting_dep) wakes_.emplace_back(a.srank, k);
}

// Time bookkeeping: the interval since the last change goes to compute if any
// compute ran, else to exposed communication if data moved, else to idle.
void Engine::account(SimRank& sr, int d_compute, int d_comm) {
  const SimTime dt = now_ - sr.last_change;
  if (dt.ns != 0) {
    if (sr.computing > 0) {
      sr.compute += dt;
    } else if (sr.communicating > 0) {
      sr.exposed += dt;
    } else {
      sr.idle += dt;
    }
  }
  sr.last_change = now_;
  sr.computing += d_compute;
  sr.communicating += d_comm;
}

// Memory. An alloc op that does not fit stops the replay.
bool Engine::alloc_op(std::uint32_t s, std::uint16_t st, std::int32_t oi, const Op& op) {
  if (!models_.memory->alloc(static_cast<int>(s), oi, op.bytes, op.stream, now_)) {
    out_of_memory(s, st, oi, false, op.bytes);
    return false;
  }
  sample_memory(s);
  return true;
}

// A free whose record streams still have ops issued before it to finish is
// deferred until they have (PyTorch records an event on each of them).
void Engine::free_op(std::uint32_t s, std::int32_t oi, const Op& op) {
  const SimRank& sr = sranks_[s];
  int pending = 0;
  const RoleTables& t = tables_[sr.role];
  for (std::uint32_t w = t.record_wait_begin[oi]; w < t.record_wait_begin[oi + 1]; ++w) {
    const auto [st, count] = t.record_waits[w];
    const std::uint32_t si = sr.first_stream + st;
    if (streams_[si].done >= count) continue;
    release_waits_[si].push_back(ReleaseWait{count, op.ref});
    ++pending;
  }
  models_.memory->free(static_cast<int>(s), op.ref, op.stream, now_, pending > 0);
  if (pending > 0) pending_release_[static_cast<std::uint64_t>(s) << 32 | op.ref] = pending;
  sample_memory(s);
}

// Stream `st` of simulated rank `s` completed an op: blocks whose record
// streams are now all done go back to the allocator.
void Engine::stream_progress(std::uint32_t s, std::uint16_t st) {
  const std::uint32_t si = sranks_[s].first_stream + st;
  std::vector<ReleaseWait>& waits = release_waits_[si];
  const std::uint32_t done = streams_[si].done;
  for (std::size_t i = 0; i < waits.size();) {
    if (waits[i].count > done) {
      ++i;
      continue;
    }
    const std::int32_t alloc = waits[i].free_op;
    waits[i] = waits.back();
    waits.pop_back();
    const auto it = pending_release_.find(static_cast<std::uint64_t>(s) << 32 | alloc);
    PRISM_CHECK(it != pending_release_.end(), "record-stream wait without a pending free");
    if (--it->second > 0) continue;
    pending_release_.erase(it);
    models_.memory->release(static_cast<int>(s), alloc, now_);
    sample_memory(s);
  }
}

// `bytes` of NCCL buffers (communicator init, connections on first use)
// allocated on the arrival's rank.
void Engine::add_nccl(const Arrival& a, std::int64_t bytes) {
  const auto s = static_cast<std::uint32_t>(a.srank);
  if (bytes == 0) return;
  if (sranks_[s].live && listener_ != nullptr)
    listener_->nccl_allocated(sranks_[s].rank, a.op, bytes);
  if (!models_.memory->add_external(static_cast<int>(s), Bytes{bytes}, now_))
    out_of_memory(s, a.stream, a.op, true, Bytes{bytes});
  sample_memory(s);
}

void Engine::out_of_memory(std::uint32_t s, std::uint16_t st, std::int32_t oi, bool in_nccl,
                           Bytes bytes) {
  if (stopped_) return;
  stopped_ = true;
  const SimRank& sr = sranks_[s];
  OutOfMemory o;
  o.rank = sr.rank;
  o.num_ranks = fold_.class_size[s];
  o.role = sr.role;
  o.op = oi;
  o.stream = st;
  o.at = now_;
  o.in_nccl = in_nccl;
  o.requested = bytes;
  if (!in_nccl) o.allocator = models_.memory->oom(static_cast<int>(s));
  o.usage = models_.memory->usage(static_cast<int>(s));
  o.capacity = models_.memory->capacity();
  oom_.push_back(o);
}

void Engine::sample_memory(std::uint32_t s) {
  const SimRank& sr = sranks_[s];
  if (!sr.traced) return;
  const MemoryUsage u = models_.memory->usage(static_cast<int>(s));
  memory_trace_.push_back(MemorySample{sr.rank, now_, u.allocated, u.reserved, u.device()});
}

}  // namespace prism
