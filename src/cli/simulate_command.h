// `prism simulate JOB.yaml`: builds the job's graph (workload/megatron.h),
// replays it on the job's cluster (NCCL-faithful flow network, kernel times
// from the compute model and measured-kernel database) and prints iteration
// time, throughput, MFU, the per-role breakdown and peak memory; writes the
// JSON report, the Chrome/Perfetto trace and the kernel list when asked.
// docs/simulate.md documents the output, docs/cli.md every option.
#pragma once

#include <string>

#include "cli/job_setup.h"
#include "cli/memory_options.h"
#include "cli/replay_options.h"
#include "util/status.h"

namespace CLI {
class App;
}  // namespace CLI

namespace prism {

class SimulateCommand {
 public:
  explicit SimulateCommand(CLI::App& parent);
  bool selected() const;
  Result<int> run() const;

 private:
  CLI::App* app_;
  JobOptions job_;
  OutputOptions output_;
  std::string kernels_path_;
  bool continue_past_oom_ = false;
  FoldOption fold_;
  WhatIfOptions what_if_;
  NcclOptions nccl_;
  MemoryOptions memory_;
};

// `prism build JOB.yaml -o GRAPH`: writes the graph `prism simulate` would
// replay, for `prism replay` and the emulator. With --from-slices DIR, the
// graph is built from captured ranks (slicing/slices.h), one per role; a
// program's job (no model section) needs one for every role.
class BuildCommand {
 public:
  explicit BuildCommand(CLI::App& parent);
  bool selected() const;
  Result<int> run() const;

 private:
  CLI::App* app_;
  JobOptions job_;
  std::string output_path_;
  std::string slices_dir_;
};

}  // namespace prism
