// The option blocks that `prism simulate`, `replay` and `emulate` share,
// each registered by every command the same way, with the same meaning:
// the output files (--report, --trace, --trace-ranks, --trace-level, --html), folding (--no-fold)
// and the NCCL selection (--nccl-algo, --nccl-proto).
#pragma once

#include <string>
#include <vector>

#include "graph/graph.h"
#include "net/nccl_tuner.h"
#include "report/chrome_trace.h"
#include "simulation/what_if.h"
#include "util/status.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace prism {

struct OutputOptions {
  std::string report_path;
  std::string trace_path;
  std::string trace_ranks;
  std::string trace_level = "phases";
  std::string html_path;

  // Registers --report, --trace, --trace-ranks and --trace-level (which
  // need --trace) and --html;
  // the help texts say which ranks the command traces.
  void add_to(
      CLI::App* app,
      const std::string& trace_help = "Write a Chrome/Perfetto trace of the traced ranks to FILE",
      const std::string& trace_ranks_help = "Ranks to trace, e.g. 0,17 or 0-3,17 (default: 0)");
  // --trace-level, parsed (report/chrome_trace.h): an unknown level is an
  // error naming the option and the valid levels.
  Result<TraceLevel> level() const { return parse_trace_level(trace_level); }
  // The ranks to trace: --trace-ranks (`trace_ranks`, parsed), and with
  // --html each role's first rank too (report/replay_html.h).
  std::vector<Rank> traced(const ExecutionGraph& g, std::vector<Rank> trace_ranks) const;
};

struct FoldOption {
  bool no_fold = false;

  void add_to(CLI::App* app, const std::string& help =
                                 "Simulate every rank instead of one per class of identical ranks");
  bool fold() const { return !no_fold; }
};

struct NcclOptions {
  std::string algo;
  std::string proto;

  // Registers --nccl-algo and --nccl-proto.
  void add_to(CLI::App* app);
  Result<NcclSelection> selection() const { return NcclSelection::parse(algo, proto); }
};

// What-if perturbations (simulation/what_if.h): --straggler RANKS:FACTOR
// (repeatable), --jitter PCT[:SEED], --link-degrade WHAT:FACTOR
// (repeatable), --fail-node N@TIME with --nccl-timeout DURATION.
struct WhatIfOptions {
  std::vector<std::string> stragglers;
  std::string jitter;
  std::vector<std::string> links;  // --link-degrade
  std::string fail_node;
  std::string nccl_timeout;
  CLI::Option* fail_node_option = nullptr;     // set by add_to
  CLI::Option* nccl_timeout_option = nullptr;  // set by add_to
  CLI::Option* jitter_option = nullptr;        // set by add_to

  void add_to(CLI::App* app);
  // The options parsed against a world of `world_size` ranks.
  Result<WhatIf> what_if(int world_size) const;
};

}  // namespace prism
