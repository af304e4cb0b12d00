#include "cli/interop_command.h"

#include <filesystem>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "chakra/chakra.h"
#include "cli/job_setup.h"
#include "compute/compute_model.h"
#include "graph/graph_json.h"
#include "kineto/kineto.h"

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

}  // namespace prism
