// Output of `prism collective`: an nccl-tests-style table and its JSON form.
// Same rows, same rounding: the table prints times with 2 decimals in us and
// bandwidths with 2 decimals in GB/s (1 GB = 10^9 bytes), and the JSON holds
// the same numbers rounded the same way, so both read alike.
#pragma once

#include <string>
#include <vector>

#include "net/cluster_spec.h"
#include "net/collective_sweep.h"

namespace prism {

inline constexpr int kSweepReportFormatVersion = 1;

std::string format_sweep_table(const ClusterSpec& c, const SweepOptions& o,
                               const std::vector<SweepRow>& rows);
std::string format_sweep_json(const ClusterSpec& c, const SweepOptions& o,
                              const std::vector<SweepRow>& rows);

}  // namespace prism
