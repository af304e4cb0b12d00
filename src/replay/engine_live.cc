// The engine's live mode (replay/live_replay.h): live ranks' ops enter from
// outside as events at their own times, and their completions go to the
// listener instead of moving the rank's streams.
#include "replay/engine.h"

namespace prism {

LiveReplay::LiveReplay(const ExecutionGraph& g, const ReplayOptions& options,
                       const ReplayModels& models, LiveListener* listener)
    : options_(options) {
  PRISM_CHECK(models.network && models.compute && models.memory, "replay needs all three models");
  // Folded copies would share resources the model cannot see: replay all.
  if (!models.network->folding_exact()) options_.fold = false;
  engine_ = std::make_unique<Engine>(g, options_, models, listener);
  engine_->start();
}

LiveReplay::~LiveReplay() = default;

void LiveReplay::enter(Rank rank, std::int32_t op, SimTime at) {
  engine_->enter_live(rank, op, at);
}

void LiveReplay::mark(Rank rank, MarkerKind kind, SimTime at) {
  engine_->mark_live(rank, kind, at);
}

Result<SimTime> LiveReplay::advance() {
  return engine_->step();
}

SimTime LiveReplay::now() const {
  return engine_->now();
}

bool LiveReplay::stopped() const {
  return engine_->stopped();
}

ReplayResult LiveReplay::finish(const std::vector<LiveRankTimes>& live) {
  return engine_->finish_live(live);
}

std::uint32_t Engine::live_srank(Rank rank) const {
  PRISM_CHECK(rank >= 0 && rank < g_.world_size(), "live rank out of range");
  const auto s = static_cast<std::uint32_t>(fold_.class_of_rank[rank]);
  PRISM_CHECK(sranks_[s].live && sranks_[s].rank == rank, "not a live rank");
  return s;
}

void Engine::enter_live(Rank rank, std::int32_t op, SimTime at) {
  const std::uint32_t s = live_srank(rank);
  const Op& o = g_.roles[sranks_[s].role].ops[op];
  PRISM_CHECK(is_communication(o.kind), "a live rank enters communication ops only");
  PRISM_CHECK(at >= now_, "a live op entered in the simulated past");
  queue_.push(at, kLiveArrival, Event{s, o.stream, op});
}

void Engine::mark_live(Rank rank, MarkerKind kind, SimTime at) {
  sranks_[live_srank(rank)].iteration_marks.record(kind, at);
}

void Engine::arrive_live(std::uint32_t s, std::int32_t oi) {
  const Op& op = g_.roles[sranks_[s].role].ops[oi];
  if (op.kind == OpKind::kCollective) {
    arrive_collective(s, op.stream, oi, op);
  } else {
    post_p2p(s, op.stream, oi, op);
  }
}

// A live rank's op completed: its streams belong to the real process, so
// only the record and the listener learn of it.
void Engine::complete_live(const Arrival& a, SimTime transfer_start) {
  SimRank& sr = sranks_[a.srank];
  account(sr, 0, -1);
  ++op_events_;
  sr.finish = now_;
  if (sr.traced)
    trace_.push_back(TraceRecord{sr.rank, sr.role, a.op, a.stream, a.at, transfer_start, now_});
  listener_->completed(sr.rank, a.op, now_);
}

ReplayResult Engine::finish_live(const std::vector<LiveRankTimes>& live) {
  PRISM_CHECK(live.size() == options_.live_ranks.size(), "one LiveRankTimes per live rank");
  live_times_ = live;
  for (std::size_t i = 0; i < live.size(); ++i) {
    SimRank& sr = sranks_[live_srank(options_.live_ranks[i])];
    sr.finish = max(sr.finish, live[i].finish);
  }
  return collect();
}

}  // namespace prism
