#include "simulation/job.h"

#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "compute/kernel_model.h"
#include "util/progress.h"
#include "workload/job_yaml.h"

namespace prism {

std::string default_kernel_db_path() {
  return std::string(PRISM_SOURCE_DIR) + "/data/kernels.csv";
}

Result<PreparedJob> prepare_job(const JobInput& o, bool program_ok) {
  PRISM_ASSIGN_OR_RETURN(PreparedJob p, read_job(o, program_ok));
  if (!p.job.has_model) return p;  // the graph comes from capturing the program
  progress(fmt::format("building the graph of {} ranks...", p.job.num_gpus));
  PRISM_RETURN_IF_ERROR(build_job(&p));
  return p;
}

Result<PreparedJob> read_job(const JobInput& o, bool program_ok) {
  if (o.no_kernel_db && !o.kernel_dbs.empty())
    return Status::invalid_argument("--no-kernel-db and --kernel-db contradict each other");
  PreparedJob p;
  p.path = o.job_path;
  progress(fmt::format("reading {}...", o.job_path));
  PRISM_ASSIGN_OR_RETURN(p.job, load_job_yaml(o.job_path, o.sets));
  Result<GpuSpec> gpu = gpu_spec(p.job.cluster.gpu_model);
  if (!gpu.is_ok()) return gpu.status().with_context(fmt::format("cluster {}", p.job.cluster.name));
  p.gpu = gpu.value();
  // The cluster's own chip-to-chip clock spread, where it gives one.
  if (!std::isnan(p.job.cluster.gpu_clock_cov))
    p.gpu.sustained_clock_cov = p.job.cluster.gpu_clock_cov;
  if (!p.job.has_model) {
    if (!program_ok)
      return Status::invalid_argument(fmt::format(
          "{}: job '{}' has no model section: it describes a program, whose graph comes from "
          "running it (prism emulate {} --real-ranks 0 -- PROGRAM)",
          o.job_path, p.job.name, o.job_path));
    return p;  // the graph comes from capturing the program
  }

  std::vector<std::string> paths = o.kernel_dbs;
  if (paths.empty() && !o.no_kernel_db && std::filesystem::exists(default_kernel_db_path()))
    paths.push_back(default_kernel_db_path());
  for (const std::string& path : paths) {
    PRISM_ASSIGN_OR_RETURN(KernelDb db, KernelDb::load(path, p.gpu.name));
    p.db.merge(db);
    const bool shipped = path == default_kernel_db_path();
    p.db_paths += (p.db_paths.empty() ? "" : ", ") + (shipped ? "shipped data/kernels.csv" : path);
  }
  return p;
}

Status build_job(PreparedJob* p) {
  const KernelModel kernels(p->gpu, &p->db);
  PRISM_ASSIGN_OR_RETURN(p->built, build_megatron(p->job, kernels));
  return Status::ok();
}

}  // namespace prism
