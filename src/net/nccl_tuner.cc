#include "net/nccl_tuner.h"

#include <algorithm>
#include <cmath>
#include <span>

#include "util/check.h"

namespace prism {
namespace {

// ---- Constants of NCCL 2.2x, src/graph/tuning.cc (docs/collectives.md) ----
constexpr int kTree = static_cast<int>(NcclAlgo::kTree);
constexpr int kRing = static_cast<int>(NcclAlgo::kRing);
constexpr int kNvls = static_cast<int>(NcclAlgo::kNvls);
constexpr int kNvlsTree = static_cast<int>(NcclAlgo::kNvlsTree);
constexpr int kPat = static_cast<int>(NcclAlgo::kPat);
constexpr int kLL = static_cast<int>(NcclProto::kLL);
constexpr int kLL128 = static_cast<int>(NcclProto::kLL128);
constexpr int kSimple = static_cast<int>(NcclProto::kSimple);

// Base latency per algorithm and protocol, us.
constexpr float kBaseLat[kNumAlgos][kNumProtos] = {
    {6.8f, 14.0f, 8.4f},  // Tree
    {6.6f, 14.0f, 8.4f},  // Ring
    {0, 0, 0},            // CollNetDirect
    {0, 0, 0},            // CollNetChain
    {0, 0, 0},            // NVLS
    {0, 0, 0},            // NVLSTree
    {0, 0, 0},            // PAT (latency set directly)
};
// Hardware latency per step: [NVLink, PCI, network][algorithm][protocol], us.
enum Hw { kHwNvlink = 0, kHwPci = 1, kHwNet = 2 };
constexpr float kHwLat[3][kNumAlgos][kNumProtos] = {
    {{.6f, 1.25f, 4.0f},
     {.6f, 1.9f, 3.4f},
     {0, 0, 3.7f},
     {0, 0, 2.8f},
     {0, 0, 25.0f},
     {0, 0, 25.0f},
     {0, 0, 0}},
    {{1.0f, 1.9f, 4.0f},
     {1.0f, 2.5f, 5.7f},
     {0, 0, 3.7f},
     {0, 0, 2.8f},
     {0, 0, 0},
     {0, 0, 0},
     {0, 0, 0}},
    {{5.0f, 8.5f, 14.0f},
     {2.7f, 4.0f, 14.0f},
     {0, 0, 31.0f},
     {0, 0, 30.0f},
     {0, 0, 18.0f},
     {0, 0, 14.0f},
     {0, 0, 0}},
};
// Per-GPU-generation caps, indexed [Volta, Ampere, Hopper, Blackwell][1 node, 2 nodes, >2 nodes].
constexpr double kLLMaxBw[4][3] = {
    {39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {2 * 141.0, 2 * 45.0, 2 * 35.0}};
constexpr double kPerChMaxRingLL128Bw[4][3] = {
    {20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 36.7}, {2 * 36.7, 2 * 36.7, 2 * 36.7}};
constexpr double kPerChMaxTreeLL128Bw[4][3] = {
    {20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 29.0}, {2 * 36.7, 2 * 36.7, 2 * 29.0}};
constexpr double kPerChMaxTreeBw[4][3] = {
    {26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {2 * 38.7, 2 * 41.4, 2 * 36.0}};
// Tree all-reduce bandwidth correction by log2(bytes / 64), per protocol.
constexpr float kTreeCorrection[kNumProtos][23] = {
    {1.0f, 1.0f, 1.0f, 1.0f, .9f, .8f, .7f, .7f,  .7f,  .7f,  .6f, .5f,
     .4f,  .4f,  .5f,  .6f,  .7f, .8f, .9f, 1.0f, 1.0f, 1.0f, 1.0f},
    {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, .9f, .8f, .8f, .8f, .7f,  .6f, .6f,
     .6f,  .6f,  .6f,  .6f,  .8f,  .9f, .9f, .9f, .9f, 1.0f, 1.0f},
    {.9f, .9f, .9f, .9f, .9f, .9f, .9f, .8f, .7f, .6f, .6f, .5f,
     .5f, .5f, .5f, .6f, .7f, .8f, .7f, .7f, .8f, .9f, .9f},
};

// ---- Topology search (src/graph/search.cc) ----
// Per-channel speeds NCCL tries, fastest first, GB/s.
constexpr double kSpeedIntra[] = {40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0,
                                  9.0,  7.0,  6.0,  5.0,  4.0,  3.0};
constexpr double kSpeedInter[] = {48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0,
                                  7.0,  6.0,  5.0,  4.0,  3.0,  2.4,  1.2,  0.24, 0.12};
constexpr double kSm90SpeedIntra[] = {60.0, 50.0, 40.0, 30.0, 24.0, 20.0,
                                      15.0, 12.0, 11.0, 6.0,  3.0};
constexpr double kSm90SpeedInter[] = {48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5,
                                      15.0, 12.0, 6.0,  3.0,  2.4,  1.2,  0.24, 0.12};
constexpr double kSm100SpeedIntra[] = {90.0, 80.0, 70.0, 60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 19.0};
constexpr int kRingMaxChannels = 32;         // MAXCHANNELS / 2
constexpr int kNvlsMaxChannels = 32;         // NCCL_MAX_NVLS_ARITY
constexpr double kDupChannelsBw = 25.0;      // channels are doubled at or above this speed...
constexpr double kDupChannelsSm90Bw = 50.0;  // ...and, past Ampere with > 4 channels, this one
constexpr double kStopRatio = 0.49;          // lower speeds are tried while next / found > this
// NCCL_P2P_LL_THRESHOLD: send/recv of at most this many bytes use LL.
constexpr std::int64_t kP2pLLThreshold = 16384;

int arch_index(GpuArch a) {
  return static_cast<int>(a);
}

std::span<const double> speeds_intra(GpuArch a) {
  if (a == GpuArch::kBlackwell) return kSm100SpeedIntra;
  if (a == GpuArch::kHopper) return kSm90SpeedIntra;
  return kSpeedIntra;
}
std::span<const double> speeds_inter(GpuArch a) {  // sm100 uses sm90's
  return a >= GpuArch::kHopper ? std::span<const double>(kSm90SpeedInter) : kSpeedInter;
}

// NCCL's search over per-channel speeds: start at the fastest speed a single
// path allows (max_bw), find how many channels fit at that speed
// (channels_at), keep a strictly better total, stop once the total reaches
// total_bw or the next speed is under 0.49 of the one found.
template <typename ChannelsAt>
void search_speed(std::span<const double> speeds, double max_bw, double total_bw,
                  ChannelsAt channels_at, int* channels, double* speed) {
  *channels = 0;
  *speed = 0;
  for (double s : speeds) {
    if (s > max_bw + 1e-9) continue;
    if (*channels > 0 && s / *speed <= kStopRatio) break;
    const int n = channels_at(s);
    if (n > 0 && n * s > *channels * *speed + 1e-9) {
      *channels = n;
      *speed = s;
    }
    if (*channels * *speed >= total_bw - 1e-9) break;
  }
  if (*channels == 0) {  // NCCL's fallback: one slow channel
    *channels = 1;
    *speed = speeds.back();
  }
}

int log2i(std::int64_t n) {
  int l = 0;
  while (n >>= 1) ++l;
  return l;
}

SimTime us_to_time(double us) {
  if (!(us > 0)) return SimTime::zero();
  const double ns = std::ceil(us * 1000.0 - 1e-6);
  return ns >= static_cast<double>(kMaxOpDuration.ns) ? kMaxOpDuration
                                                      : SimTime{static_cast<std::int64_t>(ns)};
}

NcclFunc func_of(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kBroadcast:
      return NcclFunc::kBroadcast;
    case CollectiveKind::kReduce:
      return NcclFunc::kReduce;
    case CollectiveKind::kAllGather:
      return NcclFunc::kAllGather;
    case CollectiveKind::kReduceScatter:
      return NcclFunc::kReduceScatter;
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kBarrier:
    case CollectiveKind::kAllToAll:
      break;
  }
  return NcclFunc::kAllReduce;
}

}  // namespace

double nccl_bus_factor(CollectiveKind k, int n) {
  const double d = n;
  switch (k) {
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kBarrier:
      return 2.0 * (d - 1) / d;
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllToAll:
      return (d - 1) / d;
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kReduce:
      return 1.0;
  }
  return 1.0;
}

NcclTuner::NcclTuner(const ClusterSpec& cluster, NcclSelection selection)
    : cluster_(cluster), selection_(selection) {
  PRISM_CHECK(validate_cluster(cluster).is_ok(), "NcclTuner needs a valid cluster spec");
}

// Rings (and trees, searched with the same channel count): through NVLink
// inside a node, each channel entering and leaving a node through one NIC.
NcclTuner::Graph NcclTuner::ring_graph(const CommGeometry& g) const {
  const double nvlink = cluster_.nvlink_GBps();
  Graph gr;
  double speed = 0;
  if (g.num_nodes == 1) {
    search_speed(
        speeds_intra(cluster_.arch), nvlink, nvlink,
        [&](double s) { return std::min(kRingMaxChannels, static_cast<int>(nvlink / s + 1e-9)); },
        &gr.channels, &speed);
  } else {
    // The NICs next to a node's members (their rails), each reached over PCIe.
    const int ppn = g.max_ranks_per_node;
    const int nics = std::clamp(ppn * cluster_.nics_per_node / cluster_.gpus_per_node, 1,
                                cluster_.nics_per_node);
    const double path_bw = std::min(cluster_.pcie_GBps, cluster_.nic_GBps());
    search_speed(
        speeds_inter(cluster_.arch), path_bw, nvlink,
        [&](double s) {
          int n =
              std::min(kRingMaxChannels, nics * static_cast<int>(cluster_.nic_GBps() / s + 1e-9));
          // Every member but a channel's exit sends over NVLink.
          while (n > 0 && ppn > 1 && n * s * (ppn - 1) / ppn > nvlink + 1e-9) --n;
          return n;
        },
        &gr.channels, &speed);
  }
  gr.bw_intra = gr.bw_inter = speed;
  const bool dup = speed >= kDupChannelsBw && !(cluster_.arch > GpuArch::kAmpere &&
                                                speed < kDupChannelsSm90Bw && gr.channels > 4);
  if (dup) {
    const int channels = std::min(2 * gr.channels, kRingMaxChannels);
    const int div = (channels + gr.channels - 1) / gr.channels;
    gr.bw_intra /= div;
    gr.bw_inter /= div;
    gr.channels = channels;
  }
  return gr;
}

// NVLS: one channel per local GPU (each the head of one); every GPU carries
// each channel's bandwidth on its NVLink and its head channel twice. Between
// nodes each channel leaves through its head's NIC (shared by several heads
// when a node has fewer NICs than GPUs), and the search raises the
// inter-node speed up to twice the intra-node one.
NcclTuner::Graph NcclTuner::nvls_graph(const CommGeometry& g) const {
  const int local = std::min(g.max_ranks_per_node, kNvlsMaxChannels);
  const double nvlink = cluster_.nvlink_GBps();
  Graph gr;
  const std::span<const double> speeds =
      g.num_nodes == 1 ? speeds_intra(cluster_.arch) : speeds_inter(cluster_.arch);
  for (double s : speeds) {
    if (s * (local + 1) <= nvlink + 1e-9) {
      gr.bw_intra = s;
      break;
    }
  }
  if (gr.bw_intra == 0) return gr;
  gr.channels = local;
  gr.bw_inter = gr.bw_intra;
  if (g.num_nodes > 1) {
    // The heads' NICs (their rails) carry every channel: with fewer NICs
    // than heads, channels share a NIC, and the search lowers the speed
    // until they fit in it.
    const int nics = std::clamp(local * cluster_.nics_per_node / cluster_.gpus_per_node, 1,
                                cluster_.nics_per_node);
    const double path_bw =
        std::min(cluster_.pcie_GBps, cluster_.nic_GBps() * nics / static_cast<double>(local));
    gr.bw_inter = std::min(gr.bw_intra, path_bw);
    for (double s : speeds)
      if (s > gr.bw_inter && s < 2 * gr.bw_intra && s <= path_bw + 1e-9) gr.bw_inter = s;
  }
  return gr;
}

const NcclTuner::Tables& NcclTuner::tables(const CommGeometry& g) const {
  const std::uint64_t key = (static_cast<std::uint64_t>(g.num_ranks) << 40) |
                            (static_cast<std::uint64_t>(g.num_nodes) << 20) |
                            static_cast<std::uint64_t>(g.max_ranks_per_node);
  auto it = cache_.find(key);
  if (it == cache_.end()) it = cache_.emplace(key, build_tables(g)).first;
  return it->second;
}

// ncclTopoTuneModel for one communicator.
NcclTuner::Tables NcclTuner::build_tables(const CommGeometry& g) const {
  Tables t;
  const int n = g.num_ranks, nodes = g.num_nodes;
  if (n <= 1) return t;
  const int cc = arch_index(cluster_.arch);
  const int index2 = nodes <= 2 ? nodes - 1 : 2;
  const int index1 = nodes == 1 ? cc : (cluster_.cpu_vendor == CpuVendor::kAmd ? 1 : 0);
  const double ll_max_bw = kLLMaxBw[index1][index2];
  const double ppn = static_cast<double>(n) / nodes;
  // NVLS needs NVSwitch multicast (Hopper on), more than two local GPUs, and
  // between nodes CollNet (IB SHARP), which is not modelled: NVLSTree covers that.
  const bool nvls_ok =
      cluster_.nvls && cluster_.arch >= GpuArch::kHopper && g.max_ranks_per_node > 2;
  // Per-step network overhead of the proxy thread: 2 us on AMD hosts, else 1.
  const double net_overhead = cluster_.cpu_vendor == CpuVendor::kAmd ? 2.0 : 1.0;
  const double latency_inter = cluster_.network_latency_us;

  Graph graphs[kNumAlgos];
  graphs[kTree] = graphs[kRing] = graphs[kPat] = ring_graph(g);
  graphs[kNvls] = graphs[kNvlsTree] = nvls_graph(g);
  for (int a = 0; a < kNumAlgos; ++a) t.channels[a] = graphs[a].channels;
  t.comm_channels = std::min(2 * graphs[kRing].channels, 2 * kRingMaxChannels);

  for (int f = 0; f < kNumFuncs; ++f) {
    const auto func = static_cast<NcclFunc>(f);
    const bool ar = func == NcclFunc::kAllReduce;
    const bool ag_rs = func == NcclFunc::kAllGather || func == NcclFunc::kReduceScatter;
    const bool bcast_reduce = func == NcclFunc::kBroadcast || func == NcclFunc::kReduce;
    const int nsteps = ar ? 2 * (n - 1) : ag_rs ? n - 1 : n;
    for (int a = 0; a < kNumAlgos; ++a) {
      if (bcast_reduce && a != kRing) continue;
      if (ag_rs && a != kPat && a != kRing && a != kNvls) continue;
      if (ar && a == kPat) continue;
      if (a != kTree && a != kRing && a != kNvls && a != kNvlsTree && a != kPat)
        continue;  // CollNet
      if ((a == kNvls || a == kNvlsTree) && !nvls_ok) continue;
      if (a == kNvls && (nodes > 1 || (ag_rs && n > kNvlsMaxChannels))) continue;
      if (a == kNvlsTree && (nodes == 1 || !ar)) continue;
      if (a == kPat && !(ppn == 1 && nodes > 1)) continue;  // PAT: one GPU per node
      if (a == kTree && !ar) continue;
      const Graph& gr = graphs[a];
      for (int p = 0; p < kNumProtos; ++p) {
        if ((a == kNvls || a == kNvlsTree || a == kPat) && p != kSimple) continue;
        double bw = nodes <= 2 ? gr.bw_intra : gr.bw_inter;
        if (a == kNvls) bw = std::min(gr.bw_intra, gr.bw_inter);
        if (a == kNvlsTree) bw = std::min(gr.bw_intra, nodes <= 2 ? gr.bw_inter : gr.bw_inter / 2);
        double bus = gr.channels * bw;
        if (a == kRing && p == kLL) bus = std::min(ll_max_bw, bus * 0.5);
        if (a == kRing && p == kLL128)
          bus = std::min(bus * 0.92, gr.channels * kPerChMaxRingLL128Bw[cc][index2]);
        if (a == kTree && ar) bus = std::min(bus * .92, gr.channels * kPerChMaxTreeBw[cc][index2]);
        if (a == kTree && p == kLL) bus = std::min(bus * 1.0 / 3.8, ll_max_bw);
        if (a == kTree && p == kLL128)
          bus = std::min(bus * (nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0),
                         gr.channels * kPerChMaxTreeLL128Bw[cc][index2]);
        if (a == kPat) bus *= .75;
        // Bus bandwidth to algorithm bandwidth.
        if (a == kRing) {
          bus *= static_cast<double>(n) / nsteps;
        } else if (a == kNvls || a == kNvlsTree) {
          if (ar) bus *= 5.0 / 6.0;
        } else if (a != kPat) {
          bus *= .5;
        }
        t.bw[f][a][p] = static_cast<float>(bus);

        // Latency.
        double lat = kBaseLat[a][p];
        const Hw intra_hw = kHwNvlink;
        const Hw hw = nodes == 1 ? intra_hw : kHwNet;
        double intra_lat = kHwLat[intra_hw][a][p];
        double inter_lat =
            (ppn == 1 ? kHwLat[kHwNet][kTree][p] : kHwLat[kHwNet][a][p]) + latency_inter;
        if (p == kSimple) inter_lat += latency_inter;  // the flush
        if (a == kRing) {
          if (bcast_reduce) {
            lat += kHwLat[hw][a][p];  // one pipelined chain (graphs share channels)
          } else {
            double overhead = 0;
            if (nodes > 1) overhead = p == kSimple ? 3 * net_overhead : net_overhead;
            intra_lat = std::max(intra_lat, overhead);
            const int inter_steps = nodes == 1 ? 0 : ar ? 2 * (nodes - 1) : nodes - 1;
            lat += (nsteps - inter_steps) * intra_lat + inter_steps * inter_lat;
          }
        } else if (a == kTree) {
          lat += 2 * ((n / nodes - 1) * intra_lat + log2i(nodes) * inter_lat);
        } else if (a == kNvls) {
          lat = intra_lat + (nodes > 1 ? inter_lat : 0);
        } else if (a == kNvlsTree) {
          lat += intra_lat + 2 * log2i(nodes) * inter_lat;
        } else if (a == kPat) {
          lat = 8 + log2i(nodes) * (inter_lat / 3.5) + n * 2.8;
        }
        t.lat[f][a][p] = static_cast<float>(lat);
      }
    }
  }
  return t;
}

std::optional<CollectiveCost> NcclTuner::best(NcclFunc f, Bytes bytes,
                                              const CommGeometry& g) const {
  const Tables& t = tables(g);
  const int fi = static_cast<int>(f);
  std::optional<CollectiveCost> out;
  double best_time = 0;
  const int log_size = log2i(bytes.count >> 6);
  const double nb = static_cast<double>(bytes.count);
  for (int a = 0; a < kNumAlgos; ++a) {
    for (int p = 0; p < kNumProtos; ++p) {
      double bw = t.bw[fi][a][p];
      if (bw <= 0 || !selection_.allowed(f, static_cast<NcclAlgo>(a), static_cast<NcclProto>(p)))
        continue;
      double lat = t.lat[fi][a][p];
      if (a == kTree && f == NcclFunc::kAllReduce && bytes.count >= 64 && log_size < 23)
        bw *= kTreeCorrection[p][log_size];
      if (a == kRing && p == kSimple && g.num_nodes > 1 && f == NcclFunc::kAllReduce &&
          nb / (static_cast<double>(t.comm_channels) * g.num_ranks) >= 64)
        lat *= cluster_.arch < GpuArch::kAmpere ? 1.9 : 1.4;  // ring plateau
      const double bw_us = nb / (1000.0 * bw);
      const double time = lat + bw_us;
      if (!out || time < best_time) {
        best_time = time;
        out = CollectiveCost{static_cast<NcclAlgo>(a), static_cast<NcclProto>(p), t.channels[a],
                             us_to_time(lat), us_to_time(bw_us)};
      }
    }
  }
  return out;
}

std::optional<CollectiveCost> NcclTuner::collective(CollectiveKind k, Bytes bytes,
                                                    const CommGeometry& g) const {
  if (g.num_ranks <= 1) return CollectiveCost{NcclAlgo::kRing, NcclProto::kSimple, 0, {}, {}};
  if (k == CollectiveKind::kAllToAll) return all_to_all(bytes, g);
  if (k == CollectiveKind::kBarrier) bytes = Bytes{4};
  return best(func_of(k), bytes, g);
}

CollectiveCost NcclTuner::point_to_point(Bytes bytes, bool same_node) const {
  const int p = bytes.count <= kP2pLLThreshold ? kLL : kSimple;
  CollectiveCost c;
  c.algo = NcclAlgo::kP2p;
  c.proto = static_cast<NcclProto>(p);
  c.channels = 1;
  double lat = kBaseLat[kRing][p];
  double bw = 0;
  if (same_node) {
    lat += kHwLat[kHwNvlink][kRing][p];
    bw = cluster_.nvlink_GBps();
  } else {
    lat += kHwLat[kHwNet][kRing][p] + cluster_.network_latency_us;
    bw = cluster_.nic_goodput_GBps();
  }
  if (p == kLL) bw /= 4;  // LL carries 8 bytes of data per 16-byte line... and flags
  c.latency = us_to_time(lat);
  c.bandwidth_time = us_to_time(static_cast<double>(bytes.count) / (1000.0 * bw));
  return c;
}

// NCCL runs all-to-all as one group of n-1 sends and receives per rank. Each
// rank sends bytes/n to every peer: NVLink carries the peers on its node, its
// NIC the rest; the slower side sets the time.
CollectiveCost NcclTuner::all_to_all(Bytes bytes, const CommGeometry& g) const {
  const double n = g.num_ranks;
  const double local_peers = std::min(g.max_ranks_per_node, g.num_ranks) - 1;
  const double remote_peers = n - 1 - local_peers;
  const double chunk = static_cast<double>(bytes.count) / n;
  const double nvl_us = local_peers * chunk / (1000.0 * cluster_.nvlink_GBps());
  const double nic_share = std::max(1.0, static_cast<double>(g.max_ranks_per_node) *
                                             cluster_.nics_per_node / cluster_.gpus_per_node);
  const double nic_bw = nic_share * cluster_.nic_goodput_GBps() / g.max_ranks_per_node;
  const double net_us = remote_peers > 0 ? remote_peers * chunk / (1000.0 * nic_bw) : 0;
  double lat_net = g.num_nodes > 1 ? cluster_.network_latency_us : 0;
  const Hw hw = g.num_nodes > 1 ? kHwNet : kHwNvlink;
  // LL (a quarter of the bandwidth, less latency) or Simple, whichever is
  // faster: NCCL switches per peer at NCCL_P2P_LL_THRESHOLD, which for one
  // peer agrees.
  CollectiveCost c;
  c.algo = NcclAlgo::kP2p;
  c.channels = 1;
  bool first = true;
  for (int p : {kLL, kSimple}) {
    const double lat = kBaseLat[kRing][p] + kHwLat[hw][kRing][p] + lat_net;
    const double bw_us = std::max(nvl_us, net_us) * (p == kLL ? 4 : 1);
    if (first || lat + bw_us < c.latency.micros() + c.bandwidth_time.micros()) {
      c.proto = static_cast<NcclProto>(p);
      c.latency = us_to_time(lat);
      c.bandwidth_time = us_to_time(bw_us);
    }
    first = false;
  }
  return c;
}

}  // namespace prism
