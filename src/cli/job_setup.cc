#include "cli/job_setup.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

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
    // Checked before the work, not after it: the file's folder must exist
    // and take new files (outputs are written beside it, then renamed).
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    const std::string dir = parent.empty() ? "." : parent.string();
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
      return Status::invalid_argument(fmt::format("{} {}: is a folder", flag, path));
    if (!std::filesystem::is_directory(dir, ec))
      return Status::invalid_argument(
          fmt::format("{} {}: the folder {} does not exist", flag, path, dir));
    if (::access(dir.c_str(), W_OK | X_OK) != 0)
      return Status::invalid_argument(
          fmt::format("{} {}: cannot write in {}: {}", flag, path, dir, std::strerror(errno)));
    for (const auto& [other, other_path] : given) {
      if (same_file(path, other_path))
        return Status::invalid_argument(
            fmt::format("{} and {} name the same file {}", other, flag, path));
    }
    given.emplace_back(flag, path);
  }
  return Status::ok();
}

}  // namespace prism
