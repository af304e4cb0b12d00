#include "runtime/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <optional>
#include <system_error>

#include <fmt/format.h>

namespace prism::runtime {
namespace {

using namespace std::chrono_literals;

constexpr std::size_t kMaxLine = 64 * 1024;  // bounds memory for output with no newlines
constexpr auto kDrainGrace = 1000ms;         // how long a dead child's pipes may stay open
constexpr auto kReapInterval = 10ms;         // no SIGCHLD handler in a library, so we poll
constexpr auto kKillWait = 10s;              // a process tearing down a GPU context may be slow

std::string errno_text(int err) {
  return std::error_code(err, std::generic_category()).message();
}

// A pipe whose ends close with it unless released.
struct Pipe {
  int read = -1, write = -1;
  Pipe() = default;
  Pipe(Pipe&& o) noexcept : read(std::exchange(o.read, -1)), write(std::exchange(o.write, -1)) {}
  ~Pipe() {
    for (int fd : {read, write}) {
      if (fd >= 0) close(fd);
    }
  }
};

// Close-on-exec, so no child inherits another's pipes (posix_spawn's dup2
// onto 1 and 2 clears the flag there, even when the end already is 1 or 2).
Result<Pipe> make_pipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return Status::io_error("cannot create a pipe: " + errno_text(errno));
  }
  Pipe p;
  p.read = fds[0];
  p.write = fds[1];
  return p;
}

void drain(int nonblocking_fd) {
  char junk[64];
  while (read(nonblocking_fd, junk, sizeof junk) > 0) continue;
}

// The current environment with `env` applied; a later override wins.
std::vector<std::string> merged_environment(const Env& env) {
  auto overridden_after = [&](std::string_view name, std::size_t from) {
    return std::any_of(env.begin() + static_cast<std::ptrdiff_t>(from), env.end(),
                       [&](const auto& kv) { return kv.first == name; });
  };
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view kv(*e);
    if (!overridden_after(kv.substr(0, kv.find('=')), 0)) out.emplace_back(kv);
  }
  for (std::size_t i = 0; i < env.size(); ++i) {
    if (!overridden_after(env[i].first, i + 1)) out.push_back(env[i].first + "=" + env[i].second);
  }
  return out;
}

std::vector<char*> c_strings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  for (const std::string& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// File actions and attributes for a child: stdin from /dev/null, stdout and
// stderr on the pipes, its own process group, no blocked signals, and SIGPIPE
// and SIGXFSZ at their defaults even if we ignore them (as Python's subprocess
// does; other ignored signals stay ignored, so `nohup prism ...` still works).
int configure(posix_spawn_file_actions_t* fa, posix_spawnattr_t* attr, int out_fd, int err_fd) {
  int rc = posix_spawn_file_actions_addopen(fa, 0, "/dev/null", O_RDONLY, 0);
  if (rc == 0) rc = posix_spawn_file_actions_adddup2(fa, out_fd, 1);
  if (rc == 0) rc = posix_spawn_file_actions_adddup2(fa, err_fd, 2);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  sigaddset(&defaults, SIGXFSZ);
  if (rc == 0) rc = posix_spawnattr_setpgroup(attr, 0);
  if (rc == 0) rc = posix_spawnattr_setsigmask(attr, &none);
  if (rc == 0) rc = posix_spawnattr_setsigdefault(attr, &defaults);
  const short flags = POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  if (rc == 0) rc = posix_spawnattr_setflags(attr, flags);
  return rc;
}

// glibc's posix_spawnp waits until the exec succeeded or failed and returns
// its errno, so "not found" is reported here rather than as an exit 127.
Result<pid_t> spawn(const std::vector<std::string>& argv, const Env& env, int out_fd, int err_fd) {
  std::vector<std::string> env_strings = merged_environment(env);
  std::vector<char*> c_argv = c_strings(argv);
  std::vector<char*> c_env = c_strings(env_strings);
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);  // both only zero memory in glibc
  posix_spawnattr_init(&attr);
  pid_t pid = -1;
  int rc = configure(&fa, &attr, out_fd, err_fd);
  if (rc == 0) rc = posix_spawnp(&pid, c_argv[0], &fa, &attr, c_argv.data(), c_env.data());
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&fa);
  if (rc == 0) return pid;
  std::string msg = fmt::format("cannot run '{}': {}", argv[0], errno_text(rc));
  return rc == ENOENT ? Status::not_found(msg) : Status::io_error(msg);
}

