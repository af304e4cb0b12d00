// AllocatorMemoryModel: one caching allocator per rank on a device of the
// given capacity, less the CUDA context; NCCL's memory as external bytes.
#include "mem/memory_model.h"

#include <gtest/gtest.h>

namespace prism {
namespace {

constexpr std::int64_t kMiB = 1 << 20;

TEST(AllocatorMemoryModelTest, RanksHaveTheirOwnAllocators) {
  AllocatorMemoryModel m(DeviceMemoryOptions{});
  m.reset(2);
  ASSERT_TRUE(m.alloc(0, 7, Bytes{100}, 0, SimTime{}));
  ASSERT_TRUE(m.alloc(1, 7, Bytes{30 * kMiB}, 0, SimTime{}));
  EXPECT_EQ(m.usage(0).allocated.count, 512);
  EXPECT_EQ(m.usage(0).reserved.count, 2 * kMiB);
  EXPECT_EQ(m.usage(1).allocated.count, 30 * kMiB);
  EXPECT_EQ(m.usage(1).reserved.count, 30 * kMiB);
  m.free(0, 7, 0, SimTime{}, false);
  EXPECT_EQ(m.usage(0).allocated.count, 0);
  EXPECT_EQ(m.usage(0).reserved.count, 2 * kMiB);  // cached
  const MemoryPeaks p = m.peaks(0);
  EXPECT_EQ(p.requested.count, 100);
  EXPECT_EQ(p.allocated.count, 512);
  EXPECT_EQ(p.reserved.count, 2 * kMiB);
  EXPECT_EQ(p.device.count, 2 * kMiB);
  EXPECT_EQ(p.cached_at_reserved_peak.count, 2 * kMiB - 512);
}

TEST(AllocatorMemoryModelTest, DeferredFreeKeepsTheBlockUntilReleased) {
  AllocatorMemoryModel m(DeviceMemoryOptions{});
  m.reset(1);
  ASSERT_TRUE(m.alloc(0, 1, Bytes{12 * kMiB}, 0, SimTime{}));
  m.free(0, 1, 0, SimTime{}, /*deferred=*/true);
  EXPECT_EQ(m.usage(0).allocated.count, 0);
  ASSERT_TRUE(m.alloc(0, 2, Bytes{12 * kMiB}, 0, SimTime{}));
  EXPECT_EQ(m.usage(0).reserved.count, 24 * kMiB);  // the pending block was not reused
  m.release(0, 1, SimTime{});
  m.free(0, 2, 0, SimTime{}, false);
  ASSERT_TRUE(m.alloc(0, 3, Bytes{12 * kMiB}, 0, SimTime{}));
  EXPECT_EQ(m.usage(0).reserved.count, 24 * kMiB);
}

TEST(AllocatorMemoryModelTest, ContextAndExternalBytesShrinkTheDevice) {
  DeviceMemoryOptions o;
  o.capacity = Bytes{100 * kMiB};
  o.context = Bytes{30 * kMiB};
  AllocatorMemoryModel m(o);
  m.reset(1);
  EXPECT_TRUE(m.add_external(0, Bytes{20 * kMiB}, SimTime{}));
  EXPECT_TRUE(m.alloc(0, 1, Bytes{50 * kMiB}, 0, SimTime{}));  // exactly fits
  EXPECT_FALSE(m.alloc(0, 2, Bytes{1}, 0, SimTime{}));
  const OomInfo oom = m.oom(0);
  EXPECT_EQ(oom.requested, 1);
  EXPECT_EQ(oom.rounded, 512);
  EXPECT_EQ(oom.alloc_size, 2 * kMiB);
  EXPECT_EQ(oom.device_free, 0);
  EXPECT_EQ(m.usage(0).device().count, 100 * kMiB);
  EXPECT_EQ(m.peaks(0).device.count, 100 * kMiB);
  EXPECT_FALSE(m.add_external(0, Bytes{1}, SimTime{}));  // NCCL has no room either
  EXPECT_EQ(m.capacity().count, 100 * kMiB);
}

TEST(AllocatorMemoryModelTest, ResetStartsOver) {
  AllocatorMemoryModel m(DeviceMemoryOptions{});
  m.reset(1);
  ASSERT_TRUE(m.alloc(0, 1, Bytes{kMiB}, 0, SimTime{}));
  m.reset(1);
  EXPECT_EQ(m.usage(0).reserved.count, 0);
  EXPECT_EQ(m.peaks(0).allocated.count, 0);
}

TEST(AllocatorMemoryModelTest, AllocatorConfigApplies) {
  DeviceMemoryOptions o;
  o.allocator.expandable_segments = true;
  AllocatorMemoryModel m(o);
  m.reset(1);
  ASSERT_TRUE(m.alloc(0, 1, Bytes{3 * kMiB}, 0, SimTime{}));
  // Expandable: pages of 20 MiB are mapped as needed, not a 20 MiB segment
  // per request size class; one page holds it.
  EXPECT_EQ(m.usage(0).reserved.count, 20 * kMiB);
  ASSERT_TRUE(m.alloc(0, 2, Bytes{30 * kMiB}, 0, SimTime{}));
  EXPECT_EQ(m.usage(0).reserved.count, 40 * kMiB);  // grows in place by one more page
}

}  // namespace
}  // namespace prism
