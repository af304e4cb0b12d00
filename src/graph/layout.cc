#include "graph/layout.h"

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

}  // namespace prism
