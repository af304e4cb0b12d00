#include "compute/gpu_spec.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace prism {
namespace {

// Compute-model constants shared by the GPUs of one architecture (same SMs,
// clocks and kernels); docs/compute.md tabulates them with their sources.
// The GEMM curve's efficiency caps and k half-points are per GPU type
// (GemmCurve, below).
struct ArchConstants {
  int num_sms;
  int gemm_tile_m, gemm_tile_n;
  double attention_fwd_efficiency, attention_bwd_efficiency;
  double attention_seq_half, attention_head_dim_half;
  double hbm_efficiency;
  double launch_overhead_us;
  double gemm_stream_k_rate;  // 0: the quantized tile candidates only
};

// Ampere (A100 SXM4): 108 SMs (NVIDIA A100 whitepaper).
// - HBM 0.70: calibrated with the GEMM cap (A100's GemmCurve, below) on the 19
//   A100 training runs of docs/validation.md.
// - Tile 128x256: the largest cuBLAS/CUTLASS sm80 bf16 tile (256x128 kernels).
// - Attention (FlashAttention-2, the Ampere kernel): forward 0.80 / backward 0.66
//   asymptotes with seq_half 256 and head_dim_half 16 reproduce FA2 on A100:
//   178 TFLOP/s at b=16 hq=32 s=1024 d=128 (liangan1/GPU_travel flash-attn
//   README, measured 178-181), ~70% fwd / ~57% bwd of peak at d=128 and 16k
//   (FlashAttention-2 paper, Dao 2023: 50-73% of peak).
// - HBM: streaming copies reach 84-92% of the spec; the calibrated 0.70 also
//   absorbs the 2021 element-wise kernels' extra passes.
// - Launch 2.5 us: estimate of a near-empty kernel's duration (launch, ramp,
//   tail) under CUDA-event timing.
// - No stream-K candidate: no measured A100 GEMMs to fit it to (the A100 curve
//   is calibrated on training runs).
constexpr ArchConstants kAmpere{108, 128, 256, 0.80, 0.66, 256, 16, 0.70, 2.5, 0};

// Hopper (H100/H200 SXM): 132 SMs (NVIDIA H100 whitepaper).
// - Tile 128x256: cuBLAS sm90 bf16 kernels for large shapes (128x256x64 warp-
//   specialized tiles).
// - Attention (FlashAttention-3 / cuDNN fused attention, what Megatron-Core with
//   Transformer Engine runs on Hopper; PyTorch SDPA's FA2 is ~35% of peak):
//   forward 0.85 / backward 0.66 asymptotes with head_dim_half 32 give
//   ~645 TFLOP/s fwd at d=128 and ~715 at d=256, 16k tokens (FA3 paper, Shah
//   et al. 2024: up to 740 at d=256, ~650 at d=128), bwd ~500 at d=128
//   (FA3: 1.5-1.75x FA2's ~300).
// - HBM 0.87, launch 2.0 us: estimates as for Ampere (84% measured for coalesced
//   loads on H100, mikamirai.com/blog/gpu-memory-bandwidth).
// - Stream-K 0.93: where the large tile leaves the last wave partly empty
//   (tiles / 132 just above a whole number), the measured database runs
//   faster than the quantized waves allow: H100 measured/modelled median
//   0.86 bf16 / 0.88 FP8 over the rows whose last wave is under 80% full,
//   1.00 / 0.99 over the others (H200: 0.81 / 0.83). cuBLAS's sm90 kernels
//   can schedule tiles persistently with stream-K (CUTLASS 3's
//   PersistentTileSchedulerSm90StreamK splits the k loop of the leftover
//   tiles over the idle SMs and fixes the partial sums up). The candidate
//   spreads the large tile's work evenly over the SMs (at least one wave)
//   at 0.93 of its rate: fitted by scripts/fit_gemm_curve.py on the H100
//   rows (the sum of squared log ratios is least at 0.92 bf16 / 0.96 FP8;
//   one constant for both), which takes those rows to 0.99 / 0.99 (H200
//   0.97 / 0.99) and leaves the others where they were.
constexpr ArchConstants kHopper{132, 128, 256, 0.85, 0.66, 256, 32, 0.87, 2.0, 0.93};

// Blackwell (B200): 148 SMs (NVIDIA Blackwell datasheet).
// - Tile 128x256 per SM (a 2-SM 256x256 UMMA tile is 128x256 per SM).
// - Attention (FlashAttention-4 / cuDNN on sm100): forward 0.80 / backward 0.71
//   with head_dim_half 16 give 1535 / 1360 TFLOP/s at b=4 h=16 s=8192 d=128
//   (Dao-AILab/flash-attention#2280: fwd 1534.8, bwd 1359.8; causal fwd 1418).
// - HBM 0.85, launch 2.0 us: estimates.
// - No stream-K candidate until B200 GEMMs are measured.
constexpr ArchConstants kBlackwell{148, 128, 256, 0.80, 0.71, 256, 16, 0.85, 2.0, 0};

// The GEMM curve of one GPU type: efficiency cap and k half-point per input
// type (bf16; FP8, unused without FP8 tensor cores).
struct GemmCurve {
  double bf16_efficiency, bf16_k_half;
  double fp8_efficiency, fp8_k_half;
};

// A GEMM's or attention kernel's time at sustained power over its time in a
// burst, per input type (GpuSpec::tensor_sustained_slowdown).
// And the chip-to-chip coefficient of variation of that sustained clock
// (GpuSpec::sustained_clock_cov).
struct Sustained {
  double bf16, fp8;
  double clock_cov;
};

// Hopper: scripts/gpu/sustained_clocks.py on an H200 (2026-11-28, torch
// 2.11.0+cu130; docs/compute.md, "Sustained clocks"). GEMMs called back to
// back for 20 s drew 692 of the 700 W limit within the first second and the
// SM clock fell from 1,980 MHz to 1,365-1,500: the time per call over the
// last 10 s was 1.21 times the time of a burst after 3 s idle. But the
// database was measured in one long run of back-to-back kernels, at or near
// that limit: the curves fitted to it (kHopperGemm) give 1590.0, 815.7 and
// 898.9 us for the three shapes, whose sustained times were 1652.1 (bf16
// 8192^3), 832.1 (bf16 16384x4096x4096) and 894.4 us (FP8 8192^3). The
// slowdown over the database is therefore 1.039 and 1.020 for bf16 (1.0296,
// their mean) and 0.995 for FP8, taken as 1.000 (no faster than the
// database). (With the curves fitted before the stream-K candidate: 1.0375
// and 1.000.) The H100 SXM is the same GH100 compute at
// the same 700 W limit, and its database rows of these sizes are within
// 1-4% of the H200's: the H200's figures stand for it until an H100
// measures its own.
//
// Chip to chip, 0.016: no fleet of H100s or H200s at their power limit has
// published its spread. The one published fleet measurement at a power cap
// is V100's: Sinha et al., "Not All GPUs Are Created Equal" (SC'22), whose
// released data (hal-uw/blox-pal, aggregated_data/sim/sgemm-longhorn-agg.csv,
// SGEMM 25536^2 on TACC Longhorn's V100s drawing 295-298 of 300 W) give a
// kernel-time CoV of 1.58% and an SM-clock CoV of 1.65% over the 188 runs
// at the cap among the file's first 191 rows (1,312-1,432 MHz; a chip that
// appears twice or three times there repeats its clock within 15 MHz, so the
// spread is the chips', not the runs'). It stands for Hopper, a GPU held
// at its power limit the same way, until a fleet of them is measured.
constexpr Sustained kHopperSustained{1.0296, 1.0, 0.016};
// Not measured: 1 (burst and sustained alike). The A100 curve is calibrated
// on training runs, so whatever throttling they had is already in it.
// Their chip-to-chip spread, likewise (and B200's is not measured): 0.
constexpr Sustained kNotMeasured{1, 1, 0};

GpuSpec make(std::string_view name, const ArchConstants& a, const GemmCurve& c, double bf16_tflops,
             double fp8_tflops, double hbm_GBps, double hbm_GB,
             const Sustained& sustained = kNotMeasured) {
  GpuSpec g;
  g.name = std::string(name);
  g.num_sms = a.num_sms;
  g.bf16_flops = bf16_tflops * 1e12;
  g.fp8_flops = fp8_tflops * 1e12;
  g.hbm_Bps = hbm_GBps * 1e9;
  g.hbm_bytes = hbm_GB * 1e9;
  g.gemm_max_efficiency = c.bf16_efficiency;
  g.gemm_fp8_max_efficiency = c.fp8_efficiency;
  g.gemm_tile_m = a.gemm_tile_m;
  g.gemm_tile_n = a.gemm_tile_n;
  g.gemm_stream_k_rate = a.gemm_stream_k_rate;
  g.gemm_k_half = c.bf16_k_half;
  g.gemm_fp8_k_half = c.fp8_k_half;
  g.attention_fwd_efficiency = a.attention_fwd_efficiency;
  g.attention_bwd_efficiency = a.attention_bwd_efficiency;
  g.attention_seq_half = a.attention_seq_half;
  g.attention_head_dim_half = a.attention_head_dim_half;
  g.hbm_efficiency = a.hbm_efficiency;
  g.launch_overhead_us = a.launch_overhead_us;
  g.tensor_sustained_slowdown = sustained.bf16;
  g.tensor_fp8_sustained_slowdown = sustained.fp8;
  g.sustained_clock_cov = sustained.clock_cov;
  return g;
}

// Peaks: NVIDIA datasheets (dense, no sparsity; ../shared/calibration/gpus.csv).
// A100: 312 bf16, no FP8, 40 GB HBM2 at 1555 GB/s or 80 GB HBM2e at 2039 GB/s.
// H100 SXM5: 989.4 bf16, 1978.9 FP8, 80 GB HBM3 at 3350 GB/s.
// H200 SXM: H100's compute, 141 GB HBM3e at 4800 GB/s.
// B200 (DGX B200): 2250 bf16, 4500 FP8, 180 GB HBM3e at 8000 GB/s.
// GEMM curves (docs/compute.md, "Constants per GPU type").
// - A100: cap 0.78 calibrated with HBM 0.70 on the 19 A100 training runs of
//   docs/validation.md (Megatron-LM 2021-22, cuBLAS 11, its own fused
//   kernels), one fit for all rows; today's cuBLAS reaches 0.87 (MAMF 271.2 of
//   312 TFLOP/s, torch 2.6; stas00/ml-engineering, "Maximum Achievable Matmul
//   FLOPS comparison table"). k_half 128: two 64-deep k-blocks of prologue and
//   epilogue per tile. No FP8 tensor cores.
// - H100 and H200 (Hopper, the same GH100 compute at 700 W): fitted to the
//   H100 rows of the measured database data/kernels.csv (cuBLAS via torch
//   2.11, 2026-11-23; 252 bf16 and 246 FP8 e4m3 GEMMs) by
//   scripts/fit_gemm_curve.py: the cap and k_half per input type minimizing
//   the median |ln(measured / modelled)|, with the stream-K candidate
//   (kHopper). H100 measured/modelled median 0.997 (bf16), 0.989 (FP8); the
//   H200's rows give 1.009 and 0.995 with these constants; fitted alone they
//   would give 0.73/224 and 0.70/736. (Without
//   the stream-K candidate the fit was 0.75/240 and 0.69/608.) The caps sit below MAMF's
//   best shape (bf16 80.3%, FP8 70.9%): they are the asymptote of the shapes
//   training runs, k_half takes the per-tile cost of short k (FP8's larger).
// - B200: MAMF bf16 1745.0 of 2250 TFLOP/s (77.6%), FP8 e4m3 3432.5 of 4500
//   (76.3%) (ml-engineering table, torch 2.7.1); k_half 128 as A100.
constexpr GemmCurve kA100Gemm{0.78, 128, 0, 128};
constexpr GemmCurve kHopperGemm{0.74, 208, 0.68, 528};
constexpr GemmCurve kB200Gemm{0.78, 128, 0.76, 128};

std::vector<GpuSpec> make_presets() {
  return {
      make("A100-SXM4-40GB", kAmpere, kA100Gemm, 312, 0, 1555, 40),
      make("A100-SXM4-80GB", kAmpere, kA100Gemm, 312, 0, 2039, 80),
      make("H100-SXM5-80GB", kHopper, kHopperGemm, 989.4, 1978.9, 3350, 80, kHopperSustained),
      make("H200-SXM-141GB", kHopper, kHopperGemm, 989.4, 1978.9, 4800, 141, kHopperSustained),
      make("B200-SXM-180GB", kBlackwell, kB200Gemm, 2250, 4500, 8000, 180),
  };
}

const std::vector<GpuSpec>& presets() {
  static const std::vector<GpuSpec> kPresets = make_presets();
  return kPresets;
}

bool fraction(double x) {
  return x > 0 && x <= 1;
}

}  // namespace

