// What `prism simulate` prints and writes: the job's throughput figures, the
// per-role breakdown of the iteration and peak memory. Plain data in, text or
// JSON out; docs/simulate.md documents both.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "replay/result.h"
#include "report/breakdown.h"
#include "util/units.h"

namespace prism {

struct SimulateRole {
  std::string name;
  int num_ranks = 0;
  Rank representative = 0;  // the rank whose breakdown is shown
  int num_layers = 0;
  std::int64_t parameters = 0;  // per rank
  Bytes activation_bytes_per_layer;
  Bytes model_state_bytes;
  // Peaks, max over the role's ranks (replay/result.h RankTimes).
  Bytes peak_allocated, peak_reserved, peak_device, nccl;
  Bytes fragmentation, inactive_split_peak;
  Breakdown breakdown;
};

// --continue-past-oom: the same iteration replayed with unlimited memory
// after it ran out: how long it would take and what each role would need.
struct PastOom {
  SimTime iteration_time;
  double tokens_per_s_per_gpu = 0, mfu = 0;
  struct Role {
    std::string name;
    Bytes needed;  // the device peak (reserved + NCCL + context), max over the role's ranks
  };
  std::vector<Role> roles;
  Bytes capacity;  // what a rank may use: the GPU's, or its --memory-fraction share
};

// A what-if run (--straggler, --jitter) and the same run unperturbed: the
// options as written and each run's iteration time, absent when that run
// did not complete (out of memory, deadlock).
struct WhatIfComparison {
  std::string options;
  std::optional<SimTime> perturbed, unperturbed;
};
// The summary's value after "what-if:": "--straggler 5:1.5: iteration
// 21.904 ms vs 20.876 ms unperturbed (+4.92%)".
std::string what_if_text(const WhatIfComparison& w);
// The report's "what_if" object: options, iteration_time_s,
// unperturbed_iteration_time_s, delta_s, delta_pct (null where a run did
// not complete).
nlohmann::ordered_json what_if_json(const WhatIfComparison& w);

struct SimulateSummary {
  std::string job;
  int num_gpus = 0;
  int tp = 1, cp = 1, pp = 1, vpp = 1, dp = 1, ep = 1, etp = 1;
  bool sequence_parallel = false;
  int micro_batch_size = 1, seq_length = 0, global_batch_size = 0, num_microbatches = 0;
  std::string precision, recompute;
  std::string cluster, gpu;
  int num_nodes = 0;
  double peak_flops = 0;  // bf16 dense peak of one GPU, the MFU denominator
  // FP8 runs: the GPU's dense FP8 peak and the MFU against it too (0: a bf16
  // run, or a GPU without FP8 tensor cores).
  double fp8_peak_flops = 0, mfu_fp8 = 0;
  std::int64_t parameters = 0, active_parameters = 0;
  double model_flops = 0;  // per iteration
  SimTime iteration_time;
  double tokens_per_s_per_gpu = 0, model_tflops_per_gpu = 0, mfu = 0;
  // Peaks, max over ranks; the device's capacity and CUDA context.
  Bytes peak_allocated, peak_reserved, peak_device, nccl, fragmentation;
  Bytes capacity, context;
  std::string alloc_conf;  // PYTORCH_CUDA_ALLOC_CONF in effect ("" = defaults)
  // Set when a rank ran out of memory: the iteration did not complete, and
  // its times are not reported.
  std::string oom_text;
  nlohmann::ordered_json oom;
  std::optional<PastOom> past_oom;           // with --continue-past-oom after an OOM
  std::optional<WhatIfComparison> what_if;   // with --straggler or --jitter
  std::optional<NodeFailureReplay> failure;  // with --fail-node
  // Whether the iteration completed (no OOM, no hang after a node failure),
  // so that its times are reported.
  bool completed() const { return oom_text.empty() && !(failure && failure->hung); }
  std::int64_t kernels = 0, kernels_measured = 0;
  std::string kernel_db;  // databases used, or empty
  // The job runs its tensor kernels at its slowest GPU's pace: this factor
  // over the single GPU the kernel model describes, from the GPU type's
  // chip-to-chip clock CoV (compute/slowest_gpu.h); 1 and 0 where unknown.
  double slowest_gpu_slowdown = 1;
  double clock_cov = 0;
  bool folded = false;
  int simulated_ranks = 0;
  std::uint64_t op_events = 0;
  std::vector<SimulateRole> roles;
};

std::string format_simulate_text(const SimulateSummary& s);
std::string format_simulate_json(const SimulateSummary& s);

}  // namespace prism
