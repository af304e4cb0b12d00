// Rule-by-rule tests of the caching allocator against hand-worked PyTorch
// behaviour (c10/cuda/CUDACachingAllocator.cpp at 001074d2).
#include "mem/caching_allocator.h"

#include <gtest/gtest.h>

#include "caching_allocator_test_util.h"

namespace prism {
namespace {

using namespace prism::testing;  // NOLINT(google-build-using-namespace)

// --- sizes ------------------------------------------------------------------

TEST(RoundRequestTest, RoundsTo512Bytes) {
  const AllocatorConfig c;
  EXPECT_EQ(round_request(1, c), 512);
  EXPECT_EQ(round_request(512, c), 512);
  EXPECT_EQ(round_request(513, c), 1024);
  EXPECT_EQ(round_request(1000, c), 1024);
  EXPECT_EQ(round_request(3 * kMiB + 1, c), 3 * kMiB + 512);
}

TEST(RoundRequestTest, PowerOfTwoDivisions) {
  AllocatorConfig c;
  c.roundup_power2_divisions.fill(4);
  // At most 512 * divisions bytes, plain 512-byte rounding (1200 -> 1536).
  EXPECT_EQ(round_request(1200, c), 1536);
  EXPECT_EQ(round_request(2048, c), 2048);
  EXPECT_EQ(round_request(2049, c), 2560);  // steps of 2048 / 4
  EXPECT_EQ(round_request(4096, c), 4096);  // powers of two stay
  EXPECT_EQ(round_request(3 * kMiB + 1, c), 3 * kMiB + 512 * kKiB);
  EXPECT_EQ(round_request(5 * kMiB + 1, c), 6 * kMiB);

  // Per interval: [256:1,512:2,1024:4,>:8] gives 1 up to 256 MB, 2 for
  // [512 MB, 1 GB), 8 from 1 GB on.
  AllocatorConfig d;
  for (int i = 0; i <= 8; ++i) d.roundup_power2_divisions[i] = 1;
  d.roundup_power2_divisions[9] = 2;
  for (int i = 10; i < 16; ++i) d.roundup_power2_divisions[i] = 8;
  EXPECT_EQ(round_request(300 * kMiB + 1, d), 300 * kMiB + 512);
  EXPECT_EQ(round_request(600 * kMiB, d), 768 * kMiB);
  EXPECT_EQ(round_request(1536 * kMiB + 1, d), 1536 * kMiB + 128 * kMiB);
  // Below 1 MiB the first interval applies; above 64 GiB the last.
  EXPECT_EQ(round_request(5000, d), 5120);
  EXPECT_EQ(round_request(100 * kGiB + 1, d), 104 * kGiB);
}

TEST(RoundRequestTest, SegmentSizes) {
  EXPECT_EQ(segment_size_for(512), 2 * kMiB);
  EXPECT_EQ(segment_size_for(kMiB), 2 * kMiB);
  EXPECT_EQ(segment_size_for(kMiB + 512), 20 * kMiB);
  EXPECT_EQ(segment_size_for(10 * kMiB - 512), 20 * kMiB);
  EXPECT_EQ(segment_size_for(10 * kMiB), 10 * kMiB);
  EXPECT_EQ(segment_size_for(11 * kMiB + 512), 12 * kMiB);
}

// --- pools and best fit -----------------------------------------------------------

TEST(CachingAllocatorTest, SmallAndLargePools) {
  SimulatedDevice dev(8 * kGiB);
  CachingAllocator a({}, &dev);
  const BlockId s = a.malloc(kMiB, 0);      // small: <= 1 MiB
  const BlockId l = a.malloc(kMiB + 1, 0);  // large
  const BlockId m = a.malloc(5 * kMiB, 0);  // mid size: shares the 20 MiB segment
  EXPECT_EQ(a.address(s), kBase);
  EXPECT_EQ(a.block_size(l), kMiB + 512);
  EXPECT_EQ(layout(a),
            "S@0 s0: A1M F1M\n"
            "L@2M s0: A1049088 A5M F14679552\n");
  EXPECT_EQ(a.address(m), kBase + 2 * kMiB + kMiB + 512);
  EXPECT_EQ(a.stats().reserved, 22 * kMiB);
  EXPECT_EQ(a.stats().segments, 2);
}

TEST(CachingAllocatorTest, LargeRequestsRoundTo2MiBSegments) {
  SimulatedDevice dev(8 * kGiB);
  CachingAllocator a({}, &dev);
  // 11 MiB + 1 -> 11 MiB + 512 in a 12 MiB segment; the 1 MiB - 512 left is
  // not more than 1 MiB, so the block is not split and holds 12 MiB.
  const BlockId b = a.malloc(11 * kMiB + 1, 0);
  EXPECT_EQ(a.block_size(b), 12 * kMiB);
  EXPECT_EQ(layout(a), "L@0 s0: A12M\n");
  EXPECT_EQ(a.stats().allocated, 12 * kMiB);
  EXPECT_EQ(a.stats().requested, 11 * kMiB + 1);
}

TEST(CachingAllocatorTest, BestFitBySizeThenAddress) {
  SimulatedDevice dev(8 * kGiB);
  CachingAllocator a({}, &dev);
  const BlockId x = a.malloc(24 * kMiB, 0);  // @0
  const BlockId y = a.malloc(12 * kMiB, 0);  // @24M
  const BlockId z = a.malloc(12 * kMiB, 0);  // @36M
  a.free(x);
  a.free(z);
  a.free(y);
  // 11 MiB: the smallest fit (12 MiB) at the lowest address.
  const BlockId p = a.malloc(11 * kMiB, 0);
  EXPECT_EQ(a.address(p), kBase + 24 * kMiB);
  const BlockId q = a.malloc(11 * kMiB, 0);
  EXPECT_EQ(a.address(q), kBase + 36 * kMiB);
  // Now only the 24 MiB block is left; 11 MiB splits it (13 MiB > 1 MiB left).
  const BlockId r = a.malloc(11 * kMiB, 0);
  EXPECT_EQ(a.address(r), kBase);
  EXPECT_EQ(layout(a),
            "L@0 s0: A11M F13M\n"
            "L@24M s0: A12M\n"
            "L@36M s0: A12M\n");
}

TEST(CachingAllocatorTest, StreamsDoNotShareBlocks) {
  SimulatedDevice dev(8 * kGiB);
  CachingAllocator a({}, &dev);
  a.free(a.malloc(4 * kMiB, 1));
  const BlockId b = a.malloc(4 * kMiB, 2);
  EXPECT_EQ(a.address(b), kBase + 20 * kMiB);
  const BlockId c = a.malloc(4 * kMiB, 1);
  EXPECT_EQ(a.address(c), kBase);
  EXPECT_EQ(layout(a),
            "L@0 s1: A4M F16M\n"
            "L@20M s2: A4M F16M\n");
}

// --- splitting ----------------------------------------------------------------

TEST(CachingAllocatorTest, SmallPoolSplitsDownTo512Bytes) {
  SimulatedDevice dev(8 * kGiB);
  CachingAllocator a({}, &dev);
  a.malloc(kMiB, 0);
  a.malloc(kMiB - 512, 0);  // leaves exactly 512: split
  EXPECT_EQ(layout(a), "S@0 s0: A1M A1048064 F512\n");
  a.malloc(512, 0);  // takes the last 512 whole
  EXPECT_EQ(layout(a), "S@0 s0: A1M A1048064 A512\n");
  EXPECT_EQ(a.stats().inactive_split, 0);
}

TEST(CachingAllocatorTest, LargePoolSplitsOnlyAboveOneMiB) {
  SimulatedDevice dev(8 * kGiB);
  CachingAllocator a({}, &dev);
  a.malloc(5 * kMiB, 0);
  EXPECT_EQ(a.stats().inactive_split, 15 * kMiB);
  // 14 MiB from the 15 MiB left: 1 MiB remains, not more than 1 MiB, so the
  // whole 15 MiB is handed out.
  const BlockId b = a.malloc(14 * kMiB, 0);
  EXPECT_EQ(a.block_size(b), 15 * kMiB);
  EXPECT_EQ(layout(a), "L@0 s0: A5M A15M\n");
  EXPECT_EQ(a.stats().inactive_split, 0);
  // 18 MiB + 512 in a 20 MiB segment leaves 2 MiB - 512: split.
  a.malloc(18 * kMiB + 512, 0);
  EXPECT_EQ(layout(a),
            "L@0 s0: A5M A15M\n"
            "L@20M s0: A18874880 F2096640\n");
}

TEST(CachingAllocatorTest, MaxSplitSizeRules) {
  SimulatedDevice dev(8 * kGiB);
  CachingAllocator a(with_max_split(64), &dev);
  a.free(a.malloc(100 * kMiB, 0));  // an oversize cached block @0
  // Below max_split_size: oversize blocks are never taken.
  const BlockId small = a.malloc(30 * kMiB, 0);
  EXPECT_EQ(a.address(small), kBase + 100 * kMiB);
  // At or above it: taken whole when within kLargeBuffer (20 MiB) of the
  // request, never split.
  const BlockId big = a.malloc(90 * kMiB, 0);
  EXPECT_EQ(a.address(big), kBase);
  EXPECT_EQ(a.block_size(big), 100 * kMiB);
  a.free(big);
  const BlockId far = a.malloc(70 * kMiB, 0);  // 100 >= 70 + 20: a new segment
  EXPECT_EQ(a.address(far), kBase + 130 * kMiB);
  EXPECT_EQ(layout(a),
            "L@0 s0: F100M\n"
            "L@100M s0: A30M\n"
            "L@130M s0: A70M\n");
}

TEST(CachingAllocatorTest, NoSplitAtMaxSplitSizeEvenWithRoomLeft) {
  SimulatedDevice dev(8 * kGiB);
  CachingAllocator a(with_max_split(64), &dev);
  // 64 MiB request into a cached 80 MiB block: within 20 MiB, not split.
  a.free(a.malloc(80 * kMiB, 0));
  const BlockId b = a.malloc(64 * kMiB, 0);
  EXPECT_EQ(a.block_size(b), 80 * kMiB);
  // A request below max_split_size still splits its own segment.
  a.malloc(5 * kMiB, 0);
  EXPECT_EQ(layout(a),
            "L@0 s0: A80M\n"
            "L@80M s0: A5M F15M\n");
}

// --- merging ------------------------------------------------------------------

TEST(CachingAllocatorTest, FreeMergesBothNeighbours) {
  SimulatedDevice dev(8 * kGiB);
  CachingAllocator a({}, &dev);
  const BlockId x = a.malloc(5 * kMiB, 0);
  const BlockId y = a.malloc(5 * kMiB, 0);
  const BlockId z = a.malloc(5 * kMiB, 0);
  EXPECT_EQ(layout(a), "L@0 s0: A5M A5M A5M F5M\n");
  a.free(x);
  a.free(z);
  EXPECT_EQ(layout(a), "L@0 s0: F5M A5M F10M\n");
  EXPECT_EQ(a.stats().inactive_split, 15 * kMiB);
  a.free(y);
  EXPECT_EQ(layout(a), "L@0 s0: F20M\n");
  EXPECT_EQ(a.stats().inactive_split, 0);
  EXPECT_EQ(a.stats().inactive_split_peak, 15 * kMiB);
}

TEST(CachingAllocatorTest, NoMergeWithPendingFreeNeighbour) {
  SimulatedDevice dev(8 * kGiB);
  CachingAllocator a({}, &dev);
  const BlockId x = a.malloc(5 * kMiB, 0);
  const BlockId y = a.malloc(5 * kMiB, 0);
  a.malloc(5 * kMiB, 0);
  const std::uint64_t t = a.free_deferred(x);
  a.free(y);
  EXPECT_EQ(layout(a), "L@0 s0: P5M F5M A5M F5M\n");
  a.complete_free(t);
  EXPECT_EQ(layout(a), "L@0 s0: F10M A5M F5M\n");
}

// --- record-stream frees ----------------------------------------------------------

TEST(CachingAllocatorTest, DeferredFreeDropsAllocatedAtOnceAndReusesLater) {
  SimulatedDevice dev(8 * kGiB);
  CachingAllocator a({}, &dev);
  const BlockId x = a.malloc(kMiB, 0);
  const std::uint64_t t = a.free_deferred(x);
  EXPECT_EQ(a.stats().allocated, 0);
  EXPECT_EQ(a.stats().active, kMiB);     // PyTorch keeps it active ...
  EXPECT_EQ(a.stats().requested, kMiB);  // ... and requested, until free_block
  const BlockId y = a.malloc(kMiB, 0);   // not x's block: the rest of the segment
  EXPECT_EQ(a.address(y), kBase + kMiB);
  const BlockId z = a.malloc(kMiB, 0);  // a new segment
  EXPECT_EQ(a.address(z), kBase + 2 * kMiB);
  a.complete_free(t);
  EXPECT_EQ(a.stats().active, 2 * kMiB);
  EXPECT_EQ(a.stats().requested, 2 * kMiB);
  const BlockId w = a.malloc(kMiB, 0);
  EXPECT_EQ(a.address(w), kBase);
}

TEST(CachingAllocatorTest, EmptyCacheCompletesPendingFrees) {
  SimulatedDevice dev(8 * kGiB);
  CachingAllocator a({}, &dev);
  EventLog log;
  log.attach(a);
  const BlockId x = a.malloc(3 * kMiB, 0);
  const std::uint64_t t = a.free_deferred(x);
  a.empty_cache();
  EXPECT_EQ(layout(a), "");
  EXPECT_EQ(a.stats().num_sync_all_streams, 1);
  // The same slot and address may come back; the old ticket stays void.
  const BlockId y = a.malloc(3 * kMiB, 0);
  log.take();
  a.complete_free(t);
  EXPECT_TRUE(log.take().empty());
  EXPECT_EQ(layout(a), "L@20M s0: A3M F17M\n");
  a.free(y);
  EXPECT_EQ(a.stats().active, 0);
}

// --- events and small things ------------------------------------------------------

TEST(CachingAllocatorTest, EventSequenceMatchesRecordTrace) {
  SimulatedDevice dev(8 * kGiB);
  CachingAllocator a({}, &dev);
  EventLog log;
  log.attach(a);
  const BlockId x = a.malloc(1000, 0);
  const BlockId y = a.malloc(3 * kMiB, 7);
  a.free(x);
  const std::uint64_t t = a.free_deferred(y);
  const BlockId z = a.malloc(1000, 0);  // at x's address again
  a.free(z);
  a.empty_cache();
  a.complete_free(t);
  EXPECT_EQ(log.take(), (std::vector<std::string>{
                            "SEGMENT_ALLOC 0 2M s0",
                            "ALLOC 0 1000 s0",
                            "SEGMENT_ALLOC 2M 20M s7",
                            "ALLOC 2M 3M s7",
                            "FREE_REQUESTED 0 1000 s0",
                            "FREE_COMPLETED 0 1000 s0",
                            "FREE_REQUESTED 2M 3M s7",
                            "ALLOC 0 1000 s0",
                            "FREE_REQUESTED 0 1000 s0",
                            "FREE_COMPLETED 0 1000 s0",
                            "FREE_COMPLETED 2M 3M s7",
                            "SEGMENT_FREE 2M 20M s7",
                            "SEGMENT_FREE 0 2M s0",
                        }));
  EXPECT_EQ(a.stats().num_allocs, 3);
  EXPECT_EQ(a.stats().num_frees, 3);
  EXPECT_EQ(a.stats().num_device_alloc, 2);
  EXPECT_EQ(a.stats().num_device_free, 2);
  EXPECT_EQ(dev.used(), 0);
}

TEST(CachingAllocatorTest, ZeroSizeAllocatesNothing) {
  SimulatedDevice dev(8 * kGiB);
  CachingAllocator a({}, &dev);
  EventLog log;
  log.attach(a);
  const BlockId z = a.malloc(0, 0);
  EXPECT_NE(z, kOutOfMemory);
  EXPECT_EQ(a.address(z), 0u);
  EXPECT_EQ(a.block_size(z), 0);
  a.free(z);
  const std::uint64_t t = a.free_deferred(a.malloc(0, 0));
  a.complete_free(t);
  EXPECT_TRUE(log.take().empty());
  EXPECT_EQ(a.stats().num_allocs, 0);
  EXPECT_EQ(layout(a), "");
}

TEST(CachingAllocatorTest, PeaksTrackTheHighWaterMark) {
  SimulatedDevice dev(8 * kGiB);
  CachingAllocator a({}, &dev);
  const BlockId x = a.malloc(4 * kMiB, 0);
  const BlockId y = a.malloc(6 * kMiB + 100, 0);
  a.free(x);
  a.free(y);
  a.empty_cache();
  const AllocatorStats& s = a.stats();
  EXPECT_EQ(s.allocated, 0);
  EXPECT_EQ(s.allocated_peak, 10 * kMiB + 512);
  EXPECT_EQ(s.active_peak, 10 * kMiB + 512);
  EXPECT_EQ(s.requested_peak, 10 * kMiB + 100);
  EXPECT_EQ(s.reserved, 0);
  EXPECT_EQ(s.reserved_peak, 20 * kMiB);
  EXPECT_EQ(s.segments, 0);
}

}  // namespace
}  // namespace prism
