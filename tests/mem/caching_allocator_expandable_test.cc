// Expandable segments: growth by pages, reuse, unmapping on empty_cache,
// best fit by expandable size, and failing maps.
#include <limits>

#include <gtest/gtest.h>

#include "caching_allocator_test_util.h"
#include "mem/caching_allocator.h"

namespace prism {
namespace {

using namespace prism::testing;  // NOLINT(google-build-using-namespace)

AllocatorConfig expandable() {
  AllocatorConfig c;
  c.expandable_segments = true;
  return c;
}

// A 1 GiB device: segments reserve 1 1/8 GiB, i.e. 58 pages of 20 MiB
// (1160 MiB) in the large pool and 576 pages of 2 MiB (1152 MiB) in the
// small pool.
TEST(ExpandableSegmentsTest, GrowsPageByPageAndUnmapsOnEmptyCache) {
  SimulatedDevice dev(kGiB);
  CachingAllocator a(expandable(), &dev);
  EventLog log;
  log.attach(a);
  const BlockId x = a.malloc(5 * kMiB, 0);
  EXPECT_EQ(layout(a), "LE@0 s0: A5M F15M U1140M\n");
  const BlockId y = a.malloc(30 * kMiB, 0);  // the free 15 MiB plus one more page
  EXPECT_EQ(layout(a), "LE@0 s0: A5M A30M F5M U1120M\n");
  EXPECT_EQ(log.take(), (std::vector<std::string>{
                            "SEGMENT_MAP 0 20M s0",
                            "ALLOC 0 5M s0",
                            "SEGMENT_MAP 20M 20M s0",
                            "ALLOC 5M 30M s0",
                        }));
  EXPECT_EQ(a.stats().reserved, 40 * kMiB);
  EXPECT_EQ(a.stats().segments, 0);  // PyTorch counts cudaMalloc segments only
  EXPECT_EQ(a.stats().num_device_alloc, 2);
  EXPECT_EQ(a.stats().inactive_split, 0);  // expandable segments are left out
  EXPECT_EQ(dev.used(), 40 * kMiB);

  a.free(x);
  a.empty_cache();  // no free block covers a whole page
  EXPECT_EQ(layout(a), "LE@0 s0: F5M A30M F5M U1120M\n");
  a.free(y);
  log.take();
  a.empty_cache();
  EXPECT_EQ(log.take(), std::vector<std::string>{"SEGMENT_UNMAP 0 40M s0"});
  EXPECT_EQ(layout(a), "");  // nothing mapped: the segment is released
  EXPECT_EQ(a.stats().reserved, 0);
  EXPECT_EQ(a.stats().num_device_free, 1);
  EXPECT_EQ(dev.used(), 0);
}

TEST(ExpandableSegmentsTest, UnmapsOnlyWholePagesAndRemapsThem) {
  SimulatedDevice dev(kGiB);
  CachingAllocator a(expandable(), &dev);
  EventLog log;
  a.malloc(5 * kMiB, 0);
  const BlockId y = a.malloc(30 * kMiB, 0);
  a.free(y);
  EXPECT_EQ(layout(a), "LE@0 s0: A5M F35M U1120M\n");
  log.attach(a);
  a.empty_cache();
  EXPECT_EQ(log.take(), std::vector<std::string>{"SEGMENT_UNMAP 20M 20M s0"});
  EXPECT_EQ(layout(a), "LE@0 s0: A5M F15M U1140M\n");
  EXPECT_EQ(a.stats().reserved, 20 * kMiB);
  // Growing again maps the page right after the free block.
  a.malloc(30 * kMiB, 0);
  EXPECT_EQ(log.take(), (std::vector<std::string>{"SEGMENT_MAP 20M 20M s0", "ALLOC 5M 30M s0"}));
  EXPECT_EQ(layout(a), "LE@0 s0: A5M A30M F5M U1120M\n");
}

TEST(ExpandableSegmentsTest, BestFitCountsRoomToGrow) {
  SimulatedDevice dev(kGiB);
  CachingAllocator a(expandable(), &dev);
  const BlockId x = a.malloc(4 * kMiB, 0);
  a.malloc(12 * kMiB, 0);
  a.malloc(2 * kMiB, 0);
  a.free(x);
  EXPECT_EQ(layout(a), "LE@0 s0: F4M A12M A2M F2M U1140M\n");
  // The 2 MiB tail could grow to 1142 MiB, so the 4 MiB block is the
  // better fit.
  const BlockId y = a.malloc(2 * kMiB, 0);
  EXPECT_EQ(a.address(y), kBase);
  EXPECT_EQ(layout(a), "LE@0 s0: A2M F2M A12M A2M F2M U1140M\n");
}

TEST(ExpandableSegmentsTest, SmallPoolPagesAndStreams) {
  SimulatedDevice dev(kGiB);
  CachingAllocator a(expandable(), &dev);
  a.malloc(512, 0);
  a.malloc(5 * kMiB, 1);  // another stream: its own reservation
  EXPECT_EQ(layout(a),
            "SE@0 s0: A512 F2096640 U1150M\n"
            "LE@1152M s1: A5M F15M U1140M\n");
  EXPECT_EQ(a.stats().reserved, 22 * kMiB);
}

TEST(ExpandableSegmentsTest, FailedMapEndsInOutOfMemory) {
  SimulatedDevice dev(100 * kMiB);  // reservation: 6 pages of 20 MiB
  CachingAllocator a(expandable(), &dev);
  EventLog log;
  const BlockId x = a.malloc(50 * kMiB, 0);
  EXPECT_EQ(layout(a), "LE@0 s0: A50M F10M U60M\n");
  log.attach(a);
  // 60 MiB needs 3 more pages; the device has 40 MiB.
  EXPECT_EQ(a.malloc(60 * kMiB, 0), kOutOfMemory);
  EXPECT_EQ(log.take(), std::vector<std::string>{"OOM 40M 60M s0"});
  EXPECT_EQ(layout(a), "LE@0 s0: A50M F10M U60M\n");
  EXPECT_EQ(a.stats().num_alloc_retries, 1);
  EXPECT_EQ(a.last_oom().alloc_size, 60 * kMiB);
  a.free(x);
  const BlockId y = a.malloc(60 * kMiB, 0);  // fits the mapped 60 MiB
  EXPECT_EQ(a.address(y), kBase);
  EXPECT_EQ(layout(a), "LE@0 s0: A60M U60M\n");
}

TEST(ExpandableSegmentsTest, UnlimitedDeviceReservesAsForOnePiB) {
  SimulatedDevice dev(std::numeric_limits<std::int64_t>::max());
  CachingAllocator a(expandable(), &dev);
  a.malloc(5 * kMiB, 0);
  const std::int64_t pib = std::int64_t{1} << 50;
  const std::int64_t pages = (pib + pib / 8 + 20 * kMiB - 1) / (20 * kMiB);
  ASSERT_EQ(a.segments().size(), 1u);
  EXPECT_EQ(a.segments()[0].size, pages * 20 * kMiB);
  EXPECT_EQ(a.stats().reserved, 20 * kMiB);
}

}  // namespace
}  // namespace prism
