// NCCL's device memory formulas against figures worked by hand from NCCL
// 2.28's source (docs/memory.md, "Fixed footprints"), their scaling with
// the communicator, and the environment knobs.
#include "mem/nccl_footprint.h"

#include <gtest/gtest.h>

namespace prism {
namespace {

constexpr std::int64_t kMiB = std::int64_t{1} << 20;

// A DGX H100 node as NCCL sees a TP8 communicator: 24 collective channels,
// 32 p2p channels (32 per peer), 16 NVLS channels over 8 heads.
NcclCommShape tp8_h100() {
  NcclCommShape s;
  s.num_ranks = 8;
  s.num_nodes = 1;
  s.local_ranks = 8;
  s.channels = 24;
  s.p2p_channels = 32;
  s.p2p_channels_per_peer = 32;
  s.nvls_channels = 16;
  s.nvls_heads = 8;
  return s;
}

// A data-parallel communicator over `nodes` DGX H100 nodes: 16 channels.
NcclCommShape dp_h100(int nodes) {
  NcclCommShape s = tp8_h100();
  s.num_nodes = nodes;
  s.num_ranks = 8 * nodes;
  s.channels = 16;
  s.p2p_channels = 16;
  s.p2p_channels_per_peer = 1;
  return s;
}

std::int64_t link(const NcclLinks& l, NcclLinkSet s) {
  return l[static_cast<int>(s)];
}

TEST(NcclFootprint, DefaultBufferSizesAreNcclsDefines) {
  EXPECT_EQ(kNcclDefaultLlBuffSize, 524288);
  EXPECT_EQ(kNcclDefaultLl128BuffSize, 4915200);
  EXPECT_EQ(kNcclDefaultBuffSize, 4 * kMiB);
}

// NVIDIA/nccl#1685 logs exactly these two allocation sizes for intra-node
// p2p connections on H100 (10485760 and 2097152 bytes).
TEST(NcclFootprint, P2pTransportConnectors) {
  const NcclFootprintConfig c;
  EXPECT_EQ(nccl_endpoint_bytes(c, NcclTransport::kP2p, NcclSide::kRecv, false), 10 * kMiB);
  EXPECT_EQ(nccl_endpoint_bytes(c, NcclTransport::kP2p, NcclSide::kSend, false), 2 * kMiB);
  // Read mode (A100 over NVLink) moves the 4 MiB Simple buffer to the sender.
  EXPECT_EQ(nccl_endpoint_bytes(c, NcclTransport::kP2p, NcclSide::kRecv, true), 6 * kMiB);
  EXPECT_EQ(nccl_endpoint_bytes(c, NcclTransport::kP2p, NcclSide::kSend, true), 6 * kMiB);
}

TEST(NcclFootprint, NetTransportConnectorsFollowGdr) {
  NcclFootprintConfig c;
  EXPECT_EQ(nccl_endpoint_bytes(c, NcclTransport::kNet, NcclSide::kRecv, false), 10 * kMiB);
  EXPECT_EQ(nccl_endpoint_bytes(c, NcclTransport::kNet, NcclSide::kSend, false), 10 * kMiB);
  c.net_gdr_read = false;  // LL128 and Simple to host memory on the sender
  EXPECT_EQ(nccl_endpoint_bytes(c, NcclTransport::kNet, NcclSide::kSend, false), 0);
  EXPECT_EQ(nccl_endpoint_bytes(c, NcclTransport::kNet, NcclSide::kRecv, false), 10 * kMiB);
  c.net_gdr = false;
  EXPECT_EQ(nccl_endpoint_bytes(c, NcclTransport::kNet, NcclSide::kRecv, false), 0);
}

TEST(NcclFootprint, CommInitOfTp8OnH100) {
  // 32 channels x 3 allocations of one granule + devComm + rankToLocalRank
  // + NVLS: 16 channels of head peers + the credits.
  EXPECT_EQ(nccl_comm_init_bytes(NcclFootprintConfig{}, tp8_h100()), (192 + 4 + 32 + 2) * kMiB);
}

TEST(NcclFootprint, RingInOneNodeIsOneConnectorPairPerChannel) {
  const NcclFootprintConfig c;
  // 24 channels x (10 MiB receive + 2 MiB send).
  EXPECT_EQ(nccl_connection_bytes(c, NcclConnection::kRing, tp8_h100()), 288 * kMiB);
  NcclCommShape s = tp8_h100();
  s.channels = 8;
  EXPECT_EQ(nccl_connection_bytes(c, NcclConnection::kRing, s), 96 * kMiB);
}

TEST(NcclFootprint, RingPerRankDoesNotGrowWithRanks) {
  const NcclFootprintConfig c;
  // 16 channels x (7 NVLink pairs of 12 MiB + 1 network pair of 20 MiB) / 8.
  const std::int64_t at16 = nccl_connection_bytes(c, NcclConnection::kRing, dp_h100(2));
  EXPECT_EQ(at16, 208 * kMiB);
  EXPECT_EQ(nccl_connection_bytes(c, NcclConnection::kRing, dp_h100(128)), at16);
  EXPECT_EQ(nccl_connection_bytes(c, NcclConnection::kRing, dp_h100(1024)), at16);
}

TEST(NcclFootprint, TreeAddsChildrenAcrossNodes) {
  const NcclFootprintConfig c;
  const NcclLinks two = nccl_connection_links(c, NcclConnection::kTree, dp_h100(2));
  const NcclLinks many = nccl_connection_links(c, NcclConnection::kTree, dp_h100(128));
  // Inside the node: a chain both ways, 7 pairs per channel.
  EXPECT_EQ(link(many, NcclLinkSet::kIntraForward), 168 * kMiB);
  EXPECT_EQ(link(many, NcclLinkSet::kIntraReverse), 168 * kMiB);
  // Between nodes: 2(nodes-1)/nodes network pairs per node and channel.
  EXPECT_EQ(link(two, NcclLinkSet::kTreeNet), 16 * 20 * kMiB / 8);  // 1 pair per node
  EXPECT_EQ(link(many, NcclLinkSet::kTreeNet), 16 * 2 * 127 * 20 * kMiB / 1024);
  EXPECT_LT(link(many, NcclLinkSet::kTreeNet), 2 * link(two, NcclLinkSet::kTreeNet));
  // No network edges inside one node.
  EXPECT_EQ(
      link(nccl_connection_links(c, NcclConnection::kTree, tp8_h100()), NcclLinkSet::kTreeNet), 0);
}

TEST(NcclFootprint, InitGrowsWithRanksThroughPeerTables) {
  const NcclFootprintConfig c;
  // 128 nodes: 16 channels x 3 granules + 2 + 2 + NVLS 34 MiB.
  EXPECT_EQ(nccl_comm_init_bytes(c, dp_h100(128)), (96 + 4 + 34) * kMiB);
  // 1,024 nodes: the shared peer table is 8192 x 608 bytes = 3 granules.
  EXPECT_EQ(nccl_comm_init_bytes(c, dp_h100(1024)), (160 + 4 + 34) * kMiB);
}

TEST(NcclFootprint, NvlsGrowsWithLocalHeads) {
  const NcclFootprintConfig c;
  NcclCommShape s = tp8_h100();
  // 16 channels x 2 x (128 KiB x 8 steps) x 8 heads.
  EXPECT_EQ(nccl_connection_bytes(c, NcclConnection::kNvls, s), 256 * kMiB);
  s.local_ranks = s.num_ranks = s.nvls_heads = 4;
  EXPECT_EQ(nccl_connection_bytes(c, NcclConnection::kNvls, s), 128 * kMiB);
  s.nvls_channels = 0;  // no NVLS support
  EXPECT_EQ(nccl_connection_bytes(c, NcclConnection::kNvls, s), 0);
  // NVLS tree: the buffer plus tree edges between nodes.
  const NcclLinks t = nccl_connection_links(c, NcclConnection::kNvlsTree, dp_h100(128));
  EXPECT_EQ(link(t, NcclLinkSet::kNvlsBuffer), 256 * kMiB);
  EXPECT_EQ(link(t, NcclLinkSet::kNvlsTreeNet), 16 * 2 * 127 * 20 * kMiB / 1024);
}

TEST(NcclFootprint, PatConnectsBinomialPeers) {
  const NcclFootprintConfig c;
  NcclCommShape s;
  s.num_ranks = s.num_nodes = 8;
  s.channels = 4;
  // masks 1, 2, 4: peers +-1, +-2 and 4 (one peer): 5, of which the ring's 1.
  const NcclLinks l = nccl_connection_links(c, NcclConnection::kPat, s);
  EXPECT_EQ(link(l, NcclLinkSet::kRingNet), 4 * 20 * kMiB);
  EXPECT_EQ(link(l, NcclLinkSet::kPatNet), 4 * 4 * 20 * kMiB);
  // NCCL 2.28 runs PAT only with one rank per node.
  EXPECT_EQ(nccl_connection_bytes(c, NcclConnection::kPat, tp8_h100()), 0);
}

TEST(NcclFootprint, P2pPeersAndPools) {
  const NcclFootprintConfig c;
  const NcclCommShape s = tp8_h100();
  EXPECT_EQ(nccl_p2p_peer_bytes(c, s, true, NcclSide::kSend), 32 * 2 * kMiB);
  EXPECT_EQ(nccl_p2p_peer_bytes(c, s, true, NcclSide::kRecv), 32 * 10 * kMiB);
  EXPECT_EQ(nccl_p2p_peer_bytes(c, s, false, NcclSide::kRecv), 0);  // shared pool instead
  // 16 p2p channels x 16 shared steps x 128 KiB network chunks.
  EXPECT_EQ(nccl_p2p_net_pool_bytes(c, dp_h100(128), NcclSide::kRecv), 32 * kMiB);
  EXPECT_EQ(nccl_p2p_net_pool_bytes(c, dp_h100(128), NcclSide::kSend), 32 * kMiB);
  // All-to-all on one node: 7 peers x 32 channels x (2 + 10) MiB.
  EXPECT_EQ(nccl_connection_bytes(c, NcclConnection::kP2p, s), 7 * 32 * 12 * kMiB);
  // Across nodes: the local peers on 1 channel each, plus both pools.
  EXPECT_EQ(nccl_connection_bytes(c, NcclConnection::kP2p, dp_h100(128)),
            7 * 12 * kMiB + 2 * 32 * kMiB);
}

TEST(NcclFootprint, P2pChannelsFollowPathsCc) {
  const NcclFootprintConfig c;
  // One H100 node: 24 channels -> 32 p2p channels; NVLink peers allow 36.
  NcclP2pChannels p = nccl_p2p_channels(c, 24, 8, 1, 8, 18);
  EXPECT_EQ(p.channels, 32);
  EXPECT_EQ(p.per_peer, 32);
  // Two nodes: network peers take 2 channels, and every peer gets that.
  p = nccl_p2p_channels(c, 16, 16, 2, 8, 18);
  EXPECT_EQ(p.channels, 16);
  EXPECT_EQ(p.per_peer, 2);
  // Large communicators halve them while 2 x ranks > 4 x p2p channels.
  EXPECT_EQ(nccl_p2p_channels(c, 16, 1024, 128, 8, 18).per_peer, 1);
  NcclFootprintConfig k;
  k.nchannels_per_net_peer = 4;
  EXPECT_EQ(nccl_p2p_channels(k, 16, 1024, 128, 8, 18).per_peer, 4);
  k.max_p2p_nchannels = 8;
  EXPECT_EQ(nccl_p2p_channels(k, 24, 8, 1, 8, 18).channels, 8);
  // PCIe peers (no NVLink): 2 channels.
  EXPECT_EQ(nccl_p2p_channels(c, 24, 8, 1, 8, 0).per_peer, 2);
}

TEST(NcclFootprint, NvlsChannelsByGeneration) {
  NcclFootprintConfig c;
  EXPECT_EQ(nccl_nvls_channels(c, false, false), 16);
  EXPECT_EQ(nccl_nvls_channels(c, true, false), 24);
  EXPECT_EQ(nccl_nvls_channels(c, true, true), 32);
  c.nvls_nchannels = 8;
  EXPECT_EQ(nccl_nvls_channels(c, false, true), 8);
}

TEST(NcclFootprint, KnobsChangeTheFigures) {
  const NcclCommShape s = tp8_h100();
  NcclFootprintConfig c;
  c.buffsize = 8 * kMiB;  // NCCL_BUFFSIZE: 4096 + 512 KiB + 4.69 MiB + 8 MiB -> 14 MiB
  EXPECT_EQ(nccl_endpoint_bytes(c, NcclTransport::kP2p, NcclSide::kRecv, false), 14 * kMiB);
  EXPECT_EQ(nccl_connection_bytes(c, NcclConnection::kRing, s), 24 * 16 * kMiB);
  c = NcclFootprintConfig{};
  c.ll128_buffsize = 0;  // NCCL_LL128_BUFFSIZE=0: 4096 + 512 KiB + 4 MiB -> 6 MiB
  EXPECT_EQ(nccl_endpoint_bytes(c, NcclTransport::kP2p, NcclSide::kRecv, false), 6 * kMiB);
  c = NcclFootprintConfig{};
  c.nvls_chunksize = 64 << 10;  // NCCL_NVLS_CHUNKSIZE halves the NVLS buffer
  EXPECT_EQ(nccl_connection_bytes(c, NcclConnection::kNvls, s), 128 * kMiB);
  c = NcclFootprintConfig{};
  c.cumem_enable = false;  // cudaMalloc: no 2 MiB granules for the small tables
  EXPECT_LT(nccl_comm_init_bytes(c, s), 40 * kMiB);
  EXPECT_FALSE(nccl_runtime_connect(c));
  c = NcclFootprintConfig{};
  c.p2p_nvl_chunksize = 1 << 20;  // capped so that 8 chunks fit NCCL_BUFFSIZE
  EXPECT_EQ(nccl_p2p_chunk_bytes(c, 1), 512 << 10);
}

TEST(NcclFootprint, EagerInitConnectsEverythingAndTheSendPool) {
  const NcclFootprintConfig c;
  const NcclCommShape s = tp8_h100();
  const NcclLinks l = nccl_eager_links(c, s);
  // Ring forward edges (288) cover the tree's chain; reverse chain 252.
  EXPECT_EQ(link(l, NcclLinkSet::kIntraForward), 288 * kMiB);
  EXPECT_EQ(link(l, NcclLinkSet::kIntraReverse), 252 * kMiB);
  EXPECT_EQ(link(l, NcclLinkSet::kNvlsBuffer), 256 * kMiB);
  // proxySharedInit: 32 p2p channels x 16 steps x 512 KiB NVLink chunks.
  EXPECT_EQ(link(l, NcclLinkSet::kP2pNetSendPool), 256 * kMiB);
  EXPECT_EQ(link(l, NcclLinkSet::kP2pNetRecvPool), 0);
}

TEST(NcclFootprint, SingleRankConnectsNothing) {
  NcclCommShape s;
  s.channels = 64;
  s.p2p_channels = 64;
  EXPECT_EQ(nccl_connection_bytes(NcclFootprintConfig{}, NcclConnection::kRing, s), 0);
  EXPECT_EQ(nccl_comm_init_bytes(NcclFootprintConfig{}, s), (64 * 6 + 4) * kMiB);
}

TEST(NcclFootprint, GpuCapacitiesAndContexts) {
  EXPECT_EQ(usable_device_bytes("H100-SXM5-80GB"), 81008 * kMiB);  // "79.11 GiB"
  EXPECT_EQ(usable_device_bytes("H200-SXM-141GB"), 143155 * kMiB);
  EXPECT_EQ(gpu_total_memory("B200-SXM-180GB"), usable_device_bytes("B200-SXM-180GB"));
  EXPECT_EQ(usable_device_bytes("nope"), 0);
  EXPECT_EQ(cuda_context_bytes("nope"), 0);
  const struct {
    std::string_view name;
    std::int64_t hbm_gib;
  } gpus[] = {{"A100-SXM4-40GB", 40},
              {"A100-SXM4-80GB", 80},
              {"H100-SXM5-80GB", 80},
              {"H200-SXM-141GB", 141},
              {"B200-SXM-180GB", 180}};
  for (const auto& g : gpus) {
    EXPECT_GT(cuda_context_bytes(g.name), 256 * kMiB) << g.name;
    EXPECT_LT(cuda_context_bytes(g.name), 1024 * kMiB) << g.name;
    // The driver keeps 1-2 % of the HBM the name promises.
    EXPECT_LT(usable_device_bytes(g.name), g.hbm_gib * 1024 * kMiB) << g.name;
    EXPECT_GT(usable_device_bytes(g.name), g.hbm_gib * 1024 * kMiB / 100 * 97) << g.name;
  }
}

}  // namespace
}  // namespace prism
