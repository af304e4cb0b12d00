// Cluster specs in YAML (format in docs/collectives.md, "Cluster spec"):
//
//   preset: dgx-h100          # optional: start from a preset, then override
//   name: my-h100-pod
//   gpu: {model: H100-SXM5-80GB, arch: hopper}
//   node: {gpus: 8, nvlink_links: 18, nvlink_link_GBps: 20.6, nvls: true, pcie_GBps: 48,
//         cpu_vendor: intel}
//   network: {nics_per_node: 8, nic_Gbps: 400, latency_us: 0, rail_optimized: true}
//   fabric: {tiers: 2, nodes_per_leaf: 32, leaves_per_pod: 32, oversubscription: 1}
//   num_gpus: 1024            # or num_nodes
//
// Unknown fields, wrong types and invalid values are rejected with
// "FILE:LINE:COL: field: reason".
#pragma once

#include <string>
#include <string_view>

#include "net/cluster_spec.h"
#include "util/status.h"

namespace prism {

// Parses `text`; `source` names it in errors (a path, or "<string>").
Result<ClusterSpec> parse_cluster_yaml(std::string_view text, std::string_view source);
Result<ClusterSpec> load_cluster_yaml(const std::string& path);
// A preset name, or else a path to a YAML file.
Result<ClusterSpec> resolve_cluster(const std::string& preset_or_path);

}  // namespace prism
