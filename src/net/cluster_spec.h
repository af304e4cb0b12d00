// ClusterSpec: the machine a job runs on, as NCCL's topology detection and a
// fat-tree fabric see it. Built from a preset (dgx-a100, dgx-h100, hgx-h200,
// dgx-b200) or a YAML file (net/cluster_yaml.h), then sized with num_gpus or
// num_nodes. Fields carry their units in their names; docs/collectives.md
// gives the source of every preset value.
//
// Ranks fill GPUs in order (rank r on node r / gpus_per_node, local GPU
// r % gpus_per_node), as torchrun and SLURM place them. Local GPU g uses NIC
// g * nics_per_node / gpus_per_node (its rail).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace prism {

// Sustained fraction of a NIC's line rate that transfers reach (nccl-tests
// sendrecv over one 400 Gb/s NDR NIC: 46-49 GB/s of 50).
inline constexpr double kNicGoodput = 0.96;

// The GPU generation NCCL's tuner indexes its tables by (compute capability
// 7.x, 8.x, 9.x, 10.x).
enum class GpuArch : std::uint8_t { kVolta, kAmpere, kHopper, kBlackwell };
// The host CPU, which sets NCCL's per-step network overhead and its LL
// bandwidth ceiling across nodes.
enum class CpuVendor : std::uint8_t { kIntel, kAmd, kArm };

std::string_view to_string(GpuArch a);
std::string_view to_string(CpuVendor v);
// NCCL's bandwidth of one NVLink of this generation, per direction, GB/s.
double nccl_nvlink_link_GBps(GpuArch a);

struct ClusterSpec {
  std::string name;
  std::string gpu_model;  // e.g. "H100-SXM5-80GB"; informational
  GpuArch arch = GpuArch::kHopper;
  // The chip-to-chip CoV of the GPUs' sustained clock, this cluster's own
  // (gpu.clock_cov; e.g. from nvidia-smi clocks under load), over the GPU
  // preset's GpuSpec::sustained_clock_cov; NaN: the preset's.
  double gpu_clock_cov = std::numeric_limits<double>::quiet_NaN();

  // Node.
  int gpus_per_node = 8;
  int nvlink_links = 18;        // NVLink links per GPU, all to NVSwitches
  double nvlink_link_GBps = 0;  // per link and direction as NCCL's topology counts it
  bool nvls = false;            // NVLink SHARP (NVSwitch multicast / in-switch reduction)
  double pcie_GBps = 48;        // GPU-to-NIC PCIe path as NCCL counts it (Gen4 x16 24, Gen5 x16 48)
  CpuVendor cpu_vendor = CpuVendor::kIntel;

  // Network: one NIC per rail; local GPU g uses rail g * nics_per_node / gpus_per_node.
  int nics_per_node = 8;
  double nic_Gbps = 400;          // line rate of one NIC, gigabits per second
  double network_latency_us = 0;  // added to every inter-node step (NCCL's latencyInter)
  bool rail_optimized = true;     // rail r of every node in a leaf group meets on leaf r

  // Fat tree: tier 1 = one switch; tier 2 = leaves + spines; tier 3 adds a core.
  int fabric_tiers = 2;
  int nodes_per_leaf = 32;  // nodes under one leaf group (one leaf per rail when rail-optimized)
  int leaves_per_pod = 32;  // tier 3: leaf groups under one spine group
  double oversubscription = 1.0;  // down:up bandwidth at each tier above the leaf, >= 1

  // Size.
  int num_nodes = 1;

  int num_gpus() const { return num_nodes * gpus_per_node; }
  double nvlink_GBps() const { return nvlink_links * nvlink_link_GBps; }
  double nic_GBps() const { return nic_Gbps / 8.0; }
  double nic_goodput_GBps() const { return nic_GBps() * kNicGoodput; }
  int rail_of_gpu(int local_gpu) const { return local_gpu * nics_per_node / gpus_per_node; }
};

// Names of the presets, in a fixed order.
const std::vector<std::string_view>& cluster_preset_names();
// A preset sized to one node, or not_found naming the presets.
Result<ClusterSpec> cluster_preset(std::string_view name);
// Checks every field; the error names the field ("network.nic_Gbps: must be > 0").
Status validate_cluster(const ClusterSpec& c);
// Sets the size from a GPU count (a whole number of nodes, or fewer GPUs than
// one node, which then has that many) or a node count; exactly one may be > 0.
Status size_cluster(ClusterSpec* c, std::int64_t num_gpus, std::int64_t num_nodes);

}  // namespace prism
