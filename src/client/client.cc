#include "client/client.h"

#include <unistd.h>

#include <algorithm>
#include <thread>
#include <utility>

#include <fmt/format.h>

namespace prism::client {

namespace {

using Clock = VirtualClock::Clock;

// How long a waiting rank spins before it sleeps: wire round trips and
// short waits stay off the scheduler (docs/benchmarks.md, prism_bench_wire).
constexpr std::chrono::microseconds kSpin{200};

Failure failure_of(wire::ErrorCode c) {
  switch (c) {
    case wire::ErrorCode::kProtocol:
      return Failure::kProtocol;
    case wire::ErrorCode::kRejected:
    case wire::ErrorCode::kMismatch:
      return Failure::kRejected;
    case wire::ErrorCode::kAborted:
      return Failure::kAborted;
  }
  return Failure::kProtocol;
}

}  // namespace

Result<std::unique_ptr<Client>> Client::connect(const wire::Address& a, const Identity& who,
                                                std::chrono::milliseconds timeout,
                                                Failure* failure) {
  *failure = Failure::kConnect;
  Result<std::unique_ptr<wire::Connection>> conn = wire::Connection::open(a, timeout);
  if (!conn.is_ok()) return conn.status();
  wire::Connection& c = *conn.value();
  c.set_spin(kSpin);
  *failure = Failure::kProtocol;
  PRISM_RETURN_IF_ERROR(c.send(wire::Hello{who.rank, who.world_size, who.local_rank,
                                           static_cast<std::int64_t>(::getpid()), who.program}));
  Result<wire::Message> answer = c.receive(timeout);
  if (!answer.is_ok()) return answer.status();
  if (const auto* e = std::get_if<wire::Error>(&answer.value())) {
    *failure = failure_of(e->code);
    return Status::invalid_argument(fmt::format("{}: the coordinator refused rank {}: {}",
                                                a.to_string(), who.rank, e->message));
  }
  const auto* w = std::get_if<wire::Welcome>(&answer.value());
  if (w == nullptr) {
    return Status::invalid_argument(fmt::format("{}: expected welcome, got {}", a.to_string(),
                                                wire::to_string(wire::type_of(answer.value()))));
  }
  if (w->rank != who.rank || w->world_size != who.world_size) {
    return Status::invalid_argument(
        fmt::format("{}: welcome for rank {} of {}, this is rank {} of {}", a.to_string(), w->rank,
                    w->world_size, who.rank, who.world_size));
  }
  *failure = Failure::kNone;
  return std::unique_ptr<Client>(new Client(std::move(conn).value(), *w, timeout));
}

Client::Client(std::unique_ptr<wire::Connection> conn, const wire::Welcome& w,
               std::chrono::milliseconds timeout)
    : conn_(std::move(conn)), timeout_(timeout), clock_(w.start_at, Clock::now()) {}

Status Client::fail(Failure f, Status s) {
  failure_ = f;
  return s;
}

Status Client::send(const wire::Message& m) {
  if (!broken_.is_ok()) return broken_;
  Status s = conn_->send(m);
  if (!s.is_ok()) {
    broken_ = s;
    return fail(Failure::kProtocol, s);
  }
  return s;
}

Status Client::comm_init(std::uint32_t comm, std::int32_t nranks, std::int32_t rank_in_comm,
                         std::vector<std::int32_t> members, std::uint64_t id_hash) {
  if (nranks < 1 || rank_in_comm < 0 || rank_in_comm >= nranks) {
    return fail(Failure::kArgument,
                Status::invalid_argument(fmt::format("comm_init {}: rank_in_comm {} of nranks {}",
                                                     comm, rank_in_comm, nranks)));
  }
  return send(wire::CommInit{comm, nranks, rank_in_comm, id_hash, std::move(members)});
}

Result<std::uint64_t> Client::enter(wire::Op op) {
  if (op.bytes < 0 || op.peer < 0) {
    return fail(Failure::kArgument, Status::invalid_argument(fmt::format(
                                        "{} on comm {}: bytes {} and peer {} must "
                                        "not be negative",
                                        wire::to_string(op.code), op.comm, op.bytes, op.peer)));
  }
  op.op_id = next_op_++;
  op.at = now();
  PRISM_RETURN_IF_ERROR(send(op));
  outstanding_.insert(op.op_id);
  return std::uint64_t{op.op_id};
}

Status Client::await(std::uint64_t ticket) {
  while (!answers_.contains(ticket)) {
    if (!broken_.is_ok()) return broken_;
    Result<wire::Message> m = conn_->receive(timeout_);
    if (!m.is_ok()) {
      broken_ = m.status();
      return fail(Failure::kProtocol, broken_);
    }
    if (const auto* done = std::get_if<wire::Complete>(&m.value())) {
      if (!outstanding_.contains(done->op_id)) {
        broken_ = Status::invalid_argument(
            fmt::format("{}: completion of op {}, which this rank has not entered or already "
                        "waited for",
                        conn_->address().to_string(), done->op_id));
        return fail(Failure::kProtocol, broken_);
      }
      answers_[done->op_id] = done->at;
    } else if (const auto* e = std::get_if<wire::Error>(&m.value())) {
      broken_ = Status::invalid_argument(
          fmt::format("{}: the coordinator: {}", conn_->address().to_string(), e->message));
      return fail(failure_of(e->code), broken_);
    } else {
      broken_ = Status::invalid_argument(fmt::format("{}: unexpected {} from the coordinator",
                                                     conn_->address().to_string(),
                                                     wire::to_string(wire::type_of(m.value()))));
      return fail(Failure::kProtocol, broken_);
    }
  }
  return Status::ok();
}

Result<std::int64_t> Client::completion(std::uint64_t ticket) {
  if (!outstanding_.contains(ticket)) {
    return fail(Failure::kArgument,
                Status::invalid_argument(fmt::format(
                    "ticket {}: not an op this rank entered, or already waited for", ticket)));
  }
  PRISM_RETURN_IF_ERROR(await(ticket));
  return answers_.at(ticket);
}

Status Client::wait(std::uint64_t ticket) {
  PRISM_ASSIGN_OR_RETURN(const std::int64_t done, completion(ticket));
  const Clock::time_point due = clock_.real_at(done);
  const Clock::time_point answered = Clock::now();
  if (answered > due) {
    // The answer came after the completion was due: drop the lateness.
    late_ += clock_.release(done, answered);
  } else {
    // Sleep most of a long wait, spin the end of it: the release is on time
    // to within a few microseconds, not a scheduler tick.
    if (answered + kSpin < due) std::this_thread::sleep_until(due - kSpin);
    while (Clock::now() < due) {
    }
  }
  answers_.erase(ticket);
  outstanding_.erase(ticket);
  return Status::ok();
}

Status Client::memory(wire::MemoryAction action, std::uint64_t id, std::int64_t bytes,
                      std::uint16_t stream) {
  if (bytes < 0) {
    return fail(Failure::kArgument,
                Status::invalid_argument(fmt::format("memory event: bytes {} is negative", bytes)));
  }
  return send(wire::Memory{action, id, bytes, stream, now()});
}

Status Client::marker(wire::MarkerCode code, std::int32_t value) {
  return send(wire::Marker{code, value, now()});
}

Status Client::compute(std::uint16_t stream, std::int64_t duration_ns, std::string name) {
  if (duration_ns < 0) {
    return fail(Failure::kArgument, Status::invalid_argument(fmt::format(
                                        "compute: duration {} ns is negative", duration_ns)));
  }
  if (name.size() > wire::kMaxString) name.resize(wire::kMaxString);
  // The compute ended now; it began duration_ns earlier.
  const std::int64_t start = std::max<std::int64_t>(now() - duration_ns, 0);
  return send(wire::Compute{stream, start, duration_ns, std::move(name)});
}

Status Client::close(std::int32_t exit_code) {
  return send(wire::Bye{exit_code, now()});
}

}  // namespace prism::client
