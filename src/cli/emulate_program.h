// What `prism emulate` gives the real ranks' processes, and the captures of
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
#include "slicing/slices.h"
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

struct SliceCaptureRun {
  std::vector<Rank> real;  // the emulation's real ranks: each role's own, where it has one
  std::vector<std::string> program;
  RankEnvironment env;     // coordinator: ignored (each capture listens on its own socket)
  std::string socket_dir;  // a private directory for the captures' sockets
  std::string slices_dir;  // when set, each capture is written there as slice-rank<N>.json
  int jobs = 1;            // captures run side by side (each with a free port for its store)
};

// Builds the graph of a program's job (no model section) from captures:
// for each role of the job's layout (slicing/slices.h), one rank runs
// the program with virtual peers that answer at once
// (runtime/program_capture.h), run.jobs roles at a time in role order, with
// progress on stderr. Each role's rank is its lowest real rank, else its
// lowest rank. The first capture to fail stops the others; its error is
// the one returned (the lowest role's, when several fail on their own).
Result<SlicedGraph> capture_slices(const PreparedJob& p, const SliceCaptureRun& run);

}  // namespace prism
