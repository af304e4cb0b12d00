// `prism emulate JOB.yaml --real-ranks LIST -- PROGRAM ARGS...`: hybrid
// emulation. Parses the options, runs runtime::Emulation (the job's graph,
// the prediction, the coordinator, the real ranks started with torchrun's
// environment and their output forwarded with a rank prefix), prints its
// summary and writes the files asked for. docs/emulate.md documents it.
#pragma once

#include <string>
#include <vector>

#include "cli/job_setup.h"
#include "cli/memory_options.h"
#include "cli/replay_options.h"
#include "util/status.h"

namespace CLI {
class App;
}  // namespace CLI

namespace prism {

class EmulateCommand {
 public:
  explicit EmulateCommand(CLI::App& parent);
  bool selected() const;
  Result<int> run() const;

 private:
  CLI::App* app_;
  JobOptions job_;
  std::string real_ranks_;
  OutputOptions output_;
  std::string capture_dir_;
  std::string listen_;
  double timeout_s_ = 600;
  int master_port_ = 29500;
  FoldOption fold_;
  NcclOptions nccl_;
  std::string graph_path_;
  std::string slices_dir_;
  int capture_jobs_ = 1;
  std::string save_graph_path_;
  MemoryOptions memory_;
  std::vector<std::string> program_;
};

}  // namespace prism
