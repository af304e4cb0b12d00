// LinkDegradation: a part of the cluster's network running at a fraction of
// its bandwidth (what-if --link-degrade, simulation/what_if.h). The parts
// are the resources FlowNetwork shares bandwidth on:
//   node N    the NICs of node N (send and receive);
//   rail R    NIC R of every node (rail-optimized fabrics: the rail's leaves);
//   leaf L    the uplinks of leaf switch L (leaf group L / R, rail L % R with
//             R rails when rail-optimized, else one leaf per group);
//   nvlink N  the NVLink ports of every GPU of node N (its NVLink domain).
// A factor F > 1 divides the part's bandwidth by F; latencies stay.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "net/cluster_spec.h"
#include "util/status.h"

namespace prism {

struct LinkDegradation {
  enum class Part : std::uint8_t { kNode, kRail, kLeaf, kNvlink };
  Part part = Part::kNode;
  int index = 0;
  double factor = 1;  // >= 1
};

std::string_view to_string(LinkDegradation::Part p);
// "node", "rail", "leaf", "nvlink", in that order.
const std::vector<std::string_view>& link_part_names();

// How many parts of kind `p` the cluster has (leaves: 0 on a one-switch
// fabric).
int num_link_parts(const ClusterSpec& c, LinkDegradation::Part p);
// Leaf switches of the cluster: leaf groups x (rails when rail-optimized).
int num_leaves(const ClusterSpec& c);
// The leaf a node's NIC on `rail` hangs from.
int leaf_of(const ClusterSpec& c, int node, int rail);

// The factors by which each resource kind of a rank's GPU is slowed, the
// product over `d` (1 where nothing is degraded).
struct RankSlowdown {
  double nic = 1, nvlink = 1, leaf = 1;
  bool operator==(const RankSlowdown&) const = default;
};
RankSlowdown rank_slowdown(const ClusterSpec& c, const std::vector<LinkDegradation>& d,
                           int global_gpu);
// The slowdown of NIC `rail` of `node`, of node `node`'s NVLink ports, of
// leaf `leaf`'s uplinks.
double nic_slowdown(const std::vector<LinkDegradation>& d, int node, int rail);
double nvlink_slowdown(const std::vector<LinkDegradation>& d, int node);
double leaf_slowdown(const std::vector<LinkDegradation>& d, int leaf);

}  // namespace prism
