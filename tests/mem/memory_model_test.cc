#include "mem/memory_model.h"

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

}  // namespace
}  // namespace prism
