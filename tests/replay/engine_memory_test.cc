// The replay's memory: alloc/free ops drive each rank's caching allocator,
// record-stream frees return their block when the recorded streams are done,
// an allocation that does not fit ends the replay, and traced ranks get
// memory samples.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "net/cluster_spec.h"
#include "net/nccl_tuner.h"
#include "replay/nccl_memory.h"
#include "test_graphs.h"

namespace prism {
namespace {

using ::testing::HasSubstr;
using testing::make_graph;

constexpr std::int64_t kMiB = 1 << 20;

ReplayResult run_with(const ExecutionGraph& g, MemoryModel& memory, bool fold = true,
                      std::vector<Rank> trace = {}) {
  AlphaBetaModel network(testing::unit_network());
  return testing::run_over(network, memory, g, fold, std::move(trace));
}

// 12 MiB (a segment of its own: 10 MiB and more round to 2 MiB), used by a
// kernel on stream "side" and freed with record_stream(side); then another
// 12 MiB, which reuses the first block if that is back, else takes a second
// segment. `side_ns`: the side kernel; `gap_ns`: compute before the second
// alloc; `record_before`: whether the side kernel is issued before the free.
ReplayResult record_stream_case(std::int64_t side_ns, std::int64_t gap_ns, bool record_before) {
  RoleBuilder b("r", {"main", "side"});
  const int a = b.alloc(0, Bytes{12 * kMiB});
  if (record_before) b.compute(1, SimTime{side_ns});
  b.free(0, a, {1});
  if (!record_before) b.compute(1, SimTime{side_ns});
  if (gap_ns > 0) b.compute(0, SimTime{gap_ns});
  const int c = b.alloc(0, Bytes{12 * kMiB});
  b.free(0, c);
  auto g = make_graph({{"rank", 1}}, 8, {}, {std::move(b).build()}, {0});
  AllocatorMemoryModel memory(DeviceMemoryOptions{});
  return run_with(g, memory);
}

TEST(EngineMemoryTest, RecordStreamFreeWaitsForTheStream) {
  const ReplayResult r = record_stream_case(100, 0, true);
  EXPECT_EQ(r.roles[0].max.peak_allocated.count, 12 * kMiB);  // dropped at the free
  EXPECT_EQ(r.roles[0].max.peak_reserved.count, 24 * kMiB);   // the block was still in use
}

TEST(EngineMemoryTest, FragmentationIsReservedMinusAllocatedAtTheReservedPeak) {
  // 6 MiB splits a 20 MiB segment (14 MiB free in it); 30 MiB takes its own
  // segment. Reserved peaks at 50 MiB with 36 MiB allocated.
  RoleBuilder b("r", {"s"});
  const int a = b.alloc(0, Bytes{6 * kMiB});
  const int c = b.alloc(0, Bytes{30 * kMiB});
  b.free(0, c);
  b.free(0, a);
  auto g = make_graph({{"rank", 4}}, 8, {}, {std::move(b).build()}, {0, 0, 0, 0});
  for (bool fold : {true, false}) {
    AllocatorMemoryModel memory(DeviceMemoryOptions{});
    const ReplayResult r = run_with(g, memory, fold);
    EXPECT_EQ(r.roles[0].max.peak_reserved.count, 50 * kMiB) << fold;
    EXPECT_EQ(r.roles[0].max.fragmentation.count, 14 * kMiB) << fold;
    EXPECT_EQ(r.roles[0].mean.fragmentation.count, 14 * kMiB) << fold;
    EXPECT_EQ(r.roles[0].max.inactive_split_peak.count, 14 * kMiB) << fold;
  }
}

TEST(EngineMemoryTest, BlockAwaitingItsStreamIsFragmentation) {
  // At the 24 MiB reserved peak the first block is freed but still in use
  // on the side stream: reserved, not allocated.
  const ReplayResult r = record_stream_case(100, 0, true);
  EXPECT_EQ(r.roles[0].max.fragmentation.count, 12 * kMiB);
  EXPECT_EQ(r.roles[0].max.inactive_split_peak.count, 0);  // whole segments, never split
}

TEST(EngineMemoryTest, RecordStreamFreeIsImmediateOnceTheStreamIsDone) {
  const ReplayResult r = record_stream_case(100, 200, true);
  EXPECT_EQ(r.roles[0].max.peak_reserved.count, 12 * kMiB);
}

TEST(EngineMemoryTest, WorkIssuedAfterTheFreeIsNotWaitedFor) {
  const ReplayResult r = record_stream_case(100, 0, false);
  EXPECT_EQ(r.roles[0].max.peak_reserved.count, 12 * kMiB);
}

TEST(EngineMemoryTest, PendingBlockReturnsWhenTheStreamFinishes) {
  // The second alloc comes after the side kernel ends: the block is back.
  RoleBuilder b("r", {"main", "side"});
  const int a = b.alloc(0, Bytes{12 * kMiB});
  b.compute(1, SimTime{100});
  b.free(0, a, {1});
  b.record(1, "side_done");
  b.wait(0, "side_done");
  const int c = b.alloc(0, Bytes{12 * kMiB});
  b.free(0, c);
  auto g = make_graph({{"rank", 1}}, 8, {}, {std::move(b).build()}, {0});
  AllocatorMemoryModel memory(DeviceMemoryOptions{});
  const ReplayResult r = run_with(g, memory);
  EXPECT_EQ(r.roles[0].max.peak_reserved.count, 12 * kMiB);
}

ExecutionGraph two_big_allocs(int world) {
  RoleBuilder b("r", {"s"});
  b.alloc(0, Bytes{50 * kMiB});
  b.compute(0, SimTime{1000});
  b.alloc(0, Bytes{50 * kMiB});
  return make_graph({{"rank", world}}, 8, {}, {std::move(b).build()},
                    std::vector<std::int32_t>(world, 0));
}

TEST(EngineMemoryTest, OutOfMemoryEndsTheReplayNamingRankOpAndState) {
  DeviceMemoryOptions o;
  o.capacity = Bytes{100 * kMiB};
  o.context = Bytes{10 * kMiB};
  AllocatorMemoryModel memory(o);
  const ReplayResult r = run_with(two_big_allocs(4), memory);
  ASSERT_EQ(r.outcome, ReplayResult::Outcome::kOutOfMemory);
  ASSERT_EQ(r.oom.size(), 1u);
  const OutOfMemory& oom = r.oom[0];
  EXPECT_EQ(oom.rank, 0);
  EXPECT_EQ(oom.num_ranks, 4);  // folded: the class of all four
  EXPECT_EQ(oom.op, 2);
  EXPECT_EQ(oom.at.ns, 1000);
  EXPECT_FALSE(oom.in_nccl);
  EXPECT_EQ(oom.requested.count, 50 * kMiB);
  EXPECT_EQ(oom.allocator.alloc_size, 50 * kMiB);
  EXPECT_EQ(oom.usage.allocated.count, 50 * kMiB);
  EXPECT_EQ(oom.usage.reserved.count, 50 * kMiB);
  EXPECT_EQ(oom.usage.context.count, 10 * kMiB);
  EXPECT_EQ(oom.capacity.count, 100 * kMiB);
  EXPECT_TRUE(r.blocked.empty());
}

TEST(EngineMemoryTest, OutOfMemoryUnfoldedNamesTheFirstRank) {
  DeviceMemoryOptions o;
  o.capacity = Bytes{100 * kMiB};
  o.context = Bytes{1};
  AllocatorMemoryModel memory(o);
  const ReplayResult r = run_with(two_big_allocs(2), memory, /*fold=*/false);
  ASSERT_EQ(r.outcome, ReplayResult::Outcome::kOutOfMemory);
  EXPECT_EQ(r.oom[0].rank, 0);
  EXPECT_EQ(r.oom[0].num_ranks, 1);
}

TEST(EngineMemoryTest, EnoughMemoryCompletes) {
  DeviceMemoryOptions o;
  o.capacity = Bytes{110 * kMiB};
  o.context = Bytes{10 * kMiB};
  AllocatorMemoryModel memory(o);
  const ReplayResult r = run_with(two_big_allocs(2), memory);
  ASSERT_EQ(r.outcome, ReplayResult::Outcome::kCompleted);
  EXPECT_EQ(r.roles[0].max.peak_device.count, 110 * kMiB);
}

TEST(EngineMemoryTest, TracedRanksGetMemorySamples) {
  RoleBuilder b("r", {"s"});
  const int a = b.alloc(0, Bytes{4 * kMiB});
  b.compute(0, SimTime{1000});
  b.free(0, a);
  auto g = make_graph({{"rank", 2}}, 8, {}, {std::move(b).build()}, {0, 0});
  AllocatorMemoryModel memory(DeviceMemoryOptions{});
  const ReplayResult r = run_with(g, memory, true, {1});
  ASSERT_EQ(r.memory_trace.size(), 2u);
  EXPECT_EQ(r.memory_trace[0].rank, 1);
  EXPECT_EQ(r.memory_trace[0].at.ns, 0);
  EXPECT_EQ(r.memory_trace[0].allocated.count, 4 * kMiB);
  EXPECT_EQ(r.memory_trace[0].reserved.count, 20 * kMiB);
  EXPECT_EQ(r.memory_trace[1].at.ns, 1000);
  EXPECT_EQ(r.memory_trace[1].allocated.count, 0);
  EXPECT_EQ(r.memory_trace[1].reserved.count, 20 * kMiB);  // cached
}

// NCCL allocates for the transfers it carries; Transformer Engine's
// userbuffers (TP overlap) use the program's own buffers.
TEST(EngineMemoryTest, UserbuffersTransfersTakeNoNcclMemory) {
  ClusterSpec c = *cluster_preset("dgx-h100");
  ASSERT_TRUE(size_cluster(&c, 0, 1).is_ok());
  const NcclTuner tuner(c);
  auto nccl_bytes = [&](Transport transport) {
    RoleBuilder b("r", {"main"});
    b.set_transport(b.collective(0, 0, CollectiveKind::kReduceScatter, Bytes{1 << 20}), transport);
    const auto g = make_graph({{"tp", 4}}, 8, {testing::group_slot("tp", {0})},
                              {std::move(b).build()}, {0, 0, 0, 0});
    AlphaBetaModel network(testing::unit_network());
    RooflineModel compute;
    AllocatorMemoryModel memory(DeviceMemoryOptions{});
    NcclMemory nccl(tuner);
    Result<ReplayResult> r =
        replay(g, ReplayOptions{}, ReplayModels{&network, &compute, &memory, &nccl});
    EXPECT_TRUE(r.is_ok()) << r.status().message();
    return r.is_ok() ? r->roles[0].max.nccl.count : -1;
  };
  EXPECT_GT(nccl_bytes(Transport::kNccl), 0);
  EXPECT_EQ(nccl_bytes(Transport::kUserbuffers), 0);
}

}  // namespace
}  // namespace prism
