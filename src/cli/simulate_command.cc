#include "cli/simulate_command.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/cluster_models.h"
#include "cli/replay_command.h"
#include "compute/compute_model.h"
#include "graph/graph_json.h"
#include "graph/rank_list.h"
#include "mem/memory_model.h"
#include "net/flow_network.h"
#include "replay/nccl_memory.h"
#include "replay/replay.h"
#include "report/breakdown.h"
#include "report/chrome_trace.h"
#include "report/memory_report.h"
#include "report/simulate_report.h"
#include "slicing/slices.h"
#include "util/file.h"
#include "workload/model_stats.h"

namespace prism {
namespace {

// The first rank of each role: the representative whose breakdown is shown.
std::vector<Rank> role_representatives(const ExecutionGraph& g) {
  std::vector<Rank> reps(g.roles.size(), -1);
  for (Rank r = 0; r < g.world_size(); ++r) {
    Rank& rep = reps[g.role_of_rank[r]];
    if (rep < 0) rep = r;
  }
  return reps;
}

std::string kernels_csv(const PreparedJob& p) {
  // `model_us`, not `us`: a kernel list is not a measurement, and
  // --kernel-db refuses it.
  std::string out = "gpu,signature,model_us,source,count\n";
  for (const KernelUse& k : p.built.kernels) {
    out += fmt::format("{},{},{:.3f},{},{}\n", p.gpu.name, k.signature, k.time.ns / 1e3,
                       k.measured ? "measured" : "model", k.count);
  }
  return out;
}

SimulateSummary summarize(const PreparedJob& p, const ReplayResult& r,
                          const std::vector<Rank>& reps, const DeviceMemoryOptions& device) {
  const JobSpec& job = p.job;
  SimulateSummary s;
  s.job = job.name;
  s.num_gpus = job.num_gpus;
  s.tp = job.tp();
  s.cp = job.cp();
  s.pp = job.pp();
  s.vpp = job.vpp();
  s.dp = job.dp();
  s.ep = job.ep();
  s.etp = job.model.is_moe() ? job.etp() : job.tp();
  s.sequence_parallel = job.parallelism.sequence_parallel && job.tp() > 1;
  s.micro_batch_size = job.training.micro_batch_size;
  s.seq_length = job.training.seq_length;
  s.global_batch_size = job.training.global_batch_size;
  s.num_microbatches = job.num_microbatches();
  s.precision = std::string(to_string(job.training.precision));
  s.recompute = std::string(to_string(job.training.recompute));
  s.cluster = job.cluster.name;
  s.gpu = p.gpu.name;
  s.num_nodes = job.cluster.num_nodes;
  s.peak_flops = p.gpu.bf16_flops;
  const ParameterCount count = count_parameters(job.model);
  s.parameters = count.total;
  s.active_parameters = count.active;
  s.model_flops = model_flops_per_iteration(job);
  s.capacity = device.capacity;
  s.context = device.context;
  s.alloc_conf = device.allocator.to_string();
  if (r.outcome == ReplayResult::Outcome::kOutOfMemory) {
    s.oom_text = format_oom_text(p.built.graph, r.oom.front());
    s.oom = oom_json(p.built.graph, r.oom.front());
  }
  s.iteration_time = r.iteration_time;
  const double t = s.oom_text.empty() ? r.iteration_time.seconds() : 0;
  if (t > 0) {
    s.tokens_per_s_per_gpu = static_cast<double>(job.training.global_batch_size) *
                             job.training.seq_length / t / job.num_gpus;
    s.model_tflops_per_gpu = s.model_flops / t / job.num_gpus / 1e12;
    s.mfu = s.model_tflops_per_gpu * 1e12 / p.gpu.bf16_flops;
  }
  s.kernels = static_cast<std::int64_t>(p.built.kernels.size());
  s.kernels_measured = std::count_if(p.built.kernels.begin(), p.built.kernels.end(),
                                     [](const KernelUse& k) { return k.measured; });
  s.kernel_db = p.db_paths;
  s.folded = r.folded;
  s.simulated_ranks = r.simulated_ranks;
  s.op_events = r.op_events;
  for (std::size_t i = 0; i < r.roles.size(); ++i) {
    const RoleSummary& rs = r.roles[i];
    SimulateRole role;
    role.name = rs.name;
    role.num_ranks = rs.num_ranks;
    role.representative = reps[i];
    const RoleFootprint& f = p.built.roles[i];
    role.num_layers = f.num_layers;
    role.parameters = f.parameters;
    role.activation_bytes_per_layer = f.activation_bytes_per_layer;
    role.model_state_bytes = f.model_state_bytes;
    role.peak_allocated = rs.max.peak_allocated;
    role.peak_reserved = rs.max.peak_reserved;
    role.peak_device = rs.max.peak_device;
    role.nccl = rs.max.nccl;
    role.fragmentation = rs.max.fragmentation;
    role.inactive_split_peak = rs.max.inactive_split_peak;
    s.peak_allocated = std::max(s.peak_allocated, rs.max.peak_allocated);
    s.peak_reserved = std::max(s.peak_reserved, rs.max.peak_reserved);
    s.peak_device = std::max(s.peak_device, rs.max.peak_device);
    s.nccl = std::max(s.nccl, rs.max.nccl);
    s.fragmentation = std::max(s.fragmentation, rs.max.fragmentation);
    if (s.oom_text.empty()) {
      role.breakdown =
          rank_breakdown(p.built.graph, r.trace, reps[i], SimTime::zero(), r.iteration_time);
    }
    s.roles.push_back(std::move(role));
  }
  return s;
}

}  // namespace

SimulateCommand::SimulateCommand(CLI::App& parent)
    : app_(parent.add_subcommand(
          "simulate", "Simulate one training iteration of a job spec: time, MFU, breakdown")) {
  app_->footer(
      "Exit status: 0 simulated, 1 error, 4 a rank ran out of memory (summary and report still "
      "written).");
  job_.add_to(app_);
  app_->add_option("--report", report_path_, "Write the JSON report to FILE")->type_name("FILE");
  CLI::Option* trace = app_->add_option(
      "--trace", trace_path_, "Write a Chrome/Perfetto trace of the traced ranks to FILE");
  trace->type_name("FILE");
  app_->add_option("--trace-ranks", trace_ranks_,
                   "Ranks to trace, e.g. 0,17 or 0-3,17 (default: 0)")
      ->type_name("LIST")
      ->needs(trace);
  app_->add_option("--kernels", kernels_path_,
                   "Write the job's distinct kernels with their times to FILE (CSV, the "
                   "measured-kernel database's format; input of scripts/measure_kernels.py)")
      ->type_name("FILE");
  app_->add_flag("--no-fold", no_fold_,
                 "Simulate every rank instead of one per class of identical ranks");
  app_->add_option("--nccl-algo", nccl_algo_, "Allowed algorithms, NCCL_ALGO syntax")
      ->type_name("LIST");
  app_->add_option("--nccl-proto", nccl_proto_, "Allowed protocols, NCCL_PROTO syntax")
      ->type_name("LIST");
  memory_.add_to(app_);
}

bool SimulateCommand::selected() const {
  return app_->parsed();
}

Result<int> SimulateCommand::run() const {
  PRISM_ASSIGN_OR_RETURN(const NcclSelection selection,
                         NcclSelection::parse(nccl_algo_, nccl_proto_));
  PRISM_RETURN_IF_ERROR(
      check_output_files(*app_, {"--report", "--trace", "--kernels"}, job_.job_path, "job spec"));
  PRISM_ASSIGN_OR_RETURN(const PreparedJob p, prepare_job(job_));
  const ExecutionGraph& g = p.built.graph;
  PRISM_ASSIGN_OR_RETURN(const DeviceMemoryOptions device, memory_.device(p.gpu.name));

  ReplayOptions options;
  options.fold = !no_fold_;
  std::vector<Rank> traced;
  if (!trace_path_.empty()) {
    const bool given = app_->get_option("--trace-ranks")->count() > 0;
    Result<std::vector<Rank>> ranks = parse_rank_list(given ? trace_ranks_ : "0", g.world_size());
    if (!ranks.is_ok()) return ranks.status().with_context("--trace-ranks");
    traced = ranks.value();
  }
  const std::vector<Rank> reps = role_representatives(g);
  options.trace_ranks = traced;
  options.trace_ranks.insert(options.trace_ranks.end(), reps.begin(), reps.end());
  std::sort(options.trace_ranks.begin(), options.trace_ranks.end());
  options.trace_ranks.erase(std::unique(options.trace_ranks.begin(), options.trace_ranks.end()),
                            options.trace_ranks.end());

  progress(fmt::format("replaying {} ranks...", g.world_size()));
  // Roofline compute goes unused: every compute op of a built job has its duration.
  ClusterModels models(p.job.cluster, selection, device);
  PRISM_ASSIGN_OR_RETURN(ReplayResult result, replay(g, options, models.view()));
  if (result.outcome == ReplayResult::Outcome::kDeadlock) {
    return Status::invalid_argument(fmt::format(
        "the graph built from {} deadlocked at rank {} ({}): a builder defect, please report it",
        job_.job_path, result.blocked.front().rank, result.blocked.front().waiting_for));
  }
  const SimulateSummary summary = summarize(p, result, reps, device);
  std::fputs(format_simulate_text(summary).c_str(), stdout);
  std::fflush(stdout);
  if (!report_path_.empty())
    PRISM_RETURN_IF_ERROR(write_file_atomic(report_path_, format_simulate_json(summary)));
  if (!trace_path_.empty()) {
    std::erase_if(result.trace, [&](const TraceRecord& rec) {
      return !std::binary_search(traced.begin(), traced.end(), rec.rank);
    });
    PRISM_RETURN_IF_ERROR(write_file_atomic(trace_path_, format_chrome_trace(g, result)));
  }
  if (!kernels_path_.empty())
    PRISM_RETURN_IF_ERROR(write_file_atomic(kernels_path_, kernels_csv(p)));
  return result.outcome == ReplayResult::Outcome::kOutOfMemory ? kExitOutOfMemory : 0;
}

BuildCommand::BuildCommand(CLI::App& parent)
    : app_(parent.add_subcommand("build", "Build the execution graph of a job spec")) {
  job_.add_to(app_);
  app_->add_option("-o,--output", output_path_, "Write the graph to FILE (docs/graph-format.md)")
      ->required()
      ->type_name("FILE");
  app_->add_option("--from-slices", slices_dir_,
                   "Build from the captures in DIR, one rank per role (prism emulate --slices); "
                   "roles without one run the model")
      ->type_name("DIR");
}

bool BuildCommand::selected() const {
  return app_->parsed();
}

Result<int> BuildCommand::run() const {
  PRISM_RETURN_IF_ERROR(check_output_files(*app_, {"--output"}, job_.job_path, "job spec"));
  PRISM_ASSIGN_OR_RETURN(const PreparedJob p,
                         prepare_job(job_, /*program_ok=*/!slices_dir_.empty()));
  ExecutionGraph sliced;
  if (!slices_dir_.empty()) {
    progress(fmt::format("reading the captures in {}...", slices_dir_));
    Result<std::vector<RankProgram>> captures = read_slices(slices_dir_, p.job.num_gpus);
    if (!captures.is_ok()) return captures.status().with_context("--from-slices");
    Result<SlicedGraph> s = graph_from_slices(p.job, p.job.has_model ? &p.built.graph : nullptr,
                                              std::move(captures).value());
    if (!s.is_ok()) return s.status().with_context("--from-slices");
    std::fputs(format_slice_report(s.value()).c_str(), stdout);
    sliced = std::move(s.value().graph);
  }
  const ExecutionGraph& g = slices_dir_.empty() ? p.built.graph : sliced;
  progress(fmt::format("writing {}...", output_path_));
  PRISM_RETURN_IF_ERROR(save_graph(g, output_path_));
  fmt::print("{}: {} ranks, {} roles, {} ops\n", output_path_, g.world_size(), g.roles.size(),
             g.total_ops());
  return 0;
}

}  // namespace prism
