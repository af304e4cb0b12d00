// GpuSpec: a GPU's vendor peaks and the efficiency constants of the compute
// model for it (one calibration per GPU type, never per job; docs/compute.md
// gives every value's source). Presets: A100-SXM4-40GB, A100-SXM4-80GB,
// H100-SXM5-80GB, H200-SXM-141GB, B200-SXM-180GB (the cluster presets'
// gpu_model names).
//
// Peaks are dense (no 2:4 sparsity). Efficiencies are fractions of a peak in
// (0, 1]; how the model uses them is in compute/kernel_model.h.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace prism {

struct GpuSpec {
  std::string name;
  int num_sms = 0;
  double bf16_flops = 0;  // dense peak, FLOP/s
  double fp8_flops = 0;   // dense peak, FLOP/s (0: no FP8 tensor cores)
  double hbm_Bps = 0;     // HBM bandwidth, bytes/s
  double hbm_bytes = 0;   // HBM capacity
  // Efficiency curve constants (fractions of peak, launch floor), filled per
  // GPU type by the preset; see compute/kernel_model.h.
  double gemm_max_efficiency = 0;      // bf16 GEMM, large well-shaped problems
  double gemm_fp8_max_efficiency = 0;  // FP8 GEMM, same (unused without FP8)
  int gemm_tile_m = 0;                 // output tile of one SM for large GEMMs
  int gemm_tile_n = 0;
  // > 0: cuBLAS may also spread a GEMM's tiles evenly over the SMs (stream-K:
  // CUTLASS 3's PersistentTileSchedulerSm90StreamK) at this fraction of the
  // large tile's rate, instead of a partly filled last wave. 0: never.
  double gemm_stream_k_rate = 0;
  double gemm_k_half = 0;      // bf16 GEMM: k at which the main loop is half the tile's time
  double gemm_fp8_k_half = 0;  // FP8 GEMM, same (unused without FP8)
  double attention_fwd_efficiency = 0;  // asymptote (long sequence, large head dim)
  double attention_bwd_efficiency = 0;
  double attention_seq_half = 0;       // keys per query at half efficiency
  double attention_head_dim_half = 0;  // head dim at half efficiency
  double hbm_efficiency = 0;           // achievable fraction of hbm_Bps
  double launch_overhead_us = 0;       // added to every kernel; its floor
  // Sustained power: a GEMM's or attention kernel's time in a training step,
  // which holds the GPU at its power limit and its SM clock below boost, over
  // its time in a burst of calls (how data/kernels.csv is measured, and so
  // the curves fitted to it). >= 1; 1 where not measured (docs/compute.md,
  // "Sustained clocks").
  double tensor_sustained_slowdown = 1;      // bf16 (any non-FP8) inputs
  double tensor_fp8_sustained_slowdown = 1;  // FP8 inputs
  // Chip to chip: the coefficient of variation of the sustained SM clock (so
  // of a tensor kernel's time) across GPUs of this type at the power limit.
  // A job runs at its slowest GPU's pace (compute/slowest_gpu.h). In [0,
  // 0.1]; 0 where not measured (docs/compute.md, "The slowest GPU").
  double sustained_clock_cov = 0;
};

const std::vector<std::string_view>& gpu_spec_names();
// A preset by name, or not_found naming the presets.
Result<GpuSpec> gpu_spec(std::string_view name);
// The problem with a spec (a custom one) or ok: positive peaks and SM count,
// efficiencies in (0, 1], positive tiles and half points, launch >= 0,
// sustained slowdowns in [1, 2], clock CoV in [0, 0.1].
Status validate_gpu_spec(const GpuSpec& g);

}  // namespace prism
