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

namespace {

// Whether `a` and `b` name one file: the same existing file (hard or
// symbolic links included), or the same path once resolved, for files that
// do not exist yet.
bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  if (std::filesystem::equivalent(a, b, ec) && !ec) return true;
  std::error_code ec_a, ec_b;
  const auto ca = std::filesystem::weakly_canonical(a, ec_a);
  const auto cb = std::filesystem::weakly_canonical(b, ec_b);
  return !ec_a && !ec_b && ca == cb;
}

}  // namespace

Status check_output_files(const CLI::App& app, std::initializer_list<const char*> flags,
                          const std::string& input, std::string_view what) {
  std::vector<std::pair<const char*, std::string>> given;
  for (const char* flag : flags) {
    const CLI::Option* opt = app.get_option(flag);
    if (opt->count() == 0) continue;
    const auto path = opt->as<std::string>();
    if (path.empty()) return Status::invalid_argument(fmt::format("{} needs a file name", flag));
    if (same_file(path, input))
      return Status::invalid_argument(
          fmt::format("{} would overwrite the input {} {}", flag, what, input));
    for (const auto& [other, other_path] : given) {
      if (same_file(path, other_path))
        return Status::invalid_argument(
            fmt::format("{} and {} name the same file {}", other, flag, path));
    }
    given.emplace_back(flag, path);
  }
  return Status::ok();
}

void progress(const std::string& line) {
  if (::isatty(STDERR_FILENO)) fmt::print(stderr, "{}\n", line);
}

Result<PreparedJob> prepare_job(const JobOptions& o, bool program_ok) {
  if (o.no_kernel_db && !o.kernel_dbs.empty())
    return Status::invalid_argument("--no-kernel-db and --kernel-db contradict each other");
  PreparedJob p;
  progress(fmt::format("reading {}...", o.job_path));
  PRISM_ASSIGN_OR_RETURN(p.job, load_job_yaml(o.job_path, o.sets));
  Result<GpuSpec> gpu = gpu_spec(p.job.cluster.gpu_model);
  if (!gpu.is_ok()) return gpu.status().with_context(fmt::format("cluster {}", p.job.cluster.name));
  p.gpu = gpu.value();
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
  progress(fmt::format("building the graph of {} ranks...", p.job.num_gpus));
  const KernelModel kernels(p.gpu, &p.db);
  PRISM_ASSIGN_OR_RETURN(p.built, build_megatron(p.job, kernels));
  return p;
}

}  // namespace prism
