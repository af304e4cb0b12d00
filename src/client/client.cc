#include "client/client.h"

#include <unistd.h>

#include <algorithm>
#include <string>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "util/check.h"

namespace prism::client {

namespace {

// How long a waiting rank spins before it sleeps: wire round trips and
// short waits stay off the scheduler (docs/benchmarks.md, prism_bench_wire).
constexpr std::chrono::microseconds kSpin{200};

// The coordinator's error frame as a Status: it refused (the rank, an op),
// it ended the emulation, or this client broke the protocol.
Status coordinator_error(wire::ErrorCode c, std::string message) {
  switch (c) {
    case wire::ErrorCode::kRejected:
    case wire::ErrorCode::kMismatch:
      return Status::failed_precondition(std::move(message));
    case wire::ErrorCode::kAborted:
      return Status::aborted(std::move(message));
    case wire::ErrorCode::kProtocol:
      break;
  }
  return Status::internal(std::move(message));
}

// A failed receive: a malformed frame from the coordinator (invalid_argument
// from the decoder) is the coordinator's breach of the protocol, not the
// caller's argument.
Status protocol_error(const Status& s) {
  return s.code() == StatusCode::kInvalidArgument ? Status::internal(s.message()) : s;
}

}  // namespace

Result<std::unique_ptr<Client>> Client::connect(const wire::Address& a, const Identity& who,
                                                std::chrono::milliseconds timeout, bool* opened) {
  Result<std::unique_ptr<wire::Connection>> conn = wire::Connection::open(a, timeout);
  if (!conn.is_ok()) return conn.status();
  if (opened != nullptr) *opened = true;
  wire::Connection& c = *conn.value();
  c.set_spin(kSpin);
  PRISM_RETURN_IF_ERROR(
      c.send(wire::Hello{who.rank, who.world_size, who.local_rank,
                         static_cast<std::int64_t>(::getpid()), who.program, who.secret}));
  Result<wire::Message> answer = c.receive(timeout);
  if (!answer.is_ok()) return protocol_error(answer.status());
  if (const auto* e = std::get_if<wire::Error>(&answer.value())) {
    return coordinator_error(e->code, fmt::format("{}: the coordinator refused rank {}: {}",
                                                  a.to_string(), who.rank, e->message));
  }
  const auto* w = std::get_if<wire::Welcome>(&answer.value());
  if (w == nullptr) {
    return Status::internal(fmt::format("{}: expected welcome, got {}", a.to_string(),
                                        wire::to_string(wire::type_of(answer.value()))));
  }
  if (w->rank != who.rank || w->world_size != who.world_size) {
    return Status::internal(fmt::format("{}: welcome for rank {} of {}, this is rank {} of {}",
                                        a.to_string(), w->rank, w->world_size, who.rank,
                                        who.world_size));
  }
  return std::unique_ptr<Client>(new Client(std::move(conn).value(), *w, timeout));
}

Client::Client(std::unique_ptr<wire::Connection> conn, const wire::Welcome& w,
               std::chrono::milliseconds timeout)
    : conn_(std::move(conn)),
      timeout_(timeout),
      clock_(w.start_at, Clock::now()),
      capture_(w.capture) {}

// Every message costs a system call, a few microseconds the job itself would
// not spend (its collectives are enqueued, not sent): that time is taken out
// of the rank's virtual time. When the coordinator has hung up, its error
// frame, if it sent one first, says why better than the broken pipe does.
Status Client::send(const wire::Message& m) {
  if (!broken_.is_ok()) return broken_;
  poll_wait_.reset();    // the coordinator ends an open wait at the next message
  quiet_until_.reset();  // and what it said of the silence that follows
  const Clock::time_point start = Clock::now();
  Status s = conn_->send(m);
  const auto spent = Clock::now() - start;
  if (!keep_clock_) clock_.exclude(spent);
  overhead_ += spent;
  ++messages_;
  if (s.is_ok()) return s;
  broken_ = s;
  for (;;) {
    Result<wire::Message> last = conn_->receive(std::chrono::milliseconds(100));
    if (!last.is_ok()) break;
    if (const auto* e = std::get_if<wire::Error>(&last.value()))
      return broken(coordinator_error(e->code, fmt::format("the coordinator: {}", e->message)));
  }
  return broken_;
}

Status Client::comm_init(std::uint32_t comm, std::int32_t nranks, std::int32_t rank_in_comm,
                         std::vector<std::int32_t> members, std::uint64_t id_hash) {
  if (nranks < 1 || rank_in_comm < 0 || rank_in_comm >= nranks) {
    return Status::invalid_argument(
        fmt::format("comm_init {}: rank_in_comm {} of nranks {}", comm, rank_in_comm, nranks));
  }
  return send(wire::CommInit{comm, nranks, rank_in_comm, id_hash, std::move(members)});
}

Result<wire::CommInfo> Client::comm_split(std::uint32_t parent, std::uint32_t comm,
                                          std::int32_t color, std::int32_t key) {
  if (color < 0) {
    return Status::invalid_argument(
        fmt::format("comm_split {} of {}: color {} is negative", comm, parent, color));
  }
  PRISM_RETURN_IF_ERROR(send(wire::CommSplit{parent, comm, color, key}));
  const Clock::time_point start = Clock::now();  // send() excluded its own time
  splitting_ = comm;
  for (;;) {
    Result<wire::Message> m = receive();
    if (!m.is_ok() || std::holds_alternative<wire::CommInfo>(m.value())) {
      splitting_.reset();
      if (!keep_clock_) clock_.exclude(Clock::now() - start);
      if (!m.is_ok()) return m.status();
      return std::get<wire::CommInfo>(std::move(m).value());
    }
  }
}

Result<std::uint64_t> Client::enter(wire::Op op) {
  if (op.bytes < 0 || op.peer < 0) {
    return Status::invalid_argument(
        fmt::format("{} on comm {}: bytes {} and peer {} must "
                    "not be negative",
                    wire::to_string(op.code), op.comm, op.bytes, op.peer));
  }
  op.op_id = next_op_++;
  op.at = now();
  PRISM_RETURN_IF_ERROR(send(op));
  outstanding_.insert(op.op_id);
  return std::uint64_t{op.op_id};
}

Status Client::broken(Status why) {
  broken_ = why.with_context(conn_->address().to_string());
  return broken_;
}

Result<wire::Message> Client::receive() {
  if (!broken_.is_ok()) return broken_;
  return take(conn_->receive(timeout_));
}

Status Client::drain() {
  for (;;) {
    if (!broken_.is_ok()) return broken_;
    Result<wire::Message> m = conn_->receive(std::chrono::milliseconds(0));
    if (!m.is_ok() && m.status().code() == StatusCode::kDeadlineExceeded) return Status::ok();
    PRISM_RETURN_IF_ERROR(take(std::move(m)).status());
  }
}

Result<wire::Message> Client::take(Result<wire::Message> m) {
  if (!m.is_ok()) {
    broken_ = protocol_error(m.status());
    return broken_;
  }
  if (const auto* done = std::get_if<wire::Complete>(&m.value())) {
    if (!outstanding_.contains(done->op_id) || answers_.contains(done->op_id)) {
      return broken(
          Status::internal(fmt::format("completion of op {}, which this rank has not entered, or "
                                       "already has an answer for",
                                       done->op_id)));
    }
    answers_[done->op_id] = done->at;
    if (done->nccl_bytes > 0) nccl_[done->op_id] = done->nccl_bytes;
    ++answers_seen_;
  } else if (const auto* h = std::get_if<wire::Horizon>(&m.value())) {
    if (h->wait_id >= next_wait_) {
      return broken(Status::internal(
          fmt::format("horizon for wait {}, which this rank has not sent", h->wait_id)));
    }
    if (poll_wait_ == h->wait_id) {
      poll_wait_.reset();
      if (h->quiet_until > h->at) quiet_until_ = h->quiet_until;
    }
  } else if (const auto* info = std::get_if<wire::CommInfo>(&m.value())) {
    if (splitting_ != info->comm) {
      return broken(Status::internal(fmt::format(
          "comm_info for communicator {}, which this rank is not splitting", info->comm)));
    }
  } else if (const auto* e = std::get_if<wire::Error>(&m.value())) {
    return broken(coordinator_error(e->code, fmt::format("the coordinator: {}", e->message)));
  } else {
    return broken(Status::internal(fmt::format("unexpected {} from the coordinator",
                                               wire::to_string(wire::type_of(m.value())))));
  }
  return m;
}

Result<Client::Woken> Client::await(std::uint32_t wait_id, std::uint32_t op_id,
                                    std::int64_t until) {
  for (;;) {
    PRISM_ASSIGN_OR_RETURN(const wire::Message m, receive());
    if (const auto* done = std::get_if<wire::Complete>(&m)) {
      // Any answer the rank had not received when it sent the wait may end
      // a wait for any op; only its own answer ends a wait for one op.
      if (op_id == wire::kAnyOp || done->op_id == op_id)
        return Woken{std::min(done->at, until), Clock::now()};
    } else if (const auto& h = std::get<wire::Horizon>(m); h.wait_id == wait_id) {
      if (until == wire::kNoLimit || h.at != until) {
        return broken(Status::internal(
            fmt::format("horizon of wait {} at {}, which waits until {}", wait_id, h.at,
                        until == wire::kNoLimit ? "its op completes" : std::to_string(until))));
      }
      return Woken{until, Clock::now()};
    }
    // Other answers are kept for later; other horizons are of waits the
    // rank did not block on, and are stale.
  }
}

Result<std::int64_t> Client::block(std::uint32_t op_id, std::int64_t at, std::int64_t until) {
  const std::uint32_t id = next_wait_++;
  PRISM_RETURN_IF_ERROR(send(wire::Wait{id, op_id, answers_seen_, at, until}));
  Woken w{until, Clock::now()};
  if (op_id != wire::kAnyOp && answers_.contains(op_id)) {
    w.at = std::min(answers_.at(op_id), until);
  } else if (op_id != wire::kAnyOp || answers_.size() < outstanding_.size()) {
    PRISM_ASSIGN_OR_RETURN(w, await(id, op_id, until));
  } else {
    // No answer can end the wait: the rank sleeps until `until` on its own,
    // and the coordinator's horizon, when it comes, is stale.
    PRISM_CHECK(until != wire::kNoLimit, "a wait for any op with none unanswered and no limit");
  }
  const std::int64_t woke = std::max(w.at, at);
  wake_at(woke, w.arrived);
  return woke;
}

void Client::wake_at(std::int64_t w, Clock::time_point arrived) {
  const Clock::time_point due = clock_.real_at(w);
  if (arrived <= due) {
    // Sleep most of a long wait, spin the end of it: the release is on time
    // to within a few microseconds, not a scheduler tick.
    if (arrived + kSpin < due) std::this_thread::sleep_until(due - kSpin);
    while (Clock::now() < due) {
    }
    arrived = Clock::now();
  }
  // Whatever came after the moment due (an answer that was late, a sleep
  // the system ended late) is the emulator's, not the rank's: the clock
  // restarts at the completion.
  if (!keep_clock_) late_ += clock_.release(w, arrived);
}

std::optional<Client::Answer> Client::earliest_answer() const {
  std::optional<Answer> best;
  for (const auto& [ticket, at] : answers_) {
    if (!best || at < best->at) best = Answer{at, ticket};
  }
  return best;
}

std::int64_t Client::take_nccl_bytes(std::uint64_t ticket) {
  const auto it = nccl_.find(ticket);
  if (it == nccl_.end()) return 0;
  const std::int64_t bytes = it->second;
  nccl_.erase(it);
  return bytes;
}

Status Client::check_ticket(std::uint64_t ticket) {
  if (outstanding_.contains(ticket)) return Status::ok();
  return Status::invalid_argument(
      fmt::format("ticket {}: not an op this rank entered, or already waited for", ticket));
}

void Client::spend(std::uint64_t ticket) {
  answers_.erase(ticket);
  outstanding_.erase(ticket);
}

Status Client::wait(std::uint64_t ticket) {
  PRISM_RETURN_IF_ERROR(check_ticket(ticket));
  const std::int64_t at = now();
  const auto known = answers_.find(ticket);
  if (capture_ || known == answers_.end() || known->second > at) {
    PRISM_RETURN_IF_ERROR(block(static_cast<std::uint32_t>(ticket), at, wire::kNoLimit).status());
  }
  spend(ticket);
  return Status::ok();
}

Status Client::waited(std::uint64_t ticket) {
  if (ticket >= next_op_ || outstanding_.contains(ticket)) {
    return Status::invalid_argument(fmt::format(
        "waited: ticket {} is {}", ticket,
        ticket >= next_op_ ? "not an op this rank entered" : "not spent yet (wait for it)"));
  }
  if (!capture_) return Status::ok();
  // Its answer was in when it was spent: the Wait ends at once.
  const std::uint32_t id = next_wait_++;
  return send(
      wire::Wait{id, static_cast<std::uint32_t>(ticket), answers_seen_, now(), wire::kNoLimit});
}

Result<bool> Client::test(std::uint64_t ticket) {
  PRISM_RETURN_IF_ERROR(check_ticket(ticket));
  const std::int64_t at = now();
  // A wait until now: the coordinator says whether the op completes by now.
  if (!answers_.contains(ticket))
    PRISM_RETURN_IF_ERROR(block(static_cast<std::uint32_t>(ticket), at, at).status());
  const auto known = answers_.find(ticket);
  const bool done = known != answers_.end() && known->second <= at;
  if (done) spend(ticket);
  return done;
}

Result<std::optional<std::uint64_t>> Client::wait_any(std::int64_t until) {
  if (until == wire::kNoLimit && outstanding_.empty()) {
    return Status::invalid_argument("wait_any: no outstanding op and no time limit");
  }
  const std::int64_t at = now();
  until = std::max(until, at);
  std::optional<Answer> first = earliest_answer();
  if (!first || first->at > at) {
    // Answers already received are the rank's own business: they shorten
    // the wait instead of being waited for.
    const std::int64_t limit = first ? std::min(first->at, until) : until;
    PRISM_ASSIGN_OR_RETURN(const std::int64_t woke, block(wire::kAnyOp, at, limit));
    first = earliest_answer();
    if (!first || first->at > woke) return std::optional<std::uint64_t>();
  }
  spend(first->ticket);
  return std::optional<std::uint64_t>(first->ticket);
}

bool Client::poll_open() const {
  // Any answer that came after the Wait ended it (docs/protocol.md).
  return poll_wait_.has_value() && answers_seen_ == poll_seen_;
}

std::optional<std::uint64_t> Client::take_due(std::int64_t at) {
  const std::optional<Answer> first = earliest_answer();
  if (!first || first->at > at) return std::nullopt;
  spend(first->ticket);
  return first->ticket;
}

Result<std::optional<std::uint64_t>> Client::poll(bool clock_runs) {
  const std::int64_t at = now();
  if (std::optional<std::uint64_t> t = take_due(at)) return t;
  // Before the quiet time nothing can complete, and the coordinator does
  // not need this rank's clock to get there.
  // In a capture every op completes when entered: a poll only takes the
  // answers, and the capture records no wait the rank's threads did not do.
  const bool quiet = capture_ || (quiet_until_.has_value() && at < *quiet_until_);
  if (!poll_open() && !quiet) {
    // The rank's bound: it sends nothing before `at`. A wait until its own
    // `at` ends then: the rank need not block for its horizon.
    const std::uint32_t id = next_wait_++;
    keep_clock_ = clock_runs;
    const Status sent = send(wire::Wait{id, wire::kAnyOp, answers_seen_, at, at});
    keep_clock_ = false;
    PRISM_RETURN_IF_ERROR(sent);
    // Open while some op is unanswered: an answer or the horizon ends it
    // (a blocking wait_any would have waited for either).
    if (answers_.size() < outstanding_.size()) {
      poll_wait_ = id;
      poll_seen_ = answers_seen_;
    }
  }
  PRISM_RETURN_IF_ERROR(drain());
  return take_due(at);
}

std::chrono::nanoseconds Client::quiet_for() const {
  if (!quiet_until_) return std::chrono::nanoseconds(0);
  if (*quiet_until_ == wire::kNoLimit) return std::chrono::nanoseconds::max();
  return std::max(std::chrono::nanoseconds(0), std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                   clock_.real_at(*quiet_until_) - Clock::now()));
}

