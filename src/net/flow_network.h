// FlowNetwork: the NCCL-faithful network model of the replay. Each transfer
// first waits its NCCL latency (NcclTuner), then moves its data as a flow
// whose speed alone is the tuner's bandwidth; flows in flight together share
// every resource they cross max-min fairly (MaxMinSolver) and are re-rated
// whenever one starts or ends.
//
// Resources: each GPU's NVLink to the NVSwitches (send, receive), each NIC
// (send, receive), and, when the fabric is oversubscribed, each leaf's and
// (three tiers) each pod's uplink (up, down). A transfer's demand on a
// resource is the bytes it moves there over its solo bandwidth time, scaled
// so that alone it runs exactly at the tuner's speed (docs/collectives.md,
// "Bandwidth sharing", gives the traffic of each algorithm).
//
// Degraded links (what-if --link-degrade, net/link_degradation.h) have their
// capacity divided by their factor, while a transfer's demands stay scaled
// to the nominal capacities: alone on a degraded part, a transfer that
// filled the part runs that factor slower. A degraded leaf gets uplink
// resources even in a non-blocking fabric (the others then never bind).
//
// Rank r sits on node r / gpus_per_node, local GPU r % gpus_per_node.
#pragma once

#include <cstdint>
#include <functional>
#include <queue>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "net/link_degradation.h"
#include "net/max_min_solver.h"
#include "net/nccl_tuner.h"
#include "net/network_model.h"

namespace prism {

class FlowNetwork final : public NetworkModel {
 public:
  // `cluster` sized to hold every rank the transfers name.
  // `degraded`: parts within the cluster (checked by the caller).
  explicit FlowNetwork(const ClusterSpec& cluster, NcclSelection selection = {},
                       std::vector<LinkDegradation> degraded = {});

  TransferId start(const Transfer& t, SimTime now) override;
  SimTime next_completion() const override;
  void take_completed(SimTime t, std::vector<TransferId>* done) override;
  bool folding_exact() const override;
  Status admit(const Transfer& t) const override;
  // The channels the tuner gives `t` (solo_cost): NCCL launches one block per
  // channel.
  int sms_held(const Transfer& t) const override;

  const NcclTuner& tuner() const { return tuner_; }
  // What the tuner says `t` costs alone (also what start() uses).
  CollectiveCost solo_cost(const Transfer& t) const;
  // The flow's current share of its solo speed, in (0, 1]; 0 if `id` is not
  // moving data (still in its latency, or done).
  double rate(TransferId id) const;
  int num_resources() const { return solver_.num_resources(); }

 private:
  struct InFlight {
    MaxMinSolver::FlowId flow = -1;  // -1 while in its latency phase
    std::vector<MaxMinSolver::Demand> demands;
    double remaining = 0;  // solo bandwidth time left, ns
    double rate = 0;
    SimTime last_update;
    std::uint32_t version = 0;
  };
  using Entry = std::tuple<SimTime, TransferId, std::uint32_t>;  // time, id, version
  using MinHeap = std::priority_queue<Entry, std::vector<Entry>, std::greater<>>;

  void build_resources();
  void add_resource(double capacity, double slowdown);
  std::vector<MaxMinSolver::Demand> demands(const Transfer& t, const CollectiveCost& cost) const;
  void add_bytes(std::vector<MaxMinSolver::Demand>* d, MaxMinSolver::ResourceId r, double b) const;
  void add_path(std::vector<MaxMinSolver::Demand>* d, int node_a, int rail_a, int node_b,
                int rail_b, double bytes) const;
  void rerate(SimTime now);
  void drop_stale() const;

  // Resource ids.
  MaxMinSolver::ResourceId nvl_tx(int gpu) const { return nvl_base_ + 2 * gpu; }
  MaxMinSolver::ResourceId nvl_rx(int gpu) const { return nvl_base_ + 2 * gpu + 1; }
  MaxMinSolver::ResourceId nic_tx(int nic) const { return nic_base_ + 2 * nic; }
  MaxMinSolver::ResourceId nic_rx(int nic) const { return nic_base_ + 2 * nic + 1; }
  int leaf_of(int node, int rail) const;
  int pod_of(int node) const;

  ClusterSpec cluster_;
  NcclTuner tuner_;
  MaxMinSolver solver_;
  std::vector<LinkDegradation> degraded_;
  std::vector<double> nominal_;  // per resource: its capacity before degradation
  MaxMinSolver::ResourceId nvl_base_ = 0, nic_base_ = 0, leaf_base_ = -1, pod_base_ = -1;
  int leaves_per_group_ = 1;

  TransferId next_id_ = 0;
  std::unordered_map<TransferId, InFlight> in_flight_;
  std::vector<TransferId> by_flow_;  // per solver flow id
  MinHeap latent_;                   // (end of latency, id, 0)
  mutable MinHeap completions_;      // (projected end, id, version); stale entries skipped
  std::vector<MaxMinSolver::FlowId> touched_;
};

}  // namespace prism
