// The models one replay of a job runs with: the NCCL-faithful flow network
// of its cluster, roofline compute (for ops without a duration), PyTorch's
// caching allocator on its GPU, and NCCL's buffers. The replays of
// simulation/simulation.h and the emulation's coordinator
// (runtime/emulation.h) each build them from the same ModelOptions.
#pragma once

#include <vector>

#include "compute/compute_model.h"
#include "mem/memory_model.h"
#include "net/cluster_spec.h"
#include "net/flow_network.h"
#include "net/link_degradation.h"
#include "replay/nccl_memory.h"
#include "replay/replay.h"

namespace prism {

// What the models are built from, besides the cluster.
struct ModelOptions {
  NcclSelection nccl;          // NCCL_ALGO / NCCL_PROTO restrictions
  DeviceMemoryOptions device;  // each rank's GPU memory and allocator
  RooflineParams compute;      // for compute ops without a duration
  // Parts of the network at a fraction of their bandwidth (--link-degrade),
  // within the cluster.
  std::vector<LinkDegradation> degraded_links;
};

struct ClusterModels {
  ClusterModels(const ClusterSpec& cluster, const ModelOptions& o)
      : network(cluster, o.nccl, o.degraded_links),
        compute(o.compute),
        memory(o.device),
        nccl(network.tuner()) {}
  ClusterModels(const ClusterModels&) = delete;
  ClusterModels& operator=(const ClusterModels&) = delete;

  ReplayModels view() { return ReplayModels{&network, &compute, &memory, &nccl}; }

  FlowNetwork network;
  RooflineModel compute;
  AllocatorMemoryModel memory;
  NcclMemory nccl;
};

}  // namespace prism
