#include "compute/kernel_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "util/check.h"
#include "util/vocab.h"

namespace prism {
namespace {

// GEMM tile candidates relative to the GPU's large tile: the large tile, and
// one half as wide at 0.9 of its per-SM rate (less operand reuse per loaded
// byte). Estimate after CUTLASS profiler runs where 128x128 tiles reach ~90%
// of 128x256's throughput on large problems; it only matters where the
// narrower tile fills a wave the wide one leaves mostly empty.
// The large tile may also run as stream-K where the GPU has it
// (GpuSpec::gemm_stream_k_rate): its work spread evenly over the SMs.
struct TileCandidate {
  int m_div, n_div;
  double rate;
  bool stream_k;
};
constexpr std::array<TileCandidate, 2> kGemmTiles{{{1, 1, 1.0, true}, {1, 2, 0.9, false}}};

// FlashAttention's block of rows per thread block (CTA) along the parallel
// dimension (FA2/FA3 use 128 query rows forward, 128 key rows backward for
// d <= 128).
constexpr double kAttentionBlockRows = 128;
// Causal masking: the diagonal key block is computed in full and half of it
// masked, i.e. half a 64..128-key block per row; 64 (liangan1/GPU_travel's
// FA2-on-A100 causal/non-causal ratio at s=1024: 0.81 measured, 0.77 here).
constexpr double kCausalExtraKeys = 64;
// FlashAttention's flop accounting (compute/kernel.h).
constexpr double kAttentionFlopsPerKeyDim = 4;
constexpr double kAttentionBwdOverFwd = 2.5;

// Peak and efficiency cap of a GEMM/attention input type. Without FP8 tensor
// cores an FP8 kernel runs at the bf16 rate (as if cast); fp32 runs as TF32,
// half the bf16 rate (NVIDIA datasheets: A100 156 vs 312, H100 494.7 vs 989.4).
struct Rate {
  double peak;
  double gemm_eff;
  double gemm_k_half;
  double attention_scale;  // attention caps scale with the GEMM cap of the type
};

Rate rate_of(const GpuSpec& g, DType d) {
  if (is_fp8(d) && g.fp8_flops > 0)
    return {g.fp8_flops, g.gemm_fp8_max_efficiency, g.gemm_fp8_k_half,
            g.gemm_fp8_max_efficiency / g.gemm_max_efficiency};
  if (d == DType::kFloat32) return {g.bf16_flops / 2, g.gemm_max_efficiency, g.gemm_k_half, 1};
  return {g.bf16_flops, g.gemm_max_efficiency, g.gemm_k_half, 1};
}

double dbl(std::int64_t v) {
  return static_cast<double>(v);
}

double ceil_div(double a, double b) {
  return std::ceil(a / b);
}

SimTime to_time(double ns) {
  if (!(ns < static_cast<double>(kMaxOpDuration.ns))) return kMaxOpDuration;  // also NaN
  return SimTime{static_cast<std::int64_t>(std::ceil(std::max(ns, 0.0)))};
}

}  // namespace

KernelModel::KernelModel(GpuSpec gpu, const KernelDb* db) : gpu_(std::move(gpu)), db_(db) {
  const Status s = validate_gpu_spec(gpu_);
  PRISM_CHECK(s.is_ok(), s.message());
}

std::string_view to_string(KernelSource s) {
  switch (s) {
    case KernelSource::kModel:
      return "model";
    case KernelSource::kMeasured:
      return "measured";
    case KernelSource::kMeasuredPlainScaled:
      return "measured (plain) x model";
  }
  return "model";
}

std::optional<double> KernelModel::measured_ns(const Kernel& k, KernelSource* source,
                                               bool* in_situ) const {
  *source = KernelSource::kModel;
  *in_situ = false;
  if (db_ == nullptr) return std::nullopt;
  if (const auto row = db_->find(signature(k))) {
    *source = KernelSource::kMeasured;
    *in_situ = row->in_situ;
    return row->us * 1e3;
  }
  // An accumulating GEMM measured only without accumulation (the shipped
  // database predates `acc`): the measurement, scaled by what the curves
  // say the accumulation costs (the output's extra traffic).
  if (k.kind != KernelKind::kGemm || !k.acc) return std::nullopt;
  Kernel plain = k;
  plain.acc.reset();
  const auto row = db_->find(signature(plain));
  if (!row) return std::nullopt;
  *source = KernelSource::kMeasuredPlainScaled;
  *in_situ = row->in_situ;
  return row->us * 1e3 * static_cast<double>(modeled(k).ns) /
         static_cast<double>(modeled(plain).ns);
}

KernelSource KernelModel::source(const Kernel& k) const {
  KernelSource s = KernelSource::kModel;
  bool in_situ = false;
  measured_ns(k, &s, &in_situ);
  return s;
}

double KernelModel::sustained_slowdown(const Kernel& k) const {
  if (k.kind == KernelKind::kMemoryBound) return 1;  // bound by HBM, not the SM clock
  return is_fp8(k.dtype) && gpu_.fp8_flops > 0 ? gpu_.tensor_fp8_sustained_slowdown
                                               : gpu_.tensor_sustained_slowdown;
}

SimTime KernelModel::time(const Kernel& k) const {
  KernelSource s = KernelSource::kModel;
  bool in_situ = false;
  const auto ns = measured_ns(k, &s, &in_situ);
  if (ns && in_situ) return to_time(*ns);  // taken in a step, at the step's clocks
  if (ns) return to_time(*ns * sustained_slowdown(k));
  return modeled_at(k, sustained_slowdown(k));
}

SimTime KernelModel::modeled(const Kernel& k) const {
  return modeled_at(k, 1);
}

SimTime KernelModel::modeled_at(const Kernel& k, double slowdown) const {
  double s = 0;
  switch (k.kind) {
    case KernelKind::kGemm:
      s = gemm_s(k);
      break;
    case KernelKind::kAttentionForward:
    case KernelKind::kAttentionBackward:
      s = attention_s(k);
      break;
    case KernelKind::kMemoryBound:
      s = std::max(memory_s(kernel_bytes(k)), kernel_flops(k) / gpu_.bf16_flops);
      break;
  }
  return to_time((s * slowdown + gpu_.launch_overhead_us * 1e-6) * 1e9);
}

double KernelModel::memory_s(double bytes) const {
  return bytes / (gpu_.hbm_efficiency * gpu_.hbm_Bps);
}

double KernelModel::gemm_s(const Kernel& k) const {
  const Rate r = rate_of(gpu_, k.dtype);
  const double sms = gpu_.num_sms;
  const double sm_rate = r.peak * r.gemm_eff / sms;
  double compute = 0;
  if (k.m > 0 && k.n > 0 && k.k > 0 && k.batch > 0) {
    compute = HUGE_VAL;
    for (const TileCandidate& t : kGemmTiles) {
      const double tm = gpu_.gemm_tile_m / t.m_div;
      const double tn = gpu_.gemm_tile_n / t.n_div;
      const double tiles = ceil_div(dbl(k.m), tm) * ceil_div(dbl(k.n), tn) * dbl(k.batch);
      const double work = 2 * tm * tn * (dbl(k.k) + r.gemm_k_half);  // one tile's
      compute = std::min(compute, ceil_div(tiles, sms) * (work / (sm_rate * t.rate)));
      if (t.stream_k && gpu_.gemm_stream_k_rate > 0)  // no partly filled last wave
        compute = std::min(
            compute, std::max(tiles / sms, 1.0) * (work / (sm_rate * gpu_.gemm_stream_k_rate)));
    }
  }
  return std::max(compute, memory_s(kernel_bytes(k)));
}

double KernelModel::attention_s(const Kernel& k) const {
  const bool bwd = k.kind == KernelKind::kAttentionBackward;
  const Rate r = rate_of(gpu_, k.dtype);
  const double eff =
      std::min(1.0, (bwd ? gpu_.attention_bwd_efficiency : gpu_.attention_fwd_efficiency) *
                        r.attention_scale);
  const double sm_rate = r.peak * eff / gpu_.num_sms;
  double compute = 0;
  if (k.b > 0 && k.hq > 0 && k.sq > 0 && k.skv > 0 && k.d > 0) {
    // Forward parallelizes over query blocks and loops over keys; backward the
    // reverse. Bottom-right causal: the last query row sees all skv keys, the
    // first key column is seen by all sq queries.
    const double rows = dbl(bwd ? k.skv : k.sq);
    const double longest_row = dbl(bwd ? k.sq : k.skv);
    const double area = k.causal ? causal_area(k.sq, k.skv) : dbl(k.sq) * dbl(k.skv);
    const double per_row = gpu_.attention_seq_half + (k.causal ? kCausalExtraKeys : 0);
    const double blocks = ceil_div(rows, kAttentionBlockRows);
    const double heads = dbl(k.b) * dbl(k.hq);
    // Seconds per key-equivalent of one row on one SM.
    const double unit = kAttentionFlopsPerKeyDim * (bwd ? kAttentionBwdOverFwd : 1) *
                        (dbl(k.d) + gpu_.attention_head_dim_half) / sm_rate;
    const double total =
        heads * (area + blocks * kAttentionBlockRows * per_row) * unit / gpu_.num_sms;
    const double block = kAttentionBlockRows * (longest_row + per_row) * unit;
    compute = std::max(total, block);
    if (!k.causal) {  // equal blocks: whole blocks run in waves over the SMs
      const double full = heads * std::floor(rows / kAttentionBlockRows);
      compute = std::max(compute, ceil_div(full, gpu_.num_sms) * block);
    }
  }
  return std::max(compute, memory_s(kernel_bytes(k)));
}

}  // namespace prism
