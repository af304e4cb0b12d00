// What the torch backend's tests need around a Python real rank: a fake
// coordinator that records what the rank sent, a TCPStore server for its
// rendezvous (the host rank of the job is virtual), and a runner that starts
// PRISM_PYTHON (the interpreter the backend is built for) with a changed
// environment and kills it past a deadline, so that a hang fails the test
// instead of stalling it.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "wire/server.h"

namespace prism::torch_shim::testing {

// Completes each op `complete_after_ns` after its `at`, and answers every
// wait that no answer ends with its horizon.
struct FakeOptions {
  std::int64_t complete_after_ns = 0;
  // false: answers each op as it arrives. true: as a real coordinator does,
  // only once a wait's `until` reaches the completion (it cannot simulate
  // past the rank's bound), so each poll of the progress thread is a round
  // trip until then.
  bool answer_when_due = false;
  // That op gets an `aborted` error instead, and the connection closes, as
  // the coordinator does when the emulation ends under a rank.
  int abort_at_op = -1;
};

class FakeCoordinator : public wire::ServerHandler {
 public:
  explicit FakeCoordinator(FakeOptions options = {});
  ~FakeCoordinator() override;

  void on_message(wire::PeerId peer, wire::Message m) override;
  void on_close(wire::PeerId, const Status&) override {}

  std::string address() const { return address_.to_string(); }
  std::vector<wire::Message> seen();
  template <typename T>
  std::vector<T> seen_of() {
    std::vector<T> out;
    for (const wire::Message& m : seen())
      if (const auto* t = std::get_if<T>(&m)) out.push_back(*t);
    return out;
  }

 private:
  bool woken(const wire::Wait& w) const;
  void answer(wire::PeerId peer, std::size_t pending_index);

  const FakeOptions options_;
  std::filesystem::path dir_;  // the socket's, removed at the end
  std::unique_ptr<wire::Server> server_;
  wire::Address address_;
  std::thread thread_;
  std::atomic<bool> done_{false};
  std::mutex mu_;
  std::vector<wire::Message> seen_;
  std::vector<wire::Complete> answered_;
  std::vector<wire::Complete> pending_;  // not yet answered
  int ops_ = 0;
};

using Env = std::map<std::string, std::string>;

struct RunResult {
  int exit_code = -1;      // -1 when killed
  bool timed_out = false;  // killed at the deadline
  std::string output;      // stdout and stderr, interleaved
  std::chrono::milliseconds took{0};
};

// Runs argv[0] with the test's environment, minus `unset`, plus `set`.
RunResult run(const std::vector<std::string>& argv, const Env& set,
              const std::vector<std::string>& unset, std::chrono::seconds timeout);

// A real rank's environment, as `prism emulate` sets it (docs/emulate.md):
// rank 0 of 4, build/python first on PYTHONPATH, the rendezvous at
// 127.0.0.1:`store_port`.
Env rank_env(const std::string& coordinator, int store_port, const std::string& timeout_ms);

// Runs tests/shim/torch/`script` with `args` under PRISM_PYTHON, with
// `env` and TORCHELASTIC_RESTART_COUNT left unset, as prism emulate leaves it
// (prism_torch makes it 0).
RunResult run_script(const std::string& script, const Env& env,
                     const std::vector<std::string>& args = {});

// tests/shim/torch/store_server.py, serving until destroyed.
class StoreServer {
 public:
  explicit StoreServer(int world_size);
  ~StoreServer();
  int port() const { return port_; }  // 0 when it did not start

 private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  int port_ = 0;
};

// Why the backend cannot be tested here, or "" when it can: torch must
// import under PRISM_PYTHON and the module must be built.
std::string torch_missing();

}  // namespace prism::torch_shim::testing
