#include "cli/collective_command.h"

#include <cstdio>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "net/cluster_yaml.h"
#include "net/collective_sweep.h"
#include "net/nccl_tuner.h"
#include "report/sweep_report.h"
#include "simulation/simulation.h"
#include "util/file.h"

namespace prism {

CollectiveCommand::CollectiveCommand(CLI::App& parent)
    : app_(parent.add_subcommand(
          "collective", "Print an nccl-tests-style table of a collective from the NCCL model")) {
  app_->add_option("--cluster", cluster_,
                   "Cluster preset (dgx-a100, dgx-h100, hgx-h200, dgx-b200) or YAML file")
      ->type_name("NAME|FILE")
      ->capture_default_str();
  app_->add_option("--num-gpus", num_gpus_, "GPUs in the communicator (default: one node)")
      ->type_name("N");
  app_->add_option("--num-nodes", num_nodes_, "Nodes in the communicator, all their GPUs")
      ->type_name("N")
      ->excludes("--num-gpus");
  app_->add_option(
          "--op", op_,
          "all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all, send_recv")
      ->type_name("OP")
      ->capture_default_str();
  app_->add_option("-d,--dtype", dtype_, "Element type (fp32, bf16, fp16, ...)")
      ->type_name("TYPE")
      ->capture_default_str();
  app_->add_option("-b,--min-bytes", min_bytes_, "Smallest size (K, M, G suffixes: powers of 1024)")
      ->type_name("SIZE")
      ->capture_default_str();
  app_->add_option("-e,--max-bytes", max_bytes_, "Largest size")
      ->type_name("SIZE")
      ->capture_default_str();
  app_->add_option("-f,--step-factor", step_factor_, "Multiply the size by this between rows")
      ->type_name("N")
      ->capture_default_str();
  app_->add_option("--algo", algo_, "Allowed algorithms, NCCL_ALGO syntax (e.g. Ring, ^NVLS)")
      ->type_name("LIST");
  app_->add_option("--proto", proto_, "Allowed protocols, NCCL_PROTO syntax (e.g. Simple, ^LL)")
      ->type_name("LIST");
  app_->add_option("--report", report_path_, "Write the rows as JSON to FILE")->type_name("FILE");
}

bool CollectiveCommand::selected() const {
  return app_->parsed();
}

Result<int> CollectiveCommand::run() const {
  PRISM_ASSIGN_OR_RETURN(ClusterSpec cluster, resolve_cluster(cluster_));
  if (app_->get_option("--num-gpus")->count() > 0 && num_gpus_ <= 0)
    return Status::invalid_argument(fmt::format("--num-gpus must be > 0 (got {})", num_gpus_));
  if (app_->get_option("--num-nodes")->count() > 0 && num_nodes_ <= 0)
    return Status::invalid_argument(fmt::format("--num-nodes must be > 0 (got {})", num_nodes_));
  if (num_gpus_ > 0 || num_nodes_ > 0) {
    Status s = size_cluster(&cluster, num_gpus_, num_nodes_);
    if (!s.is_ok()) return s.with_context(fmt::format("cluster {}", cluster.name));
  }
  if (app_->get_option("--report")->count() > 0 && report_path_.empty())
    return Status::invalid_argument("--report needs a file name");

  SweepOptions o;
  PRISM_ASSIGN_OR_RETURN(o.op, parse_sweep_op(op_));
  const std::optional<DType> dtype = parse_dtype(dtype_);
  if (!dtype) return Status::invalid_argument(fmt::format("--dtype: unknown type \"{}\"", dtype_));
  o.dtype = *dtype;
  PRISM_ASSIGN_OR_RETURN(o.min_bytes, parse_size("--min-bytes", min_bytes_));
  PRISM_ASSIGN_OR_RETURN(o.max_bytes, parse_size("--max-bytes", max_bytes_));
  o.step_factor = step_factor_;
  PRISM_ASSIGN_OR_RETURN(const NcclSelection selection, NcclSelection::parse(algo_, proto_));

  PRISM_ASSIGN_OR_RETURN(const std::vector<SweepRow> rows, sweep_collective(cluster, selection, o));
  std::fputs(format_sweep_table(cluster, o, rows).c_str(), stdout);
  std::fflush(stdout);
  if (!report_path_.empty())
    PRISM_RETURN_IF_ERROR(write_file_atomic(report_path_, format_sweep_json(cluster, o, rows)));
  return 0;
}

}  // namespace prism
