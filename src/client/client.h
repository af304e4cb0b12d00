// Client: a live rank's session with the coordinator, behind the C ABI of
// include/prism/client.h. It owns the connection and the rank's virtual
// clock, numbers the ops it enters (tickets) and keeps answers that arrive
// for other tickets until they are asked for. Whenever it blocks it first
// says so with a Wait, under the rules of docs/protocol.md ("Waiting"): the
// coordinator may only simulate as far as each live rank's bound. That is
// why a completion is never handed out before the rank has waited for it.
// Not thread-safe: one caller at a time.
//
// Errors say what happened in their code: invalid_argument (the caller's
// argument), unavailable (the coordinator is not there, or hung up),
// deadline_exceeded (nothing came in time), failed_precondition (the
// coordinator refused the rank or an op), aborted (the emulation ended),
// internal (the coordinator broke the protocol, or was told this client
// did). The C ABI maps them to prism_status (client/c_status.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "client/virtual_clock.h"
#include "util/status.h"
#include "wire/address.h"
#include "wire/connection.h"
#include "wire/protocol.h"

namespace prism::client {

class Client {
 public:
  struct Identity {
    std::int32_t rank = 0;
    std::int32_t world_size = 1;
    std::int32_t local_rank = 0;
    std::string program;
    std::string secret;  // the run's ($PRISM_SECRET)
  };

  // Connects and waits for the welcome; the rank's virtual clock starts then.
  // `opened` says whether the connection opened: a failure before is the
  // connect's (no coordinator at the address, or none in time).
  static Result<std::unique_ptr<Client>> connect(const wire::Address& a, const Identity& who,
                                                 std::chrono::milliseconds timeout,
                                                 bool* opened = nullptr);

  Status comm_init(std::uint32_t comm, std::int32_t nranks, std::int32_t rank_in_comm,
                   std::vector<std::int32_t> members, std::uint64_t id_hash);
  // Makes communicator `comm` from `parent` (ncclCommSplit with a color) and
  // holds the caller until the coordinator says its members. The round trip
  // is not counted in virtual time: a split takes none in the emulation.
  Result<wire::CommInfo> comm_split(std::uint32_t parent, std::uint32_t comm, std::int32_t color,
                                    std::int32_t key);
  // Enters `op` (its op_id and at are set here) at the current virtual time.
  Result<std::uint64_t> enter(wire::Op op);
  // Holds the caller until the op's completion (see VirtualClock); the
  // ticket is then spent. In a capture the Wait is sent even when the
  // answer is in: the capture records where the rank waited.
  Status wait(std::uint64_t ticket);
  // The rank's thread waited for op `ticket`, which a poll had already
  // completed and spent (a progress thread took its answer first). In a
  // capture this sends the Wait a wait() would have sent, so that the
  // program records the wait whichever thread took the answer; otherwise
  // it sends nothing. A ticket never entered, or not yet spent, is refused.
  Status waited(std::uint64_t ticket);
  // Whether the coordinator records this rank's program (wire::Welcome::
  // capture) rather than emulating a job.
  bool capturing() const { return capture_; }
  // Whether the op has completed by now(), exactly: when its answer is not
  // in, asks the coordinator and holds the caller for the round trip, which
  // virtual time does not count. A completed op's ticket is spent.
  Result<bool> test(std::uint64_t ticket);
  // Holds the caller until the first of the rank's outstanding ops
  // completes (ties: earliest completion, then lowest ticket) or until
  // virtual time `until` (wire::kNoLimit: none), whichever comes first.
  // Returns that op's ticket, spent, or nullopt when `until` came first.
  // An `until` before now() means now(); kNoLimit needs an outstanding op.
  Result<std::optional<std::uint64_t>> wait_any(std::int64_t until);
  // For a helper thread that polls while the rank's other threads keep
  // running: an op that has completed by now(), spent, or nullopt. It never
  // blocks on the coordinator. Unless an answer is in, it sends a Wait for
  // any op until now() (the rank's bound: it sends nothing before now; in a
  // capture, where every op completes when entered, no Wait at all) and
  // takes whatever has arrived without waiting for more; a Wait the
  // coordinator has not yet ended (no answer since, no horizon, nothing
  // sent after it) is not repeated, so each poll Wait is answered as a
  // blocking one would be. Blocking here would hold the rank's other threads
  // out of the client until every other live rank's clock reached this
  // one's, and that real time would count as the rank's compute. The time
  // the poll takes (sending) stays in virtual time: the rank did not stop.
  // `clock_runs` false: the caller is the thread that would compute, and
  // the send is taken out of virtual time as any other of its messages.
  Result<std::optional<std::uint64_t>> poll(bool clock_runs = true);
  // Real time from now before a poll() can find anything: the coordinator's
  // last horizon for a poll said that, while the rank sends nothing, none of
  // its ops completes before a later virtual time (wire::Horizon::
  // quiet_until), and poll() sends no Wait until then. 0 when nothing was
  // said, the rank has sent something since, or the time has come;
  // nanoseconds::max() when nothing completes until the rank sends.
  std::chrono::nanoseconds quiet_for() const;
  // poll() without the Wait: an op completed by now() among the answers
  // that have arrived (taken without waiting), spent, or nullopt. Sends
  // nothing.
  Result<std::optional<std::uint64_t>> arrived();
  // Whether a message arrives within `within` (wire::Connection::readable).
  // The one call safe while another thread is in any other: a progress
  // thread waits here between polls without holding the others out.
  bool readable(std::chrono::microseconds within) const { return conn_->readable(within); }
  Status memory(wire::MemoryAction action, std::uint64_t id, std::int64_t bytes,
                std::uint16_t stream);
  Status marker(wire::MarkerCode code, std::int32_t value);
  Status compute(std::uint16_t stream, std::int64_t duration_ns, std::string name);
  // The NCCL device bytes the coordinator sent with the completion of op
  // `ticket` (wire::Complete), once; 0 when none (or not yet in).
  std::int64_t take_nccl_bytes(std::uint64_t ticket);
  // Sends bye; the client is unusable afterwards.
  Status close(std::int32_t exit_code);

