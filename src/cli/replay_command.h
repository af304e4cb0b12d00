// `prism replay GRAPH`: replays an execution graph over a cluster (the
// NCCL-faithful network with bandwidth sharing, net/flow_network.h; roofline
// compute for ops without a duration; PyTorch's caching allocator and NCCL's
// buffers on the cluster's GPU, mem/memory_model.h), prints the summary to
// stdout and writes the JSON report and the Chrome/Perfetto trace when asked.
// Exit status 0 when the replay completed, kExitDeadlock when it deadlocked,
// kExitOutOfMemory when a rank ran out of memory (the summary and report are
// still written); bad input is an error. docs/cli.md documents every option.
#pragma once

#include <string>

#include "cli/memory_options.h"
#include "cli/replay_options.h"
#include "util/status.h"

namespace CLI {
class App;
}  // namespace CLI

namespace prism {

inline constexpr int kExitDeadlock = 3;
inline constexpr int kExitOutOfMemory = 4;
// A --fail-node failure hung the job (replay and simulate): it did not complete.
inline constexpr int kExitNodeFailure = 6;

class ReplayCommand {
 public:
  // Registers the subcommand and its options on `parent`.
  explicit ReplayCommand(CLI::App& parent);

  bool selected() const;
  // The exit status, or the error to print.
  Result<int> run() const;

 private:
  CLI::App* app_;
  std::string graph_path_;
  OutputOptions output_;
  FoldOption fold_;
  WhatIfOptions what_if_;
  std::string cluster_;  // --cluster; unset: the graph's own, else dgx-h100
  NcclOptions nccl_;
  double gpu_tflops_;
  double hbm_bw_gbps_;
  MemoryOptions memory_;
  bool continue_past_oom_ = false;
};

}  // namespace prism
