// `prism search JOB.yaml`: every valid parallel configuration of a job
// (tp, pp, vpp, cp, ep, micro-batch size, recompute, distributed optimizer,
// overlaps, sequence parallelism; lists overridable: --tp 1,2,4,8 --pp 1-16)
// simulated folded on the host's cores and the best ones printed by tokens/s
// per GPU (planning/search.h); --csv and --report write every one.
// docs/search.md documents the output, docs/cli.md every option.
#pragma once

#include <string>

#include "cli/job_setup.h"
#include "cli/memory_options.h"
#include "cli/replay_options.h"
#include "planning/search_space.h"
#include "util/status.h"

namespace CLI {
class App;
}  // namespace CLI

namespace prism {

class SearchCommand {
 public:
  explicit SearchCommand(CLI::App& parent);
  bool selected() const;
  Result<int> run() const;

 private:
  CLI::App* app_;
  JobOptions job_;
  SearchAxesText axes_;
  int top_ = 10;
  int jobs_ = 0;  // 0: the host's cores
  std::string csv_path_;
  std::string report_path_;
  std::string html_path_;
  NcclOptions nccl_;
  MemoryOptions memory_;
};

}  // namespace prism
