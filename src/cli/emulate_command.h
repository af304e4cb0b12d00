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
#include "runtime/emulation.h"
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
  // Options of the emulation alone are parsed into options_; the blocks
  // shared with other commands into their own structs, copied in by run().
  runtime::EmulationOptions options_;
  int capture_jobs_ = 1;  // options_.capture_jobs when given
  JobOptions job_;
  OutputOptions output_;
  FoldOption fold_;
  NcclOptions nccl_;
  MemoryOptions memory_;
  WhatIfOptions what_if_;
};

}  // namespace prism
