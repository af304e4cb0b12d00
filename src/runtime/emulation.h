// Emulation: one hybrid emulation from job to report, as `prism emulate`
// runs it. It reads the job, chooses the graph (a file, the model's, or,
// for a program's job, one built from captures of the program, role by
// role: runtime/slice_capture.h), predicts the real ranks' times with the
// replay alone (simulation/simulation.h), then hosts the rendezvous store
// and the coordinator, starts the real ranks with their environment
// (runtime/real_ranks.h), ends early when a rank dies before it connects,
// and summarizes what the real ranks did against the prediction
// (runtime/emulate_report.h).
//
// Progress goes to stderr as `prism emulate` prints it; the real ranks'
// output is forwarded to stdout and stderr with a rank prefix. Errors name
// the option or the rank at fault. A real rank's process that ends badly
// after its goodbye is named on stderr and flagged in the result, not an
// error: the summary still stands.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/graph_json.h"
#include "net/nccl_tuner.h"
#include "report/chrome_trace.h"
#include "runtime/coordinator.h"
#include "runtime/emulate_report.h"
#include "runtime/launcher.h"
#include "runtime/object_payloads.h"
#include "runtime/real_ranks.h"
#include "simulation/cluster_models.h"
#include "simulation/job.h"
#include "simulation/memory_settings.h"
#include "simulation/what_if.h"
#include "util/status.h"

namespace prism::runtime {

// Mirrors `prism emulate`'s options (docs/emulate.md).
struct EmulationOptions {
  JobInput job;
  MemorySettings memory;
  NcclSelection nccl;
  std::string real_ranks;            // "0,63", "0-3": ranks of the job
  std::vector<std::string> program;  // run once per real rank
  std::string trace_ranks;           // virtual ranks traced besides the real ones
  std::string report_path;           // each output: none when empty
  std::string trace_path;
  std::string html_path;  // the HTML report (report/replay_html.h)
  TraceLevel trace_level = kDefaultTraceLevel;
  std::string capture_dir;      // each real rank's capture, DIR/rank<N>.json
  std::string save_graph_path;  // the graph emulated against
  std::string listen;           // tcp:HOST:PORT or unix:PATH; empty: a private Unix socket
  double timeout_s = 600;       // to connect, or to stay silent while waited for
  int master_port = 29500;      // the rendezvous store's on 127.0.0.1; 0: any free port
  bool fold = true;
  std::string graph_path;           // emulate against this graph file
  std::string slices_dir;           // a program's captures written there
  std::optional<int> capture_jobs;  // roles captured at once; unset: 1
  bool verify_roles = true;         // a second rank of each role captured and checked
  std::string capture_ranks;        // more ranks to capture and check ("3,62")
  // The real ranks are started elsewhere (another host's launcher): none is
  // started here; the coordinator (on --listen tcp) and the store (on its
  // host) wait for them, and the environment they need is written to
  // external_env_path (mode 0600: it holds the run's secret).
  bool external_ranks = false;
  std::string external_env_path;
  // What-if perturbations of the virtual ranks and the network
  // (--straggler, --jitter, --link-degrade; simulation/what_if.h), parsed
  // against the job's world size once it is known (prism emulate passes
  // WhatIfOptions::what_if). Unset: none. The real ranks run as they run: a
  // straggler naming one is an error, jitter leaves their compute alone.
  std::function<Result<WhatIf>(int world_size)> what_if;
};

struct EmulationResult {
  EmulateSummary summary;  // format_emulate_text / _json
  // A real rank's process ended badly after its goodbye (named on stderr).
  bool real_rank_failed = false;
};

class Emulation {
 public:
  explicit Emulation(EmulationOptions options);
  ~Emulation();  // removes the private directory of the graph and sockets
  Emulation(const Emulation&) = delete;
  Emulation& operator=(const Emulation&) = delete;

  // Runs the emulation once, from the job to the summary; --save-graph is
  // written on the way.
  Result<EmulationResult> run();
  // Writes the report, the trace and the captures that the options ask for,
  // each atomically, from `r` (this emulation's run()).
  Status write_outputs(const EmulationResult& r) const;

 private:
  Status prepare();
  Status prepare_what_if();
  Status refuse_failed_real_rank(const std::function<int(Rank)>& node_of) const;
  Status prepare_failure();
  Status choose_graph();
  void place_objects(std::vector<Rank> captured);
  std::vector<ExtraSection> saved_objects() const;
  Result<ReplayResult> predict() const;
  Result<CoordinatorResult> emulate();
  Result<CoordinatorResult> run_real_ranks(Coordinator& coordinator, const std::string& address);
  void stop_hung_ranks(Launcher& launcher, CoordinatorResult& result);
  Result<CoordinatorResult> run_external_ranks(Coordinator& coordinator,
                                               const wire::Address& address);
  // The store's answers for the objects virtual ranks send, and its record
  // of communicators' ids (comm_ids_).
  StoreOptions store_hooks() const;

  EmulationOptions options_;
  PreparedJob job_;
  ModelOptions models_;
  std::vector<Rank> real_;
  std::vector<Rank> traced_;
  std::string dir_;  // private: the graph file and the sockets
  RankEnvironment env_;
  ExecutionGraph owned_;  // a loaded or captured graph
  const ExecutionGraph* graph_ = nullptr;
  // The objects the captures recorded, and which capture speaks for each
  // rank (its role's captured rank): runtime/object_payloads.h.
  std::shared_ptr<ObjectPayloads> objects_ = std::make_shared<ObjectPayloads>();
  std::shared_ptr<ObjectRoles> object_roles_ = std::make_shared<ObjectRoles>();
  // The objects the real ranks sent in the emulation (--capture's files).
  std::shared_ptr<ObjectPayloads> real_objects_ = std::make_shared<ObjectPayloads>();
  // Communicators' members by their NCCL id, as the store learns them.
  std::shared_ptr<CommIds> comm_ids_ = std::make_shared<CommIds>();
  WhatIf what_if_;
  std::vector<Rank> failed_;  // the failed node's ranks (--fail-node)
  bool real_rank_failed_ = false;
};

}  // namespace prism::runtime
