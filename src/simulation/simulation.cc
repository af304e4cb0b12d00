#include "simulation/simulation.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "compute/gpu_spec.h"
#include "net/cluster_yaml.h"
#include "report/breakdown.h"
#include "report/memory_report.h"
#include "report/summary.h"
#include "simulation/node_failure.h"
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

// The job's shape, model and cluster, and its throughput: tokens/s and MFU
// from the iteration time (none after an out-of-memory outcome).
// Tokens/s per GPU and model TFLOP/s per GPU of an iteration of `t` seconds.
struct Throughput {
  double tokens_per_s_per_gpu = 0, model_tflops_per_gpu = 0;
};
Throughput throughput(const JobSpec& job, double model_flops, double t) {
  return {static_cast<double>(job.training.global_batch_size) * job.training.seq_length / t /
              job.num_gpus,
          model_flops / t / job.num_gpus / 1e12};
}

void summarize_job(const PreparedJob& p, const ReplayResult& r, const DeviceMemoryOptions& device,
                   SimulateSummary& s) {
  const JobSpec& job = p.job;
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
  if (job.training.precision == Precision::kFp8) s.fp8_peak_flops = p.gpu.fp8_flops;
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
  s.failure = r.failure;
  s.iteration_time = r.iteration_time;
  const double t = s.completed() ? r.iteration_time.seconds() : 0;
  if (t > 0) {
    const Throughput x = throughput(job, s.model_flops, t);
    s.tokens_per_s_per_gpu = x.tokens_per_s_per_gpu;
    s.model_tflops_per_gpu = x.model_tflops_per_gpu;
    s.mfu = s.model_tflops_per_gpu * 1e12 / p.gpu.bf16_flops;
    if (s.fp8_peak_flops > 0) s.mfu_fp8 = s.model_tflops_per_gpu * 1e12 / s.fp8_peak_flops;
  }
  s.kernels = static_cast<std::int64_t>(p.built.kernels.size());
  s.kernels_measured = std::count_if(p.built.kernels.begin(), p.built.kernels.end(),
                                     [](const KernelUse& k) { return k.measured; });
  s.kernel_db = p.db_paths;
  s.slowest_gpu_slowdown = p.built.slowest_gpu_slowdown;
  s.clock_cov = p.gpu.sustained_clock_cov;
  s.folded = r.folded;
  s.simulated_ranks = r.simulated_ranks;
  s.op_events = r.op_events;
  if (r.what_if) s.what_if = what_if_comparison(r);
  if (r.past_oom && r.past_oom->iteration_time.seconds() > 0) {
    // simulate_graph's replay with unlimited memory, in the job's terms.
    const Throughput x = throughput(job, s.model_flops, r.past_oom->iteration_time.seconds());
    PastOom past;
    past.iteration_time = r.past_oom->iteration_time;
    past.tokens_per_s_per_gpu = x.tokens_per_s_per_gpu;
    past.mfu = x.model_tflops_per_gpu * 1e12 / p.gpu.bf16_flops;
    for (std::size_t i = 0; i < r.past_oom->role_needed.size() && i < r.roles.size(); ++i)
      past.roles.push_back({r.roles[i].name, r.past_oom->role_needed[i]});
    past.capacity = r.past_oom->capacity;
    s.past_oom = std::move(past);
  }
}

// Each role's footprint, peak memory and (without an OOM) the breakdown of
// its representative; the job's peaks over the roles.
void summarize_roles(const PreparedJob& p, const ReplayResult& r, const std::vector<Rank>& reps,
                     SimulateSummary& s) {
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
    if (s.completed()) {
      role.breakdown =
          rank_breakdown(p.built.graph, r.trace, reps[i], SimTime::zero(), r.iteration_time);
    }
    s.roles.push_back(std::move(role));
  }
}

}  // namespace

