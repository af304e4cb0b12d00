// MaxMinSolver: max-min fair rates for flows over shared resources, by
// progressive filling (SimGrid's LMM without weights).
//
// A resource has a capacity (bytes per ns). A flow has a demand on each
// resource it crosses: what it would use there running at full speed, and a
// rate x in [0, 1], the fraction of full speed it gets. The rates are the
// max-min fair ones subject to sum_i demand_ij * x_i <= capacity_j: all
// unfrozen flows rise together; when a resource fills, its flows freeze;
// a flow that reaches 1 stops there.
//
// Incremental: adding or removing a flow marks its resources dirty, and
// solve() recomputes only the flows connected to dirty resources through
// shared resources, so a start or finish costs the size of its component,
// not of the whole network. Each fill step pops the resource that fills
// first from a heap: O((flows x demands) log resources) per component.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace prism {

class MaxMinSolver {
 public:
  using ResourceId = std::int32_t;
  using FlowId = std::int32_t;
  struct Demand {
    ResourceId resource;
    double use;  // bytes per ns at full speed, > 0
  };

  ResourceId add_resource(double capacity);
  int num_resources() const { return static_cast<int>(resources_.size()); }
  double capacity(ResourceId r) const { return resources_[r].capacity; }

  // A new flow with rate 0 until the next solve(). Demands name distinct resources.
  FlowId add_flow(std::span<const Demand> demands);
  void remove_flow(FlowId f);
  // Recomputes the rates of every flow connected to a resource changed
  // since the last call; appends those flows (ascending) to `touched`.
  void solve(std::vector<FlowId>* touched);
  double rate(FlowId f) const { return flows_[f].rate; }
  int num_flows() const { return live_flows_; }

 private:
  struct Use {  // one flow on one resource
    FlowId flow;
    std::int32_t demand;  // index into the flow's demands
  };
  struct Resource {
    double capacity = 0;
    std::vector<Use> flows;
    // Solve state.
    std::uint32_t stamp = 0;
    std::uint32_t version = 0;
    double frozen_use = 0;
    double open_use = 0;  // demands of flows not yet frozen
    bool dirty = false;
  };
  struct FlowDemand {
    ResourceId resource;
    double use;
    std::int32_t slot;  // position in the resource's `flows`
  };
  struct Flow {
    std::vector<FlowDemand> demands;
    double rate = 0;
    std::uint32_t stamp = 0;
    bool frozen = false;
    bool alive = false;
  };

  void mark(ResourceId r);
  void collect(ResourceId start, std::vector<ResourceId>* res, std::vector<FlowId>* flows);
  void fill(const std::vector<ResourceId>& res, const std::vector<FlowId>& flows);

  std::vector<Resource> resources_;
  std::vector<Flow> flows_;
  std::vector<FlowId> free_;
  std::vector<ResourceId> dirty_;
  std::uint32_t stamp_ = 0;
  int live_flows_ = 0;
};

}  // namespace prism