Status check_request(const std::vector<std::string>& argv, const Env& env) {
  if (argv.empty() || argv[0].empty()) return Status::invalid_argument("empty command");
  for (const auto& [name, value] : env) {
    if (name.empty() || name.find('=') != std::string::npos) {
      return Status::invalid_argument(fmt::format("bad environment variable name '{}'", name));
    }
  }
  return Status::ok();
}

}  // namespace

struct Launcher::Child {
  int rank = 0;
  pid_t pid = -1;
  bool reaped = false;
  bool status_lost = false;
  int wait_status = 0;
  Clock::time_point reaped_at{};
  int open_streams = 2;
  bool reported = false;

  // Ended and all its output forwarded, so nothing of its group is left.
  bool quiet(Clock::time_point) const { return reaped && open_streams == 0; }
  // Ended and its output forwarded, or given up on after kDrainGrace.
  bool done(Clock::time_point now) const {
    return reaped && (open_streams == 0 || now - reaped_at >= kDrainGrace);
  }
  RankExit exit() const {
    RankExit e{.rank = rank, .pid = pid};
    if (!reaped) return e;
    if (status_lost) {
      e.how = RankExit::How::kUnknown;
    } else if (WIFSIGNALED(wait_status)) {
      e.how = RankExit::How::kSignaled;
      e.code = WTERMSIG(wait_status);
      e.core_dumped = WCOREDUMP(wait_status);
    } else {
      e.how = RankExit::How::kExited;
      e.code = WEXITSTATUS(wait_status);
    }
    return e;
  }
};

struct Launcher::Stream {
  int rank = 0;
  bool is_stderr = false;
  int fd = -1;
  std::string partial{};  // bytes after the last newline
};

std::string RankExit::describe() const {
  switch (how) {
    case How::kRunning:
      return "running";
    case How::kExited:
      return fmt::format("exited with code {}", code);
    case How::kSignaled: {
      const char* abbrev = sigabbrev_np(code);
      std::string s = abbrev ? fmt::format("killed by signal {} (SIG{})", code, abbrev)
                             : fmt::format("killed by signal {}", code);
      return core_dumped ? s + ", core dumped" : s;
    }
    case How::kUnknown:
      break;
  }
  return "ended (exit status unknown)";
}

OutputSink stdio_sink(std::FILE* out, std::FILE* err) {
  return [out, err](int rank, bool is_stderr, std::string_view line) {
    std::string text = fmt::format("[rank{}]: {}\n", rank, line);
    std::FILE* f = is_stderr ? err : out;
    // Flushing before and after, under the stream's lock, gives the line a
    // write(2) of its own even when others write to the same FILE.
    flockfile(f);
    std::fflush(f);
    std::fwrite(text.data(), 1, text.size(), f);
    std::fflush(f);
    funlockfile(f);
  };
}

Launcher::Launcher(OutputSink sink) : sink_(std::move(sink)) {}

Launcher::~Launcher() {
  if (!children_.empty()) terminate_all(kShutdownGrace);
  if (forwarder_.joinable()) {
    {
      std::lock_guard lock(mu_);
      closing_ = true;
    }
    wake();
    forwarder_.join();
  }
  for (int fd : {wake_read_, wake_write_}) {
    if (fd >= 0) close(fd);
  }
}

