#include "cli/job_setup.h"

#include <filesystem>

#include <unistd.h>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "compute/kernel_model.h"
#include "workload/job_yaml.h"

namespace prism {

void JobOptions::add_to(CLI::App* app) {
  app->add_option("JOB", job_path, "Job spec (YAML, docs/job-spec.md)")
      ->required()
      ->type_name("FILE");
  app->add_option("--set", sets,
                  "Override a field of the job spec, e.g. "
                  "parallelism.tensor_model_parallel_size=8 (repeatable)")
      ->type_name("SECTION.KEY=VALUE");
  app->add_option("--kernel-db", kernel_dbs,
                  "Measured-kernel database (CSV, docs/compute.md); repeatable, later files win "
                  "(default: the shipped data/kernels.csv)")
      ->type_name("FILE");
  app->add_flag("--no-kernel-db", no_kernel_db, "Use the compute model only, no measured kernels");
}

std::string default_kernel_db_path() {
  return std::string(PRISM_SOURCE_DIR) + "/data/kernels.csv";
}

void progress(const std::string& line) {
  if (::isatty(STDERR_FILENO)) fmt::print(stderr, "{}\n", line);
}

Result<PreparedJob> prepare_job(const JobOptions& o) {
  if (o.no_kernel_db && !o.kernel_dbs.empty())
    return Status::invalid_argument("--no-kernel-db and --kernel-db contradict each other");
  PreparedJob p;
  progress(fmt::format("reading {}...", o.job_path));
  PRISM_ASSIGN_OR_RETURN(p.job, load_job_yaml(o.job_path, o.sets));
  Result<GpuSpec> gpu = gpu_spec(p.job.cluster.gpu_model);
  if (!gpu.is_ok()) return gpu.status().with_context(fmt::format("cluster {}", p.job.cluster.name));
  p.gpu = gpu.value();

  std::vector<std::string> paths = o.kernel_dbs;
  if (paths.empty() && !o.no_kernel_db && std::filesystem::exists(default_kernel_db_path()))
    paths.push_back(default_kernel_db_path());
  for (const std::string& path : paths) {
    PRISM_ASSIGN_OR_RETURN(KernelDb db, KernelDb::load(path, p.gpu.name));
    p.db.merge(db);
    p.db_paths += (p.db_paths.empty() ? "" : ", ") + path;
  }
  progress(fmt::format("building the graph of {} ranks...", p.job.num_gpus));
  const KernelModel kernels(p.gpu, &p.db);
  PRISM_ASSIGN_OR_RETURN(p.built, build_megatron(p.job, kernels));
  return p;
}

}  // namespace prism
