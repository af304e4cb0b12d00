// Session: the process's one connection to the coordinator, shared by every
// process group of the c10d backend (docs/torch-backend.md). It owns the
// prism_client, the one lock around every prism_* call (the client is not
// thread-safe), the table of entered ops, and the progress thread.
//
// An "entry" is what one torch call entered: one op, or the send/recv group
// of a gather or scatter. Its Done callback runs exactly once, without the
// lock held (it may complete futures whose callbacks enter new ops), either
// on a thread that waits for it (wait(): prism_wait, so the rank's virtual
// clock jumps exactly to the completion) or on the progress thread, which
// finds completions with prism_poll (a wait with the deadline "now" that
// keeps the clock running and does not block for the coordinator's answer)
// and, between polls, with prism_poll_arrived as answers arrive, while
// some op is outstanding; when the coordinator said nothing can complete
// before a later time (prism_poll_quiet_us), it sleeps until then or until
// the main thread enters an op. It never waits without a deadline: the main
// thread may enter ops meanwhile, and those must not be stamped before a
// wait the coordinator has already simulated past. Nor does it wait for
// the coordinator under the lock: the coordinator may be waiting for the
// other live ranks' clocks, and the main thread for the lock.
//
// Torch-free on purpose: it compiles in a second, and the libtorch units
// only build ops and finish works.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "prism/client.h"

namespace prism::torch_shim {

// Who this process is in the job: RANK, WORLD_SIZE, LOCAL_RANK.
struct Identity {
  std::int32_t rank = 0;
  std::int32_t world_size = 1;
  std::int32_t local_rank = 0;
};

class Session {
 public:
  // Runs once per entry: error is empty when every op completed, else why
  // not (the coordinator's words, naming the op).
  using Done = std::function<void(const std::string& error)>;

  static Session& get();
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Connects at the first call; later calls check that `who` is the same
  // rank. Throws std::runtime_error saying what is wrong ($PRISM_COORDINATOR
  // unset, the coordinator's refusal or absence).
  void connect(const Identity& who);
  bool connected();

  // Declares a communicator; returns its handle. Throws on failure.
  std::uint32_t comm_init(std::int32_t nranks, std::int32_t rank_in_comm,
                          const std::vector<std::int32_t>& members);

  // A fresh nonzero prism_op.group for ops that NCCL would issue in one
  // ncclGroupStart/End.
  std::uint32_t new_group_id();

  // Enters `ops` without waiting; `what` names them in errors ("allreduce of
  // 40 bytes on comm 0"). Returns the entry's id for wait(). With no ops,
  // `done` runs at once and the id is 0. Throws std::runtime_error when an
  // op cannot be entered; `done` is then never called.
  std::uint64_t enter(std::span<const prism_op> ops, const std::string& what, Done done);

  // Holds the caller until entry `id` completes, then runs its Done here.
  // Returns at once when another thread has taken it (that thread runs it).
  // In a capture the wait is on the wire either way (prism_waited).
  void wait(std::uint64_t id);

  // An iteration marker (prism_marker). False when no group was created yet
  // (nothing to mark); throws when the client fails.
  bool marker(int code, std::int32_t value);

  // Messages sent, their cost and the lateness dropped; zeros before connect.
  prism_stats stats();
  // The rank's virtual time (prism_now); 0 before connect.
  std::int64_t now();

  // Stops the progress thread and says goodbye once. Entries still open are
  // dropped without their Done (run_pending false: static destruction, when
  // Python is gone) or failed with "the process is exiting".
  void shutdown(std::int32_t exit_code, bool run_pending);

 private:
  struct Entry {
    std::vector<std::uint64_t> tickets;  // not yet completed
    std::string what;
    Done done;
  };
  // A Done to run once the lock is released, with its error.
  struct Ready {
    Done done;
    std::string error;
  };

  Session() = default;
  void progress_loop();
  // The ticket completed; returns the entry's Done when it was its last.
  // `by_poll`: the progress thread took it (kept for wait() in a capture).
  std::vector<Ready> spend_locked(std::uint64_t ticket, bool by_poll);
  // In a capture: the waits for entry `id`'s ops a poll took, put on the
  // wire now that the rank's thread waits for them.
  void say_polled_waits_locked(std::uint64_t id);
  // The client failed (`cause`: prism_last_error): every open entry fails,
  // naming itself, and later calls throw. Said once on stderr too, since a
  // future's error may never be looked at.
  std::vector<Ready> fail_all_locked(const std::string& cause);
  [[noreturn]] void throw_locked(const std::string& doing);
  void check_usable_locked() const;
  static void run(std::vector<Ready>& ready);

  std::mutex mu_;  // guards everything below, and every prism_* call
  std::condition_variable work_cv_;
  prism_client* client_ = nullptr;
  pid_t pid_ = 0;  // the process that connected: a forked child must not use it
  Identity who_;
  std::string broken_;  // non-empty once the client failed or closed
  std::uint32_t next_comm_ = 0;
  std::uint32_t next_group_ = 1;
  std::uint64_t next_entry_ = 1;
  std::map<std::uint64_t, Entry> entries_;
  std::map<std::uint64_t, std::uint64_t> owner_;  // ticket -> entry
  bool capturing_ = false;                        // prism_capturing
  // In a capture: entry -> its tickets the progress thread spent, until the
  // rank's thread waits for the entry or the next iteration marker (an
  // entry nobody waits for, such as one DDP's reducer waits for through its
  // future, is dropped then).
  std::map<std::uint64_t, std::vector<std::uint64_t>> polled_;
  std::chrono::microseconds poll_{200};
  // The longest one sleep of the progress thread on a quiet time (which may
  // be "until the rank sends"); it then looks again.
  static constexpr std::chrono::milliseconds kMaxQuiet{1000};
  // How long the progress thread waits for a message with no op
  // outstanding before it looks again (for stop_, say).
  static constexpr std::chrono::milliseconds kIdleWait{20};
  std::uint64_t entered_ = 0;  // entries made: wakes a quiet progress thread
  bool stop_ = false;
  std::unique_ptr<std::thread> progress_;
};

}  // namespace prism::torch_shim
