#include "compute/gpu_spec.h"

#include <cmath>

#include <gtest/gtest.h>

namespace prism {
namespace {

TEST(GpuSpecTest, PresetNamesAreTheClusterGpuModels) {
  const std::vector<std::string_view> want{"A100-SXM4-40GB", "A100-SXM4-80GB", "H100-SXM5-80GB",
                                           "H200-SXM-141GB", "B200-SXM-180GB"};
  EXPECT_EQ(gpu_spec_names(), want);
  for (std::string_view name : gpu_spec_names()) {
    const Result<GpuSpec> g = gpu_spec(name);
    ASSERT_TRUE(g.is_ok()) << name;
    EXPECT_EQ(g->name, name);
    EXPECT_TRUE(validate_gpu_spec(*g).is_ok()) << validate_gpu_spec(*g).message();
  }
}

TEST(GpuSpecTest, VendorPeaksAreDense) {
  const GpuSpec a40 = *gpu_spec("A100-SXM4-40GB");
  const GpuSpec a80 = *gpu_spec("A100-SXM4-80GB");
  EXPECT_EQ(a40.num_sms, 108);
  EXPECT_DOUBLE_EQ(a40.bf16_flops, 312e12);
  EXPECT_DOUBLE_EQ(a40.fp8_flops, 0);
  EXPECT_DOUBLE_EQ(a40.hbm_Bps, 1555e9);
  EXPECT_DOUBLE_EQ(a80.hbm_Bps, 2039e9);
  EXPECT_DOUBLE_EQ(a80.hbm_bytes, 80e9);

  const GpuSpec h100 = *gpu_spec("H100-SXM5-80GB");
  EXPECT_EQ(h100.num_sms, 132);
  EXPECT_DOUBLE_EQ(h100.bf16_flops, 989.4e12);
  EXPECT_DOUBLE_EQ(h100.fp8_flops, 1978.9e12);
  EXPECT_DOUBLE_EQ(h100.hbm_Bps, 3.35e12);
  EXPECT_DOUBLE_EQ(h100.hbm_bytes, 80e9);

  const GpuSpec h200 = *gpu_spec("H200-SXM-141GB");
  EXPECT_EQ(h200.num_sms, 132);
  EXPECT_DOUBLE_EQ(h200.bf16_flops, h100.bf16_flops);
  EXPECT_DOUBLE_EQ(h200.fp8_flops, h100.fp8_flops);
  EXPECT_DOUBLE_EQ(h200.hbm_Bps, 4.8e12);
  EXPECT_DOUBLE_EQ(h200.hbm_bytes, 141e9);

  const GpuSpec b200 = *gpu_spec("B200-SXM-180GB");
  EXPECT_EQ(b200.num_sms, 148);
  EXPECT_DOUBLE_EQ(b200.bf16_flops, 2.25e15);
  EXPECT_DOUBLE_EQ(b200.fp8_flops, 4.5e15);
  EXPECT_DOUBLE_EQ(b200.hbm_Bps, 8e12);
  EXPECT_DOUBLE_EQ(b200.hbm_bytes, 180e9);
}

TEST(GpuSpecTest, OneCalibrationPerArchitecture) {
  // The A100s differ only in memory; H100 and H200 share Hopper's curves
  // (the GEMM curve fitted to the H100's measured GEMMs, which the H200's
  // rows match within 2%: KernelModelFitTest).
  const GpuSpec a40 = *gpu_spec("A100-SXM4-40GB");
  const GpuSpec a80 = *gpu_spec("A100-SXM4-80GB");
  EXPECT_DOUBLE_EQ(a40.gemm_max_efficiency, a80.gemm_max_efficiency);
  EXPECT_DOUBLE_EQ(a40.attention_fwd_efficiency, a80.attention_fwd_efficiency);
  const GpuSpec h100 = *gpu_spec("H100-SXM5-80GB");
  const GpuSpec h200 = *gpu_spec("H200-SXM-141GB");
  EXPECT_DOUBLE_EQ(h100.gemm_max_efficiency, h200.gemm_max_efficiency);
  EXPECT_DOUBLE_EQ(h100.gemm_fp8_max_efficiency, h200.gemm_fp8_max_efficiency);
  EXPECT_DOUBLE_EQ(h100.gemm_k_half, h200.gemm_k_half);
  EXPECT_DOUBLE_EQ(h100.gemm_fp8_k_half, h200.gemm_fp8_k_half);
  EXPECT_DOUBLE_EQ(h100.attention_bwd_efficiency, h200.attention_bwd_efficiency);
  EXPECT_DOUBLE_EQ(h100.launch_overhead_us, h200.launch_overhead_us);
}

TEST(GpuSpecTest, UnknownNameListsThePresets) {
  const Result<GpuSpec> g = gpu_spec("H100-PCIe");
  ASSERT_FALSE(g.is_ok());
  EXPECT_EQ(g.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(g.status().message(),
            "unknown GPU 'H100-PCIe' (known: A100-SXM4-40GB, A100-SXM4-80GB, H100-SXM5-80GB, "
            "H200-SXM-141GB, B200-SXM-180GB)");
}

TEST(GpuSpecTest, ValidateRejectsEachBadField) {
  const GpuSpec good = *gpu_spec("H100-SXM5-80GB");
  struct Case {
    void (*mutate)(GpuSpec&);
    const char* message;
  };
  const Case cases[] = {
      {[](GpuSpec& g) { g.num_sms = 0; }, "num_sms must be > 0"},
      {[](GpuSpec& g) { g.bf16_flops = 0; }, "bf16_flops must be > 0"},
      {[](GpuSpec& g) { g.fp8_flops = -1; }, "fp8_flops must be >= 0"},
      {[](GpuSpec& g) { g.hbm_Bps = 0; }, "hbm_Bps must be > 0"},
      {[](GpuSpec& g) { g.gemm_max_efficiency = 1.5; }, "gemm_max_efficiency must be in (0, 1]"},
      {[](GpuSpec& g) { g.gemm_fp8_max_efficiency = 0; },
       "gemm_fp8_max_efficiency must be in (0, 1]"},
      {[](GpuSpec& g) { g.gemm_tile_n = 1; }, "GEMM tile must be positive"},
      {[](GpuSpec& g) { g.gemm_stream_k_rate = 1.5; }, "gemm_stream_k_rate must be 0 or in (0, 1]"},
      {[](GpuSpec& g) { g.gemm_stream_k_rate = -0.1; },
       "gemm_stream_k_rate must be 0 or in (0, 1]"},
      {[](GpuSpec& g) { g.gemm_k_half = 0; }, "gemm_k_half must be > 0"},
      {[](GpuSpec& g) { g.gemm_fp8_k_half = 0; }, "gemm_fp8_k_half must be > 0"},
      {[](GpuSpec& g) { g.attention_bwd_efficiency = 0; },
       "attention efficiencies must be in (0, 1]"},
      {[](GpuSpec& g) { g.attention_seq_half = 0; }, "attention half points must be > 0"},
      {[](GpuSpec& g) { g.hbm_efficiency = 0; }, "hbm_efficiency must be in (0, 1]"},
      {[](GpuSpec& g) { g.launch_overhead_us = -1; }, "launch_overhead_us must be >= 0"},
      {[](GpuSpec& g) { g.tensor_sustained_slowdown = 0.99; },
       "sustained slowdowns must be in [1, 2]"},
      {[](GpuSpec& g) { g.tensor_fp8_sustained_slowdown = 2.5; },
       "sustained slowdowns must be in [1, 2]"},
      {[](GpuSpec& g) { g.tensor_sustained_slowdown = std::nan(""); },
       "sustained slowdowns must be in [1, 2]"},
  };
  for (const Case& c : cases) {
    GpuSpec g = good;
    c.mutate(g);
    const Status s = validate_gpu_spec(g);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(), std::string("GPU spec 'H100-SXM5-80GB': ") + c.message);
  }
  // No FP8 tensor cores: the FP8 efficiency and k half-point are not used.
  GpuSpec a100 = *gpu_spec("A100-SXM4-80GB");
  a100.gemm_fp8_max_efficiency = 0;
  a100.gemm_fp8_k_half = 0;
  EXPECT_TRUE(validate_gpu_spec(a100).is_ok());
}

}  // namespace
}  // namespace prism
