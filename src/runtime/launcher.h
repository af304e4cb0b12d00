// Launcher: starts the real ranks of a hybrid emulation, one process per rank,
// the way torchrun does, and forwards what they print.
//
// Each child runs in its own process group (so a signal reaches the programs it
// started too), reads /dev/null as stdin, and writes stdout and stderr into
// pipes. One internal thread reads every pipe and hands each line to the sink,
// whole, tagged with the rank and the stream. A child's exit is reported only
// after its pipes reached EOF, so a traceback is forwarded before the caller
// hears that the rank died (unless something the child left behind keeps the
// pipes open for longer than a short grace).
//
// start / poll_exits / wait_all / terminate_all and the accessors must be
// called from one thread. The sink is called on the forwarding thread, must
// not throw, and holds up every rank's output while it runs. The destructor
// terminates whatever still runs, so an early return leaves nothing behind.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "util/status.h"

namespace prism::runtime {

// Receives one line a child printed, without its newline. A last line with no
// newline is delivered too; a line longer than 64 KiB arrives in pieces.
using OutputSink = std::function<void(int rank, bool is_stderr, std::string_view line)>;

// A sink that writes "[rank3]: LINE\n" to `out` or `err` in one write per line
// (PyTorch's prefix for per-rank output), so ranks never interleave mid-line.
OutputSink stdio_sink(std::FILE* out, std::FILE* err);

// How a rank's process stands.
struct RankExit {
  // kUnknown: it ended but someone else reaped it (e.g. SIGCHLD ignored).
  enum class How { kRunning, kExited, kSignaled, kUnknown };
  int rank = 0;
  pid_t pid = -1;
  How how = How::kRunning;
  int code = 0;  // exit code (kExited) or signal number (kSignaled)
  bool core_dumped = false;

  bool running() const { return how == How::kRunning; }
  // "running", "exited with code 3", "killed by signal 9 (SIGKILL)".
  std::string describe() const;
};

using Env = std::vector<std::pair<std::string, std::string>>;

class Launcher {
 public:
  explicit Launcher(OutputSink sink);
  ~Launcher();  // terminate_all(kShutdownGrace), then stops the forwarding thread
  Launcher(const Launcher&) = delete;
  Launcher& operator=(const Launcher&) = delete;

  static constexpr std::chrono::milliseconds kShutdownGrace{2000};

  // Starts argv (PATH searched as by execvp) for `rank` with the current
  // environment plus `env` (which overrides). Returns the child's pid; fails
  // with "rank 3: cannot run 'prog': No such file or directory" when the
  // program cannot be executed.
  Result<pid_t> start(int rank, const std::vector<std::string>& argv, const Env& env);

  // Ranks that ended since the last call (or wait_all), in rank order. Never blocks.
  std::vector<RankExit> poll_exits();
  // Waits up to `timeout` for every rank to end, or until `give_up` (asked
  // every few milliseconds: a caught signal) says to stop; returns every
  // rank started, in rank order, those still running as such.
  std::vector<RankExit> wait_all(std::chrono::milliseconds timeout,
                                 const std::function<bool()>& give_up = {});
  // SIGTERM to every rank's process group (and SIGCONT, so that a stopped
  // process gets it), SIGKILL after `grace` to those
  // left (then waits up to 10 s for them to be reaped: a process releasing a
  // GPU can take that long); returns every rank as wait_all does.
  std::vector<RankExit> terminate_all(std::chrono::milliseconds grace);

  pid_t pid(int rank) const;  // -1 when `rank` was not started
  int running();              // ranks whose process has not ended
  int num_started() const { return static_cast<int>(children_.size()); }

 private:
  struct Child;
  struct Stream;
  using Clock = std::chrono::steady_clock;
  using ChildPred = bool (Child::*)(Clock::time_point) const;

  Status start_forwarder();
  void wake();
  void forward_loop();
  bool read_stream(Stream& s);  // false at EOF
  void end_stream(Stream& s);
  void reap_locked();
  bool wait_until(Clock::time_point deadline, ChildPred done,
                  const std::function<bool()>& give_up = {});
  void signal_live_groups(int sig);
  std::vector<RankExit> table_locked();

  OutputSink sink_;
  int wake_read_ = -1;  // a byte here makes the forwarder look at new_streams_ / closing_
  int wake_write_ = -1;
  std::thread forwarder_;

  std::mutex mu_;                    // guards what follows, shared with the forwarding thread
  std::condition_variable changed_;  // a stream of some child ended
  std::map<int, std::unique_ptr<Child>> children_;  // inserted only by start()
  std::vector<std::unique_ptr<Stream>> new_streams_;
  bool closing_ = false;
};

// Whether process `pid` is stopped (SIGSTOP, job control or a debugger):
// state T or t in /proc/PID/stat. False when it cannot be read.
bool process_stopped(pid_t pid);

}  // namespace prism::runtime
