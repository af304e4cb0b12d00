#include "mem/memory_model.h"

#include <limits>

#include <gtest/gtest.h>

namespace prism {
namespace {

TEST(CountingMemoryModelTest, TracksPeakPerRank) {
  CountingMemoryModel m;
  m.reset(2);
  m.alloc(0, 1, Bytes{100}, 0, SimTime{0});
  m.alloc(0, 2, Bytes{50}, 0, SimTime{1});
  m.free(0, 1, Bytes{100}, 0, SimTime{2});
  m.alloc(0, 3, Bytes{80}, 0, SimTime{3});
  m.alloc(1, 1, Bytes{7}, 0, SimTime{0});
  EXPECT_EQ(m.peak_allocated(0).count, 150);
  EXPECT_EQ(m.allocated(0).count, 130);
  EXPECT_EQ(m.peak_allocated(1).count, 7);
  m.reset(1);
  EXPECT_EQ(m.peak_allocated(0).count, 0);
}

TEST(CountingMemoryModelTest, SaturatesInsteadOfOverflowing) {
  CountingMemoryModel m;
  m.reset(1);
  for (int i = 0; i < 9000; ++i) m.alloc(0, i, kMaxBytes, 0, SimTime{0});
  EXPECT_EQ(m.peak_allocated(0).count, std::numeric_limits<std::int64_t>::max());
}

}  // namespace
}  // namespace prism
