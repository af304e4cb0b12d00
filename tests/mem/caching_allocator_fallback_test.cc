// What malloc does when no cached block fits: release of oversize cached
// blocks, release of every cached segment and retry, out of memory, the
// memory fraction and garbage collection.
#include <limits>

#include <gtest/gtest.h>

#include "caching_allocator_test_util.h"
#include "mem/caching_allocator.h"

namespace prism {
namespace {

using namespace prism::testing;  // NOLINT(google-build-using-namespace)

TEST(CachingAllocatorFallbackTest, ReleasesOversizeBlocksLargestFirst) {
  SimulatedDevice dev(250 * kMiB);
  CachingAllocator a(with_max_split(64), &dev);
  EventLog log;
  const BlockId x = a.malloc(100 * kMiB, 0);
  const BlockId y = a.malloc(70 * kMiB, 0);
  a.free(x);
  a.free(y);
  log.attach(a);
  // 120 MiB fits no cached block and the device has 80 MiB left: both
  // oversize blocks go (largest first) and cudaMalloc is tried again.
  const BlockId z = a.malloc(120 * kMiB, 0);
  ASSERT_NE(z, kOutOfMemory);
  EXPECT_EQ(log.take(), (std::vector<std::string>{
                            "SEGMENT_FREE 0 100M s0",
                            "SEGMENT_FREE 100M 70M s0",
                            "SEGMENT_ALLOC 170M 120M s0",
                            "ALLOC 170M 120M s0",
                        }));
  EXPECT_EQ(a.stats().num_alloc_retries, 0);
  EXPECT_EQ(a.stats().num_sync_all_streams, 0);
}

TEST(CachingAllocatorFallbackTest, ReleasesTheSmallestSufficientOversizeBlock) {
  SimulatedDevice dev(350 * kMiB);
  CachingAllocator a(with_max_split(64), &dev);
  const BlockId x = a.malloc(100 * kMiB, 0);
  const BlockId y = a.malloc(200 * kMiB, 0);
  a.free(x);
  a.free(y);
  // 150 MiB: the 200 MiB block is more than 20 MiB too big to hand out, but
  // it is the smallest one large enough to release.
  const BlockId z = a.malloc(150 * kMiB, 0);
  ASSERT_NE(z, kOutOfMemory);
  EXPECT_EQ(layout(a),
            "L@0 s0: F100M\n"
            "L@300M s0: A150M\n");
}

TEST(CachingAllocatorFallbackTest, ReleasesAllCachedSegmentsAndRetries) {
  SimulatedDevice dev(60 * kMiB);
  CachingAllocator a({}, &dev);
  EventLog log;
  const BlockId x = a.malloc(30 * kMiB, 0);
  const BlockId s = a.malloc(4 * kMiB, 0);  // a split 20 MiB segment
  a.free(x);
  log.attach(a);
  // 40 MiB: cudaMalloc fails (10 MiB left); no max_split_size, so every
  // unsplit cached segment is released and cudaMalloc retried.
  const BlockId y = a.malloc(40 * kMiB, 0);
  ASSERT_NE(y, kOutOfMemory);
  EXPECT_EQ(log.take(), (std::vector<std::string>{
                            "SEGMENT_FREE 0 30M s0",
                            "SEGMENT_ALLOC 50M 40M s0",
                            "ALLOC 50M 40M s0",
                        }));
  EXPECT_EQ(a.stats().num_alloc_retries, 1);
  EXPECT_EQ(a.stats().num_sync_all_streams, 1);
  EXPECT_EQ(layout(a),
            "L@30M s0: A4M F16M\n"
            "L@50M s0: A40M\n");
  (void)s;
}

TEST(CachingAllocatorFallbackTest, OutOfMemoryReportsAndKeepsLiveBlocks) {
  SimulatedDevice dev(60 * kMiB);
  CachingAllocator a({}, &dev);
  EventLog log;
  const BlockId keep = a.malloc(30 * kMiB, 0);
  a.free(a.malloc(5 * kMiB, 0));  // a cached 20 MiB segment
  log.attach(a);
  EXPECT_EQ(a.malloc(40 * kMiB + 1, 0), kOutOfMemory);
  EXPECT_EQ(log.take(), (std::vector<std::string>{
                            "SEGMENT_FREE 30M 20M s0",
                            "OOM 30M 41943552 s0",
                        }));
  const OomInfo& oom = a.last_oom();
  EXPECT_EQ(oom.requested, 40 * kMiB + 1);
  EXPECT_EQ(oom.rounded, 40 * kMiB + 512);
  EXPECT_EQ(oom.alloc_size, 42 * kMiB);
  EXPECT_EQ(oom.stream, 0);
  EXPECT_EQ(oom.device_free, 30 * kMiB);
  EXPECT_EQ(oom.allocated, 30 * kMiB);
  EXPECT_EQ(oom.reserved, 30 * kMiB);
  const AllocatorStats& st = a.stats();
  EXPECT_EQ(st.num_ooms, 1);
  EXPECT_EQ(st.num_alloc_retries, 1);
  EXPECT_EQ(st.allocated, 30 * kMiB);
  EXPECT_EQ(st.reserved, 30 * kMiB);
  EXPECT_EQ(st.reserved_peak, 50 * kMiB);
  EXPECT_EQ(layout(a), "L@0 s0: A30M\n");
  EXPECT_EQ(a.address(keep), kBase);
  // The allocator still works afterwards.
  EXPECT_NE(a.malloc(20 * kMiB, 0), kOutOfMemory);
}

TEST(CachingAllocatorFallbackTest, MemoryFractionLimitsReserved) {
  SimulatedDevice dev(200 * kMiB);
  AllocatorConfig c;
  c.memory_fraction = 0.25;  // 50 MiB allowed
  CachingAllocator a(c, &dev);
  ASSERT_NE(a.malloc(30 * kMiB, 0), kOutOfMemory);
  EXPECT_EQ(a.malloc(21 * kMiB, 0), kOutOfMemory);  // 30 + 22 > 50
  EXPECT_EQ(a.last_oom().device_free, 170 * kMiB);
  EXPECT_NE(a.malloc(5 * kMiB, 0), kOutOfMemory);  // a 20 MiB segment fits
}

TEST(CachingAllocatorFallbackTest, FullFractionOfAnUnlimitedDevice) {
  SimulatedDevice dev(std::numeric_limits<std::int64_t>::max());
  AllocatorConfig c;
  c.memory_fraction = 1.0;
  CachingAllocator a(c, &dev);
  EXPECT_NE(a.malloc(kGiB, 0), kOutOfMemory);
}

TEST(CachingAllocatorFallbackTest, GarbageCollectionFreesTheOldestCachedBlocks) {
  SimulatedDevice dev(200 * kMiB);
  AllocatorConfig c;
  c.memory_fraction = 0.5;               // 100 MiB allowed
  c.garbage_collection_threshold = 0.5;  // collect above 50 MiB reserved
  CachingAllocator a(c, &dev);
  EventLog log;
  const BlockId x = a.malloc(30 * kMiB, 0);  // large-pool get_free_block call 1
  a.malloc(24 * kMiB, 0);                    // 2
  const BlockId z = a.malloc(12 * kMiB, 0);  // 3; 66 MiB reserved, nothing cached
  a.free(x);                                 // age counted from 3
  a.free(z);                                 // from 3
  const BlockId w = a.malloc(12 * kMiB, 0);  // 4: reuses z's block
  a.free(w);                                 // from 4
  log.attach(a);
  // Call 5 misses. Ages: x 2, z 1; mean 1.5, so x (30 MiB) goes, which is
  // enough to get 16 MiB under the threshold.
  const BlockId big = a.malloc(40 * kMiB, 0);
  ASSERT_NE(big, kOutOfMemory);
  EXPECT_EQ(log.take(), (std::vector<std::string>{
                            "SEGMENT_FREE 0 30M s0",
                            "SEGMENT_ALLOC 66M 40M s0",
                            "ALLOC 66M 40M s0",
                        }));
  EXPECT_EQ(layout(a),
            "L@30M s0: A24M\n"
            "L@54M s0: F12M\n"
            "L@66M s0: A40M\n");
}

TEST(CachingAllocatorFallbackTest, GarbageCollectionNeedsAMemoryFraction) {
  SimulatedDevice dev(200 * kMiB);
  AllocatorConfig c;
  c.garbage_collection_threshold = 0.5;
  CachingAllocator a(c, &dev);
  a.free(a.malloc(30 * kMiB, 0));
  a.malloc(40 * kMiB, 0);
  EXPECT_EQ(layout(a),
            "L@0 s0: F30M\n"
            "L@30M s0: A40M\n");
}

TEST(CachingAllocatorFallbackTest, RetryPathCompletesPendingFrees) {
  SimulatedDevice dev(40 * kMiB);
  CachingAllocator a({}, &dev);
  const BlockId x = a.malloc(30 * kMiB, 0);
  const std::uint64_t t = a.free_deferred(x);
  // 30 MiB pending; the next 30 MiB request must wait for it.
  const BlockId y = a.malloc(30 * kMiB, 0);
  ASSERT_NE(y, kOutOfMemory);
  EXPECT_EQ(a.stats().num_alloc_retries, 1);
  EXPECT_EQ(layout(a), "L@30M s0: A30M\n");
  a.complete_free(t);  // ignored
  EXPECT_EQ(layout(a), "L@30M s0: A30M\n");
}

}  // namespace
}  // namespace prism