Result<std::optional<std::uint64_t>> Client::arrived() {
  PRISM_RETURN_IF_ERROR(drain());
  return take_due(now());
}

Status Client::memory(wire::MemoryAction action, std::uint64_t id, std::int64_t bytes,
                      std::uint16_t stream) {
  if (bytes < 0) {
    return Status::invalid_argument(fmt::format("memory event: bytes {} is negative", bytes));
  }
  return send(wire::Memory{action, id, bytes, stream, now()});
}

Status Client::marker(wire::MarkerCode code, std::int32_t value) {
  return send(wire::Marker{code, value, now()});
}

Status Client::compute(std::uint16_t stream, std::int64_t duration_ns, std::string name) {
  if (duration_ns < 0) {
    return Status::invalid_argument(
        fmt::format("compute: duration {} ns is negative", duration_ns));
  }
  if (name.size() > wire::kMaxString) name.resize(wire::kMaxString);
  // The compute ended now; it began duration_ns earlier.
  const std::int64_t start = std::max<std::int64_t>(now() - duration_ns, 0);
  return send(wire::Compute{stream, start, duration_ns, std::move(name)});
}

// After the goodbye the coordinator closes its end; reading up to that
// close (answers and horizons the rank never asked for included) keeps the
// goodbye from being lost: a socket closed with unread data is reset, and a
// reset can overtake the last frame.
Status Client::close(std::int32_t exit_code) {
  PRISM_RETURN_IF_ERROR(send(wire::Bye{exit_code, now()}));
  while (conn_->receive(timeout_).is_ok()) {
  }
  return Status::ok();
}

}  // namespace prism::client
