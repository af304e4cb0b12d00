#include "mem/nccl_footprint.h"

#include <algorithm>

namespace prism {
namespace {

constexpr std::int64_t kMiB = std::int64_t{1} << 20;

constexpr std::int64_t round_up(std::int64_t x, std::int64_t m) {
  return m <= 1 ? x : (x + m - 1) / m * m;
}
constexpr std::int64_t div_up(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}
int pow2_up(int x) {
  int p = 1;
  while (p < x) p <<= 1;
  return p;
}

// NCCL calls cuMem directly for NVLS memory, so it is always granular.
std::int64_t granular(const NcclFootprintConfig& c, std::int64_t bytes) {
  return bytes <= 0 ? 0 : round_up(bytes, c.granularity);
}

// One send and one receive connector.
std::int64_t pair_bytes(const NcclFootprintConfig& c, NcclTransport t, bool read) {
  return nccl_endpoint_bytes(c, t, NcclSide::kSend, read) +
         nccl_endpoint_bytes(c, t, NcclSide::kRecv, read);
}

int idx(NcclLinkSet s) {
  return static_cast<int>(s);
}

// Ring: per channel and node, L edges around a node alone, else L-1 inside
// and one in and one out through the network (transport/generic.cc
// ncclTransportRingConnect: recv from ring.prev, send to ring.next).
void add_ring(const NcclFootprintConfig& c, const NcclCommShape& s, NcclLinks* l) {
  const std::int64_t L = s.local_ranks;
  const std::int64_t intra = s.num_nodes == 1 ? L : L - 1;
  (*l)[idx(NcclLinkSet::kIntraForward)] =
      div_up(s.channels * intra * pair_bytes(c, NcclTransport::kP2p, s.p2p_read), L);
  if (s.num_nodes > 1)
    (*l)[idx(NcclLinkSet::kRingNet)] =
        div_up(s.channels * pair_bytes(c, NcclTransport::kNet, false), L);
}

// Tree: a chain through the node's GPUs (up and down, both directions) and,
// between nodes, a binary tree per channel: nodes-1 edges, a send and a
// receive connector at both ends (ncclTransportTreeConnect).
void add_tree(const NcclFootprintConfig& c, const NcclCommShape& s, NcclLinks* l) {
  const std::int64_t L = s.local_ranks;
  const std::int64_t chain =
      div_up(s.channels * (L - 1) * pair_bytes(c, NcclTransport::kP2p, s.p2p_read), L);
  (*l)[idx(NcclLinkSet::kIntraForward)] = chain;
  (*l)[idx(NcclLinkSet::kIntraReverse)] = chain;
  if (s.num_nodes > 1)
    (*l)[idx(NcclLinkSet::kTreeNet)] =
        div_up(s.channels * 2 * (s.num_nodes - 1) * pair_bytes(c, NcclTransport::kNet, false),
               std::int64_t{s.num_nodes} * L);
}

// PAT (one rank per node): for mask = 1, 2, 4, ... < n, send to and receive
// from rank +- mask on every channel (ncclTransportPatConnect); mask 1 is
// the ring's edge. NCCL 2.28 has no PAT with more ranks per node.
void add_pat(const NcclFootprintConfig& c, const NcclCommShape& s, NcclLinks* l) {
  if (s.local_ranks > 1) return;
  const std::int64_t n = s.num_ranks;
  std::int64_t peers = 0;
  for (std::int64_t mask = 1; mask < n; mask <<= 1) peers += (2 * mask) % n == 0 ? 1 : 2;
  const std::int64_t pair = pair_bytes(c, NcclTransport::kNet, false);
  (*l)[idx(NcclLinkSet::kRingNet)] = s.channels * pair;
  (*l)[idx(NcclLinkSet::kPatNet)] = s.channels * (peers - 1) * pair;
}

// NVLS: each rank binds a unicast buffer of nvlsChannels x 2 x
// (NVLS chunk x NCCL_STEPS) per head to the multicast group
// (nvls.cc ncclNvlsBufferSetup); the multicast object holds no memory.
void add_nvls(const NcclFootprintConfig& c, const NcclCommShape& s, NcclLinks* l) {
  (*l)[idx(NcclLinkSet::kNvlsBuffer)] =
      granular(c, std::int64_t{s.nvls_channels} * 2 * c.nvls_chunksize * kNcclSteps * s.nvls_heads);
}

// NVLS tree: per NVLS channel a binary tree between the nodes' heads
// (nvls.cc ncclNvlsTreeConnect), network connectors like the tree's.
void add_nvls_tree(const NcclFootprintConfig& c, const NcclCommShape& s, NcclLinks* l) {
  add_nvls(c, s, l);
  if (s.num_nodes > 1)
    (*l)[idx(NcclLinkSet::kNvlsTreeNet)] =
        div_up(std::int64_t{s.nvls_channels} * 2 * (s.num_nodes - 1) *
                   pair_bytes(c, NcclTransport::kNet, false),
               std::int64_t{s.num_nodes} * s.local_ranks);
}

// All-to-all: a send and a receive with every peer on p2p channels per
// peer; the network peers share the pools.
void add_all_to_all(const NcclFootprintConfig& c, const NcclCommShape& s, NcclLinks* l) {
  const std::int64_t local_peers = s.local_ranks - 1;
  (*l)[idx(NcclLinkSet::kP2pSend)] = local_peers * nccl_p2p_peer_bytes(c, s, true, NcclSide::kSend);
  (*l)[idx(NcclLinkSet::kP2pRecv)] = local_peers * nccl_p2p_peer_bytes(c, s, true, NcclSide::kRecv);
  if (s.num_ranks > s.local_ranks) {
    (*l)[idx(NcclLinkSet::kP2pNetSendPool)] = nccl_p2p_net_pool_bytes(c, s, NcclSide::kSend);
    (*l)[idx(NcclLinkSet::kP2pNetRecvPool)] = nccl_p2p_net_pool_bytes(c, s, NcclSide::kRecv);
  }
}

void merge_max(NcclLinks* into, const NcclLinks& from) {
  for (int i = 0; i < kNumNcclLinkSets; ++i) (*into)[i] = std::max((*into)[i], from[i]);
}

struct GpuMemory {
  std::string_view name;
  std::int64_t usable_mib;
  std::int64_t context_mib;
};

// Usable: PyTorch's "total capacity" in OOM messages, GiB x 1024 rounded to
// MiB. Context: ~520 MiB measured on H100, scaled by SM count (the driver
// reserves local memory per resident thread). docs/memory.md has sources.
constexpr GpuMemory kGpus[] = {
    {"A100-SXM4-40GB", 40335, 426},   // 39.39 GiB; 108 SMs
    {"A100-SXM4-80GB", 81152, 426},   // 79.25 GiB
    {"H100-SXM5-80GB", 81008, 520},   // 79.11 GiB; 132 SMs
    {"H200-SXM-141GB", 143155, 520},  // 139.80 GiB
    {"B200-SXM-180GB", 182630, 584},  // 178.35 GiB; 148 SMs
};

const GpuMemory* find_gpu(std::string_view name) {
  for (const GpuMemory& g : kGpus)
    if (g.name == name) return &g;
  return nullptr;
}

}  // namespace

bool nccl_runtime_connect(const NcclFootprintConfig& c) {
  return c.runtime_connect && c.cumem_enable;
}

NcclP2pChannels nccl_p2p_channels(const NcclFootprintConfig& c, int comm_channels, int num_ranks,
                                  int num_nodes, int local_ranks, int nvlink_links) {
  int p2p = std::max({std::min(comm_channels, c.max_p2p_nchannels), c.min_p2p_nchannels, 1});
  int min_channels = p2p;
  if (local_ranks > 1) min_channels = std::min(min_channels, 2 * std::max(1, nvlink_links));
  if (num_nodes > 1 && num_ranks > local_ranks) {
    int net = c.nchannels_per_net_peer;
    if (net <= 0) {
      net = 2;
      while (net * std::int64_t{num_ranks} > std::int64_t{p2p} * 4 && net > 1) net /= 2;
    }
    min_channels = std::min(min_channels, net);
  }
  NcclP2pChannels out;
  out.channels = std::min(pow2_up(p2p), kNcclMaxChannels);
  out.per_peer = std::min(pow2_up(min_channels), out.channels);
  return out;
}

int nccl_nvls_channels(const NcclFootprintConfig& c, bool blackwell, bool multi_node) {
  if (c.nvls_nchannels > 0) return std::min(c.nvls_nchannels, kNcclMaxChannels);
  if (!blackwell) return 16;    // NVLS_NCHANNELS_SM90
  return multi_node ? 32 : 24;  // NVLS_NCHANNELS_SM100, _SM100_NVL
}

std::int64_t nccl_p2p_chunk_bytes(const NcclFootprintConfig& c, int num_nodes) {
  std::int64_t chunk = num_nodes > 1 ? c.p2p_net_chunksize : c.p2p_nvl_chunksize;
  if (chunk * kNcclSteps > c.buffsize) chunk = c.buffsize / kNcclSteps;
  return chunk;
}

std::int64_t nccl_device_alloc_bytes(const NcclFootprintConfig& c, std::int64_t bytes) {
  if (bytes <= 0) return 0;
  return c.cumem_enable ? round_up(bytes, c.granularity) : bytes;
}

std::int64_t nccl_comm_init_bytes(const NcclFootprintConfig& c, const NcclCommShape& s) {
  const std::int64_t n = s.num_ranks, L = s.local_ranks;
  // initChannel: the shared peer table (one ncclDevChannelPeer per rank),
  // this communicator's peer pointers (ranks + CollNet root + NVLS heads)
  // and the ring's rank order; ncclTopoComputeP2pChannels initializes the
  // p2p channels beyond the collective ones.
  const std::int64_t per_channel = nccl_device_alloc_bytes(c, n * kNcclDevChannelPeerBytes) +
                                   nccl_device_alloc_bytes(c, (n + 1 + L) * 8) +
                                   nccl_device_alloc_bytes(c, n * 4);
  std::int64_t total = std::max(s.channels, s.p2p_channels) * per_channel;
  // devCommSetup: ncclKernelCommAndChannels and rankToLocalRank.
  total += nccl_device_alloc_bytes(c, kNcclDevCommBytes) + nccl_device_alloc_bytes(c, n * 4);
  if (s.nvls_channels > 0) {
    // ncclNvlsSetup: per channel the heads' peer structures, and the credits.
    total += s.nvls_channels * nccl_device_alloc_bytes(c, L * kNcclDevChannelPeerBytes);
    total += granular(c, std::int64_t{s.nvls_channels} * 2 * kNcclNvlsCreditBytes * s.nvls_heads);
  }
  return total;
}

std::int64_t nccl_endpoint_bytes(const NcclFootprintConfig& c, NcclTransport t, NcclSide side,
                                 bool p2p_read) {
  if (t == NcclTransport::kP2p) {
    // p2p.cc p2pSendSetup / p2pRecvSetup, ALIGN_SIZE(size, CUDA_IPC_MIN).
    std::int64_t bytes = kNcclConnCtrlBytes;
    if (side == NcclSide::kRecv)
      bytes += c.ll_buffsize + c.ll128_buffsize + (p2p_read ? 0 : c.buffsize);
    else if (p2p_read)
      bytes += c.buffsize;
    return nccl_device_alloc_bytes(c, round_up(bytes, kCudaIpcMin));
  }
  // net.cc recvProxyConnect / sendProxyConnect: NCCL_NET_MAP_DEVMEM.
  if (!c.net_gdr) return 0;
  if (side == NcclSide::kRecv)
    return nccl_device_alloc_bytes(c, c.ll_buffsize + c.ll128_buffsize + c.buffsize);
  if (!c.net_gdr_read) return 0;
  const std::int64_t bytes = c.ll128_buffsize + c.buffsize;
  return nccl_device_alloc_bytes(c, c.cumem_enable ? round_up(bytes, kCudaIpcMin) : bytes);
}

std::int64_t nccl_p2p_net_pool_bytes(const NcclFootprintConfig& c, const NcclCommShape& s,
                                     NcclSide side) {
  const bool on_gpu = side == NcclSide::kRecv ? c.net_gdr : c.net_gdr && c.net_gdr_read;
  if (!on_gpu) return 0;
  return nccl_device_alloc_bytes(
      c, std::int64_t{s.p2p_channels} * kNcclSharedSteps * nccl_p2p_chunk_bytes(c, s.num_nodes));
}

std::int64_t nccl_p2p_peer_bytes(const NcclFootprintConfig& c, const NcclCommShape& s,
                                 bool same_node, NcclSide side) {
  if (!same_node) return 0;
  return s.p2p_channels_per_peer * nccl_endpoint_bytes(c, NcclTransport::kP2p, side, s.p2p_read);
}

std::string_view to_string(NcclConnection c) {
  switch (c) {
    case NcclConnection::kRing:
      return "ring";
    case NcclConnection::kTree:
      return "tree";
    case NcclConnection::kNvls:
      return "nvls";
    case NcclConnection::kNvlsTree:
      return "nvls_tree";
    case NcclConnection::kCollNet:
      return "collnet";
    case NcclConnection::kPat:
      return "pat";
    case NcclConnection::kP2p:
      return "p2p";
  }
  return "?";
}

NcclLinks nccl_connection_links(const NcclFootprintConfig& c, NcclConnection conn,
                                const NcclCommShape& s) {
  NcclLinks l{};
  if (s.num_ranks <= 1) return l;  // NCCL connects nothing on a single rank
  switch (conn) {
    case NcclConnection::kRing:
      add_ring(c, s, &l);
      break;
    case NcclConnection::kTree:
      add_tree(c, s, &l);
      break;
    case NcclConnection::kNvls:
      if (s.nvls_channels > 0) add_nvls(c, s, &l);
      break;
    case NcclConnection::kNvlsTree:
      if (s.nvls_channels > 0) add_nvls_tree(c, s, &l);
      break;
    case NcclConnection::kCollNet:
      break;
    case NcclConnection::kPat:
      add_pat(c, s, &l);
      break;
    case NcclConnection::kP2p:
      add_all_to_all(c, s, &l);
      break;
  }
  return l;
}

std::int64_t nccl_connection_bytes(const NcclFootprintConfig& c, NcclConnection conn,
                                   const NcclCommShape& s) {
  std::int64_t total = 0;
  for (std::int64_t b : nccl_connection_links(c, conn, s)) total += b;
  return total;
}

NcclLinks nccl_eager_links(const NcclFootprintConfig& c, const NcclCommShape& s) {
  NcclLinks l{};
  if (s.num_ranks > 1) {
    merge_max(&l, nccl_connection_links(c, NcclConnection::kRing, s));
    merge_max(&l, nccl_connection_links(c, NcclConnection::kTree, s));
    if (s.local_ranks == 1 && s.num_nodes > 1)
      merge_max(&l, nccl_connection_links(c, NcclConnection::kPat, s));
    merge_max(&l, nccl_connection_links(c, NcclConnection::kNvlsTree, s));
  }
  // init.cc: ncclProxyMsgSharedInit -> net.cc proxySharedInit, send side,
  // CUDA memory, even for a single rank (NVIDIA/nccl#2363).
  NcclFootprintConfig on_gpu = c;
  on_gpu.net_gdr = on_gpu.net_gdr_read = true;
  l[idx(NcclLinkSet::kP2pNetSendPool)] = nccl_p2p_net_pool_bytes(on_gpu, s, NcclSide::kSend);
  return l;
}

std::int64_t usable_device_bytes(std::string_view gpu) {
  const GpuMemory* g = find_gpu(gpu);
  return g == nullptr ? 0 : g->usable_mib * kMiB;
}

std::int64_t gpu_total_memory(std::string_view gpu) {
  return usable_device_bytes(gpu);
}

std::int64_t cuda_context_bytes(std::string_view gpu) {
  const GpuMemory* g = find_gpu(gpu);
  return g == nullptr ? 0 : g->context_mib * kMiB;
}

}  // namespace prism
