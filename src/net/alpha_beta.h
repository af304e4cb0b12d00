// AlphaBetaModel: the placeholder network until the NCCL-faithful model lands.
// A collective over n ranks costs  steps * alpha + factor * bytes / bw  with
// ring factors (all-reduce 2(n-1)/n, all-gather / reduce-scatter / all-to-all
// (n-1)/n, broadcast / reduce 1) and bw, alpha taken from NVLink when the group
// sits in one node and from the NIC otherwise. Transfers never share
// bandwidth. Bandwidths are bus bandwidths as nccl-tests reports them.
#pragma once

#include <queue>
#include <vector>

#include "net/network_model.h"

namespace prism {

struct AlphaBetaParams {
  // Defaults: DGX H100 as nccl-tests measures it (ring busbw ~360 GB/s on
  // NVLink4; ~48 GB/s per 400 Gb/s NDR NIC; ~14 us for an 8-byte all-reduce
  // on 8 GPUs = 14 ring steps of ~1 us).
  Bandwidth intra_node_bw = Bandwidth::from_gbps(360);
  Bandwidth inter_node_bw = Bandwidth::from_gbps(48);
  SimTime intra_node_latency = SimTime{1000};
  SimTime inter_node_latency = SimTime{5000};
};

class AlphaBetaModel final : public NetworkModel {
 public:
  explicit AlphaBetaModel(AlphaBetaParams p = {}) : p_(p) {}
  // The time `t` takes alone, clamped to kMaxOpDuration.
  SimTime duration(const Transfer& t) const;

  TransferId start(const Transfer& t, SimTime now) override;
  SimTime next_completion() const override;
  void take_completed(SimTime t, std::vector<TransferId>* done) override;

 private:
  struct InFlight {
    SimTime end;
    TransferId id;
    bool operator>(const InFlight& o) const { return end != o.end ? end > o.end : id > o.id; }
  };
  AlphaBetaParams p_;
  TransferId next_id_ = 0;
  std::priority_queue<InFlight, std::vector<InFlight>, std::greater<>> in_flight_;
};

}  // namespace prism
