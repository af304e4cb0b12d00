#include "net/max_min_solver.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <tuple>

#include "util/check.h"

namespace prism {

MaxMinSolver::ResourceId MaxMinSolver::add_resource(double capacity) {
  PRISM_CHECK(capacity > 0, "a resource needs a positive capacity");
  resources_.push_back(Resource{});
  resources_.back().capacity = capacity;
  return static_cast<ResourceId>(resources_.size() - 1);
}

MaxMinSolver::FlowId MaxMinSolver::add_flow(std::span<const Demand> demands) {
  FlowId id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else {
    id = static_cast<FlowId>(flows_.size());
    flows_.emplace_back();
  }
  Flow& f = flows_[id];
  f.demands.clear();
  f.rate = 0;
  f.alive = true;
  f.frozen = false;
  for (const Demand& d : demands) {
    PRISM_CHECK(d.use > 0 && d.resource >= 0 && d.resource < num_resources(), "bad demand");
    Resource& r = resources_[d.resource];
    f.demands.push_back(FlowDemand{d.resource, d.use, static_cast<std::int32_t>(r.flows.size())});
    r.flows.push_back(Use{id, static_cast<std::int32_t>(f.demands.size() - 1)});
    mark(d.resource);
  }
  if (demands.empty()) f.rate = 1.0;  // crosses nothing: never slowed
  ++live_flows_;
  return id;
}

void MaxMinSolver::remove_flow(FlowId id) {
  Flow& f = flows_[id];
  PRISM_CHECK(f.alive, "removing a flow twice");
  for (const FlowDemand& d : f.demands) {
    Resource& r = resources_[d.resource];
    const Use moved = r.flows.back();
    r.flows[d.slot] = moved;
    flows_[moved.flow].demands[moved.demand].slot = d.slot;
    r.flows.pop_back();
    mark(d.resource);
  }
  f.demands.clear();
  f.alive = false;
  f.rate = 0;
  free_.push_back(id);
  --live_flows_;
}

void MaxMinSolver::mark(ResourceId r) {
  if (!resources_[r].dirty) {
    resources_[r].dirty = true;
    dirty_.push_back(r);
  }
}

void MaxMinSolver::solve(std::vector<FlowId>* touched) {
  std::vector<ResourceId> res;
  std::vector<FlowId> flows;
  const std::size_t first = touched->size();
  ++stamp_;
  for (ResourceId start : dirty_) {
    resources_[start].dirty = false;
    if (resources_[start].stamp == stamp_) continue;  // already in a component
    res.clear();
    flows.clear();
    collect(start, &res, &flows);
    fill(res, flows);
    touched->insert(touched->end(), flows.begin(), flows.end());
  }
  dirty_.clear();
  std::sort(touched->begin() + static_cast<std::ptrdiff_t>(first), touched->end());
}

// The component of `start`: resources and flows reachable through shared
// resources (breadth first).
void MaxMinSolver::collect(ResourceId start, std::vector<ResourceId>* res,
                           std::vector<FlowId>* flows) {
  resources_[start].stamp = stamp_;
  res->push_back(start);
  for (std::size_t i = 0; i < res->size(); ++i) {
    for (const Use& u : resources_[(*res)[i]].flows) {
      Flow& f = flows_[u.flow];
      if (f.stamp == stamp_) continue;
      f.stamp = stamp_;
      flows->push_back(u.flow);
      for (const FlowDemand& d : f.demands) {
        if (resources_[d.resource].stamp != stamp_) {
          resources_[d.resource].stamp = stamp_;
          res->push_back(d.resource);
        }
      }
    }
  }
}

// Progressive filling. A resource with frozen use F and open demand D fills
// when the common level reaches (capacity - F) / D; that level only changes
// when one of its flows freezes, so a heap of levels with versions finds the
// next resource to fill.
void MaxMinSolver::fill(const std::vector<ResourceId>& res, const std::vector<FlowId>& flows) {
  using Entry = std::tuple<double, ResourceId, std::uint32_t>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
  for (FlowId id : flows) flows_[id].frozen = false;
  for (ResourceId r : res) {
    Resource& rr = resources_[r];
    rr.frozen_use = 0;
    rr.open_use = 0;
    for (const Use& u : rr.flows) rr.open_use += flows_[u.flow].demands[u.demand].use;
    ++rr.version;
    if (!rr.flows.empty()) heap.emplace(rr.capacity / rr.open_use, r, rr.version);
  }
  double level = 0;
  while (!heap.empty()) {
    const auto [at, r, version] = heap.top();
    heap.pop();
    if (version != resources_[r].version) continue;
    if (at >= 1.0) break;  // every open flow reaches full speed first
    level = std::max(level, at);
    for (const Use& u : resources_[r].flows) {
      Flow& f = flows_[u.flow];
      if (f.frozen) continue;
      f.frozen = true;
      f.rate = level;
      for (const FlowDemand& d : f.demands) {
        Resource& k = resources_[d.resource];
        k.frozen_use += d.use * level;
        k.open_use -= d.use;
        ++k.version;
        if (k.open_use > 1e-12 * k.capacity && d.resource != r)
          heap.emplace(std::max(level, (k.capacity - k.frozen_use) / k.open_use), d.resource,
                       k.version);
      }
    }
  }
  for (FlowId id : flows)
    if (!flows_[id].frozen) flows_[id].rate = 1.0;
}

}  // namespace prism
