#include "cli/collective_command.h"

#include <cstdio>
#include <utility>

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
  app_->add_option("-d,--dtype", dtype_,
                   "Element type: nccl-tests' (float, half, bfloat16, double, int8, uint8, int32, "
                   "int64, f8e4m3, f8e5m2) or fp32, bf16, fp16, ...")
      ->type_name("TYPE")
      ->capture_default_str();
  app_->add_option("-o,--redop", redop_, "Reduction, as nccl-tests -o: sum, prod, max, min, avg")
      ->type_name("OP")
      ->capture_default_str();
  app_->add_option("-r,--root", root_, "Root of broadcast and reduce, as nccl-tests -r")
      ->type_name("RANK")
      ->capture_default_str();
  app_->add_option("-g,--ngpus", gpus_per_thread_,
                   "GPUs per thread, as nccl-tests -g: the communicator has nthreads x ngpus GPUs "
                   "(instead of --num-gpus)")
      ->type_name("N")
      ->excludes("--num-gpus")
      ->excludes("--num-nodes");
  app_->add_option("-t,--nthreads", threads_, "Threads, as nccl-tests -t (with -g)")
      ->type_name("N")
      ->capture_default_str();
  app_->add_option("-n,--iters", iters_,
                   "Iterations, as nccl-tests -n: printed; the model's times do not depend on it")
      ->type_name("N")
      ->capture_default_str();
  app_->add_option("-w,--warmup-iters", warmup_,
                   "Warm-up iterations, as nccl-tests -w: printed; no effect on the model")
      ->type_name("N")
      ->capture_default_str();
  app_->add_option("-c,--check", check_,
                   "Data check, as nccl-tests -c: accepted; a model moves no data (#wrong N/A)")
      ->type_name("0|1")
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
  for (const auto& [flag, v] : {std::pair{"--nthreads", threads_}, std::pair{"--iters", iters_}})
    if (v < 1) return Status::invalid_argument(fmt::format("{} must be >= 1 (got {})", flag, v));
  if (warmup_ < 0)
    return Status::invalid_argument(fmt::format("--warmup-iters must be >= 0 (got {})", warmup_));
  if (app_->get_option("--ngpus")->count() > 0) {
    if (gpus_per_thread_ < 1)
      return Status::invalid_argument(
          fmt::format("--ngpus must be >= 1 (got {})", gpus_per_thread_));
    Status s = size_cluster(&cluster, gpus_per_thread_ * threads_, 0);
    if (!s.is_ok()) return s.with_context(fmt::format("-g {} -t {}", gpus_per_thread_, threads_));
  }
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
  PRISM_ASSIGN_OR_RETURN(o.dtype, parse_test_dtype("--dtype", dtype_));
  PRISM_ASSIGN_OR_RETURN(o.redop, parse_test_redop("--redop", redop_));
  if (root_ < 0 || root_ >= cluster.num_gpus())
    return Status::invalid_argument(
        fmt::format("--root {} is not a rank of the {} GPUs", root_, cluster.num_gpus()));
  o.root = root_;
  o.iters = iters_;
  o.warmup_iters = warmup_;
  o.threads = threads_;
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
