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

#include <functional>
#include <string>
#include <string_view>

#include "net/cluster_spec.h"
#include "util/status.h"

namespace YAML {
class Node;
struct Mark;
}  // namespace YAML

namespace prism {

// Parses `text`; `source` names it in errors (a path, or "<string>").
Result<ClusterSpec> parse_cluster_yaml(std::string_view text, std::string_view source);
Result<ClusterSpec> load_cluster_yaml(const std::string& path);
// For documents that embed a cluster spec (a job spec's `cluster:` section).
struct ClusterYamlContext {
  std::string source;        // names the document in errors
  std::string field_prefix;  // put before field paths in errors, e.g. "cluster."
  // Where a field's value came from, for errors ("FILE:LINE:COL", or the
  // command-line override that set it); `field` is the path without the
  // prefix ("" for the whole spec), `mark` may be null. Default: SOURCE:LINE:COL.
  std::function<std::string(std::string_view field, const YAML::Mark& mark)> where;
};
// Parses an already loaded document, as parse_cluster_yaml does the text.
Result<ClusterSpec> parse_cluster_yaml_node(const YAML::Node& root,
                                            const ClusterYamlContext& context);

// A preset name, or else a path to a YAML file.
Result<ClusterSpec> resolve_cluster(const std::string& preset_or_path);

// `c` as a spec parse_cluster_yaml reads back as `c`: every field, no
// preset, sized by num_nodes; one line per section, deterministic.
std::string format_cluster_yaml(const ClusterSpec& c);

}  // namespace prism
