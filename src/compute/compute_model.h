// ComputeModel: the duration of a compute op that carries a KernelCost instead
// of a measured duration. The placeholder is a roofline on one GPU's peaks;
// the calibrated per-GPU model with efficiency curves and a measured-kernel
// database replaces it behind the same interface.
#pragma once

#include "graph/op.h"
#include "util/units.h"

namespace prism {

class ComputeModel {
 public:
  virtual ~ComputeModel() = default;
  virtual SimTime duration(const KernelCost& cost) const = 0;
};

struct RooflineParams {
  // Defaults: H100 SXM dense BF16 and HBM3 peaks (NVIDIA datasheet,
  // ../shared/calibration/gpus.csv).
  double peak_flops = 989.4e12;
  Bandwidth hbm_bw = Bandwidth::from_gbps(3350);
};

class RooflineModel final : public ComputeModel {
 public:
  explicit RooflineModel(RooflineParams p = {}) : p_(p) {}
  // max(flops / peak, bytes / bandwidth), rounded up to a nanosecond and
  // clamped to kMaxOpDuration.
  SimTime duration(const KernelCost& cost) const override;

 private:
  RooflineParams p_;
};

// The roofline with default parameters (an H100), how `prism replay` prices
// kernel costs unless told otherwise; one shared, immutable instance.
const RooflineModel& default_roofline();

}  // namespace prism
