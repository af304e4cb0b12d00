#include "net/flow_network.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "util/check.h"

namespace prism {
FlowNetwork::FlowNetwork(const ClusterSpec& cluster, NcclSelection selection,
                         std::vector<LinkDegradation> degraded)
    : cluster_(cluster), tuner_(cluster, selection), degraded_(std::move(degraded)) {
  for (const LinkDegradation& d : degraded_)
    PRISM_CHECK(d.factor > 0 && d.index >= 0 && d.index < num_link_parts(cluster_, d.part),
                "a degraded link outside the cluster");
  build_resources();
}

void FlowNetwork::add_resource(double capacity, double slowdown) {
  solver_.add_resource(capacity / slowdown);
  nominal_.push_back(capacity);
}

void FlowNetwork::build_resources() {
  const ClusterSpec& c = cluster_;
  const int gpus = c.num_gpus();
  const int nics = c.num_nodes * c.nics_per_node;
  const double nic_cap = c.nic_goodput_GBps();
  nvl_base_ = solver_.num_resources();
  for (int i = 0; i < 2 * gpus; ++i)
    add_resource(c.nvlink_GBps(), nvlink_slowdown(degraded_, i / 2 / c.gpus_per_node));
  nic_base_ = solver_.num_resources();
  for (int i = 0; i < 2 * nics; ++i)
    add_resource(nic_cap,
                 nic_slowdown(degraded_, i / 2 / c.nics_per_node, i / 2 % c.nics_per_node));
  // A non-blocking tier carries whatever its NICs send: no resource needed,
  // unless one of its leaves is degraded.
  const bool leaf_degraded =
      std::any_of(degraded_.begin(), degraded_.end(),
                  [](const LinkDegradation& d) { return d.part == LinkDegradation::Part::kLeaf; });
  if (c.fabric_tiers < 2 || (c.oversubscription <= 1.0 && !leaf_degraded)) return;
  leaves_per_group_ = c.rail_optimized ? c.nics_per_node : 1;
  const int groups = (c.num_nodes + c.nodes_per_leaf - 1) / c.nodes_per_leaf;
  const double nics_per_leaf =
      static_cast<double>(c.nodes_per_leaf) * c.nics_per_node / leaves_per_group_;
  leaf_base_ = solver_.num_resources();
  for (int i = 0; i < 2 * groups * leaves_per_group_; ++i)
    add_resource(nics_per_leaf * nic_cap / c.oversubscription, leaf_slowdown(degraded_, i / 2));
  if (c.fabric_tiers < 3) return;
  const int pods = (groups + c.leaves_per_pod - 1) / c.leaves_per_pod;
  const double nics_per_pod = nics_per_leaf * leaves_per_group_ * c.leaves_per_pod;
  pod_base_ = solver_.num_resources();
  for (int i = 0; i < 2 * pods; ++i)
    add_resource(nics_per_pod * nic_cap / (c.oversubscription * c.oversubscription), 1);
}

bool FlowNetwork::folding_exact() const {
  // Folded copies of a transfer run on other GPUs and NICs; they share
  // nothing with it unless GPUs share a NIC or traffic meets in the fabric.
  return cluster_.nics_per_node == cluster_.gpus_per_node && leaf_base_ < 0;
}

int FlowNetwork::leaf_of(int node, int rail) const {
  return (node / cluster_.nodes_per_leaf) * leaves_per_group_ +
         (cluster_.rail_optimized ? rail : 0);
}

int FlowNetwork::pod_of(int node) const {
  return node / cluster_.nodes_per_leaf / cluster_.leaves_per_pod;
}

Status FlowNetwork::admit(const Transfer& t) const {
  if (t.kind == Transfer::Kind::kPointToPoint) return Status::ok();
  const CommGeometry g{static_cast<int>(t.ranks.size()), t.num_nodes, t.max_ranks_per_node};
  if (tuner_.collective(t.collective, t.bytes, g).has_value()) return Status::ok();
  return Status::invalid_argument(fmt::format(
      "the NCCL selection (--nccl-algo, --nccl-proto) leaves {} over {} ranks on {} node{} no "
      "algorithm and protocol; NCCL fails such a call too (\"no algorithm/protocol available\")",
      to_string(t.collective), t.ranks.size(), t.num_nodes, t.num_nodes == 1 ? "" : "s"));
}

CollectiveCost FlowNetwork::solo_cost(const Transfer& t) const {
  if (t.kind == Transfer::Kind::kPointToPoint)
    return tuner_.point_to_point(t.bytes, t.num_nodes == 1);
  const CommGeometry g{static_cast<int>(t.ranks.size()), t.num_nodes, t.max_ranks_per_node};
  const std::optional<CollectiveCost> c = tuner_.collective(t.collective, t.bytes, g);
  PRISM_CHECK(c.has_value(), "the NCCL selection leaves a collective no algorithm");
  return *c;
}

int FlowNetwork::sms_held(const Transfer& t) const {
  return solo_cost(t).channels;
}

void FlowNetwork::add_bytes(std::vector<MaxMinSolver::Demand>* d, MaxMinSolver::ResourceId r,
                            double b) const {
  if (b > 0) d->push_back(MaxMinSolver::Demand{r, b});
}

// Bytes from NIC (node_a, rail_a) to NIC (node_b, rail_b): NICs and, where
// the fabric has resources for them, the leaf and pod uplinks crossed.
void FlowNetwork::add_path(std::vector<MaxMinSolver::Demand>* d, int node_a, int rail_a, int node_b,
                           int rail_b, double bytes) const {
  add_bytes(d, nic_tx(node_a * cluster_.nics_per_node + rail_a), bytes);
  add_bytes(d, nic_rx(node_b * cluster_.nics_per_node + rail_b), bytes);
  if (leaf_base_ < 0) return;
  const int la = leaf_of(node_a, rail_a), lb = leaf_of(node_b, rail_b);
  if (la == lb) return;
  add_bytes(d, leaf_base_ + 2 * la, bytes);
  add_bytes(d, leaf_base_ + 2 * lb + 1, bytes);
  if (pod_base_ < 0) return;
  const int pa = pod_of(node_a), pb = pod_of(node_b);
  if (pa == pb) return;
  add_bytes(d, pod_base_ + 2 * pa, bytes);
  add_bytes(d, pod_base_ + 2 * pb + 1, bytes);
}

// Bytes each resource carries during the transfer (docs/collectives.md):
// - send/recv: the message, over NVLink inside a node, else NIC to NIC;
// - all-to-all: each rank sends bytes/n to every peer, NVLink or its NIC;
// - ring, tree, NVLS and PAT collectives: each rank moves f x bytes (f the
//   nccl-tests bus factor); of that a node sends f x bytes to the next node
//   in communicator order, spread over the rails of its members, and the rest
//   stays on NVLink.
std::vector<MaxMinSolver::Demand> FlowNetwork::demands(const Transfer& t,
                                                       const CollectiveCost& cost) const {
  const int gpn = cluster_.gpus_per_node;
  std::vector<MaxMinSolver::Demand> d;
  const auto node = [gpn](std::int32_t r) { return r / gpn; };
  const auto rail = [this, gpn](std::int32_t r) { return cluster_.rail_of_gpu(r % gpn); };
  const double bytes = static_cast<double>(t.bytes.count);
  if (t.kind == Transfer::Kind::kPointToPoint) {
    const std::int32_t a = t.ranks[0], b = t.ranks[1];
    if (node(a) == node(b)) {
      add_bytes(&d, nvl_tx(a), bytes);
      add_bytes(&d, nvl_rx(b), bytes);
    } else {
      add_path(&d, node(a), rail(a), node(b), rail(b), bytes);
    }
  } else {
    // Members per node, in communicator order of first appearance.
    std::vector<int> nodes;
    std::map<int, std::vector<std::int32_t>> members;
    for (std::int32_t r : t.ranks) {
      auto& m = members[node(r)];
      if (m.empty()) nodes.push_back(node(r));
      m.push_back(r);
    }
    const double n = static_cast<double>(t.ranks.size());
    if (cost.algo == NcclAlgo::kP2p) {  // all-to-all
      for (std::int32_t r : t.ranks) {
        const double local = static_cast<double>(members[node(r)].size());
        add_bytes(&d, nvl_tx(r), bytes * (local - 1) / n);
        add_bytes(&d, nvl_rx(r), bytes * (local - 1) / n);
        for (int other : nodes) {
          if (other == node(r)) continue;
          add_path(&d, node(r), rail(r), other, rail(r),
                   bytes * static_cast<double>(members[other].size()) / n);
        }
      }
    } else {
      const double moved = nccl_bus_factor(t.collective, static_cast<int>(t.ranks.size())) * bytes;
      for (std::size_t i = 0; i < nodes.size(); ++i) {
        const std::vector<std::int32_t>& m = members[nodes[i]];
        const double k = static_cast<double>(m.size());
        for (std::int32_t r : m) {
          add_bytes(&d, nvl_tx(r), moved * (k - 1) / k);
          add_bytes(&d, nvl_rx(r), moved * (k - 1) / k);
        }
        if (nodes.size() == 1) continue;
        std::vector<int> rails;
        for (std::int32_t r : m) rails.push_back(rail(r));
        std::sort(rails.begin(), rails.end());
        rails.erase(std::unique(rails.begin(), rails.end()), rails.end());
        const int next = nodes[(i + 1) % nodes.size()];
        for (int ra : rails)
          add_path(&d, nodes[i], ra, next, ra, moved / static_cast<double>(rails.size()));
      }
    }
  }
  // One demand per resource.
  std::sort(d.begin(), d.end(),
            [](const auto& a, const auto& b) { return a.resource < b.resource; });
  std::vector<MaxMinSolver::Demand> merged;
  for (const auto& x : d) {
    if (!merged.empty() && merged.back().resource == x.resource) {
      merged.back().use += x.use;
    } else {
      merged.push_back(x);
    }
  }
  return merged;
}

TransferId FlowNetwork::start(const Transfer& t, SimTime now) {
  for (std::int32_t r : t.ranks)
    PRISM_CHECK(r >= 0 && r < cluster_.num_gpus(), "transfer names a rank outside the cluster");
  const TransferId id = next_id_++;
  const CollectiveCost cost = solo_cost(t);
  InFlight f;
  f.remaining = static_cast<double>(cost.bandwidth_time.ns);
  if (cost.bandwidth_time.ns > 0) {
    f.demands = demands(t, cost);
    // Use per ns of solo time, scaled so the flow alone fits every resource
    // at its nominal capacity (a degraded one then slows it).
    double over = 0;
    for (auto& x : f.demands) {
      x.use /= f.remaining;
      over = std::max(over, x.use / nominal_[x.resource]);
    }
    if (over > 1)
      for (auto& x : f.demands) x.use /= over;
  }
  in_flight_.emplace(id, std::move(f));
  latent_.emplace(now + cost.latency, id, 0);
  return id;
}

void FlowNetwork::drop_stale() const {
  while (!completions_.empty()) {
    const auto& [at, id, version] = completions_.top();
    auto it = in_flight_.find(id);
    if (it != in_flight_.end() && it->second.flow >= 0 && it->second.version == version) return;
    completions_.pop();
  }
}

SimTime FlowNetwork::next_completion() const {
  drop_stale();
  SimTime t = SimTime::never();
  if (!latent_.empty()) t = std::get<0>(latent_.top());
  if (!completions_.empty()) t = min(t, std::get<0>(completions_.top()));
  return t;
}

void FlowNetwork::take_completed(SimTime t, std::vector<TransferId>* done) {
  const std::size_t first = done->size();
  bool changed = false;
  drop_stale();
  while (!completions_.empty() && std::get<0>(completions_.top()) == t) {
    const TransferId id = std::get<1>(completions_.top());
    completions_.pop();
    InFlight& f = in_flight_.at(id);
    solver_.remove_flow(f.flow);
    in_flight_.erase(id);
    done->push_back(id);
    changed = true;
    drop_stale();
  }
  while (!latent_.empty() && std::get<0>(latent_.top()) == t) {
    const TransferId id = std::get<1>(latent_.top());
    latent_.pop();
    InFlight& f = in_flight_.at(id);
    if (f.remaining <= 0) {  // latency only
      in_flight_.erase(id);
      done->push_back(id);
      continue;
    }
    f.flow = solver_.add_flow(f.demands);
    f.last_update = t;
    if (by_flow_.size() <= static_cast<std::size_t>(f.flow)) by_flow_.resize(f.flow + 1);
    by_flow_[f.flow] = id;
    if (f.demands.empty()) {  // nothing shared: runs at solo speed
      f.rate = 1;
      completions_.emplace(t + SimTime{static_cast<std::int64_t>(std::ceil(f.remaining))}, id,
                           ++f.version);
    }
    changed = true;
  }
  if (changed) rerate(t);
  std::sort(done->begin() + static_cast<std::ptrdiff_t>(first), done->end());
}

// Progress at the old rates up to `now`, then the new rates and ends.
void FlowNetwork::rerate(SimTime now) {
  touched_.clear();
  solver_.solve(&touched_);
  for (MaxMinSolver::FlowId fid : touched_) {
    InFlight& f = in_flight_.at(by_flow_[fid]);
    f.remaining =
        std::max(0.0, f.remaining - f.rate * static_cast<double>((now - f.last_update).ns));
    f.last_update = now;
    f.rate = solver_.rate(fid);
    PRISM_CHECK(f.rate > 0, "a flow got no bandwidth");
    const double left = std::ceil(f.remaining / f.rate - 1e-6);
    const SimTime end = left >= static_cast<double>(kMaxOpDuration.ns)
                            ? now + kMaxOpDuration
                            : now + SimTime{static_cast<std::int64_t>(left)};
    completions_.emplace(max(end, now), by_flow_[fid], ++f.version);
  }
  // Re-rated flows leave stale entries behind; rebuild before they pile up.
  if (completions_.size() > 4 * in_flight_.size() + 1024) {
    MinHeap fresh;
    while (!completions_.empty()) {
      const Entry e = completions_.top();
      completions_.pop();
      auto it = in_flight_.find(std::get<1>(e));
      if (it != in_flight_.end() && it->second.flow >= 0 && it->second.version == std::get<2>(e))
        fresh.push(e);
    }
    completions_ = std::move(fresh);
  }
  drop_stale();
}

double FlowNetwork::rate(TransferId id) const {
  auto it = in_flight_.find(id);
  return it == in_flight_.end() || it->second.flow < 0 ? 0.0 : it->second.rate;
}

}  // namespace prism
