// The models one replay of a job runs with: the NCCL-faithful flow network
// of its cluster, roofline compute (for ops without a duration), PyTorch's
// caching allocator on its GPU, and NCCL's buffers. `replay`, `simulate`
// and `emulate` (twice: the prediction and the emulation) each build them.
#pragma once

#include "compute/compute_model.h"
#include "mem/memory_model.h"
#include "net/flow_network.h"
#include "replay/nccl_memory.h"
#include "replay/replay.h"

namespace prism {

struct ClusterModels {
  ClusterModels(const ClusterSpec& cluster, const NcclSelection& selection,
                const DeviceMemoryOptions& device, RooflineParams roofline = {})
      : network(cluster, selection), compute(roofline), memory(device), nccl(network.tuner()) {}
  ClusterModels(const ClusterModels&) = delete;
  ClusterModels& operator=(const ClusterModels&) = delete;

  ReplayModels view() { return ReplayModels{&network, &compute, &memory, &nccl}; }

  FlowNetwork network;
  RooflineModel compute;
  AllocatorMemoryModel memory;
  NcclMemory nccl;
};

}  // namespace prism
