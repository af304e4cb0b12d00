#include "runtime/live_session.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace prism::runtime {
namespace {

constexpr std::chrono::milliseconds kTick{10};

}  // namespace

LiveSession::LiveSession(LiveSessionOptions options, LivePolicy& policy)
    : options_(std::move(options)), policy_(policy), server_(*this, wire::ServerOptions{}) {
  for (Rank r : options_.ranks) peers_[r];
}

LiveSession::~LiveSession() = default;

Status LiveSession::run(const std::function<Status()>& tick) {
  started_ = SteadyClock::now();
  while (!ended()) {
    server_.run_for(kTick);
    if (ended()) break;
    Status st = tick();
    if (st.is_ok()) st = check_timeouts(SteadyClock::now());
    if (!st.is_ok()) fail(std::move(st));
  }
  if (!failed()) policy_.finishing();
  // Let the error frames and last answers reach the ranks.
  for (int i = 0; i < 20 && server_.num_peers() > 0; ++i) server_.run_for(kTick);
  return failed_;
}

bool LiveSession::connected(Rank r) const {
  const auto it = peers_.find(r);
  return it != peers_.end() && it->second.id.has_value();
}

bool LiveSession::open(Rank r) const {
  const auto it = peers_.find(r);
  return it != peers_.end() && it->second.open;
}

void LiveSession::send(Rank r, const wire::Message& m) {
  const Peer& p = peer(r);
  if (p.id) server_.send(*p.id, m);
}

void LiveSession::close(Rank r) {
  Peer& p = peer(r);
  if (!p.id) return;
  p.open = false;
  server_.close(*p.id);
}

void LiveSession::heard(Rank r) {
  peer(r).last_heard = SteadyClock::now();
}

SteadyClock::time_point LiveSession::last_heard(Rank r) const {
  return peer(r).last_heard;
}

std::string LiveSession::seconds_of_timeout() const {
  return fmt::format("{:g} s", static_cast<double>(options_.timeout.count()) / 1000);
}

void LiveSession::finish() {
  finished_ = true;
  server_.stop();
}

void LiveSession::fail(Status why, std::optional<Rank> culprit, wire::ErrorCode code) {
  if (failed()) return;
  failed_ = std::move(why);
  for (auto& [r, p] : peers_) {
    if (!p.id || !rank_of_.contains(*p.id)) continue;  // never connected, or gone
    if (p.open) {
      server_.send(*p.id,
                   wire::Error{r == culprit ? code : wire::ErrorCode::kAborted, failed_.message()});
    }
    server_.close(*p.id);
    rank_of_.erase(*p.id);
    p.open = false;
  }
  server_.stop();
}

void LiveSession::on_message(wire::PeerId id, wire::Message m) {
  if (failed()) return;
  if (const auto* h = std::get_if<wire::Hello>(&m)) return hello(id, *h);
  const auto it = rank_of_.find(id);
  if (it == rank_of_.end()) {
    server_.send(id, wire::Error{wire::ErrorCode::kRejected, "the first message must be hello"});
    server_.close(id);
    return;
  }
  const Rank r = it->second;
  heard(r);
  Status st = policy_.handle(r, m);
  if (!st.is_ok()) fail(std::move(st), r, policy_.error_code(r));
}

void LiveSession::hello(wire::PeerId id, const wire::Hello& h) {
  std::string why;
  const auto it = peers_.find(h.rank);
  if (h.secret != options_.secret) {
    why =
        "its hello does not carry this run's secret ($PRISM_SECRET, which `prism emulate` "
        "gives the ranks it starts)";
  } else if (h.world_size != options_.world_size) {
    why = fmt::format("world size {}, the job has {}", h.world_size, options_.world_size);
  } else if (it == peers_.end()) {
    why = policy_.not_expected(h.rank);
  } else if (it->second.id) {
    why = fmt::format("rank {} is connected already", h.rank);
  }
  if (!why.empty()) {
    server_.send(id, wire::Error{wire::ErrorCode::kRejected, why});
    server_.close(id);
    return;
  }
  Peer& p = it->second;
  p.id = id;
  p.open = true;
  p.last_heard = SteadyClock::now();
  rank_of_[id] = h.rank;
  policy_.hello(h.rank, h);
}

void LiveSession::on_close(wire::PeerId id, const Status& why) {
  const auto it = rank_of_.find(id);
  const std::optional<Rank> r =
      it == rank_of_.end() ? std::nullopt : std::optional<Rank>(it->second);
  if (r) {
    rank_of_.erase(it);
    peer(*r).open = false;
  }
  if (failed()) return;
  if (!r) {
    if (why.is_ok()) return;
    if (tcp_) {  // a stranger on the port: dropped, the run goes on
      if (strangers_named_++ < 3)
        fmt::print(stderr,
                   "prism emulate: warning: dropped a connection that never said hello: {}; the "
                   "run goes on\n",
                   why.message());
      return;
    }
    // Only PrismLLM's ranks know the private socket: garbage there means
    // something is badly wrong.
    fail(Status::invalid_argument(fmt::format("a peer that never said hello: {}", why.message())));
    return;
  }
  Status st = policy_.closed(*r, why);
  if (!st.is_ok()) fail(std::move(st));
}

// Until every rank is connected, the session waits for the missing ones.
Status LiveSession::check_timeouts(SteadyClock::time_point now) {
  std::vector<Rank> missing;
  for (const auto& [r, p] : peers_)
    if (!p.id) missing.push_back(r);
  if (missing.empty()) return policy_.check(now);
  if (now - started_ <= options_.timeout) return Status::ok();
  if (missing.size() == 1)
    return Status::deadline_exceeded(fmt::format("{} {} did not connect within {}", options_.noun,
                                                 missing[0], seconds_of_timeout()));
  return Status::deadline_exceeded(fmt::format("{}s {} did not connect within {}", options_.noun,
                                               fmt::join(missing, ", "), seconds_of_timeout()));
}

}  // namespace prism::runtime
