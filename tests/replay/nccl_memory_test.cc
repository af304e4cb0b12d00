// NcclMemory: what each transfer allocates on a rank, from the tuner's
// algorithm choice and mem/nccl_footprint.h; lazy connection on first use.
#include "replay/nccl_memory.h"

#include <gtest/gtest.h>

#include <array>
#include <numeric>
#include <vector>

namespace prism {
namespace {

constexpr std::int64_t kMiB = std::int64_t{1} << 20;

ClusterSpec cluster(std::string_view preset, int nodes) {
  ClusterSpec c = *cluster_preset(preset);
  EXPECT_TRUE(size_cluster(&c, 0, nodes).is_ok());
  return c;
}

std::vector<std::int32_t> first_ranks(int n) {
  std::vector<std::int32_t> r(static_cast<std::size_t>(n));
  std::iota(r.begin(), r.end(), 0);
  return r;
}

Transfer collective(CollectiveKind k, std::int64_t bytes, const std::vector<std::int32_t>& ranks,
                    int nodes) {
  Transfer t;
  t.kind = Transfer::Kind::kCollective;
  t.collective = k;
  t.bytes = Bytes{bytes};
  t.ranks = ranks;
  t.num_nodes = nodes;
  t.max_ranks_per_node = static_cast<int>(ranks.size()) / nodes;
  return t;
}

// `pair` must outlive the transfer (Transfer::ranks is a span).
Transfer p2p(const std::array<std::int32_t, 2>& pair, bool same_node) {
  Transfer t;
  t.kind = Transfer::Kind::kPointToPoint;
  t.bytes = Bytes{1 << 20};
  t.ranks = pair;
  t.num_nodes = same_node ? 1 : 2;
  t.max_ranks_per_node = same_node ? 2 : 1;
  return t;
}

// NCCL's once-per-process share, at a rank's first communicator.
constexpr std::int64_t kProcess = kNcclProcessBytes;

std::int64_t link(const NcclLinks& l, NcclLinkSet s) {
  return l[static_cast<int>(s)];
}

// connect_group on all members gives each member what on_transfer member by
// member does: communicators that overlap, a point-to-point first on one
// rank (so its process share comes from there), algorithms connecting late.
TEST(NcclMemory, GroupConnectMatchesMemberByMember) {
  const ClusterSpec c = cluster("dgx-h100", 2);
  const NcclTuner tuner(c);
  NcclMemory each(tuner), group(tuner);
  each.reset(16);
  group.reset(16);
  const std::array<std::int32_t, 2> pair{3, 11};
  EXPECT_EQ(each.on_transfer(3, 11, p2p(pair, false)), group.on_transfer(3, 11, p2p(pair, false)));
  // comm 0: ranks 0-7 (one node); comm 1: ranks 0, 8 (two nodes); comm 2: all 16.
  const std::vector<std::vector<std::int32_t>> members{first_ranks(8), {0, 8}, first_ranks(16)};
  const std::vector<int> nodes{1, 2, 2};
  const std::vector<std::pair<int, std::int64_t>> calls{
      {1, 8}, {0, 256 * kMiB}, {2, 4 * kMiB}, {0, 256 * kMiB}, {0, 8}, {1, 512 * kMiB}, {2, 8}};
  for (const auto& [comm, bytes] : calls) {
    const Transfer t = collective(CollectiveKind::kAllReduce, bytes, members[comm], nodes[comm]);
    const NcclMemory::GroupConnect g = group.connect_group(comm, group.collective_need(t));
    for (std::int32_t r : members[comm]) {
      const auto srank = static_cast<std::uint32_t>(r);
      EXPECT_EQ(group.member_bytes(srank, g), each.on_transfer(srank, comm, t))
          << "comm " << comm << " bytes " << bytes << " rank " << r;
    }
  }
  for (std::uint32_t r = 0; r < 16; ++r) EXPECT_EQ(group.bytes(r), each.bytes(r));
  EXPECT_GT(group.bytes(3), group.bytes(9));  // rank 3 also holds the point-to-point buffers
}

TEST(NcclMemory, Tp8OnOneH100NodeConnectsAlgorithmsOnFirstUse) {
  const ClusterSpec c = cluster("dgx-h100", 1);
  const NcclTuner tuner(c);
  NcclMemory m(tuner);
  m.reset(2);
  const auto ranks = first_ranks(8);
  const CommGeometry g{8, 1, 8};
  const NcclCommShape s = m.shape(g);
  EXPECT_EQ(s.channels, 24);
  EXPECT_EQ(s.p2p_channels, 32);
  EXPECT_EQ(s.p2p_channels_per_peer, 32);
  EXPECT_EQ(s.nvls_channels, 16);
  EXPECT_EQ(s.nvls_heads, 8);
  ASSERT_EQ(m.connection(CollectiveKind::kAllReduce, Bytes{256 * kMiB}, g), NcclConnection::kNvls);
  ASSERT_EQ(m.connection(CollectiveKind::kAllReduce, Bytes{8}, g), NcclConnection::kRing);

  // The process's share (192 MiB, its first communicator), init (230 MiB)
  // and the NVLS buffer (256 MiB).
  const Transfer big = collective(CollectiveKind::kAllReduce, 256 * kMiB, ranks, 1);
  EXPECT_EQ(m.on_transfer(0, 7, big), (192 + 230 + 256) * kMiB);
  EXPECT_EQ(m.on_transfer(0, 7, big), 0);  // connected already
  // A small all-reduce rings: 24 channels x 12 MiB.
  EXPECT_EQ(m.on_transfer(0, 7, collective(CollectiveKind::kAllReduce, 8, ranks, 1)), 288 * kMiB);
  EXPECT_EQ(m.on_transfer(0, 7, collective(CollectiveKind::kAllGather, 64 * kMiB, ranks, 1)), 0);
  EXPECT_EQ(m.bytes(0), (192 + 230 + 256 + 288) * kMiB);
  // Another rank starts from nothing; another communicator of the same rank
  // without the process's share.
  EXPECT_EQ(m.on_transfer(1, 7, big), (192 + 230 + 256) * kMiB);
  EXPECT_EQ(m.on_transfer(0, 8, big), (230 + 256) * kMiB);
  m.reset(1);
  EXPECT_EQ(m.bytes(0), 0);
}

TEST(NcclMemory, RingPerRankIsTheSameAt16And8192Ranks) {
  const NcclSelection ring = NcclSelection::parse("Ring", "").value();
  const ClusterSpec small_c = cluster("dgx-h100", 2), big_c = cluster("dgx-h100", 1024);
  const NcclTuner small_t(small_c, ring), big_t(big_c, ring);
  NcclMemory small_m(small_t), big_m(big_t);
  small_m.reset(1);
  big_m.reset(1);
  const auto r16 = first_ranks(16), r8192 = first_ranks(8192);
  const std::int64_t at16 =
      small_m.on_transfer(0, 0, collective(CollectiveKind::kAllReduce, kMiB, r16, 2));
  const std::int64_t at8192 =
      big_m.on_transfer(0, 0, collective(CollectiveKind::kAllReduce, kMiB, r8192, 1024));
  const NcclFootprintConfig cfg;
  const NcclCommShape s16 = small_m.shape({16, 2, 8}), s8192 = big_m.shape({8192, 1024, 8});
  // Same ring (16 channels: 7 NVLink pairs and a network pair per node)...
  EXPECT_EQ(nccl_connection_bytes(cfg, NcclConnection::kRing, s16), 208 * kMiB);
  EXPECT_EQ(nccl_connection_bytes(cfg, NcclConnection::kRing, s8192), 208 * kMiB);
  // ...and an init that grows with the peer tables: 134 vs 198 MiB.
  EXPECT_EQ(at16, (192 + 134 + 208) * kMiB);
  EXPECT_EQ(at8192, (192 + 198 + 208) * kMiB);
}

TEST(NcclMemory, TreeAfterRingAddsOnlyWhatTheRingLacks) {
  const ClusterSpec c = cluster("dgx-h100", 2);
  const NcclTuner tuner(c);
  NcclMemory m(tuner);
  m.reset(1);
  const auto ranks = first_ranks(16);
  const CommGeometry g{16, 2, 8};
  ASSERT_EQ(m.connection(CollectiveKind::kAllGather, Bytes{64 * kMiB}, g), NcclConnection::kRing);
  ASSERT_EQ(m.connection(CollectiveKind::kAllReduce, Bytes{8}, g), NcclConnection::kTree);
  const NcclFootprintConfig cfg;
  const NcclCommShape s = m.shape(g);
  m.on_transfer(0, 3, collective(CollectiveKind::kAllGather, 64 * kMiB, ranks, 2));
  const NcclLinks tree = nccl_connection_links(cfg, NcclConnection::kTree, s);
  // The tree's chain to its child rides the ring's edges.
  EXPECT_EQ(m.on_transfer(0, 3, collective(CollectiveKind::kAllReduce, 8, ranks, 2)),
            nccl_connection_bytes(cfg, NcclConnection::kTree, s) -
                link(tree, NcclLinkSet::kIntraForward));
}

TEST(NcclMemory, AllToAllConnectsEveryPeer) {
  const ClusterSpec c = cluster("dgx-h100", 1);
  const NcclTuner tuner(c);
  NcclMemory m(tuner);
  m.reset(1);
  // 7 peers x 32 channels x (2 MiB send + 10 MiB receive): NVIDIA/nccl#1685.
  EXPECT_EQ(m.on_transfer(0, 0, collective(CollectiveKind::kAllToAll, kMiB, first_ranks(8), 1)),
            (192 + 230 + 7 * 32 * 12) * kMiB);
}

TEST(NcclMemory, SendRecvInANodeConnectsTheDirectionUsed) {
  const ClusterSpec c = cluster("dgx-h100", 1);
  const NcclTuner tuner(c);
  NcclMemory m(tuner);
  m.reset(2);
  const NcclFootprintConfig cfg;
  const NcclCommShape s = m.shape({2, 1, 2});
  const std::int64_t init = nccl_comm_init_bytes(cfg, s);
  const std::int64_t ch = s.p2p_channels_per_peer;
  const std::array<std::int32_t, 2> r01{0, 1}, r10{1, 0}, r02{0, 2}, r00{0, 0};
  const Transfer fwd = p2p(r01, true), back = p2p(r10, true);
  // Sender (srank 0, peer 1) and receiver (srank 1, peer 0).
  EXPECT_EQ(m.on_transfer(0, 1, fwd), kProcess + init + ch * 2 * kMiB);
  EXPECT_EQ(m.on_transfer(1, 0, fwd), kProcess + init + ch * 10 * kMiB);
  EXPECT_EQ(m.on_transfer(0, 1, fwd), 0);
  // The way back: receive connectors on rank 0, send connectors on rank 1.
  EXPECT_EQ(m.on_transfer(0, 1, back), ch * 10 * kMiB);
  EXPECT_EQ(m.on_transfer(1, 0, back), ch * 2 * kMiB);
  // A new peer is a new communicator; a self send allocates nothing.
  EXPECT_EQ(m.on_transfer(0, 2, p2p(r02, true)), init + ch * 2 * kMiB);
  EXPECT_EQ(m.on_transfer(0, 0, p2p(r00, true)), 0);
}

TEST(NcclMemory, SendRecvAcrossNodesUsesTheSharedPools) {
  const ClusterSpec c = cluster("dgx-h100", 2);
  const NcclTuner tuner(c);
  NcclMemory m(tuner);
  m.reset(1);
  const NcclFootprintConfig cfg;
  const NcclCommShape s = m.shape({2, 2, 1});
  const std::int64_t pool = nccl_p2p_net_pool_bytes(cfg, s, NcclSide::kSend);
  EXPECT_EQ(pool, s.p2p_channels * 16 * 128 * 1024);
  const std::array<std::int32_t, 2> out{0, 8}, in{8, 0};
  EXPECT_EQ(m.on_transfer(0, 8, p2p(out, false)), kProcess + nccl_comm_init_bytes(cfg, s) + pool);
  EXPECT_EQ(m.on_transfer(0, 8, p2p(in, false)), pool);  // the receive pool
  EXPECT_EQ(m.on_transfer(0, 8, p2p(out, false)), 0);
}

TEST(NcclMemory, WithoutRuntimeConnectInitConnectsEverything) {
  const ClusterSpec c = cluster("dgx-h100", 1);
  const NcclTuner tuner(c);
  NcclFootprintConfig cfg;
  cfg.runtime_connect = false;
  NcclMemory m(tuner, cfg);
  m.reset(1);
  const auto ranks = first_ranks(8);
  const NcclCommShape s = m.shape({8, 1, 8});
  std::int64_t eager = 0;
  for (std::int64_t b : nccl_eager_links(cfg, s)) eager += b;
  // Init, ring + tree (288 + 252), NVLS (256), the send pool (256).
  EXPECT_EQ(eager, (288 + 252 + 256 + 256) * kMiB);
  EXPECT_EQ(m.on_transfer(0, 0, collective(CollectiveKind::kAllReduce, 8, ranks, 1)),
            kProcess + nccl_comm_init_bytes(cfg, s) + eager);
  EXPECT_EQ(m.on_transfer(0, 0, collective(CollectiveKind::kAllReduce, 256 * kMiB, ranks, 1)), 0);
}

TEST(NcclMemory, KnobsChangeWhatIsAllocated) {
  const ClusterSpec c = cluster("dgx-h100", 1);
  const NcclTuner tuner(c);
  const auto ranks = first_ranks(8);
  const Transfer small = collective(CollectiveKind::kAllReduce, 8, ranks, 1);
  const Transfer big = collective(CollectiveKind::kAllReduce, 256 * kMiB, ranks, 1);

  NcclFootprintConfig buff;
  buff.buffsize = 8 * kMiB;  // ring receive connectors of 14 MiB
  NcclMemory m1(tuner, buff);
  m1.reset(1);
  EXPECT_EQ(m1.on_transfer(0, 0, small), (192 + 230 + 24 * 16) * kMiB);

  NcclFootprintConfig no_nvls;
  no_nvls.nvls_enable = false;  // no NVLS init; big all-reduces ring instead
  NcclMemory m2(tuner, no_nvls);
  m2.reset(1);
  EXPECT_EQ(m2.shape({8, 1, 8}).nvls_channels, 0);
  EXPECT_EQ(m2.on_transfer(0, 0, big), (192 + 196 + 288) * kMiB);

  NcclFootprintConfig nvls32;
  nvls32.nvls_nchannels = 32;
  NcclMemory m3(tuner, nvls32);
  m3.reset(1);
  EXPECT_EQ(m3.on_transfer(0, 0, big), (192 + 196 + 32 * 2 + 2 + 512) * kMiB);

  NcclFootprintConfig none;
  none.process_bytes = 0;  // the knob that drops the process's share
  NcclMemory m4(tuner, none);
  m4.reset(1);
  EXPECT_EQ(m4.on_transfer(0, 0, small), (230 + 24 * 12) * kMiB);
}

TEST(NcclMemory, NvlsGrowsWithLocalRanks) {
  const ClusterSpec c = cluster("dgx-h100", 1);
  const NcclTuner tuner(c, NcclSelection::parse("NVLS", "").value());
  NcclMemory m(tuner);
  m.reset(1);
  const auto r4 = first_ranks(4), r8 = first_ranks(8);
  const NcclFootprintConfig cfg;
  const std::int64_t at4 = m.on_transfer(0, 0, collective(CollectiveKind::kAllReduce, kMiB, r4, 1));
  const std::int64_t at8 = m.on_transfer(0, 1, collective(CollectiveKind::kAllReduce, kMiB, r8, 1));
  EXPECT_EQ(at4 - kProcess - nccl_comm_init_bytes(cfg, m.shape({4, 1, 4})), 128 * kMiB);
  EXPECT_EQ(at8 - nccl_comm_init_bytes(cfg, m.shape({8, 1, 8})), 256 * kMiB);
}

TEST(NcclMemory, SingleRankCommunicatorOnlyInits) {
  const ClusterSpec c = cluster("dgx-h100", 1);
  const NcclTuner tuner(c);
  NcclMemory m(tuner);
  m.reset(1);
  // 64 channels (NVIDIA/nccl#2363) of three granules, devComm, rankToLocalRank
  // (388 MiB, the H200's second communicator exactly), and the process's
  // share: 580 MiB, its first communicator exactly (docs/memory.md).
  EXPECT_EQ(m.on_transfer(0, 0, collective(CollectiveKind::kAllReduce, kMiB, first_ranks(1), 1)),
            (64 * 6 + 4) * kMiB + kProcess);
  EXPECT_EQ(m.bytes(0), 608174080);
}

}  // namespace
}  // namespace prism
