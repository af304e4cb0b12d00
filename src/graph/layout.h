// Layout: where each rank sits in the parallel grid and in the cluster.
//
// The grid is a list of named dimensions, innermost first (Megatron's order is
// tp, cp, ep, dp, pp), whose sizes multiply to the world size:
//   rank = sum_i coord_i * stride_i,  stride_0 = 1, stride_{i+1} = stride_i * size_i.
// Ranks fill nodes in order: node = rank / gpus_per_node, local GPU (and rail)
// = rank % gpus_per_node, as torchrun and SLURM place them.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace prism {

using Rank = std::int32_t;

struct GridDim {
  std::string name;
  int size = 1;
};

class Layout {
 public:
  Layout() = default;
  Layout(int world_size, std::vector<GridDim> dims, int gpus_per_node);

  int world_size() const { return world_size_; }
  int gpus_per_node() const { return gpus_per_node_; }
  int num_nodes() const { return (world_size_ + gpus_per_node_ - 1) / gpus_per_node_; }
  const std::vector<GridDim>& dims() const { return dims_; }
  // Index of the dimension called `name`, or -1.
  int find_dim(const std::string& name) const;
  int coord(Rank r, int dim) const { return (r / strides_[dim]) % dims_[dim].size; }
  int stride(int dim) const { return strides_[dim]; }
  int node_of(Rank r) const { return r / gpus_per_node_; }
  int local_gpu(Rank r) const { return r % gpus_per_node_; }

 private:
  int world_size_ = 0;
  int gpus_per_node_ = 1;
  std::vector<GridDim> dims_;
  std::vector<int> strides_;
};

// How a group of ranks sits on nodes: what a network model needs of it, and
// what folding compares between groups.
struct GroupGeometry {
  int num_ranks = 0;
  int num_nodes = 0;           // distinct nodes among the ranks
  int max_ranks_per_node = 0;  // most ranks on one node
  friend bool operator==(const GroupGeometry&, const GroupGeometry&) = default;
};
GroupGeometry group_geometry(const Layout& layout, std::span<const Rank> ranks);

}  // namespace prism
