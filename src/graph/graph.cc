#include "graph/graph.h"

#include <algorithm>

namespace prism {

int ExecutionGraph::find_slot(const std::string& n) const {
  for (std::size_t i = 0; i < slots.size(); ++i)
    if (slots[i].name == n) return static_cast<int>(i);
  return -1;
}

int ExecutionGraph::find_role(const std::string& n) const {
  for (std::size_t i = 0; i < roles.size(); ++i)
    if (roles[i].name == n) return static_cast<int>(i);
  return -1;
}

std::int64_t ExecutionGraph::compute_scale_ppm(Rank r) const {
  auto it = std::lower_bound(overrides.begin(), overrides.end(), r,
                             [](const RankOverride& o, Rank x) { return o.rank < x; });
  return (it != overrides.end() && it->rank == r) ? it->compute_scale_ppm : 1'000'000;
}

SimTime scale_duration(SimTime d, std::int64_t ppm) {
  constexpr std::int64_t kOne = 1'000'000;
  if (ppm != kOne) {
    const Int128 scaled = (static_cast<Int128>(d.ns) * ppm + kOne / 2) / kOne;
    d = SimTime{static_cast<std::int64_t>(std::min<Int128>(scaled, kMaxOpDuration.ns))};
  }
  return min(d, kMaxOpDuration);
}

std::size_t ExecutionGraph::total_ops() const {
  std::size_t n = 0;
  for (const Role& role : roles) n += role.ops.size();
  return n;
}

}  // namespace prism
