#include "compute/compute_model.h"

#include <cmath>

namespace prism {

SimTime RooflineModel::duration(const KernelCost& cost) const {
  // Clamp in floating point first: a double above 2^63 has no int64 value.
  const double ns = std::ceil(cost.flops / p_.peak_flops * 1e9);
  const SimTime flop_time = ns < static_cast<double>(kMaxOpDuration.ns)
                                ? SimTime{static_cast<std::int64_t>(ns)}
                                : kMaxOpDuration;
  return min(max(flop_time, p_.hbm_bw.time_for(cost.bytes_accessed)), kMaxOpDuration);
}

const RooflineModel& default_roofline() {
  static const RooflineModel model;
  return model;
}

}  // namespace prism
