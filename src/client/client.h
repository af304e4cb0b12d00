// Client: a live rank's session with the coordinator, behind the C ABI of
// include/prism/client.h. It owns the connection and the rank's virtual
// clock, numbers the ops it enters (tickets) and keeps answers that arrive
// for other tickets until they are asked for. Not thread-safe: one caller at
// a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "client/virtual_clock.h"
#include "util/status.h"
#include "wire/address.h"
#include "wire/connection.h"
#include "wire/protocol.h"

namespace prism::client {

// What kind of failure the last error was; the C ABI's prism_status.
enum class Failure { kNone, kArgument, kConnect, kProtocol, kRejected, kAborted };

class Client {
 public:
  struct Identity {
    std::int32_t rank = 0;
    std::int32_t world_size = 1;
    std::int32_t local_rank = 0;
    std::string program;
  };

  // Connects and waits for the welcome; the rank's virtual clock starts then.
  static Result<std::unique_ptr<Client>> connect(const wire::Address& a, const Identity& who,
                                                 std::chrono::milliseconds timeout,
                                                 Failure* failure);

  Status comm_init(std::uint32_t comm, std::int32_t nranks, std::int32_t rank_in_comm,
                   std::vector<std::int32_t> members, std::uint64_t id_hash);
  // Enters `op` (its op_id and at are set here) at the current virtual time.
  Result<std::uint64_t> enter(wire::Op op);
  // The op's completion (virtual ns), waiting for the answer if needed.
  Result<std::int64_t> completion(std::uint64_t ticket);
  // Holds the caller until the op's completion (see VirtualClock).
  Status wait(std::uint64_t ticket);
  Status memory(wire::MemoryAction action, std::uint64_t id, std::int64_t bytes,
                std::uint16_t stream);
  Status marker(wire::MarkerCode code, std::int32_t value);
  Status compute(std::uint16_t stream, std::int64_t duration_ns, std::string name);
  // Sends bye; the client is unusable afterwards.
  Status close(std::int32_t exit_code);

  std::int64_t now() const { return clock_.at(VirtualClock::Clock::now()); }
  // Real time dropped because answers came late (VirtualClock::release).
  std::chrono::nanoseconds late() const { return late_; }
  Failure last_failure() const { return failure_; }

 private:
  Client(std::unique_ptr<wire::Connection> conn, const wire::Welcome& w,
         std::chrono::milliseconds timeout);
  Status send(const wire::Message& m);
  // Receives until the answer for `ticket` is in `answers_`.
  Status await(std::uint64_t ticket);
  Status fail(Failure f, Status s);

  std::unique_ptr<wire::Connection> conn_;
  std::chrono::milliseconds timeout_;
  VirtualClock clock_;
  std::uint32_t next_op_ = 0;
  std::map<std::uint64_t, std::int64_t> answers_;  // ticket -> completion, until waited for
  std::set<std::uint64_t> outstanding_;            // tickets entered, not yet waited for
  std::chrono::nanoseconds late_{0};
  Failure failure_ = Failure::kNone;
  Status broken_;
};

}  // namespace prism::client
