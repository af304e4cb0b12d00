// What an emulation (runtime/emulation.h) gives the real ranks' processes:
// their environment (torchrun's variables, PrismLLM's own), the rendezvous
// store of each run, and what ends a run early.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "graph/graph.h"
#include "runtime/launcher.h"
#include "runtime/rendezvous_store.h"
#include "slicing/slices.h"
#include "util/status.h"

namespace prism::runtime {

// Where and how the real ranks run.
struct RankEnvironment {
  int world_size = 0;
  int gpus_per_node = 1;
  std::string coordinator;  // the coordinator's address
  std::string graph;        // the graph file; empty while capturing
  int master_port = 29500;  // the rendezvous store's port on 127.0.0.1
  double timeout_s = 600;
  std::string secret;  // the run's, for the ranks' hello ($PRISM_SECRET)
  // Where the rendezvous store listens (MASTER_ADDR): loopback, or the
  // --listen host when real ranks run on other hosts (--external-ranks).
  std::string store_host = "127.0.0.1";

  std::chrono::milliseconds timeout() const {
    return std::chrono::milliseconds(static_cast<std::int64_t>(timeout_s * 1000));
  }
};

// torchrun's variables for `rank`, PrismLLM's own, and what lets an
// unmodified PyTorch program use PrismLLM's backend and store: PYTHONPATH
// starts with build/python (its sitecustomize), and
// TORCHELASTIC_USE_AGENT_STORE makes every rank, rank 0 included, a client
// of the store at MASTER_ADDR:MASTER_PORT (docs/emulate.md).
Env rank_env(const RankEnvironment& e, Rank rank);

// A new run's secret: 32 hex digits from the system's random source.
std::string make_run_secret();

// What every external real rank needs in its environment besides its own
// RANK and LOCAL_RANK (--external-ranks), as lines `NAME=VALUE`.
std::string external_env_text(const RankEnvironment& e);

// The directory holding PrismLLM's Python package and sitecustomize
// (build/python beside build/bin), or empty when this build has none.
std::string python_dir();

// The rendezvous store of one run (the capture, or the emulation) at
// 127.0.0.1:e.master_port (0: any free port; the store's port() says which),
// answering for every rank but `real`, and for their objects through
// `objects` (its on_object and object_answer; docs/torch-backend.md,
// "Objects"); its on_comm_id learns communicators' members (comm_ids.h).
Result<std::unique_ptr<RendezvousStore>> start_store(const RankEnvironment& e,
                                                     const std::vector<Rank>& real,
                                                     const StoreOptions& objects = {});
// What ends a run early, checked every tick: a termination signal caught
// (util/interrupt.h), the store's first error (a
// Gloo group it cannot answer for; a client that sent a malformed query is
// only dropped, and named on stderr), or a `who` rank
// ("real", "captured") whose process ended before it connected, which
// would otherwise be waited for until the timeout.
Status early_end(const RendezvousStore& store, Launcher& launcher,
                 const std::function<bool(Rank)>& connected, std::string_view who);

// What the launcher knows of the real ranks' processes that failed, for an
// error: "; rank 3 (pid 123) killed by signal 9 (SIGKILL)" per rank, but
// for those the error already `said` (early_end's).
std::string exits_text(Launcher& launcher, std::string_view said);

}  // namespace prism::runtime