const std::vector<std::string_view>& gpu_spec_names() {
  static const std::vector<std::string_view> kNames = [] {
    std::vector<std::string_view> names;
    for (const GpuSpec& g : presets()) names.emplace_back(g.name);
    return names;
  }();
  return kNames;
}

Result<GpuSpec> gpu_spec(std::string_view name) {
  for (const GpuSpec& g : presets())
    if (g.name == name) return g;
  return Status::not_found(
      fmt::format("unknown GPU '{}' (known: {})", name, fmt::join(gpu_spec_names(), ", ")));
}

Status validate_gpu_spec(const GpuSpec& g) {
  auto bad = [&](std::string_view what) {
    return Status::invalid_argument(fmt::format("GPU spec '{}': {}", g.name, what));
  };
  if (g.num_sms <= 0) return bad("num_sms must be > 0");
  if (!(g.bf16_flops > 0)) return bad("bf16_flops must be > 0");
  if (!(g.fp8_flops >= 0)) return bad("fp8_flops must be >= 0");
  if (!(g.hbm_Bps > 0)) return bad("hbm_Bps must be > 0");
  if (!fraction(g.gemm_max_efficiency)) return bad("gemm_max_efficiency must be in (0, 1]");
  if (g.fp8_flops > 0 && !fraction(g.gemm_fp8_max_efficiency))
    return bad("gemm_fp8_max_efficiency must be in (0, 1]");
  if (g.gemm_tile_m <= 0 || g.gemm_tile_n <= 1) return bad("GEMM tile must be positive");
  if (g.gemm_stream_k_rate != 0 && !fraction(g.gemm_stream_k_rate))
    return bad("gemm_stream_k_rate must be 0 or in (0, 1]");
  if (!(g.gemm_k_half > 0)) return bad("gemm_k_half must be > 0");
  if (g.fp8_flops > 0 && !(g.gemm_fp8_k_half > 0)) return bad("gemm_fp8_k_half must be > 0");
  if (!fraction(g.attention_fwd_efficiency) || !fraction(g.attention_bwd_efficiency))
    return bad("attention efficiencies must be in (0, 1]");
  if (!(g.attention_seq_half > 0) || !(g.attention_head_dim_half > 0))
    return bad("attention half points must be > 0");
  if (!fraction(g.hbm_efficiency)) return bad("hbm_efficiency must be in (0, 1]");
  if (!(g.launch_overhead_us >= 0)) return bad("launch_overhead_us must be >= 0");
  if (!(g.tensor_sustained_slowdown >= 1 && g.tensor_sustained_slowdown <= 2) ||
      !(g.tensor_fp8_sustained_slowdown >= 1 && g.tensor_fp8_sustained_slowdown <= 2))
    return bad("sustained slowdowns must be in [1, 2]");
  if (!(g.sustained_clock_cov >= 0 && g.sustained_clock_cov <= 0.1))
    return bad("sustained_clock_cov must be in [0, 0.1]");
  return Status::ok();
}

}  // namespace prism