  std::int64_t now() const { return clock_.at(VirtualClock::Clock::now()); }
  // Real time dropped because answers came late (VirtualClock::release).
  std::chrono::nanoseconds late() const { return late_; }
  // Real time spent sending messages, not counted in virtual time.
  std::chrono::nanoseconds overhead() const { return overhead_; }
  std::uint64_t messages() const { return messages_; }

 private:
  using Clock = VirtualClock::Clock;
  // An answer received and not yet spent.
  struct Answer {
    std::int64_t at;
    std::uint64_t ticket;
  };
  // How a wait on the coordinator ended.
  struct Woken {
    std::int64_t at;            // min(completion, until), not yet bounded below
    Clock::time_point arrived;  // when the waking message came
  };

  Client(std::unique_ptr<wire::Connection> conn, const wire::Welcome& w,
         std::chrono::milliseconds timeout);
  Status send(const wire::Message& m);
  // Sends Wait{op_id, at, until} and holds the caller until the wait ends
  // (docs/protocol.md, "Waiting"); returns the virtual time it woke at.
  Result<std::int64_t> block(std::uint32_t op_id, std::int64_t at, std::int64_t until);
  // Receives until wait `wait_id` ends: a Complete it waits for, or its
  // Horizon. Horizons of earlier waits are stale and skipped.
  Result<Woken> await(std::uint32_t wait_id, std::uint32_t op_id, std::int64_t until);
  // The next message: a Complete (kept in answers_), a Horizon, or the
  // CommInfo of the split in progress. Anything else breaks the connection.
  Result<wire::Message> receive();
  // Checks and keeps a message received (as receive() does).
  Result<wire::Message> take(Result<wire::Message> m);
  // Takes every message already arrived, without waiting.
  Status drain();
  // Whether poll()'s last Wait is still open at the coordinator.
  bool poll_open() const;
  // The answer the rank would take first when it completed by `at`, spent.
  std::optional<std::uint64_t> take_due(std::int64_t at);
  // Holds the caller until virtual time `w`. Whatever real time passes
  // after `w` was due (a late answer, a late wake-up) is dropped (late_).
  void wake_at(std::int64_t w, Clock::time_point arrived);
  // The answer the rank would take first: earliest completion, lowest ticket.
  std::optional<Answer> earliest_answer() const;
  Status check_ticket(std::uint64_t ticket);
  void spend(std::uint64_t ticket);
  // The coordinator broke the protocol or ended the emulation: every later
  // call fails with `why` (its code said), which names the address.
  Status broken(Status why);

  std::unique_ptr<wire::Connection> conn_;
  std::chrono::milliseconds timeout_;
  VirtualClock clock_;
  bool capture_ = false;  // wire::Welcome::capture
  std::uint32_t next_op_ = 0;
  std::uint32_t next_wait_ = 0;
  std::uint32_t answers_seen_ = 0;                 // Complete messages received
  std::map<std::uint64_t, std::int64_t> answers_;  // ticket -> completion, until spent
  std::map<std::uint64_t, std::int64_t> nccl_;     // ticket -> NCCL bytes, until taken
  std::set<std::uint64_t> outstanding_;            // tickets entered, not yet spent
  std::chrono::nanoseconds late_{0};
  bool keep_clock_ = false;                 // inside poll(): the clock runs on
  std::optional<std::uint32_t> splitting_;  // inside comm_split: the new handle
  std::chrono::nanoseconds overhead_{0};
  std::uint64_t messages_ = 0;
  Status broken_;
  // poll()'s last Wait, while one that a message can end is open (sending
  // anything ends it), and answers_seen_ when it was sent.
  std::optional<std::uint32_t> poll_wait_;
  std::uint32_t poll_seen_ = 0;
  // What the last horizon of a poll said of the silence after it, until the
  // rank sends anything (wire::Horizon::quiet_until).
  std::optional<std::int64_t> quiet_until_;
};

}  // namespace prism::client