namespace {

// SM contention applies to graphs built for a cluster (a job spec's, or a
// slicing's): their kernel times come from isolated measurements or the
// compute model, which never shared the GPU with NCCL. A graph without a
// recorded cluster (Kineto, Chakra, hand-written) has times taken in situ or
// given as they are. A GPU without a preset (no SM count) has none.
int contention_sms(const ExecutionGraph& g, const ClusterSpec& cluster) {
  if (g.cluster.empty()) return 0;
  const Result<GpuSpec> gpu = gpu_spec(cluster.gpu_model);
  return gpu.is_ok() ? gpu.value().num_sms : 0;
}

// What a rank may use past an OOM's comparison: the GPU, or its
// --memory-fraction share.
Bytes usable_capacity(const DeviceMemoryOptions& d) {
  const double fraction = d.allocator.memory_fraction;
  return fraction > 0
             ? Bytes{static_cast<std::int64_t>(static_cast<double>(d.capacity.count) * fraction)}
             : d.capacity;
}

}  // namespace

Result<ReplayResult> simulate_graph(const ExecutionGraph& g, const ClusterSpec& cluster,
                                    const SimulationOptions& o) {
  ReplayOptions options;
  options.fold = o.fold;
  options.trace_ranks = o.trace_ranks;
  options.sm_count = contention_sms(g, cluster);
  std::optional<WhatIfReplay> what_if;
  ExecutionGraph perturbed;  // with the stragglers' overrides
  ModelOptions model_options = o.models;
  std::vector<Rank> failed;  // the failing node's ranks
  if (o.what_if.failure) {
    PRISM_ASSIGN_OR_RETURN(failed, node_failure_ranks(g, *o.what_if.failure));
  }
  if (!o.what_if.empty()) {
    PRISM_RETURN_IF_ERROR(check_link_degradations(o.what_if.links, cluster));
    SimulationOptions plain = o;
    plain.what_if = WhatIf{};
    plain.trace_ranks.clear();
    plain.continue_past_oom = false;
    PRISM_ASSIGN_OR_RETURN(const ReplayResult base, simulate_graph(g, cluster, plain));
    what_if = WhatIfReplay{o.what_if.describe(), base.outcome == ReplayResult::Outcome::kCompleted,
                           base.iteration_time};
    if (o.what_if.failure && o.what_if.failure->at > base.makespan)
      return Status::invalid_argument(fmt::format(
          "{}: {:.6f} s is after the run ends: the unperturbed replay ends at {:.6f} s (iteration "
          "{:.6f} s)",
          describe(*o.what_if.failure), o.what_if.failure->at.seconds(), base.makespan.seconds(),
          base.iteration_time.seconds()));
    if (!o.what_if.stragglers.empty()) {
      PRISM_ASSIGN_OR_RETURN(perturbed, apply_stragglers(g, o.what_if.stragglers));
    }
    if (o.what_if.jitter) {
      options.jitter_ppm = jitter_ppm(*o.what_if.jitter);
      options.jitter_seed = o.what_if.jitter->seed;
    }
    if (!o.what_if.links.empty()) {
      model_options.degraded_links = o.what_if.links;
      options.fold_tags = link_fold_tags(cluster, g.world_size(), o.what_if.links);
    }
    if (o.what_if.failure) {
      add_failure_fold_tags(failed, g.world_size(), options.fold_tags);
      options.failed_ranks = failed;
      options.fail_at = o.what_if.failure->at;
    }
  }
  const ExecutionGraph& run_on = o.what_if.stragglers.empty() ? g : perturbed;
  ClusterModels models(cluster, model_options);
  PRISM_ASSIGN_OR_RETURN(ReplayResult r, replay(run_on, options, models.view()));
  r.what_if = std::move(what_if);
  if (o.what_if.failure)
    r.failure = node_failure_replay(*o.what_if.failure, failed, o.what_if.nccl_timeout, r);
  if (o.continue_past_oom && r.outcome == ReplayResult::Outcome::kOutOfMemory) {
    SimulationOptions unlimited = o;
    unlimited.continue_past_oom = false;
    unlimited.trace_ranks.clear();
    unlimited.models.device.capacity = Bytes{0};  // no limit: what each role needs
    unlimited.models.device.allocator.memory_fraction = 0;
    PRISM_ASSIGN_OR_RETURN(const ReplayResult free, simulate_graph(g, cluster, unlimited));
    PastOomReplay past;
    past.iteration_time = free.iteration_time;
    past.capacity = usable_capacity(o.models.device);
    for (const RoleSummary& s : free.roles) past.role_needed.push_back(s.max.peak_device);
    r.past_oom = std::move(past);
  }
  return r;
}

