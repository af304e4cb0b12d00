// A job ready to replay: its spec read with --set overrides, the GPU and
// measured-kernel database it runs with, and its graph built (Megatron-Core's
// training step, workload/megatron.h). `prism simulate`, `build` and
// `emulate` start from it.
#pragma once

#include <string>
#include <vector>

#include "compute/gpu_spec.h"
#include "compute/kernel_db.h"
#include "util/status.h"
#include "workload/job_spec.h"
#include "workload/megatron.h"

namespace prism {

// Where the job comes from: the spec, overrides of its fields, and the
// kernel databases to read.
struct JobInput {
  std::string job_path;
  std::vector<std::string> sets;        // "section.key=value"
  std::vector<std::string> kernel_dbs;  // later files win; none: the shipped one
  bool no_kernel_db = false;
};

struct PreparedJob {
  std::string path;  // the job spec's file
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
Result<PreparedJob> prepare_job(const JobInput& input, bool program_ok = false);

// prepare_job() in two steps, for callers that change the spec before
// building (prism search builds one graph per configuration): read_job()
// reads the spec, GPU and kernel databases and builds nothing;
// build_job() builds p->built from p->job, which must pass validate_job().
Result<PreparedJob> read_job(const JobInput& input, bool program_ok = false);
Status build_job(PreparedJob* p);

}  // namespace prism
