// What `prism emulate` gives the real ranks' processes, and the capture of
// a program that has no graph yet (a job without a model section).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/job_setup.h"
#include "graph/graph.h"
#include "runtime/launcher.h"
#include "runtime/rendezvous_store.h"
#include "util/status.h"

namespace prism {

// Where and how the real ranks run.
struct RankEnvironment {
  int world_size = 0;
  int gpus_per_node = 1;
  std::string coordinator;  // the coordinator's address
  std::string graph;        // the graph file; empty while capturing
  int master_port = 29500;  // the rendezvous store's port on 127.0.0.1
  double timeout_s = 600;

  std::chrono::milliseconds timeout() const {
    return std::chrono::milliseconds(static_cast<std::int64_t>(timeout_s * 1000));
  }
};

// torchrun's variables for `rank`, PrismLLM's own, and what lets an
// unmodified PyTorch program use PrismLLM's backend and store: PYTHONPATH
// starts with build/python (its sitecustomize), and
// TORCHELASTIC_USE_AGENT_STORE makes every rank, rank 0 included, a client
// of the store at MASTER_ADDR:MASTER_PORT (docs/emulate.md).
runtime::Env rank_env(const RankEnvironment& e, Rank rank);

// The directory holding PrismLLM's Python package and sitecustomize
// (build/python beside build/bin), or empty when this build has none.
std::string python_dir();

// The rendezvous store of one run (the capture, or the emulation) at
// 127.0.0.1:e.master_port (0: any free port; the store's port() says which),
// answering for every rank but `real`.
Result<std::unique_ptr<runtime::RendezvousStore>> start_store(const RankEnvironment& e,
                                                              const std::vector<Rank>& real);
// What ends a run early, checked every tick: the store's first error (a
// Gloo group it cannot answer for, a malformed query), or a `who` rank
// ("real", "captured") whose process ended before it connected, which
// would otherwise be waited for until the timeout.
Status early_end(const runtime::RendezvousStore& store, runtime::Launcher& launcher,
                 const std::function<bool(Rank)>& connected, std::string_view who);

struct ProgramCaptureRun {
  Rank rank = 0;
  std::vector<std::string> program;
  RankEnvironment env;      // coordinator: where the capture listens
  std::string capture_dir;  // when set, the capture is written there too
};

// Runs the program once as `run.rank` with virtual peers that answer at
// once (runtime/program_capture.h), then builds the job's graph from what
// it did (workload/capture_graph.h). The job must have no model section.
Result<ExecutionGraph> capture_program(const PreparedJob& p, const ProgramCaptureRun& run);

}  // namespace prism
