#include "compute/compute_model.h"

#include <cmath>

namespace prism {

SimTime RooflineModel::duration(const KernelCost& cost) const {
  const SimTime flop_time{static_cast<std::int64_t>(std::ceil(cost.flops / p_.peak_flops * 1e9))};
  return max(flop_time, p_.hbm_bw.time_for(cost.bytes_accessed));
}

}  // namespace prism
