#include "cli/interop_command.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "chakra/chakra.h"
#include "cli/job_setup.h"
#include "compute/compute_model.h"
#include "graph/graph_json.h"
#include "kineto/kernel_calibration.h"
#include "kineto/kineto.h"
#include "util/file.h"

namespace prism {
namespace {

Result<int> save_imported(const ExecutionGraph& g, const std::string& output,
                          const std::string& from) {
  PRISM_RETURN_IF_ERROR(save_graph(g, output));
  fmt::print("{}: {} ranks, {} roles, {} ops imported from {}\n", output, g.world_size(),
             g.roles.size(), g.total_ops(), from);
  return 0;
}

}  // namespace

ImportCommand::ImportCommand(CLI::App& parent)
    : app_(parent.add_subcommand("import", "Build an execution graph from other tools' traces")) {
  app_->require_subcommand(1);
  chakra_ = app_->add_subcommand("chakra", "MLCommons Chakra execution traces, one per rank");
  chakra_
      ->add_option("TRACES", chakra_input_,
                   "Directory of <prefix>.<rank>.et files, or the prefix itself")
      ->required()
      ->type_name("DIR|PREFIX");
  chakra_
      ->add_option("--comm-groups", comm_groups_,
                   "Communicator groups JSON (default: <prefix>.comm_groups.json, if present)")
      ->type_name("FILE");
  kineto_ = app_->add_subcommand("kineto", "PyTorch profiler (Kineto) JSON traces, one per rank");
  kineto_->add_option("TRACES", kineto_inputs_, "Trace files; ranks from their distributedInfo")
      ->required()
      ->type_name("FILE...");
  kineto_->add_flag("--no-memory", no_memory_, "Leave out the traces' memory events");
  for (CLI::App* sub : {chakra_, kineto_}) {
    sub->add_option("-o,--output", output_, "Graph file to write (docs/graph-format.md)")
        ->required()
        ->type_name("GRAPH");
    sub->add_option("--gpus-per-node", gpus_per_node_, "GPUs per node of the imported layout")
        ->capture_default_str();
    sub->add_option("--name", name_, "The graph's name (default: from the input)");
  }
}

bool ImportCommand::selected() const {
  return app_->parsed();
}

Result<int> ImportCommand::run() const {
  if (gpus_per_node_ < 1)
    return Status::invalid_argument(fmt::format("--gpus-per-node {} is below 1", gpus_per_node_));
  if (chakra_->parsed()) {
    PRISM_RETURN_IF_ERROR(check_output_files(*chakra_, {"--output"}, chakra_input_, "trace"));
    progress(fmt::format("reading Chakra traces {}...", chakra_input_));
    ChakraImportOptions o;
    o.comm_groups = comm_groups_;
    o.gpus_per_node = gpus_per_node_;
    o.name = name_;
    PRISM_ASSIGN_OR_RETURN(const ExecutionGraph g, import_chakra(chakra_input_, o));
    return save_imported(g, output_, chakra_input_);
  }
  std::vector<std::filesystem::path> files;
  for (const std::string& f : kineto_inputs_) {
    PRISM_RETURN_IF_ERROR(check_output_files(*kineto_, {"--output"}, f, "trace"));
    files.emplace_back(f);
  }
  progress(fmt::format("reading {} Kineto traces...", files.size()));
  KinetoImportOptions o;
  if (!name_.empty()) o.name = name_;
  o.gpus_per_node = gpus_per_node_;
  o.memory = !no_memory_;
  PRISM_ASSIGN_OR_RETURN(const ExecutionGraph g, import_kineto(files, o));
  return save_imported(g, output_, fmt::format("{} Kineto traces", files.size()));
}

ExportCommand::ExportCommand(CLI::App& parent)
    : app_(parent.add_subcommand("export", "Write an execution graph as other tools' traces")) {
  app_->require_subcommand(1);
  chakra_ = app_->add_subcommand("chakra",
                                 "MLCommons Chakra execution traces for ASTRA-sim, one per rank");
  chakra_->add_option("GRAPH", graph_path_, "Execution graph file (docs/graph-format.md)")
      ->required()
      ->type_name("FILE");
  chakra_->add_option("-o,--output", out_dir_, "Directory to write the traces into")
      ->required()
      ->type_name("DIR");
  chakra_->add_option("--prefix", prefix_, "File names: <prefix>.<rank>.et")->capture_default_str();
}

bool ExportCommand::selected() const {
  return app_->parsed();
}

Result<int> ExportCommand::run() const {
  progress(fmt::format("loading {}...", graph_path_));
  PRISM_ASSIGN_OR_RETURN(const ExecutionGraph g, load_graph(graph_path_));
  progress(fmt::format("writing {} traces into {}...", g.world_size(), out_dir_));
  // Compute given as a cost, not a duration, is priced as `prism replay`
  // prices it by default: the H100 roofline.
  ChakraExportOptions o;
  o.prefix = prefix_;
  o.compute = &default_roofline();
  PRISM_RETURN_IF_ERROR(export_chakra(g, out_dir_, o));
  fmt::print("{}: {} ranks written as {}.<rank>.et and {}.comm_groups.json\n", out_dir_,
             g.world_size(), prefix_, prefix_);
  return 0;
}

CalibrateCommand::CalibrateCommand(CLI::App& parent)
    : app_(parent.add_subcommand(
          "calibrate", "Measured-kernel database (--kernel-db) from profiled training steps")) {
  app_->require_subcommand(1);
  kineto_ = app_->add_subcommand(
      "kineto", "Kernel times from PyTorch profiler (Kineto) traces of a step on the GPU");
  kineto_
      ->add_option("TRACES", inputs_,
                   "Trace files (torch.profiler with CPU and CUDA activity, record_shapes=True), "
                   "all of one GPU")
      ->required()
      ->type_name("FILE...");
  kineto_->add_option("-o,--output", output_, "Kernel database CSV to write (docs/compute.md)")
      ->required()
      ->type_name("FILE");
  kineto_
      ->add_option("--gpu", gpu_,
                   "The database GPU (a preset name) when the trace has no deviceProperties "
                   "or a device without a preset")
      ->type_name("NAME");
  kineto_->add_option("--date", date_, "The date in the rows' source (default: today, UTC)")
      ->type_name("YYYY-MM-DD");
}

bool CalibrateCommand::selected() const {
  return app_->parsed();
}

Result<int> CalibrateCommand::run() const {
  std::vector<std::filesystem::path> files;
  for (const std::string& f : inputs_) {
    PRISM_RETURN_IF_ERROR(check_output_files(*kineto_, {"--output"}, f, "trace"));
    files.emplace_back(f);
  }
  progress(fmt::format("reading {} Kineto trace{}...", files.size(), files.size() == 1 ? "" : "s"));
  KernelCalibrationOptions o;
  o.gpu = gpu_;
  o.date = date_;
  PRISM_ASSIGN_OR_RETURN(const KernelCalibration c, calibrate_kernels_from_files(files, o));
  PRISM_RETURN_IF_ERROR(write_file_atomic(output_, kernel_db_csv(c)));
  const auto ms = [](std::int64_t ns) { return static_cast<double>(ns) / 1e6; };
  fmt::print("{}: {} kernel signatures for {} ({}) from {} trace{}\n", output_, c.kernels.size(),
             c.gpu, c.gpu_origin, c.traces, c.traces == 1 ? "" : "s");
  fmt::print("  matched: {} ops, {} of {} GPU kernels, {:.3f} of {:.3f} ms{}\n", c.ops_matched,
             c.activities_matched, c.device_activities, ms(c.matched_ns), ms(c.device_ns),
             c.nccl_kernels > 0 ? fmt::format(" ({} NCCL kernel{} left out)", c.nccl_kernels,
                                              c.nccl_kernels == 1 ? "" : "s")
                                : "");
  int ops = 0;
  for (const auto& [why, u] : c.unmapped) ops += u.ops;
  if (c.unmapped.empty()) return 0;
  fmt::print("  not mapped: {} ops ({:.3f} ms), by op and reason:\n", ops,
             ms(c.device_ns - c.matched_ns));
  std::vector<std::pair<std::string, UnmappedOps>> rows(c.unmapped.begin(), c.unmapped.end());
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return a.second.device_ns > b.second.device_ns;
  });
  for (const auto& [why, u] : rows)
    fmt::print("    {:>5} ops {:>5} kernels {:>10.3f} ms  {}\n", u.ops, u.kernels, ms(u.device_ns),
               why);
  return 0;
}

}  // namespace prism
