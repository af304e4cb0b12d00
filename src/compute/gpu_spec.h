// GpuSpec: a GPU's vendor peaks and the efficiency constants of the compute
// model for it (one calibration per GPU type, never per job; docs/compute.md
// gives every value's source). Presets: A100-SXM4-40GB, A100-SXM4-80GB,
// H100-SXM5-80GB, H200-SXM-141GB, B200-SXM-180GB (the cluster presets'
// gpu_model names).
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
  double gemm_max_efficiency = 0;
  double attention_fwd_efficiency = 0;
  double attention_bwd_efficiency = 0;
  double hbm_efficiency = 0;
  double launch_overhead_us = 0;
};

const std::vector<std::string_view>& gpu_spec_names();
// A preset by name, or not_found naming the presets.
Result<GpuSpec> gpu_spec(std::string_view name);

}  // namespace prism