Result<pid_t> Launcher::start(int rank, const std::vector<std::string>& argv, const Env& env) {
  const std::string where = fmt::format("rank {}", rank);
  if (children_.contains(rank)) return Status::failed_precondition(where + ": already started");
  PRISM_RETURN_IF_ERROR(check_request(argv, env).with_context(where));
  PRISM_RETURN_IF_ERROR(start_forwarder().with_context(where));
  Result<Pipe> out = make_pipe();
  if (!out.is_ok()) return out.status().with_context(where);
  Result<Pipe> err = make_pipe();
  if (!err.is_ok()) return err.status().with_context(where);
  Result<pid_t> pid = spawn(argv, env, out->write, err->write);
  if (!pid.is_ok()) return pid.status().with_context(where);
  {
    std::lock_guard lock(mu_);
    children_[rank] = std::make_unique<Child>(Child{.rank = rank, .pid = *pid});
    for (Pipe* p : {&out.value(), &err.value()}) {
      new_streams_.push_back(std::make_unique<Stream>(
          Stream{.rank = rank, .is_stderr = p == &err.value(), .fd = std::exchange(p->read, -1)}));
    }
  }
  wake();
  return pid;  // the write ends close here, so EOF comes when the child's group is done
}

std::vector<RankExit> Launcher::poll_exits() {
  std::lock_guard lock(mu_);
  reap_locked();
  const Clock::time_point now = Clock::now();
  std::vector<RankExit> exits;
  for (auto& [rank, c] : children_) {
    if (c->reported || !c->done(now)) continue;
    c->reported = true;
    exits.push_back(c->exit());
  }
  return exits;
}

std::vector<RankExit> Launcher::wait_all(std::chrono::milliseconds timeout,
                                         const std::function<bool()>& give_up) {
  wait_until(Clock::now() + timeout, &Child::done, give_up);
  std::lock_guard lock(mu_);
  return table_locked();
}

std::vector<RankExit> Launcher::terminate_all(std::chrono::milliseconds grace) {
  signal_live_groups(SIGTERM);
  // A stopped process (SIGSTOP, a debugger's) holds SIGTERM pending until
  // it runs: it would die only at the SIGKILL, without its handlers.
  signal_live_groups(SIGCONT);
  if (!wait_until(Clock::now() + grace, &Child::quiet)) {
    signal_live_groups(SIGKILL);
    wait_until(Clock::now() + kKillWait, &Child::done);
  }
  std::lock_guard lock(mu_);
  return table_locked();
}

pid_t Launcher::pid(int rank) const {
  auto it = children_.find(rank);
  return it == children_.end() ? -1 : it->second->pid;
}

int Launcher::running() {
  std::lock_guard lock(mu_);
  reap_locked();
  return static_cast<int>(std::count_if(children_.begin(), children_.end(),
                                        [](auto& kv) { return !kv.second->reaped; }));
}

void Launcher::reap_locked() {
  for (auto& [rank, c] : children_) {
    if (c->reaped) continue;
    int status = 0;
    pid_t r;
    do r = waitpid(c->pid, &status, WNOHANG);
    while (r < 0 && errno == EINTR);
    if (r == 0) continue;
    c->reaped = true;
    c->reaped_at = Clock::now();
    c->wait_status = status;
    c->status_lost = r < 0;  // ECHILD: reaped elsewhere, e.g. with SIGCHLD ignored
  }
}

bool Launcher::wait_until(Clock::time_point deadline, ChildPred done,
                          const std::function<bool()>& give_up) {
  std::unique_lock lock(mu_);
  for (;;) {
    reap_locked();
    const Clock::time_point now = Clock::now();
    if (std::all_of(children_.begin(), children_.end(),
                    [&](auto& kv) { return ((*kv.second).*done)(now); })) {
      return true;
    }
    if (now >= deadline || (give_up && give_up())) return false;
    // A child's EOF wakes us early; its exit itself raises nothing we can wait on.
    changed_.wait_until(lock, std::min(deadline, now + kReapInterval));
  }
}

