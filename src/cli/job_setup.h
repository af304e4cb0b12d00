// What `prism simulate` and `prism build` share: reading the job spec with
// its --set overrides, the GPU and measured-kernel database it runs with, and
// building its graph.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "compute/gpu_spec.h"
#include "compute/kernel_db.h"
#include "util/status.h"
#include "workload/job_spec.h"
#include "workload/megatron.h"

namespace CLI {
class App;
}  // namespace CLI

namespace prism {

struct JobOptions {
  std::string job_path;
  std::vector<std::string> sets;
  std::vector<std::string> kernel_dbs;
  bool no_kernel_db = false;

  // Registers JOB, --set, --kernel-db and --no-kernel-db on `app`.
  void add_to(CLI::App* app);
};

struct PreparedJob {
  JobSpec job;
  GpuSpec gpu;
  KernelDb db;
  std::string db_paths;  // the databases read, comma separated
  BuiltJob built;
};

// The database shipped with PrismLLM (data/kernels.csv in the source tree).
std::string default_kernel_db_path();

// Reads the job and builds its graph. A job without a model section (a
// program's) is an error unless `program_ok`; then nothing is built.
Result<PreparedJob> prepare_job(const JobOptions& options, bool program_ok = false);

// Checks the output-file options `flags` of `app` that were given: each
// names a file, none is the input file (`input`, a `what`: "graph", "job
// spec"), no two are the same file.
Status check_output_files(const CLI::App& app, std::initializer_list<const char*> flags,
                          const std::string& input, std::string_view what);

// Progress on stderr, only when a person watches it, so that captured output
// (golden tests, pipelines) stays the same from run to run.
void progress(const std::string& line);

}  // namespace prism
