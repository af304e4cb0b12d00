#include "python_rank.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>

extern char** environ;

namespace prism::torch_shim::testing {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

FakeOptions torch_fake(FakeOptions o) {
  o.job = "torch_backend_test";
  o.abort_message = "virtual rank 3 ran out of memory (torch_backend_test)";
  return o;
}

namespace {

// The environment as execve wants it: owned strings and their pointers.
struct EnvBlock {
  std::vector<std::string> entries;
  std::vector<char*> pointers;
};

EnvBlock make_env(const Env& set, const std::vector<std::string>& unset) {
  std::set<std::string> drop(unset.begin(), unset.end());
  for (const auto& [k, v] : set) drop.insert(k);
  EnvBlock e;
  for (char** p = environ; *p != nullptr; ++p) {
    const std::string entry = *p;
    if (!drop.contains(entry.substr(0, entry.find('=')))) e.entries.push_back(entry);
  }
  for (const auto& [k, v] : set) e.entries.push_back(k + "=" + v);
  for (std::string& s : e.entries) e.pointers.push_back(s.data());
  e.pointers.push_back(nullptr);
  return e;
}

std::vector<char*> make_argv(std::vector<std::string>& args) {
  std::vector<char*> out;
  for (std::string& a : args) out.push_back(a.data());
  out.push_back(nullptr);
  return out;
}

// Forks and execs; the child's stdin is `in` (or /dev/null), its stdout
// `out`, its stderr `err`. Only async-signal-safe calls after fork: the
// test process has threads.
pid_t spawn(std::vector<std::string> args, const EnvBlock& env, int in, int out, int err) {
  std::vector<char*> argv = make_argv(args);
  const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(in >= 0 ? in : null, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::execve(argv[0], argv.data(), env.pointers.data());
    ::_exit(127);
  }
  ::close(null);
  return pid;
}

}  // namespace

RunResult run(const std::vector<std::string>& argv, const Env& set,
              const std::vector<std::string>& unset, std::chrono::seconds timeout) {
  RunResult r;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return r;
  const EnvBlock env = make_env(set, unset);
  const auto start = Clock::now();
  const pid_t pid = spawn(argv, env, -1, fds[1], fds[1]);
  ::close(fds[1]);
  const auto deadline = start + timeout;
  char buf[4096];
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      r.timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    r.output.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  return r;
}

Env rank_env(const std::string& coordinator, int store_port, const std::string& timeout_ms) {
  return {{"PYTHONPATH", PRISM_BINARY_DIR "/python"},
          {"PRISM_COORDINATOR", coordinator},
          {"PRISM_TIMEOUT_MS", timeout_ms},
          {"RANK", "0"},
          {"WORLD_SIZE", "4"},
          {"LOCAL_RANK", "0"},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", std::to_string(store_port)},
          {"TORCHELASTIC_USE_AGENT_STORE", "True"},
          {"OMP_NUM_THREADS", "1"}};
}

RunResult run_script(const std::string& script, const Env& env,
                     const std::vector<std::string>& args) {
  std::vector<std::string> argv{PRISM_PYTHON, PRISM_SOURCE_DIR "/tests/shim/torch/" + script};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv, env, {"TORCHELASTIC_RESTART_COUNT"}, 120s);
}

StoreServer::StoreServer(int world_size) {
  int in[2];
  int out[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) return;
  const EnvBlock env = make_env({{"OMP_NUM_THREADS", "1"}}, {"PRISM_COORDINATOR"});
  pid_ = spawn({PRISM_PYTHON, PRISM_SOURCE_DIR "/tests/shim/torch/store_server.py",
                std::to_string(world_size)},
               env, in[0], out[1], 2);
  ::close(in[0]);
  ::close(out[1]);
  stdin_ = in[1];
  std::string line;
  char c = 0;
  pollfd p{out[0], POLLIN, 0};
  while (::poll(&p, 1, 60'000) > 0 && ::read(out[0], &c, 1) == 1 && c != '\n') line += c;
  ::close(out[0]);
  if (!line.empty() && std::all_of(line.begin(), line.end(), ::isdigit)) port_ = std::stoi(line);
}

StoreServer::~StoreServer() {
  if (stdin_ >= 0) ::close(stdin_);  // it serves until its stdin closes
  if (pid_ <= 0) return;
  for (int i = 0; i < 200; ++i) {
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) return;
    std::this_thread::sleep_for(10ms);
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
}

std::string torch_missing() {
  static const std::string why = [] {
    bool built = false;
    std::error_code ec;
    for (const auto& e :
         std::filesystem::directory_iterator(PRISM_BINARY_DIR "/python/prism_torch", ec)) {
      built = built || e.path().filename().string().starts_with("_c10d");
    }
    if (!built) return std::string("the prism_torch._c10d module is not built (no torch?)");
    const RunResult r = run({PRISM_PYTHON, "-c", "import torch"}, {}, {"PYTHONPATH"}, 120s);
    if (r.exit_code != 0) return PRISM_PYTHON " cannot import torch: " + r.output;
    return std::string();
  }();
  return why;
}

}  // namespace prism::torch_shim::testing