Result<JobSimulation> simulate_job(const PreparedJob& p, const SimulationOptions& o) {
  const ExecutionGraph& g = p.built.graph;
  const TrainingSpec& t = p.job.training;
  if ((t.enable_cuda_graph || t.external_cuda_graph) &&
      o.models.device.allocator.expandable_segments)
    return Status::invalid_argument(fmt::format(
        "--alloc-conf: expandable_segments:True cannot run training.{} (Megatron-Core's "
        "CudaGraphManager: 'expandable_segments:True may not be safe when using CUDA Graphs, and "
        "may result in a crash due to illegal memory access or other undefined behaviour.')",
        t.enable_cuda_graph ? "enable_cuda_graph" : "external_cuda_graph"));
  const std::vector<Rank> reps = role_representatives(g);
  SimulationOptions traced = o;
  traced.trace_ranks.insert(traced.trace_ranks.end(), reps.begin(), reps.end());
  std::sort(traced.trace_ranks.begin(), traced.trace_ranks.end());
  traced.trace_ranks.erase(std::unique(traced.trace_ranks.begin(), traced.trace_ranks.end()),
                           traced.trace_ranks.end());
  // Roofline compute goes unused: every compute op of a built job has its duration.
  PRISM_ASSIGN_OR_RETURN(ReplayResult result, simulate_graph(g, p.job.cluster, traced));
  if (result.outcome == ReplayResult::Outcome::kDeadlock && !result.failure) {
    return Status::invalid_argument(fmt::format(
        "the graph built from {} deadlocked at rank {} ({}): a builder defect, please report it",
        p.path, result.blocked.front().rank, result.blocked.front().waiting_for));
  }
  JobSimulation out;
  summarize_job(p, result, o.models.device, out.summary);
  summarize_roles(p, result, reps, out.summary);
  std::vector<Rank> asked = o.trace_ranks;
  std::sort(asked.begin(), asked.end());
  std::erase_if(result.trace, [&](const TraceRecord& rec) {
    return !std::binary_search(asked.begin(), asked.end(), rec.rank);
  });
  out.replay = std::move(result);
  return out;
}

Result<std::vector<SweepRow>> sweep_collective(const ClusterSpec& cluster,
                                               const NcclSelection& selection,
                                               const SweepOptions& o) {
  const NcclTuner tuner(cluster, selection);
  return run_sweep(tuner, o);
}

Result<ClusterSpec> graph_cluster(const ExecutionGraph& g, const std::optional<std::string>& given,
                                  std::string_view source) {
  ClusterSpec c;
  std::string what;  // how errors name the cluster
  if (given) {
    PRISM_ASSIGN_OR_RETURN(c, resolve_cluster(*given));
    what = fmt::format("--cluster {}", c.name);
  } else if (!g.cluster.empty()) {
    const std::string where = fmt::format("{}: the graph's cluster", source);
    PRISM_ASSIGN_OR_RETURN(c, parse_cluster_yaml(g.cluster, where));
    what = where;
  } else {
    PRISM_ASSIGN_OR_RETURN(c, resolve_cluster("dgx-h100"));
    what = "--cluster dgx-h100";
  }
  const int gpn = g.layout.gpus_per_node();
  if (gpn > c.gpus_per_node)
    return Status::invalid_argument(
        fmt::format("{}: the graph places {} GPUs per node, the cluster's nodes have {}", what, gpn,
                    c.gpus_per_node));
  c.nics_per_node = std::max(1, c.nics_per_node * gpn / c.gpus_per_node);
  c.gpus_per_node = gpn;
  Status s = size_cluster(&c, 0, g.layout.num_nodes());
  if (!s.is_ok()) return s.with_context(what);
  return c;
}

}  // namespace prism