void Launcher::signal_live_groups(int sig) {
  std::lock_guard lock(mu_);
  reap_locked();
  for (auto& [rank, c] : children_) {
    if (c->quiet({})) continue;
    // The group reaches what the child started; open pipes after its exit
    // mean some of that may still run. kill() covers a child that left it.
    killpg(c->pid, sig);
    if (!c->reaped) kill(c->pid, sig);
  }
}

std::vector<RankExit> Launcher::table_locked() {
  std::vector<RankExit> exits;
  for (auto& [rank, c] : children_) {
    if (c->reaped) c->reported = true;
    exits.push_back(c->exit());
  }
  return exits;
}

Status Launcher::start_forwarder() {
  if (forwarder_.joinable()) return Status::ok();
  if (wake_read_ < 0) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
      return Status::io_error("cannot create a pipe: " + errno_text(errno));
    }
    wake_read_ = fds[0];
    wake_write_ = fds[1];
  }
  try {
    forwarder_ = std::thread([this] { forward_loop(); });
  } catch (const std::system_error& e) {
    return Status::io_error(fmt::format("cannot start the output thread: {}", e.what()));
  }
  return Status::ok();
}

void Launcher::wake() {
  // Non-blocking: a full pipe already holds a pending wake-up.
  [[maybe_unused]] ssize_t n = write(wake_write_, "w", 1);
}

void Launcher::forward_loop() {
  std::vector<std::unique_ptr<Stream>> streams;
  std::optional<Clock::time_point> drain_deadline;
  std::vector<pollfd> fds;
  for (;;) {
    {
      std::lock_guard lock(mu_);
      for (auto& s : new_streams_) streams.push_back(std::move(s));
      new_streams_.clear();
      if (closing_ && !drain_deadline) drain_deadline = Clock::now() + kDrainGrace;
    }
    if (drain_deadline && (streams.empty() || Clock::now() >= *drain_deadline)) break;
    fds.assign(1, pollfd{wake_read_, POLLIN, 0});
    for (auto& s : streams) fds.push_back(pollfd{s->fd, POLLIN, 0});
    if (poll(fds.data(), fds.size(), drain_deadline ? 10 : -1) < 0) continue;
    if (fds[0].revents != 0) drain(wake_read_);
    for (std::size_t i = 0; i < streams.size(); ++i) {
      if (fds[i + 1].revents == 0 || read_stream(*streams[i])) continue;
      end_stream(*streams[i]);
      streams[i].reset();
    }
    std::erase(streams, nullptr);
  }
  for (auto& s : streams) end_stream(*s);
}

bool Launcher::read_stream(Stream& s) {
  char buf[64 * 1024];
  ssize_t n = read(s.fd, buf, sizeof buf);
  if (n < 0) return errno == EINTR || errno == EAGAIN;
  if (n == 0) return false;
  s.partial.append(buf, static_cast<std::size_t>(n));
  std::size_t begin = 0;
  for (std::size_t nl; (nl = s.partial.find('\n', begin)) != std::string::npos; begin = nl + 1) {
    sink_(s.rank, s.is_stderr, std::string_view(s.partial).substr(begin, nl - begin));
  }
  s.partial.erase(0, begin);
  if (s.partial.size() >= kMaxLine) {
    sink_(s.rank, s.is_stderr, s.partial);
    s.partial.clear();
  }
  return true;
}

void Launcher::end_stream(Stream& s) {
  if (!s.partial.empty()) sink_(s.rank, s.is_stderr, s.partial);
  close(s.fd);
  std::lock_guard lock(mu_);
  children_.at(s.rank)->open_streams--;
  changed_.notify_all();
}

bool process_stopped(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string stat;
  if (!pid || !std::getline(in, stat)) return false;
  // "PID (COMM) STATE ...": COMM may hold spaces and parentheses.
  const std::size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return false;
  const char state = stat[close + 2];
  return state == 'T' || state == 't';
}

}  // namespace prism::runtime
