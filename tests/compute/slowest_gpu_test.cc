#include "compute/slowest_gpu.h"

#include <cmath>

#include <gtest/gtest.h>

namespace prism {
namespace {

// E[max of n standard normals]: closed forms for n <= 5 (2: 1/sqrt(pi),
// 3: 3 / (2 sqrt(pi)), 4 and 5 from the tables of order statistics), and
// the tabulated 1.538753 for 10, 2.507594 for 100, 3.241436 for 1,000.
TEST(SlowestGpuTest, ExpectedMaximumOfStandardNormals) {
  EXPECT_EQ(expected_max_standard_normal(0), 0);
  EXPECT_EQ(expected_max_standard_normal(1), 0);
  EXPECT_NEAR(expected_max_standard_normal(2), 1 / std::sqrt(M_PI), 1e-9);
  EXPECT_NEAR(expected_max_standard_normal(3), 1.5 / std::sqrt(M_PI), 1e-9);
  EXPECT_NEAR(expected_max_standard_normal(4), 1.029375, 1e-6);
  EXPECT_NEAR(expected_max_standard_normal(5), 1.162964, 1e-6);
  EXPECT_NEAR(expected_max_standard_normal(10), 1.538753, 1e-6);
  EXPECT_NEAR(expected_max_standard_normal(100), 2.507594, 1e-6);
  EXPECT_NEAR(expected_max_standard_normal(1000), 3.241436, 1e-6);
  double prev = 0;
  for (int n : {2, 8, 64, 512, 4096, 16384, 100000}) {
    const double e = expected_max_standard_normal(n);
    EXPECT_GT(e, prev) << n;
    prev = e;
  }
  EXPECT_LT(prev, 4.5);
}

TEST(SlowestGpuTest, HopperRunsAtItsSlowestChipA100AndB200DoNot) {
  const GpuSpec h100 = *gpu_spec("H100-SXM5-80GB");
  EXPECT_DOUBLE_EQ(h100.sustained_clock_cov, 0.016);
  EXPECT_DOUBLE_EQ(gpu_spec("H200-SXM-141GB")->sustained_clock_cov, 0.016);
  EXPECT_DOUBLE_EQ(slowest_gpu_slowdown(h100, 1), 1);
  EXPECT_NEAR(slowest_gpu_slowdown(h100, 8), 1 + 0.016 * 1.423600, 1e-6);
  EXPECT_NEAR(slowest_gpu_slowdown(h100, 1000), 1 + 0.016 * 3.241436, 1e-6);

  const GpuSpec scaled = slowed_by(h100, slowest_gpu_slowdown(h100, 1000));
  EXPECT_DOUBLE_EQ(scaled.tensor_sustained_slowdown,
                   h100.tensor_sustained_slowdown * slowest_gpu_slowdown(h100, 1000));
  EXPECT_DOUBLE_EQ(scaled.tensor_fp8_sustained_slowdown,
                   h100.tensor_fp8_sustained_slowdown * slowest_gpu_slowdown(h100, 1000));
  EXPECT_EQ(scaled.hbm_efficiency, h100.hbm_efficiency);  // memory-bound kernels: HBM, not SMs
  EXPECT_TRUE(validate_gpu_spec(slowed_by(h100, slowest_gpu_slowdown(h100, 16384))).is_ok());

  for (const char* name : {"A100-SXM4-80GB", "B200-SXM-180GB"}) {
    const GpuSpec g = *gpu_spec(name);
    EXPECT_EQ(g.sustained_clock_cov, 0) << name;
    EXPECT_EQ(slowest_gpu_slowdown(g, 4096), 1) << name;
    EXPECT_EQ(slowed_by(g, slowest_gpu_slowdown(g, 4096)).tensor_sustained_slowdown,
              g.tensor_sustained_slowdown);
  }
}

TEST(SlowestGpuTest, ClockSpreadOutsideItsRangeIsRejected) {
  GpuSpec g = *gpu_spec("H100-SXM5-80GB");
  g.sustained_clock_cov = -0.01;
  EXPECT_NE(validate_gpu_spec(g).message().find("sustained_clock_cov must be in [0, 0.1]"),
            std::string::npos);
  g.sustained_clock_cov = 0.2;
  EXPECT_FALSE(validate_gpu_spec(g).is_ok());
  g.sustained_clock_cov = 0.1;
  EXPECT_TRUE(validate_gpu_spec(g).is_ok());
}

}  // namespace
}  // namespace prism
