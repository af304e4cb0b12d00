#include "compute/compute_model.h"

#include <gtest/gtest.h>

namespace prism {
namespace {

TEST(RooflineModelTest, BoundByTheSlowerResource) {
  RooflineParams p;
  p.peak_flops = 1e12;                   // 1000 flop/ns
  p.hbm_bw = Bandwidth::from_gbps(100);  // 100 byte/ns
  RooflineModel m(p);
  EXPECT_EQ(m.duration(KernelCost{KernelClass::kGemm, 1e6, Bytes{1000}}).ns, 1000);  // compute
  EXPECT_EQ(m.duration(KernelCost{KernelClass::kElementwise, 1e3, Bytes{100000}}).ns,
            1000);  // memory
  EXPECT_EQ(m.duration(KernelCost{KernelClass::kOther, 0, Bytes{0}}).ns, 0);
}

TEST(RooflineModelTest, DefaultsAreH100) {
  RooflineModel m;
  // 989.4 TFLOP of dense BF16 takes one second at peak.
  EXPECT_EQ(m.duration(KernelCost{KernelClass::kGemm, 989.4e12, Bytes{0}}).ns, 1'000'000'000);
}

TEST(RooflineModelTest, HugeCostsClampToTheLongestOp) {
  RooflineModel m;
  EXPECT_EQ(m.duration(KernelCost{KernelClass::kGemm, 1e30, Bytes{0}}), kMaxOpDuration);
  EXPECT_EQ(m.duration(KernelCost{KernelClass::kGemm, 1e25, Bytes{0}}), kMaxOpDuration);
  RooflineParams slow;
  slow.hbm_bw = Bandwidth{1};
  EXPECT_EQ(RooflineModel(slow).duration(KernelCost{KernelClass::kOther, 0, kMaxBytes}),
            kMaxOpDuration);
}

}  // namespace
}  // namespace prism
