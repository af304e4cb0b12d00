// What the torch backend's tests need around a Python real rank: the fake
// coordinator's options for them, a TCPStore server for its
// rendezvous (the host rank of the job is virtual), and a runner that starts
// PRISM_PYTHON (the interpreter the backend is built for) with a changed
// environment and kills it past a deadline, so that a hang fails the test
// instead of stalling it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "support/fake_coordinator.h"

namespace prism::torch_shim::testing {

using prism::testing::FakeCoordinator;
using FakeOptions = prism::testing::FakeCoordinatorOptions;

// The torch tests' fake coordinator (tests/support/fake_coordinator.h): it
// welcomes the rank to job "torch_backend_test", and an abort is a virtual
// rank's running out of memory.
FakeOptions torch_fake(FakeOptions o = {});

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
