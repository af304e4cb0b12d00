// `prism replay GRAPH`: replays an execution graph over a cluster (the
// NCCL-faithful network with bandwidth sharing, net/flow_network.h; roofline
// compute and counting memory placeholders), prints the
// summary to stdout and writes the JSON report and the Chrome/Perfetto trace
// when asked. Exit status 0 when the replay completed, kExitDeadlock when it
// deadlocked (the summary and report are still written); bad input is an
// error. docs/cli.md documents every option.
#pragma once

#include <string>

#include "util/status.h"

namespace CLI {
class App;
}  // namespace CLI

namespace prism {

inline constexpr int kExitDeadlock = 3;

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
  std::string report_path_;
  std::string trace_path_;
  std::string trace_ranks_;
  bool no_fold_ = false;
  std::string cluster_ = "dgx-h100";
  std::string nccl_algo_;
  std::string nccl_proto_;
  double gpu_tflops_;
  double hbm_bw_gbps_;
};

}  // namespace prism
