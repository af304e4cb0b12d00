#include "net/alpha_beta.h"

#include <numeric>
#include <vector>

#include <gtest/gtest.h>

namespace prism {
namespace {

// 1 byte/ns inside a node, 0.5 byte/ns across; 10 / 100 ns per step.
AlphaBetaParams simple() {
  AlphaBetaParams p;
  p.intra_node_bw = Bandwidth::from_gbps(1);
  p.inter_node_bw = Bandwidth::from_gbps(0.5);
  p.intra_node_latency = SimTime{10};
  p.inter_node_latency = SimTime{100};
  return p;
}

Transfer collective(CollectiveKind k, std::int64_t bytes, const std::vector<std::int32_t>& ranks,
                    int nodes) {
  Transfer t;
  t.collective = k;
  t.bytes = Bytes{bytes};
  t.ranks = ranks;
  t.num_nodes = nodes;
  return t;
}

TEST(AlphaBetaTest, RingFormulas) {
  AlphaBetaModel m(simple());
  std::vector<std::int32_t> four(4);
  std::iota(four.begin(), four.end(), 0);
  // all-reduce: 2(n-1) steps + 2(n-1)/n * bytes / bw = 6*10 + 1.5*4000
  EXPECT_EQ(m.duration(collective(CollectiveKind::kAllReduce, 4000, four, 1)).ns, 60 + 6000);
  EXPECT_EQ(m.duration(collective(CollectiveKind::kAllGather, 4000, four, 1)).ns, 30 + 3000);
  EXPECT_EQ(m.duration(collective(CollectiveKind::kReduceScatter, 4000, four, 1)).ns, 30 + 3000);
  EXPECT_EQ(m.duration(collective(CollectiveKind::kAllToAll, 4000, four, 1)).ns, 30 + 3000);
  EXPECT_EQ(m.duration(collective(CollectiveKind::kBroadcast, 4000, four, 1)).ns, 30 + 4000);
  EXPECT_EQ(m.duration(collective(CollectiveKind::kBarrier, 4000, four, 1)).ns, 60);
  // Across nodes: NIC bandwidth and latency.
  EXPECT_EQ(m.duration(collective(CollectiveKind::kAllReduce, 4000, four, 2)).ns, 600 + 12000);
  // A single rank moves nothing.
  std::vector<std::int32_t> one{0};
  EXPECT_EQ(m.duration(collective(CollectiveKind::kAllReduce, 4000, one, 1)).ns, 0);
}

TEST(AlphaBetaTest, PointToPoint) {
  AlphaBetaModel m(simple());
  Transfer t;
  t.kind = Transfer::Kind::kPointToPoint;
  t.bytes = Bytes{500};
  std::vector<std::int32_t> pair{0, 1};
  t.ranks = pair;
  EXPECT_EQ(m.duration(t).ns, 510);
  t.num_nodes = 2;
  EXPECT_EQ(m.duration(t).ns, 1100);
}

// Property: time never falls with more bytes, grows strictly once bandwidth
// dominates (sub-nanosecond differences round up alike), and never falls
// below the latency floor.
TEST(AlphaBetaTest, MonotoneInBytes) {
  AlphaBetaModel m;
  std::vector<std::int32_t> eight(8);
  std::iota(eight.begin(), eight.end(), 0);
  SimTime prev{-1};
  for (std::int64_t b = 8; b <= (std::int64_t{1} << 33); b *= 2) {
    const SimTime t = m.duration(collective(CollectiveKind::kAllReduce, b, eight, 1));
    EXPECT_GE(t, prev);
    if (b >= 4096) {
      EXPECT_GT(t, prev);
    }
    EXPECT_GE(t.ns, 14 * 1000);
    prev = t;
  }
}

TEST(AlphaBetaTest, ExtremeParametersClampInsteadOfOverflowing) {
  AlphaBetaParams p;
  p.intra_node_latency = SimTime{std::int64_t{1} << 60};  // a valid but absurd option
  p.intra_node_bw = Bandwidth{1};                         // one byte per second
  AlphaBetaModel m(p);
  std::vector<std::int32_t> eight(8);
  std::iota(eight.begin(), eight.end(), 0);
  EXPECT_EQ(m.duration(collective(CollectiveKind::kAllReduce, kMaxBytes.count, eight, 1)),
            kMaxOpDuration);
  Transfer t;
  t.kind = Transfer::Kind::kPointToPoint;
  t.bytes = kMaxBytes;
  std::vector<std::int32_t> pair{0, 1};
  t.ranks = pair;
  EXPECT_EQ(m.duration(t), kMaxOpDuration);
}

TEST(AlphaBetaTest, CompletionsComeInTimeThenStartOrder) {
  AlphaBetaModel m(simple());
  std::vector<std::int32_t> pair{0, 1};
  Transfer t;
  t.kind = Transfer::Kind::kPointToPoint;
  t.ranks = pair;
  t.bytes = Bytes{90};
  const TransferId a = m.start(t, SimTime{0});  // ends 100
  t.bytes = Bytes{40};
  const TransferId b = m.start(t, SimTime{50});  // ends 100
  t.bytes = Bytes{0};
  const TransferId c = m.start(t, SimTime{50});  // ends 60
  EXPECT_EQ(m.next_completion().ns, 60);
  std::vector<TransferId> done;
  m.take_completed(SimTime{60}, &done);
  EXPECT_EQ(done, (std::vector<TransferId>{c}));
  done.clear();
  m.take_completed(m.next_completion(), &done);
  EXPECT_EQ(done, (std::vector<TransferId>{a, b}));
  EXPECT_EQ(m.next_completion(), SimTime::never());
}

}  // namespace
}  // namespace prism
