#include "net/nccl_tuner.h"

#include <limits>

#include <gtest/gtest.h>

namespace prism {
namespace {

ClusterSpec sized(std::string_view preset, int nodes) {
  ClusterSpec c = *cluster_preset(preset);
  EXPECT_TRUE(size_cluster(&c, 0, nodes).is_ok());
  return c;
}

CommGeometry whole(const ClusterSpec& c) {
  return CommGeometry{c.num_gpus(), c.num_nodes, c.gpus_per_node};
}

constexpr CollectiveKind kKinds[] = {CollectiveKind::kAllReduce,     CollectiveKind::kAllGather,
                                     CollectiveKind::kReduceScatter, CollectiveKind::kBroadcast,
                                     CollectiveKind::kReduce,        CollectiveKind::kAllToAll};

// Property: on every preset and scale, time never decreases with size, and
// no size beats the smallest size's latency floor.
TEST(NcclTuner, TimeGrowsWithBytesAboveTheLatencyFloor) {
  for (std::string_view preset : cluster_preset_names()) {
    for (int nodes : {1, 2, 4, 32}) {
      const ClusterSpec c = sized(preset, nodes);
      const NcclTuner tuner(c);
      for (CollectiveKind k : kKinds) {
        SimTime prev;
        SimTime floor = SimTime::never();
        for (std::int64_t b = 8; b <= (std::int64_t{1} << 34); b *= 2) {
          const auto cost = tuner.collective(k, Bytes{b}, whole(c));
          ASSERT_TRUE(cost) << preset;
          EXPECT_GE(cost->time(), prev) << preset << " " << nodes << " " << to_string(k) << " " << b
                                        << " " << to_string(cost->algo) << to_string(cost->proto);
          floor = min(floor, cost->latency);
          EXPECT_GE(cost->time(), floor);
          prev = cost->time();
        }
      }
    }
  }
}

// The tuner's bandwidths never pass what the hardware carries: a GPU's NVLink
// inside a node, the node's NICs between nodes.
TEST(NcclTuner, BusBandwidthCeiling) {
  for (std::string_view preset : cluster_preset_names()) {
    for (int nodes : {1, 4}) {
      const ClusterSpec c = sized(preset, nodes);
      const NcclTuner tuner(c);
      const int n = c.num_gpus();
      const Bytes huge{std::int64_t{1} << 36};
      const auto ar = tuner.collective(CollectiveKind::kAllReduce, huge, whole(c));
      const double algbw = static_cast<double>(huge.count) / static_cast<double>(ar->time().ns);
      const double ring_busbw = algbw * 2.0 * (n - 1) / n;
      if (nodes == 1) {
        // NVLS reduces in the switch, so its nccl-tests busbw may pass the
        // link; its algorithm bandwidth may not.
        EXPECT_LE(algbw, c.nvlink_GBps()) << preset;
      } else {
        EXPECT_LE(ring_busbw, c.nics_per_node * c.nic_GBps()) << preset;
      }
      EXPECT_GT(ring_busbw, 0.5 * (nodes == 1 ? c.nvlink_GBps() : c.nics_per_node * c.nic_GBps()))
          << preset;
    }
  }
}

// Between nodes every algorithm, NVLSTree included, goes through the node's
// NICs: fewer NICs make a large all-reduce slower, and the ceiling above
// holds for every NIC count (NVLSTree once ignored it: 1 NIC and 8 gave
// the same time).
TEST(NcclTuner, InterNodeAllReduceFollowsTheNicCount) {
  const Bytes huge{std::int64_t{1} << 32};
  SimTime previous{std::numeric_limits<std::int64_t>::max()};
  for (int nics : {1, 2, 4, 8}) {
    ClusterSpec c = sized("dgx-h100", 8);
    c.nics_per_node = nics;
    const NcclTuner tuner(c);
    const auto ar = tuner.collective(CollectiveKind::kAllReduce, huge, whole(c));
    const int n = c.num_gpus();
    const double algbw = static_cast<double>(huge.count) / static_cast<double>(ar->time().ns);
    EXPECT_LE(algbw * 2.0 * (n - 1) / n, nics * c.nic_GBps()) << nics << " NICs";
    for (const char* algo : {"NVLSTree", "Ring"}) {
      const NcclTuner forced(c, *NcclSelection::parse(algo, "Simple"));
      const auto t = forced.collective(CollectiveKind::kAllReduce, huge, whole(c));
      ASSERT_TRUE(t) << algo;
      const double bw = static_cast<double>(huge.count) / static_cast<double>(t->time().ns);
      EXPECT_LE(bw * 2.0 * (n - 1) / n, nics * c.nic_GBps()) << nics << " NICs, " << algo;
    }
    EXPECT_LT(ar->time().ns, previous.ns) << nics << " NICs";
    previous = ar->time();
  }
}

TEST(NcclTuner, SearchedGraphsMatchNcclOnDgxSystems) {
  // DGX H100, one node: 6 rings at 60 GB/s doubled to 12 at 30 (NCCL's
  // 24 coll channels are these doubled once more at run time).
  const ClusterSpec h1 = sized("dgx-h100", 1);
  const NcclTuner::Tables& t1 = NcclTuner(h1).tables(whole(h1));
  EXPECT_EQ(t1.channels[static_cast<int>(NcclAlgo::kRing)], 12);
  EXPECT_EQ(t1.comm_channels, 24);
  EXPECT_EQ(t1.channels[static_cast<int>(NcclAlgo::kNvls)], 8);
  // Ring Simple all-reduce bandwidth = 12 x 30 x n / (2(n-1)).
  const int ar = static_cast<int>(NcclFunc::kAllReduce);
  EXPECT_FLOAT_EQ(t1.bw[ar][static_cast<int>(NcclAlgo::kRing)][2], 360.0f * 8 / 14);
  // Ring LL latency: 6.6 + 14 steps x 0.6 us.
  EXPECT_FLOAT_EQ(t1.lat[ar][static_cast<int>(NcclAlgo::kRing)][0], 6.6f + 14 * 0.6f);

  // DGX A100 across nodes: one 24 GB/s ring per HDR NIC (PCIe Gen4 x16
  // limits a channel to 24), not doubled: 192 GB/s bus bandwidth.
  const ClusterSpec a8 = sized("dgx-a100", 8);
  const NcclTuner::Tables& t8 = NcclTuner(a8).tables(whole(a8));
  EXPECT_EQ(t8.channels[static_cast<int>(NcclAlgo::kRing)], 8);
  EXPECT_FLOAT_EQ(t8.bw[ar][static_cast<int>(NcclAlgo::kRing)][2], 192.0f * 64 / 126);
}

TEST(NcclTuner, AlgorithmSwitchPoints) {
  // One DGX H100: ring LL for small all-reduces, NVLS for large ones.
  const ClusterSpec h1 = sized("dgx-h100", 1);
  const NcclTuner one(h1);
  EXPECT_EQ(one.collective(CollectiveKind::kAllReduce, Bytes{8}, whole(h1))->algo, NcclAlgo::kRing);
  EXPECT_EQ(one.collective(CollectiveKind::kAllReduce, Bytes{8}, whole(h1))->proto, NcclProto::kLL);
  EXPECT_EQ(one.collective(CollectiveKind::kAllReduce, Bytes{1 << 30}, whole(h1))->algo,
            NcclAlgo::kNvls);
  // A100 (no NVLS): ring Simple at 1 GiB.
  const ClusterSpec a1 = sized("dgx-a100", 1);
  const auto big = NcclTuner(a1).collective(CollectiveKind::kAllReduce, Bytes{1 << 30}, whole(a1));
  EXPECT_EQ(big->algo, NcclAlgo::kRing);
  EXPECT_EQ(big->proto, NcclProto::kSimple);
  // Ring -> Tree at scale: a 32 MiB all-reduce rides rings on 2 nodes and
  // trees on 64, where the ring's 2(n-1) steps cost too much latency.
  const ClusterSpec a2 = sized("dgx-a100", 2), a64 = sized("dgx-a100", 64);
  EXPECT_EQ(NcclTuner(a2).collective(CollectiveKind::kAllReduce, Bytes{32 << 20}, whole(a2))->algo,
            NcclAlgo::kRing);
  EXPECT_EQ(
      NcclTuner(a64).collective(CollectiveKind::kAllReduce, Bytes{32 << 20}, whole(a64))->algo,
      NcclAlgo::kTree);
  // PAT only with one GPU per node.
  const CommGeometry spread{64, 64, 1};
  EXPECT_EQ(NcclTuner(a64).collective(CollectiveKind::kAllGather, Bytes{1 << 16}, spread)->algo,
            NcclAlgo::kPat);
  EXPECT_NE(NcclTuner(a64).collective(CollectiveKind::kAllGather, Bytes{1 << 16}, whole(a64))->algo,
            NcclAlgo::kPat);
}

TEST(NcclTuner, SelectionOverrides) {
  const ClusterSpec h1 = sized("dgx-h100", 1);
  const NcclTuner ring(h1, *NcclSelection::parse("Ring", "Simple"));
  const auto c = ring.collective(CollectiveKind::kAllReduce, Bytes{1 << 30}, whole(h1));
  EXPECT_EQ(c->algo, NcclAlgo::kRing);
  EXPECT_EQ(c->proto, NcclProto::kSimple);
  const NcclTuner no_nvls(h1, *NcclSelection::parse("^NVLS", "^LL"));
  const auto d = no_nvls.collective(CollectiveKind::kAllReduce, Bytes{8}, whole(h1));
  EXPECT_NE(d->algo, NcclAlgo::kNvls);
  EXPECT_NE(d->proto, NcclProto::kLL);
  const NcclTuner per_func(h1, *NcclSelection::parse("allreduce:tree", ""));
  EXPECT_EQ(per_func.collective(CollectiveKind::kAllReduce, Bytes{1 << 20}, whole(h1))->algo,
            NcclAlgo::kTree);
  EXPECT_EQ(per_func.collective(CollectiveKind::kAllGather, Bytes{1 << 20}, whole(h1))->algo,
            NcclAlgo::kRing);  // NCCL_ALGO for one function leaves the others alone
  // A selection that leaves nothing: no cost.
  const NcclTuner none(h1, *NcclSelection::parse("PAT", ""));
  EXPECT_FALSE(none.collective(CollectiveKind::kAllReduce, Bytes{8}, whole(h1)));
}

TEST(NcclTuner, SelectionParseErrors) {
  EXPECT_EQ(NcclSelection::parse("Rings", "").status().message(),
            "NCCL_ALGO: unknown name \"Rings\" (names: Tree, Ring, CollnetDirect, CollnetChain, "
            "NVLS, NVLSTree, PAT)");
  EXPECT_EQ(NcclSelection::parse("", "LL,,Simple").status().message(),
            "NCCL_PROTO: empty name in \"LL,,Simple\"");
  EXPECT_EQ(NcclSelection::parse("allgthr:ring", "").status().message(),
            "NCCL_ALGO: unknown collective \"allgthr\" (collectives: broadcast, reduce, "
            "allgather, reducescatter, allreduce)");
}

TEST(NcclTuner, PointToPointAndAllToAll) {
  const ClusterSpec h2 = sized("dgx-h100", 2);
  const NcclTuner t(h2);
  const CollectiveCost net = t.point_to_point(Bytes{1 << 30}, false);
  // One 400 Gb/s NIC at 96 % goodput: 48 GB/s.
  EXPECT_NEAR(static_cast<double>(1 << 30) / net.bandwidth_time.ns, 48.0, 0.01);
  EXPECT_LT(t.point_to_point(Bytes{1 << 30}, true).time(), net.time());
  EXPECT_EQ(t.point_to_point(Bytes{4096}, false).proto, NcclProto::kLL);
  const auto a2a = t.collective(CollectiveKind::kAllToAll, Bytes{1 << 30}, whole(h2));
  EXPECT_EQ(a2a->algo, NcclAlgo::kP2p);
  // Half the data leaves the node through one NIC per GPU.
  EXPECT_NEAR(static_cast<double>(1 << 29) / a2a->bandwidth_time.ns, 48.0, 0.01);
}

TEST(NcclTuner, SingleRankAndBarrier) {
  const ClusterSpec h1 = sized("dgx-h100", 1);
  const NcclTuner t(h1);
  EXPECT_EQ(t.collective(CollectiveKind::kAllReduce, Bytes{1 << 20}, CommGeometry{1, 1, 1})->time(),
            SimTime::zero());
  EXPECT_EQ(t.collective(CollectiveKind::kBarrier, Bytes{0}, whole(h1))->time(),
            t.collective(CollectiveKind::kAllReduce, Bytes{4}, whole(h1))->time());
}

}  // namespace
}  // namespace prism
