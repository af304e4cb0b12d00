#include "graph/layout.h"

#include <algorithm>
#include <utility>

namespace prism {

Layout::Layout(int world_size, std::vector<GridDim> dims, int gpus_per_node)
    : world_size_(world_size), gpus_per_node_(gpus_per_node), dims_(std::move(dims)) {
  int stride = 1;
  strides_.reserve(dims_.size());
  for (const GridDim& d : dims_) {
    strides_.push_back(stride);
    stride *= d.size;
  }
}

int Layout::find_dim(const std::string& name) const {
  for (std::size_t i = 0; i < dims_.size(); ++i)
    if (dims_[i].name == name) return static_cast<int>(i);
  return -1;
}

GroupGeometry group_geometry(const Layout& layout, std::span<const Rank> ranks) {
  std::vector<int> nodes;
  nodes.reserve(ranks.size());
  for (Rank r : ranks) nodes.push_back(layout.node_of(r));
  std::sort(nodes.begin(), nodes.end());
  GroupGeometry geo;
  geo.num_ranks = static_cast<int>(ranks.size());
  for (std::size_t i = 0, run = 0; i < nodes.size(); ++i) {
    if (i == 0 || nodes[i] != nodes[i - 1]) ++geo.num_nodes, run = 0;
    geo.max_ranks_per_node = std::max(geo.max_ranks_per_node, static_cast<int>(++run));
  }
  return geo;
}

}  // namespace prism
