#include "net/flow_network.h"

#include <array>
#include <vector>

#include <gtest/gtest.h>

namespace prism {
namespace {

ClusterSpec h100(int nodes, double oversubscription = 1.0, int nodes_per_leaf = 32) {
  ClusterSpec c = *cluster_preset("dgx-h100");
  c.oversubscription = oversubscription;
  c.nodes_per_leaf = nodes_per_leaf;
  EXPECT_TRUE(size_cluster(&c, 0, nodes).is_ok());
  return c;
}

Transfer p2p(const std::array<std::int32_t, 2>& pair, std::int64_t bytes, bool same_node) {
  Transfer t;
  t.kind = Transfer::Kind::kPointToPoint;
  t.bytes = Bytes{bytes};
  t.ranks = pair;
  t.num_nodes = same_node ? 1 : 2;
  t.max_ranks_per_node = same_node ? 2 : 1;
  return t;
}

// A 1 GiB all-reduce over `ranks` (16: two DGX H100 nodes).
constexpr std::array<std::int32_t, 16> kSixteen{0, 1, 2,  3,  4,  5,  6,  7,
                                                8, 9, 10, 11, 12, 13, 14, 15};
Transfer all_reduce_two_nodes(const std::array<std::int32_t, 16>& ranks) {
  Transfer ar;
  ar.collective = CollectiveKind::kAllReduce;
  ar.bytes = Bytes{1 << 30};
  ar.ranks = ranks;
  ar.num_nodes = 2;
  ar.max_ranks_per_node = 8;
  return ar;
}

// Runs the model until it is empty; returns each transfer's end, by id.
std::vector<SimTime> drain(FlowNetwork& net) {
  std::vector<SimTime> ends;
  std::vector<TransferId> done;
  for (SimTime t = net.next_completion(); t != SimTime::never(); t = net.next_completion()) {
    done.clear();
    net.take_completed(t, &done);
    for (TransferId id : done) {
      if (ends.size() <= id) ends.resize(id + 1);
      ends[id] = t;
    }
  }
  return ends;
}

// A selection that leaves a collective no algorithm is refused before the
// transfer starts (it once failed a check inside the model).
TEST(FlowNetwork, AdmitRefusesACollectiveTheSelectionLeavesNoAlgorithm) {
  const std::array<std::int32_t, 8> ranks{0, 1, 2, 3, 4, 5, 6, 7};
  Transfer t;
  t.collective = CollectiveKind::kAllGather;
  t.bytes = Bytes{1 << 20};
  t.ranks = ranks;
  t.num_nodes = 1;
  t.max_ranks_per_node = 8;
  EXPECT_TRUE(FlowNetwork(h100(1)).admit(t).is_ok());
  const Status s = FlowNetwork(h100(1), *NcclSelection::parse("Tree", "")).admit(t);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "the NCCL selection (--nccl-algo, --nccl-proto) leaves all_gather over 8 ranks on 1 "
            "node no algorithm and protocol; NCCL fails such a call too (\"no algorithm/protocol "
            "available\")");
  EXPECT_TRUE(
      FlowNetwork(h100(1), *NcclSelection::parse("Tree", "")).admit(p2p({0, 1}, 8, true)).is_ok());
}

TEST(FlowNetwork, AloneItTakesTheTunersTime) {
  FlowNetwork net(h100(2));
  const std::array<std::int32_t, 2> pair{0, 8};
  const Transfer t = p2p(pair, 1 << 28, false);
  const SimTime solo = net.solo_cost(t).time();
  net.start(t, SimTime{100});
  EXPECT_EQ(drain(net)[0], SimTime{100} + solo);

  const Transfer ar = all_reduce_two_nodes(kSixteen);
  net.start(ar, SimTime{0});
  EXPECT_EQ(drain(net)[1], net.solo_cost(ar).time());
}

// NCCL's kernel runs one block per channel: a transfer holds the tuner's
// channels of SMs (a send/recv one; a 16-rank all-reduce of 1 GiB over two
// DGX H100 nodes more, as the tuner picks them).
TEST(FlowNetwork, ATransferHoldsItsChannelsOfSms) {
  FlowNetwork net(h100(2));
  const std::array<std::int32_t, 2> pair{0, 8};
  EXPECT_EQ(net.sms_held(p2p(pair, 1 << 20, false)), 1);
  const Transfer ar = all_reduce_two_nodes(kSixteen);
  EXPECT_EQ(net.sms_held(ar), net.solo_cost(ar).channels);
  EXPECT_GT(net.sms_held(ar), 1);
}

// Two equal sends through one NIC share it equally: both take twice the
// bandwidth time (bytes are conserved), plus the latency once.
TEST(FlowNetwork, EqualFlowsShareANic) {
  FlowNetwork net(h100(3));
  const std::array<std::int32_t, 2> a{0, 8}, b{0, 16};
  const Transfer ta = p2p(a, 1 << 28, false), tb = p2p(b, 1 << 28, false);
  const CollectiveCost solo = net.solo_cost(ta);
  net.start(ta, SimTime{0});
  net.start(tb, SimTime{0});
  const auto ends = drain(net);
  EXPECT_EQ(ends[0], ends[1]);
  EXPECT_NEAR(static_cast<double>(ends[0].ns),
              static_cast<double>(solo.latency.ns + 2 * solo.bandwidth_time.ns), 2.0);
}

// A second send joins halfway: the first one is re-rated when it starts and
// when it ends. First: half alone, then half at half speed -> 1.5 x; the
// second: half at half speed (= 1/4 done) then alone.
TEST(FlowNetwork, RerateOnStartAndFinish) {
  FlowNetwork net(h100(3));
  const std::array<std::int32_t, 2> a{0, 8}, b{0, 16};
  const Transfer ta = p2p(a, 1 << 28, false), tb = p2p(b, 1 << 28, false);
  const CollectiveCost solo = net.solo_cost(ta);
  const std::int64_t lat = solo.latency.ns, bw = solo.bandwidth_time.ns;
  net.start(ta, SimTime{0});
  std::vector<TransferId> done;
  // Advance until the first transfer is halfway through its data.
  const SimTime half{lat + bw / 2};
  for (SimTime t = net.next_completion(); t <= half; t = net.next_completion())
    net.take_completed(t, &done);
  net.start(tb, SimTime{half.ns - lat});  // its latency ends at `half`
  const auto ends = drain(net);
  EXPECT_NEAR(static_cast<double>(ends[0].ns), lat + 1.5 * bw, 3.0);
  EXPECT_NEAR(static_cast<double>(ends[1].ns), half.ns + 1.5 * bw, 3.0);
}

// Two sends leaving one leaf: with a 4:1 spine they share its uplink; on a
// non-blocking fabric they do not meet.
TEST(FlowNetwork, OversubscribedSpineSlowsCrossLeafTraffic) {
  const auto time_of_two = [](const ClusterSpec& c) {
    FlowNetwork net(c);
    const std::array<std::int32_t, 2> a{0, 16}, b{8, 24};  // node 0 -> 2, node 1 -> 3
    net.start(p2p(a, 1 << 28, false), SimTime{0});
    net.start(p2p(b, 1 << 28, false), SimTime{0});
    return drain(net)[0];
  };
  const SimTime flat = time_of_two(h100(4, 1.0, 2));
  const SimTime thin = time_of_two(h100(4, 4.0, 2));
  EXPECT_GT(thin, flat);
  EXPECT_TRUE(FlowNetwork(h100(4, 1.0, 2)).folding_exact());
  EXPECT_FALSE(FlowNetwork(h100(4, 4.0, 2)).folding_exact());
}

TEST(FlowNetwork, CompletionsComeInStartOrderAndRepeatExactly) {
  const auto run = [] {
    FlowNetwork net(h100(2));
    std::vector<std::array<std::int32_t, 2>> pairs;
    for (int i = 0; i < 8; ++i) pairs.push_back({i, 8 + (i * 3) % 8});
    for (int i = 0; i < 8; ++i)
      net.start(p2p(pairs[i], (1 << 20) * (1 + i % 3), false), SimTime{i * 10});
    return drain(net);
  };
  EXPECT_EQ(run(), run());
}

}  // namespace
}  // namespace prism
