#include "net/link_degradation.h"

namespace prism {
namespace {

double product(const std::vector<LinkDegradation>& d, LinkDegradation::Part p, int index) {
  double f = 1;
  for (const LinkDegradation& x : d)
    if (x.part == p && x.index == index) f *= x.factor;
  return f;
}

}  // namespace

std::string_view to_string(LinkDegradation::Part p) {
  return link_part_names()[static_cast<std::size_t>(p)];
}

const std::vector<std::string_view>& link_part_names() {
  static const std::vector<std::string_view> names = {"node", "rail", "leaf", "nvlink"};
  return names;
}

int num_leaves(const ClusterSpec& c) {
  if (c.fabric_tiers < 2) return 0;
  const int groups = (c.num_nodes + c.nodes_per_leaf - 1) / c.nodes_per_leaf;
  return groups * (c.rail_optimized ? c.nics_per_node : 1);
}

int leaf_of(const ClusterSpec& c, int node, int rail) {
  const int per_group = c.rail_optimized ? c.nics_per_node : 1;
  return (node / c.nodes_per_leaf) * per_group + (c.rail_optimized ? rail : 0);
}

int num_link_parts(const ClusterSpec& c, LinkDegradation::Part p) {
  switch (p) {
    case LinkDegradation::Part::kNode:
    case LinkDegradation::Part::kNvlink:
      return c.num_nodes;
    case LinkDegradation::Part::kRail:
      return c.nics_per_node;
    case LinkDegradation::Part::kLeaf:
      return num_leaves(c);
  }
  return 0;
}

double nic_slowdown(const std::vector<LinkDegradation>& d, int node, int rail) {
  return product(d, LinkDegradation::Part::kNode, node) *
         product(d, LinkDegradation::Part::kRail, rail);
}

double nvlink_slowdown(const std::vector<LinkDegradation>& d, int node) {
  return product(d, LinkDegradation::Part::kNvlink, node);
}

double leaf_slowdown(const std::vector<LinkDegradation>& d, int leaf) {
  return product(d, LinkDegradation::Part::kLeaf, leaf);
}

RankSlowdown rank_slowdown(const ClusterSpec& c, const std::vector<LinkDegradation>& d,
                           int global_gpu) {
  const int node = global_gpu / c.gpus_per_node;
  const int rail = c.rail_of_gpu(global_gpu % c.gpus_per_node);
  RankSlowdown s;
  s.nic = nic_slowdown(d, node, rail);
  s.nvlink = nvlink_slowdown(d, node);
  if (c.fabric_tiers >= 2) s.leaf = leaf_slowdown(d, leaf_of(c, node, rail));
  return s;
}

}  // namespace prism
