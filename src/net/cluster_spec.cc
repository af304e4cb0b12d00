#include "net/cluster_spec.h"

#include <array>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "util/enum_names.h"

namespace prism {
namespace {

constexpr std::array<std::pair<GpuArch, std::string_view>, 4> kArchNames{{
    {GpuArch::kVolta, "volta"},
    {GpuArch::kAmpere, "ampere"},
    {GpuArch::kHopper, "hopper"},
    {GpuArch::kBlackwell, "blackwell"},
}};
constexpr std::array<std::pair<CpuVendor, std::string_view>, 3> kCpuNames{{
    {CpuVendor::kIntel, "intel"},
    {CpuVendor::kAmd, "amd"},
    {CpuVendor::kArm, "arm"},
}};

// NCCL counts an NVLink by its generation's constant, not by the link's line
// rate (src/graph/topo.h: SM80_NVLINK_BW 20.0, SM90_NVLINK_BW 20.6,
// SM100_NVLINK_BW 40.0 GB/s, NCCL 2.26 per link and direction).

// Sources in docs/collectives.md ("Cluster presets").
ClusterSpec dgx_a100() {
  ClusterSpec c;
  c.name = "dgx-a100";
  c.gpu_model = "A100-SXM4-80GB";
  c.arch = GpuArch::kAmpere;
  c.nvlink_links = 12;
  c.nvlink_link_GBps = nccl_nvlink_link_GBps(c.arch);
  c.nvls = false;
  c.pcie_GBps = 24;                // PCIe Gen4 x16
  c.cpu_vendor = CpuVendor::kAmd;  // 2x AMD EPYC 7742
  c.nics_per_node = 8;
  c.nic_Gbps = 200;  // ConnectX-6 HDR
  return c;
}

ClusterSpec dgx_h100() {
  ClusterSpec c;
  c.name = "dgx-h100";
  c.gpu_model = "H100-SXM5-80GB";
  c.arch = GpuArch::kHopper;
  c.nvlink_links = 18;
  c.nvlink_link_GBps = nccl_nvlink_link_GBps(c.arch);
  c.nvls = true;
  c.pcie_GBps = 48;                  // PCIe Gen5 x16
  c.cpu_vendor = CpuVendor::kIntel;  // 2x Xeon Platinum 8480C
  c.nics_per_node = 8;
  c.nic_Gbps = 400;  // ConnectX-7 NDR
  return c;
}

ClusterSpec hgx_h200() {
  ClusterSpec c = dgx_h100();
  c.name = "hgx-h200";
  c.gpu_model = "H200-SXM-141GB";
  return c;
}

ClusterSpec dgx_b200() {
  ClusterSpec c;
  c.name = "dgx-b200";
  c.gpu_model = "B200-SXM-180GB";
  c.arch = GpuArch::kBlackwell;
  c.nvlink_links = 18;
  c.nvlink_link_GBps = nccl_nvlink_link_GBps(c.arch);
  c.nvls = true;
  c.pcie_GBps = 48;                  // PCIe Gen5 x16
  c.cpu_vendor = CpuVendor::kIntel;  // 2x Xeon Platinum 8570
  c.nics_per_node = 8;
  c.nic_Gbps = 400;  // ConnectX-7
  return c;
}

Status field_error(std::string_view field, std::string_view what) {
  return Status::invalid_argument(fmt::format("{}: {}", field, what));
}

Status check_range(std::string_view field, double v, double lo, double hi) {
  if (!std::isfinite(v) || v < lo || v > hi)
    return field_error(field, fmt::format("must be in [{}, {}] (got {})", lo, hi, v));
  return Status::ok();
}

Status check_positive(std::string_view field, double v, double hi) {
  if (!std::isfinite(v) || v <= 0 || v > hi)
    return field_error(field, fmt::format("must be > 0 and at most {} (got {})", hi, v));
  return Status::ok();
}

}  // namespace

std::string_view to_string(GpuArch a) {
  return internal::enum_name(a, kArchNames);
}
std::string_view to_string(CpuVendor v) {
  return internal::enum_name(v, kCpuNames);
}

double nccl_nvlink_link_GBps(GpuArch a) {
  switch (a) {
    case GpuArch::kVolta:
    case GpuArch::kAmpere:
      return 20.0;
    case GpuArch::kHopper:
      return 20.6;
    case GpuArch::kBlackwell:
      return 40.0;
  }
  return 20.0;
}

const std::vector<std::string_view>& cluster_preset_names() {
  static const std::vector<std::string_view> kNames{"dgx-a100", "dgx-h100", "hgx-h200", "dgx-b200"};
  return kNames;
}

Result<ClusterSpec> cluster_preset(std::string_view name) {
  if (name == "dgx-a100") return dgx_a100();
  if (name == "dgx-h100") return dgx_h100();
  if (name == "hgx-h200") return hgx_h200();
  if (name == "dgx-b200") return dgx_b200();
  return Status::not_found(fmt::format("unknown cluster preset \"{}\" (presets: {})", name,
                                       fmt::join(cluster_preset_names(), ", ")));
}

Status validate_cluster(const ClusterSpec& c) {
  // Limits keep every derived quantity (ranks, resources, ns) far from overflow.
  constexpr int kMaxGpusPerNode = 72;  // an NVL72 rack
  constexpr int kMaxNodes = 1 << 17;
  if (!std::isnan(c.gpu_clock_cov))
    PRISM_RETURN_IF_ERROR(check_range("gpu.clock_cov", c.gpu_clock_cov, 0, 0.1));
  PRISM_RETURN_IF_ERROR(check_range("node.gpus", c.gpus_per_node, 1, kMaxGpusPerNode));
  PRISM_RETURN_IF_ERROR(check_range("node.nvlink_links", c.nvlink_links, 1, 72));
  PRISM_RETURN_IF_ERROR(check_positive("node.nvlink_link_GBps", c.nvlink_link_GBps, 1e4));
  PRISM_RETURN_IF_ERROR(check_positive("node.pcie_GBps", c.pcie_GBps, 1e4));
  PRISM_RETURN_IF_ERROR(check_range("network.nics_per_node", c.nics_per_node, 1, 64));
  if (c.nics_per_node > c.gpus_per_node)
    return field_error("network.nics_per_node",
                       fmt::format("{} NICs for {} GPUs: at most one NIC per GPU is modelled",
                                   c.nics_per_node, c.gpus_per_node));
  PRISM_RETURN_IF_ERROR(check_positive("network.nic_Gbps", c.nic_Gbps, 1e5));
  PRISM_RETURN_IF_ERROR(check_range("network.latency_us", c.network_latency_us, 0, 1e6));
  PRISM_RETURN_IF_ERROR(check_range("fabric.tiers", c.fabric_tiers, 1, 3));
  PRISM_RETURN_IF_ERROR(check_range("fabric.nodes_per_leaf", c.nodes_per_leaf, 1, 1 << 16));
  PRISM_RETURN_IF_ERROR(check_range("fabric.leaves_per_pod", c.leaves_per_pod, 1, 1 << 16));
  PRISM_RETURN_IF_ERROR(check_range("fabric.oversubscription", c.oversubscription, 1, 1024));
  PRISM_RETURN_IF_ERROR(check_range("num_nodes", c.num_nodes, 1, kMaxNodes));
  const std::int64_t leaf_groups = (c.num_nodes + c.nodes_per_leaf - 1) / c.nodes_per_leaf;
  if (c.fabric_tiers == 1 && leaf_groups > 1)
    return field_error("fabric.tiers",
                       fmt::format("a single switch tier holds {} nodes (fabric.nodes_per_leaf); "
                                   "{} nodes need 2 or 3 tiers",
                                   c.nodes_per_leaf, c.num_nodes));
  return Status::ok();
}

Status size_cluster(ClusterSpec* c, std::int64_t num_gpus, std::int64_t num_nodes) {
  if (num_gpus > 0 && num_nodes > 0)
    return Status::invalid_argument("give num_gpus or num_nodes, not both");
  if (num_gpus < 0) return field_error("num_gpus", fmt::format("must be > 0 (got {})", num_gpus));
  if (num_nodes < 0)
    return field_error("num_nodes", fmt::format("must be > 0 (got {})", num_nodes));
  constexpr std::int64_t kMaxGpus = std::int64_t{1} << 22;
  if (num_gpus > kMaxGpus || num_nodes > kMaxGpus)
    return field_error(num_gpus > 0 ? "num_gpus" : "num_nodes",
                       fmt::format("at most {} (got {})", kMaxGpus, std::max(num_gpus, num_nodes)));
  // A node of no GPUs holds no part of num_gpus (and divides by zero):
  // validate_cluster() names node.gpus.
  if (c->gpus_per_node < 1) return validate_cluster(*c);
  if (num_nodes > 0) {
    c->num_nodes = static_cast<int>(num_nodes);
  } else if (num_gpus > 0) {
    if (num_gpus < c->gpus_per_node) {
      c->gpus_per_node = static_cast<int>(num_gpus);  // part of one node
      c->nics_per_node = std::min(c->nics_per_node, c->gpus_per_node);
      c->num_nodes = 1;
    } else if (num_gpus % c->gpus_per_node != 0) {
      return field_error("num_gpus", fmt::format("{} is not a whole number of {}-GPU nodes",
                                                 num_gpus, c->gpus_per_node));
    } else {
      c->num_nodes = static_cast<int>(num_gpus / c->gpus_per_node);
    }
  }
  return validate_cluster(*c);
}

}  // namespace prism
