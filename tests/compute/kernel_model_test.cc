#include "compute/kernel_model.h"

#include <cmath>
#include <functional>
#include <random>

#include <gtest/gtest.h>

namespace prism {
namespace {

KernelModel model(std::string_view gpu, const KernelDb* db = nullptr) {
  return KernelModel(*gpu_spec(gpu), db);
}

// The curves' rate in a burst of calls (KernelModel::modeled), as the
// published microbenchmarks and the database measure kernels; time() adds
// the sustained slowdown (KernelModelSustainedTest).
double tflops(const KernelModel& m, const Kernel& k) {
  return kernel_flops(k) / m.modeled(k).seconds() / 1e12;
}

bool fp8(DType d) {
  return d == DType::kFloat8E4M3 || d == DType::kFloat8E5M2;
}

// The peak the kernel's type runs at: never beaten.
double peak(const GpuSpec& g, DType d) {
  if (fp8(d) && g.fp8_flops > 0) return g.fp8_flops;
  return d == DType::kFloat32 ? g.bf16_flops / 2 : g.bf16_flops;
}

// ---- Calibration against published measurements (docs/compute.md) ----

TEST(KernelModelCalibrationTest, LargeGemms) {
  // H100: the curve is fitted to the measured database (KernelModelFitTest);
  // there 16384x13312x8192 runs at 731 TFLOP/s bf16 and 1208 FP8. Published
  // torch matmul at 8192^3: 736-798 (best shapes, older cuBLAS).
  const Kernel big = gemm(8192, 8192, 8192);
  EXPECT_GT(tflops(model("H100-SXM5-80GB"), big), 680);
  EXPECT_LT(tflops(model("H100-SXM5-80GB"), big), 780);
  // A100: calibrated on 2021-22 Megatron-LM runs (docs/validation.md), below
  // today's cuBLAS (~270).
  EXPECT_GT(tflops(model("A100-SXM4-80GB"), big), 225);
  EXPECT_LT(tflops(model("A100-SXM4-80GB"), big), 250);
  const Kernel big8 = gemm(8192, 8192, 8192, DType::kFloat8E4M3);
  EXPECT_GT(tflops(model("H100-SXM5-80GB"), big8), 1200);  // MAMF 1402
  EXPECT_LT(tflops(model("H100-SXM5-80GB"), big8), 1400);
  EXPECT_GT(tflops(model("B200-SXM-180GB"), big), 1550);  // MAMF 1745
  EXPECT_LT(tflops(model("B200-SXM-180GB"), big), 1760);
  // 2048^3 on H100: published 645-677 (zzc0721/torch-performance-test-data#79);
  // the database's short-k rows (k < 4096) put the fitted curve ~8% lower.
  EXPECT_NEAR(tflops(model("H100-SXM5-80GB"), gemm(2048, 2048, 2048)), 620, 40);
}

TEST(KernelModelCalibrationTest, SmallGemmsAreFarBelowPeak) {
  // H100 1024^3: measured 177-179 TFLOP/s (zzc0721/torch-performance-test-data#79).
  for (std::string_view gpu : gpu_spec_names()) {
    const KernelModel m = model(gpu);
    EXPECT_LT(tflops(m, gemm(1024, 1024, 1024)) * 1e12, 0.4 * m.gpu().bf16_flops) << gpu;
    EXPECT_LT(tflops(m, gemm(256, 256, 256)) * 1e12, 0.05 * m.gpu().bf16_flops) << gpu;
  }
}

TEST(KernelModelCalibrationTest, FlashAttention) {
  // FA2 on A100, d=128, 16k tokens: ~70% of peak forward, 50-60% backward.
  const KernelModel a100 = model("A100-SXM4-80GB");
  const double a_fwd = tflops(a100, attention(false, 1, 16, 16, 16384, 16384, 128, false));
  const double a_bwd = tflops(a100, attention(true, 1, 16, 16, 16384, 16384, 128, false));
  EXPECT_GT(a_fwd / 312, 0.65);
  EXPECT_LT(a_fwd / 312, 0.75);
  EXPECT_GT(a_bwd / 312, 0.50);
  EXPECT_LT(a_bwd / 312, 0.60);
  // liangan1/GPU_travel: b=16 hq=32 s=1024 d=128 measured 178-181.
  EXPECT_NEAR(tflops(a100, attention(false, 16, 32, 32, 1024, 1024, 128, false)), 179, 10);

  // FA3 / cuDNN on H100, 16k tokens: d=128 ~650 fwd, ~500 bwd; d=256 up to 740.
  const KernelModel h100 = model("H100-SXM5-80GB");
  EXPECT_NEAR(tflops(h100, attention(false, 1, 16, 16, 16384, 16384, 128, false)), 650, 40);
  EXPECT_NEAR(tflops(h100, attention(true, 1, 16, 16, 16384, 16384, 128, false)), 500, 40);
  EXPECT_NEAR(tflops(h100, attention(false, 1, 8, 8, 16384, 16384, 256, false)), 730, 40);

  // FA4 on B200 (flash-attention#2280): b=4 h=16 s=8192 d=128 fwd 1535, bwd 1360.
  const KernelModel b200 = model("B200-SXM-180GB");
  EXPECT_NEAR(tflops(b200, attention(false, 4, 16, 16, 8192, 8192, 128, false)), 1535, 80);
  EXPECT_NEAR(tflops(b200, attention(true, 4, 16, 16, 8192, 8192, 128, false)), 1360, 80);
  EXPECT_NEAR(tflops(b200, attention(false, 4, 16, 16, 8192, 8192, 128, true)), 1418, 100);
}

TEST(KernelModelCalibrationTest, AttentionEfficiencyRisesWithSequenceAndHeadDim) {
  const KernelModel m = model("H100-SXM5-80GB");
  double last = 0;
  for (std::int64_t s : {512, 1024, 2048, 4096, 8192, 16384}) {
    const double t = tflops(m, attention(false, 16384 / s, 16, 16, s, s, 128, true));
    EXPECT_GT(t, last) << s;
    last = t;
  }
  last = 0;
  for (std::int64_t d : {32, 64, 128, 256}) {
    const double t = tflops(m, attention(true, 2, 4096 / d, 4096 / d, 8192, 8192, d, false));
    EXPECT_GT(t, last) << d;
    last = t;
  }
}

TEST(KernelModelCalibrationTest, MemoryBoundRunsAtTheAchievableBandwidth) {
  const KernelModel m = model("H100-SXM5-80GB");
  const GpuSpec& g = m.gpu();
  const std::int64_t bytes = std::int64_t{1} << 30;
  const double want_ns = bytes / (g.hbm_efficiency * g.hbm_Bps) * 1e9 + g.launch_overhead_us * 1e3;
  EXPECT_EQ(m.time(memory_bound("copy", bytes)).ns, static_cast<std::int64_t>(std::ceil(want_ns)));
  EXPECT_GT(g.hbm_efficiency, 0.84);
  EXPECT_LT(g.hbm_efficiency, 0.93);
  // H200 has H100's compute and 4.8/3.35 of its bandwidth.
  const KernelModel h200 = model("H200-SXM-141GB");
  EXPECT_LT(h200.time(memory_bound("copy", bytes)), m.time(memory_bound("copy", bytes)));
}

TEST(KernelModelCalibrationTest, NewerGpusAreFasterOnLargeKernels) {
  const Kernel ks[] = {gemm(8192, 8192, 8192), attention(false, 1, 32, 8, 8192, 8192, 128, true),
                       attention(true, 1, 32, 8, 8192, 8192, 128, true),
                       memory_bound("layernorm_fwd", 1 << 28)};
  for (const Kernel& k : ks) {
    EXPECT_GT(model("A100-SXM4-40GB").time(k), model("H100-SXM5-80GB").time(k)) << signature(k);
    EXPECT_GE(model("H100-SXM5-80GB").time(k), model("H200-SXM-141GB").time(k)) << signature(k);
    EXPECT_GT(model("H200-SXM-141GB").time(k), model("B200-SXM-180GB").time(k)) << signature(k);
  }
}

TEST(KernelModelTest, EmptyKernelsCostTheLaunchFloor) {
  for (std::string_view gpu : gpu_spec_names()) {
    const KernelModel m = model(gpu);
    const SimTime floor{static_cast<std::int64_t>(std::ceil(m.gpu().launch_overhead_us * 1e3))};
    EXPECT_EQ(m.time(gemm(0, 4096, 4096)), floor);
    EXPECT_EQ(m.time(attention(false, 0, 8, 8, 1024, 1024, 128, true)), floor);
    EXPECT_EQ(m.time(memory_bound("noop", 0)), floor);
    EXPECT_GT(m.time(gemm(1, 1, 1)), floor);
  }
}

TEST(KernelModelTest, Fp8WithoutFp8TensorCoresRunsAtTheBf16Rate) {
  const KernelModel m = model("A100-SXM4-80GB");
  EXPECT_EQ(m.time(gemm(8192, 8192, 8192, DType::kFloat8E4M3)), m.time(gemm(8192, 8192, 8192)));
  const KernelModel h = model("H100-SXM5-80GB");
  EXPECT_LT(h.time(gemm(8192, 8192, 8192, DType::kFloat8E4M3)), h.time(gemm(8192, 8192, 8192)));
}

// Hopper's stream-K candidate (docs/compute.md, "Stream-K"): a GEMM whose
// large tiles leave the last wave partly empty runs as its work spread over
// the SMs at 0.93 of the tile's rate; one whose waves are full keeps the
// quantized time; GPUs without the candidate are unchanged.
TEST(KernelModelTest, StreamKSpreadsAPartlyFilledLastWave) {
  const GpuSpec h100 = *gpu_spec("H100-SXM5-80GB");
  EXPECT_EQ(h100.gemm_stream_k_rate, 0.93);
  GpuSpec quantized = h100;
  quantized.gemm_stream_k_rate = 0;
  const KernelModel with(h100, nullptr), without(quantized, nullptr);
  const double launch = h100.launch_overhead_us * 1e-6;
  auto kernel_s = [&](const KernelModel& m, const Kernel& k) {
    return m.modeled(k).seconds() - launch;
  };
  // 512 x 9216: 4 x 36 = 144 large tiles on 132 SMs, 1.09 waves. Quantized,
  // the best is the half-width tile: 288 tiles in 3 waves of half the work
  // at 0.9 (1.667 large waves); stream-K: 144 / 132 / 0.93 = 1.173.
  const Kernel chunk = gemm(512, 9216, 18432);
  // (1e-5: the times are whole nanoseconds)
  EXPECT_NEAR(kernel_s(with, chunk) / kernel_s(without, chunk),
              (144.0 / 132 / 0.93) / (3 * 0.5 / 0.9), 1e-5);
  // 512 x 8448: 4 x 33 = 132 tiles, one full wave: the quantized tile wins.
  const Kernel full = gemm(512, 8448, 18432);
  EXPECT_EQ(with.modeled(full), without.modeled(full));
  // Fewer tiles than SMs: at least one wave, so stream-K never beats it.
  const Kernel small = gemm(256, 4096, 8192);
  EXPECT_EQ(with.modeled(small), without.modeled(small));
  for (std::string_view gpu : {"A100-SXM4-80GB", "B200-SXM-180GB"})
    EXPECT_EQ(gpu_spec(gpu)->gemm_stream_k_rate, 0) << gpu;
}

TEST(KernelModelTest, HugeKernelsClampToTheLongestOp) {
  const KernelModel m = model("H100-SXM5-80GB");
  const std::int64_t big = std::int64_t{1} << 40;
  EXPECT_EQ(m.time(gemm(big, big, big)), kMaxOpDuration);
}

// ---- The database overrides the model ----

TEST(KernelModelDbTest, MeasuredTimesOverrideExactly) {
  const KernelDb db = *KernelDb::parse(
      "gpu,signature,us,source\n"
      "H100-SXM5-80GB,gemm bf16 m=8192 n=8192 k=8192,1512.3,test\n"
      "H100-SXM5-80GB,attn_bwd bf16 b=1 hq=16 hkv=2 sq=8192 skv=8192 d=128 causal,0.0001,test\n"
      "H100-SXM5-80GB,mem adam bytes=1000,1e13,test\n"
      "A100-SXM4-80GB,gemm bf16 m=1 n=1 k=1,999,test\n",
      "db.csv", "H100-SXM5-80GB");
  const KernelModel m = model("H100-SXM5-80GB", &db);
  const KernelModel plain = model("H100-SXM5-80GB");

  // A measured row times the sustained slowdown (1.0296 for bf16 on Hopper),
  // rounded up to a nanosecond.
  const double slow = m.gpu().tensor_sustained_slowdown;
  ASSERT_EQ(slow, 1.0296);
  const Kernel g = gemm(8192, 8192, 8192);
  EXPECT_TRUE(m.measured(g));
  EXPECT_EQ(m.time(g).ns, static_cast<std::int64_t>(std::ceil(1512300 * slow)));
  EXPECT_EQ(m.modeled(g), plain.modeled(g));
  EXPECT_FALSE(plain.measured(g));

  // Below the launch floor if so measured.
  const Kernel a = attention(true, 1, 16, 2, 8192, 8192, 128, true);
  EXPECT_EQ(m.time(a).ns, 1);
  // Clamped to the longest op.
  EXPECT_EQ(m.time(memory_bound("adam", 1000)), kMaxOpDuration);

  // Unmeasured kernels (and other GPUs' rows) fall back to the model.
  const Kernel other = gemm(8192, 8192, 4096);
  EXPECT_FALSE(m.measured(other));
  EXPECT_EQ(m.time(other), plain.time(other));
  EXPECT_FALSE(m.measured(gemm(1, 1, 1)));
  EXPECT_EQ(m.time(gemm(1, 1, 1)), plain.time(gemm(1, 1, 1)));
}

// An accumulating GEMM measured only without `acc`: the plain measurement
// scaled by the curves' ratio, rounded up; its own row wins when there is one.
TEST(KernelModelDbTest, AccumulatingGemmScalesItsPlainMeasurement) {
  const KernelDb db = *KernelDb::parse(
      "gpu,signature,us,source\n"
      "H100-SXM5-80GB,gemm bf16 m=8192 n=3072 k=512,100,test\n"
      "H100-SXM5-80GB,gemm bf16 m=4096 n=4096 k=4096,200,test\n"
      "H100-SXM5-80GB,gemm bf16 m=4096 n=4096 k=4096 acc=fp32,250.5,test\n",
      "db.csv", "H100-SXM5-80GB");
  const KernelModel m = model("H100-SXM5-80GB", &db);
  const Kernel plain = gemm(8192, 3072, 512);
  const Kernel acc = gemm(8192, 3072, 512, DType::kBFloat16, 1, DType::kFloat32);
  // k = 512: the fp32 read and write of C makes the curves memory-bound.
  const double mp = static_cast<double>(m.modeled(plain).ns);
  const double ma = static_cast<double>(m.modeled(acc).ns);
  ASSERT_GT(ma, mp);
  EXPECT_EQ(m.source(plain), KernelSource::kMeasured);
  EXPECT_EQ(m.source(acc), KernelSource::kMeasuredPlainScaled);
  EXPECT_TRUE(m.measured(acc));
  const double slow = m.gpu().tensor_sustained_slowdown;
  EXPECT_EQ(m.time(acc).ns, static_cast<std::int64_t>(std::ceil(100e3 * ma / mp * slow)));
  EXPECT_GT(m.time(acc).ns, 100000);
  EXPECT_EQ(to_string(m.source(acc)), "measured (plain) x model");

  // Measured with acc: that row, as is.
  const Kernel own = gemm(4096, 4096, 4096, DType::kBFloat16, 1, DType::kFloat32);
  EXPECT_EQ(m.source(own), KernelSource::kMeasured);
  EXPECT_EQ(m.time(own).ns, static_cast<std::int64_t>(std::ceil(250500 * slow)));
  // Neither measured (the other acc type has no row, nor has its plain GEMM
  // with another shape): the curves.
  const Kernel none = gemm(8192, 3072, 1024, DType::kBFloat16, 1, DType::kBFloat16);
  EXPECT_EQ(m.source(none), KernelSource::kModel);
  EXPECT_FALSE(m.measured(none));
  EXPECT_GT(m.time(none), m.modeled(none));
  EXPECT_EQ(to_string(KernelSource::kModel), "model");
  EXPECT_EQ(to_string(KernelSource::kMeasured), "measured");
  // Without a database, the curves.
  EXPECT_EQ(model("H100-SXM5-80GB").source(acc), KernelSource::kModel);
}

// ---- Sustained clocks (docs/compute.md, "Sustained clocks") ----

// GEMMs and attention: the curves' kernel part and burst-measured rows x the
// GPU's slowdown for the input type; memory-bound kernels and rows taken in
// a training step (source "kineto ...") as they are.
TEST(KernelModelSustainedTest, TensorKernelsSlowByTheGpusFactor) {
  GpuSpec g = *gpu_spec("H100-SXM5-80GB");
  g.tensor_sustained_slowdown = 1.25;
  g.tensor_fp8_sustained_slowdown = 1.5;
  const KernelModel m(g, nullptr);
  const double launch_ns = g.launch_overhead_us * 1e3;
  const auto slowed = [&](const Kernel& k, double x) {
    const double kernel_ns = static_cast<double>(m.modeled(k).ns) - launch_ns;
    return static_cast<double>(m.time(k).ns) - launch_ns - kernel_ns * x;
  };
  // modeled() rounds up once, time() once: within 2 ns.
  EXPECT_NEAR(slowed(gemm(8192, 8192, 8192), 1.25), 0, 2);
  EXPECT_NEAR(slowed(gemm(8192, 8192, 8192, DType::kFloat8E4M3), 1.5), 0, 2);
  EXPECT_NEAR(slowed(attention(false, 1, 32, 8, 8192, 8192, 128, true), 1.25), 0, 2);
  EXPECT_NEAR(slowed(attention(true, 1, 32, 8, 8192, 8192, 128, true), 1.25), 0, 2);
  const Kernel mem = memory_bound("adam", 1 << 30);
  EXPECT_EQ(m.time(mem), m.modeled(mem));
  EXPECT_EQ(m.sustained_slowdown(mem), 1);
  // The launch floor is not slowed.
  EXPECT_EQ(m.time(gemm(0, 4096, 4096)), m.modeled(gemm(0, 4096, 4096)));

  // Without FP8 tensor cores an FP8 GEMM runs as bf16: bf16's factor.
  GpuSpec a = *gpu_spec("A100-SXM4-80GB");
  a.tensor_sustained_slowdown = 1.25;
  a.tensor_fp8_sustained_slowdown = 1.5;
  EXPECT_EQ(KernelModel(a, nullptr).sustained_slowdown(gemm(64, 64, 64, DType::kFloat8E4M3)), 1.25);

  const KernelDb db = *KernelDb::parse(
      "gpu,signature,us,source\n"
      "H100-SXM5-80GB,gemm bf16 m=4096 n=4096 k=4096,200,measure_kernels.py torch 2.11.0\n"
      "H100-SXM5-80GB,gemm bf16 m=2048 n=4096 k=4096,120,kineto step.json 2026-11-28\n"
      "H100-SXM5-80GB,gemm fp8 m=4096 n=4096 k=4096,100,measure_kernels.py torch 2.11.0\n",
      "db.csv", "H100-SXM5-80GB");
  const KernelModel md(g, &db);
  EXPECT_EQ(md.time(gemm(4096, 4096, 4096)).ns, 250000);
  EXPECT_EQ(md.time(gemm(2048, 4096, 4096)).ns, 120000);  // in situ: as measured
  EXPECT_EQ(md.time(gemm(4096, 4096, 4096, DType::kFloat8E4M3)).ns, 150000);
  // An accumulating GEMM scaled from an in-situ plain row stays in situ.
  const Kernel acc = gemm(2048, 4096, 4096, DType::kBFloat16, 1, DType::kFloat32);
  EXPECT_EQ(md.source(acc), KernelSource::kMeasuredPlainScaled);
  EXPECT_EQ(md.time(acc).ns, static_cast<std::int64_t>(std::ceil(
                                 120e3 * static_cast<double>(md.modeled(acc).ns) /
                                 static_cast<double>(md.modeled(gemm(2048, 4096, 4096)).ns))));
}

// The presets: Hopper's measured factors (gpu_spec.cc), 1 where not measured.
TEST(KernelModelSustainedTest, PresetFactors) {
  for (std::string_view name : {"H100-SXM5-80GB", "H200-SXM-141GB"}) {
    const GpuSpec g = *gpu_spec(name);
    EXPECT_EQ(g.tensor_sustained_slowdown, 1.0296) << name;
    EXPECT_EQ(g.tensor_fp8_sustained_slowdown, 1.0) << name;
  }
  for (std::string_view name : {"A100-SXM4-40GB", "A100-SXM4-80GB", "B200-SXM-180GB"}) {
    const GpuSpec g = *gpu_spec(name);
    EXPECT_EQ(g.tensor_sustained_slowdown, 1.0) << name;
    EXPECT_EQ(g.tensor_fp8_sustained_slowdown, 1.0) << name;
  }
}

TEST(KernelModelDeathTest, RejectsAnInvalidSpec) {
  GpuSpec g = *gpu_spec("H100-SXM5-80GB");
  g.hbm_efficiency = 2;
  EXPECT_DEATH(KernelModel(g, nullptr), "hbm_efficiency");
}

// ---- Properties over random shapes ----

std::int64_t pick(std::mt19937_64& rng, std::int64_t lo, std::int64_t hi) {
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
}

DType pick_dtype(std::mt19937_64& rng) {
  constexpr DType kTypes[] = {DType::kBFloat16, DType::kFloat8E4M3, DType::kFloat16,
                              DType::kFloat32};
  return kTypes[pick(rng, 0, 3)];
}

// Shapes from 1 to ~64k on a log scale, so that small and large both appear.
std::int64_t pick_size(std::mt19937_64& rng, std::int64_t max_log2 = 16) {
  const std::int64_t e = pick(rng, 0, max_log2);
  return pick(rng, std::int64_t{1} << e, std::int64_t{2} << e);
}

void expect_not_faster_than_roofline(const KernelModel& m, const Kernel& k) {
  const GpuSpec& g = m.gpu();
  const double floor_s = std::max(kernel_flops(k) / peak(g, k.dtype), kernel_bytes(k) / g.hbm_Bps);
  EXPECT_GE(m.time(k).seconds(), floor_s * (1 - 1e-12)) << signature(k);
  EXPECT_GE(m.time(k).micros(), g.launch_overhead_us) << signature(k);
}

TEST(KernelModelPropertyTest, GemmIsMonotoneInEverySize) {
  std::mt19937_64 rng(7);
  for (std::string_view gpu : gpu_spec_names()) {
    const KernelModel m = model(gpu);
    for (int i = 0; i < 400; ++i) {
      const DType t = pick_dtype(rng);
      const std::int64_t d[4] = {pick_size(rng), pick_size(rng), pick_size(rng), pick(rng, 1, 16)};
      const Kernel base = gemm(d[0], d[1], d[2], t, d[3]);
      expect_not_faster_than_roofline(m, base);
      for (int dim = 0; dim < 4; ++dim) {
        std::int64_t e[4] = {d[0], d[1], d[2], d[3]};
        e[dim] += pick(rng, 1, dim == 3 ? 4 : std::max<std::int64_t>(1, e[dim] / 2));
        const Kernel grown = gemm(e[0], e[1], e[2], t, e[3]);
        EXPECT_LE(m.time(base), m.time(grown))
            << gpu << ": " << signature(base) << " -> " << signature(grown);
      }
    }
  }
}

TEST(KernelModelPropertyTest, GemmIsMonotoneStepByStep) {
  // Unit steps across tile and wave boundaries.
  const KernelModel m = model("H100-SXM5-80GB");
  SimTime last;
  for (std::int64_t x = 1; x <= 2000; ++x) {
    const SimTime t = m.time(gemm(x, 4096, 1024));
    EXPECT_LE(last, t) << x;
    last = t;
  }
  last = SimTime{};
  for (std::int64_t k = 1; k <= 2000; ++k) {
    const SimTime t = m.time(gemm(2048, 2048, k));
    EXPECT_LE(last, t) << k;
    last = t;
  }
}

Kernel attn_with(const Kernel& k, int dim, std::int64_t v) {
  std::int64_t f[6] = {k.b, k.hq, k.hkv, k.sq, k.skv, k.d};
  if (dim == 6) {  // sequence: both lengths
    f[3] += v;
    f[4] += v;
  } else if (dim == 1) {  // query heads, keeping the group size
    f[1] += v * (k.hq / k.hkv);
    f[2] += v;
  } else {
    f[dim] += v;
  }
  return attention(k.kind == KernelKind::kAttentionBackward, f[0], f[1], f[2], f[3], f[4], f[5],
                   k.causal, k.dtype);
}

TEST(KernelModelPropertyTest, AttentionIsMonotoneInEverySize) {
  std::mt19937_64 rng(11);
  for (std::string_view gpu : gpu_spec_names()) {
    const KernelModel m = model(gpu);
    for (int i = 0; i < 400; ++i) {
      const std::int64_t hkv = pick(rng, 1, 8);
      const Kernel base = attention(pick(rng, 0, 1) == 1, pick(rng, 1, 8), hkv * pick(rng, 1, 8),
                                    hkv, pick_size(rng, 15), pick_size(rng, 15),
                                    pick(rng, 1, 4) * 32, pick(rng, 0, 1) == 1,
                                    pick(rng, 0, 3) == 0 ? DType::kFloat8E4M3 : DType::kBFloat16);
      expect_not_faster_than_roofline(m, base);
      for (int dim : {0, 1, 3, 4, 5, 6}) {
        const std::int64_t step = dim == 0 || dim == 1
                                      ? pick(rng, 1, 4)
                                      : pick(rng, 1, std::max<std::int64_t>(1, base.sq / 2));
        const Kernel grown = attn_with(base, dim, step);
        EXPECT_LE(m.time(base), m.time(grown))
            << gpu << ": " << signature(base) << " -> " << signature(grown);
      }
    }
  }
}

TEST(KernelModelPropertyTest, AttentionIsMonotoneStepByStep) {
  const KernelModel m = model("H100-SXM5-80GB");
  for (bool bwd : {false, true}) {
    for (bool causal : {false, true}) {
      SimTime last_q, last_kv, last_s;
      for (std::int64_t s = 1; s <= 1500; ++s) {
        const SimTime tq = m.time(attention(bwd, 1, 2, 1, s, 700, 128, causal));
        const SimTime tkv = m.time(attention(bwd, 1, 2, 1, 700, s, 128, causal));
        const SimTime ts = m.time(attention(bwd, 1, 2, 1, s, s, 128, causal));
        EXPECT_LE(last_q, tq) << s;
        EXPECT_LE(last_kv, tkv) << s;
        EXPECT_LE(last_s, ts) << s;
        last_q = tq;
        last_kv = tkv;
        last_s = ts;
      }
    }
  }
}

TEST(KernelModelPropertyTest, MemoryBoundIsMonotoneAndBandwidthBound) {
  std::mt19937_64 rng(13);
  const KernelModel m = model("B200-SXM-180GB");
  for (int i = 0; i < 1000; ++i) {
    const std::int64_t bytes = pick_size(rng, 40);
    const Kernel k = memory_bound("op", bytes);
    expect_not_faster_than_roofline(m, k);
    EXPECT_LE(m.time(k), m.time(memory_bound("op", bytes + pick(rng, 1, bytes))));
  }
}

// The caps are burst efficiencies (the curves are fitted to burst-measured
// kernels): modeled(), not time().
TEST(KernelModelPropertyTest, EfficiencyApproachesTheCap) {
  for (std::string_view gpu : gpu_spec_names()) {
    const KernelModel m = model(gpu);
    const GpuSpec& g = m.gpu();
    // GEMM: a wave-aligned huge problem reaches > 98% of the cap, and the cap
    // is never exceeded.
    const Kernel big = gemm(std::int64_t{128} * g.num_sms * 16, 256 * 64, 65536);
    const double eff = kernel_flops(big) / m.modeled(big).seconds() / g.bf16_flops;
    EXPECT_GT(eff, 0.98 * g.gemm_max_efficiency) << gpu;
    EXPECT_LE(eff, g.gemm_max_efficiency) << gpu;
    double last = 0;
    for (std::int64_t s = 256; s <= 32768; s *= 2) {
      const double e =
          kernel_flops(gemm(s, s, s)) / m.modeled(gemm(s, s, s)).seconds() / g.bf16_flops;
      EXPECT_LE(e, g.gemm_max_efficiency) << gpu << " " << s;
      if (s <= 4096) {
        EXPECT_GT(e, last) << gpu << " " << s;
      }
      last = e;
    }
    EXPECT_GT(last, 0.9 * g.gemm_max_efficiency) << gpu;
    // Attention: long sequences and a large head dim approach the cap.
    for (bool bwd : {false, true}) {
      const Kernel a = attention(bwd, 4, 2 * g.num_sms, 2 * g.num_sms, 65536, 65536, 1024, false);
      const double cap = bwd ? g.attention_bwd_efficiency : g.attention_fwd_efficiency;
      const double e = kernel_flops(a) / m.modeled(a).seconds() / g.bf16_flops;
      EXPECT_GT(e, 0.95 * cap) << gpu;
      EXPECT_LE(e, cap) << gpu;
    }
  }
}

}  // namespace
}  // namespace prism
