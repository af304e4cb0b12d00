#include "replay/nccl_memory.h"

#include <algorithm>

#include "util/check.h"

namespace prism {
namespace {

// Point-to-point communicators live beside the replay's (non-negative) ids.
constexpr std::uint64_t kP2pKey = std::uint64_t{1} << 62;

NcclConnection connection_of(NcclAlgo a) {
  switch (a) {
    case NcclAlgo::kTree:
      return NcclConnection::kTree;
    case NcclAlgo::kRing:
      return NcclConnection::kRing;
    case NcclAlgo::kCollNetDirect:
    case NcclAlgo::kCollNetChain:
      return NcclConnection::kCollNet;
    case NcclAlgo::kNvls:
      return NcclConnection::kNvls;
    case NcclAlgo::kNvlsTree:
      return NcclConnection::kNvlsTree;
    case NcclAlgo::kPat:
      return NcclConnection::kPat;
    case NcclAlgo::kP2p:
      return NcclConnection::kP2p;
  }
  return NcclConnection::kRing;
}

}  // namespace

NcclMemory::NcclMemory(const NcclTuner& tuner, NcclFootprintConfig config)
    : tuner_(tuner), config_(config) {}

void NcclMemory::reset(int num_simulated_ranks) {
  bytes_.assign(static_cast<std::size_t>(num_simulated_ranks), 0);
  num_comms_.assign(static_cast<std::size_t>(num_simulated_ranks), 0);
  comms_.assign(static_cast<std::size_t>(num_simulated_ranks), {});
  groups_.clear();
}

NcclCommShape NcclMemory::shape(const CommGeometry& g) const {
  const ClusterSpec& cluster = tuner_.cluster();
  NcclCommShape s;
  s.num_ranks = std::max(g.num_ranks, 1);
  s.num_nodes = std::max(g.num_nodes, 1);
  s.local_ranks = std::clamp(g.max_ranks_per_node, 1, s.num_ranks);
  // A single rank's search finds MAXCHANNELS/2 rings, duplicated
  // (NVIDIA/nccl#2363 logs 64 channels); the tuner has no tables for it.
  s.channels = s.num_ranks > 1 ? std::max(tuner_.tables(g).comm_channels, 1) : kNcclMaxChannels;
  const NcclP2pChannels p2p = nccl_p2p_channels(config_, s.channels, s.num_ranks, s.num_nodes,
                                                s.local_ranks, cluster.nvlink_links);
  s.p2p_channels = p2p.channels;
  s.p2p_channels_per_peer = p2p.per_peer;
  // NVLS as the tuner allows it (NVSwitch multicast, Hopper on, > 2 local GPUs).
  if (config_.nvls_enable && cluster.nvls && cluster.arch >= GpuArch::kHopper &&
      s.local_ranks > 2) {
    s.nvls_heads = tuner_.tables(g).channels[static_cast<int>(NcclAlgo::kNvls)];
    if (s.nvls_heads > 0)
      s.nvls_channels =
          nccl_nvls_channels(config_, cluster.arch == GpuArch::kBlackwell, s.num_nodes > 1);
  }
  // p2p.cc p2pGetInfo / paths.cc ncclTopoCheckP2p: read mode for sm80 over NVLink.
  s.p2p_read = config_.p2p_read_enable < 0
                   ? cluster.arch == GpuArch::kAmpere && cluster.nvlink_links > 0
                   : config_.p2p_read_enable > 0;
  return s;
}

NcclConnection NcclMemory::connection(CollectiveKind k, Bytes bytes, const CommGeometry& g) const {
  if (k == CollectiveKind::kAllToAll) return NcclConnection::kP2p;
  const std::optional<CollectiveCost> cost = tuner_.collective(k, bytes, g);
  // No algorithm left by the selection: nothing beyond init; model a ring.
  NcclConnection c = cost ? connection_of(cost->algo) : NcclConnection::kRing;
  // NCCL_NVLS_ENABLE=0 with a tuner that still offers NVLS: NCCL would ring.
  if (!config_.nvls_enable && (c == NcclConnection::kNvls || c == NcclConnection::kNvlsTree))
    c = NcclConnection::kRing;
  return c;
}

std::int64_t NcclMemory::on_transfer(std::uint32_t srank, std::int64_t comm, const Transfer& t) {
  PRISM_CHECK(srank < bytes_.size(), "NcclMemory: simulated rank out of range (reset first)");
  if (t.kind == Transfer::Kind::kPointToPoint) {
    PRISM_CHECK(t.ranks.size() == 2, "point-to-point transfer needs {src, dst}");
    const std::int32_t src = t.ranks[0], dst = t.ranks[1];
    if (src == dst) return 0;  // a self send/recv is a local copy
    PRISM_CHECK(comm == src || comm == dst, "point-to-point comm must be the peer's rank");
    const NcclSide side = comm == dst ? NcclSide::kSend : NcclSide::kRecv;
    const bool same_node = t.num_nodes <= 1;
    const NcclCommShape s = shape(CommGeometry{2, same_node ? 1 : 2, same_node ? 2 : 1});
    NcclLinks need{};
    if (same_node) {
      need[static_cast<int>(side == NcclSide::kSend ? NcclLinkSet::kP2pSend
                                                    : NcclLinkSet::kP2pRecv)] =
          nccl_p2p_peer_bytes(config_, s, true, side);
    } else {
      need[static_cast<int>(side == NcclSide::kSend ? NcclLinkSet::kP2pNetSendPool
                                                    : NcclLinkSet::kP2pNetRecvPool)] =
          nccl_p2p_net_pool_bytes(config_, s, side);
    }
    return connect(srank, kP2pKey | static_cast<std::uint64_t>(comm), s, need);
  }
  PRISM_CHECK(comm >= 0, "collective comm ids are non-negative");
  const Need need = collective_need(t);
  return connect(srank, static_cast<std::uint64_t>(comm), need.shape, need.links);
}

NcclMemory::Need NcclMemory::collective_need(const Transfer& t) const {
  const CommGeometry g{static_cast<int>(t.ranks.size()), t.num_nodes, t.max_ranks_per_node};
  Need need;
  need.shape = shape(g);
  if (need.shape.num_ranks > 1)
    need.links = nccl_connection_links(config_, connection(t.collective, t.bytes, g), need.shape);
  return need;
}

NcclMemory::GroupConnect NcclMemory::connect_group(std::int64_t comm, const Need& need) {
  PRISM_CHECK(comm >= 0, "collective comm ids are non-negative");
  const auto c = static_cast<std::size_t>(comm);
  if (c >= groups_.size()) groups_.resize(c + 1);
  GroupConnect out;
  out.init = !groups_[c].initialized;
  out.bytes = connect(groups_[c], need.shape, need.links);
  return out;
}

std::int64_t NcclMemory::member_bytes(std::uint32_t srank, const GroupConnect& c) {
  PRISM_CHECK(srank < bytes_.size(), "NcclMemory: simulated rank out of range (reset first)");
  std::int64_t added = c.bytes;
  if (c.init && num_comms_[srank]++ == 0) added += config_.process_bytes;
  bytes_[srank] += added;
  return added;
}

std::int64_t NcclMemory::connect(CommState& st, const NcclCommShape& s,
                                 const NcclLinks& need) const {
  std::int64_t added = 0;
  NcclLinks want = need;
  if (!st.initialized) {
    st.initialized = true;
    added += nccl_comm_init_bytes(config_, s);
    if (!nccl_runtime_connect(config_)) {
      const NcclLinks eager = nccl_eager_links(config_, s);
      for (int i = 0; i < kNumNcclLinkSets; ++i) want[i] = std::max(want[i], eager[i]);
    }
  }
  for (int i = 0; i < kNumNcclLinkSets; ++i) {
    if (want[i] > st.links[i]) {
      added += want[i] - st.links[i];
      st.links[i] = want[i];
    }
  }
  return added;
}

std::int64_t NcclMemory::connect(std::uint32_t srank, std::uint64_t key, const NcclCommShape& s,
                                 const NcclLinks& need) {
  CommState& st = comms_[srank][key];
  std::int64_t added = 0;
  // The process's first communicator brings NCCL's share of the process.
  if (!st.initialized && num_comms_[srank]++ == 0) added += config_.process_bytes;
  added += connect(st, s, need);
  bytes_[srank] += added;
  return added;
}

}  // namespace prism
