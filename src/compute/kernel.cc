#include "compute/kernel.h"

#include <fmt/format.h>

#include "util/check.h"
#include "util/vocab.h"

namespace prism {
namespace {

// FlashAttention's accounting: the forward pass is two GEMMs (QK^T, PV) of
// 2 flops per multiply-add; the backward pass is five such GEMMs.
constexpr double kAttentionFwdFlopsPerElement = 4.0;
constexpr double kAttentionBwdOverFwd = 2.5;
constexpr double kFp32Bytes = 4.0;

// The type a GEMM writes: bf16 for FP8 inputs (Transformer Engine's FP8
// GEMMs), else the input type.
int gemm_output_bytes(DType d) {
  return is_fp8(d) ? dtype_size(DType::kBFloat16) : dtype_size(d);
}

double d(std::int64_t v) {
  return static_cast<double>(v);
}

}  // namespace

Kernel gemm(std::int64_t m, std::int64_t n, std::int64_t k, DType dtype, std::int64_t batch,
            std::optional<DType> acc) {
  PRISM_CHECK(m >= 0 && n >= 0 && k >= 0 && batch >= 0,
              fmt::format("gemm: negative size m={} n={} k={} batch={}", m, n, k, batch));
  PRISM_CHECK(
      !acc || *acc == DType::kFloat32 || *acc == DType::kBFloat16 || *acc == DType::kFloat16,
      fmt::format("gemm: cannot accumulate in {}", to_string(acc.value_or(dtype))));
  Kernel r;
  r.kind = KernelKind::kGemm;
  r.dtype = dtype;
  r.m = m;
  r.n = n;
  r.k = k;
  r.batch = batch;
  r.acc = acc;
  return r;
}

Kernel attention(bool backward, std::int64_t b, std::int64_t hq, std::int64_t hkv, std::int64_t sq,
                 std::int64_t skv, std::int64_t d, bool causal, DType dtype) {
  PRISM_CHECK(b >= 0 && hq >= 0 && hkv >= 0 && sq >= 0 && skv >= 0 && d >= 0,
              "attention: negative size");
  PRISM_CHECK(hq == 0 || (hkv > 0 && hq % hkv == 0),
              fmt::format("attention: hq={} is not a multiple of hkv={}", hq, hkv));
  Kernel r;
  r.kind = backward ? KernelKind::kAttentionBackward : KernelKind::kAttentionForward;
  r.dtype = dtype;
  r.b = b;
  r.hq = hq;
  r.hkv = hkv;
  r.sq = sq;
  r.skv = skv;
  r.d = d;
  r.causal = causal;
  return r;
}

Kernel memory_bound(std::string_view op, std::int64_t bytes, double flops) {
  PRISM_CHECK(!op.empty() && op.find_first_of(" \t\r\n,") == std::string_view::npos,
              fmt::format("memory_bound: op '{}' must be one word without commas", op));
  PRISM_CHECK(bytes >= 0 && flops >= 0, "memory_bound: negative bytes or flops");
  Kernel r;
  r.kind = KernelKind::kMemoryBound;
  r.op = op;
  r.bytes = bytes;
  r.mem_flops = flops;
  return r;
}

std::string_view signature_dtype(DType dt) {
  return is_fp8(dt) ? std::string_view("fp8") : to_string(dt);
}

std::string signature(const Kernel& k) {
  switch (k.kind) {
    case KernelKind::kGemm: {
      std::string s =
          fmt::format("gemm {} m={} n={} k={}", signature_dtype(k.dtype), k.m, k.n, k.k);
      if (k.batch > 1) s += fmt::format(" batch={}", k.batch);
      if (k.acc) s += fmt::format(" acc={}", signature_dtype(*k.acc));
      return s;
    }
    case KernelKind::kAttentionForward:
    case KernelKind::kAttentionBackward:
      return fmt::format("{} {} b={} hq={} hkv={} sq={} skv={} d={}{}",
                         k.kind == KernelKind::kAttentionForward ? "attn_fwd" : "attn_bwd",
                         signature_dtype(k.dtype), k.b, k.hq, k.hkv, k.sq, k.skv, k.d,
                         k.causal ? " causal" : "");
    case KernelKind::kMemoryBound:
      return fmt::format("mem {} bytes={}", k.op, k.bytes);
  }
  PRISM_CHECK(false, "signature: unknown kernel kind");
  return {};
}

double causal_area(std::int64_t sq, std::int64_t skv) {
  // Row i sees min(skv, max(0, i + skv - sq + 1)) keys.
  if (skv >= sq) return d(sq) * d(skv - sq) + d(sq) * d(sq + 1) / 2;
  return d(skv) * d(skv + 1) / 2;
}

double kernel_flops(const Kernel& k) {
  switch (k.kind) {
    case KernelKind::kGemm:
      return 2.0 * d(k.m) * d(k.n) * d(k.k) * d(k.batch);
    case KernelKind::kAttentionForward:
    case KernelKind::kAttentionBackward: {
      double area = d(k.sq) * d(k.skv);
      if (k.causal) area = k.sq == k.skv ? area / 2 : causal_area(k.sq, k.skv);
      const double fwd = kAttentionFwdFlopsPerElement * d(k.b) * d(k.hq) * area * d(k.d);
      return k.kind == KernelKind::kAttentionForward ? fwd : kAttentionBwdOverFwd * fwd;
    }
    case KernelKind::kMemoryBound:
      return k.mem_flops;
  }
  return 0;
}

double kernel_bytes(const Kernel& k) {
  switch (k.kind) {
    case KernelKind::kGemm: {
      if (k.m == 0 || k.n == 0 || k.batch == 0) return 0;  // nothing to compute
      const double in = dtype_size(k.dtype);
      // Accumulating: C read and written in its type; else written once.
      const double out = k.acc ? 2.0 * dtype_size(*k.acc) : gemm_output_bytes(k.dtype);
      return d(k.batch) * (in * (d(k.m) * d(k.k) + d(k.k) * d(k.n)) + out * d(k.m) * d(k.n));
    }
    case KernelKind::kAttentionForward:
    case KernelKind::kAttentionBackward: {
      const double e = dtype_size(k.dtype);
      const double q = d(k.b) * d(k.sq) * d(k.hq) * d(k.d) * e;     // one of Q, O, dO, dQ
      const double kv = d(k.b) * d(k.skv) * d(k.hkv) * d(k.d) * e;  // one of K, V, dK, dV
      const double row = d(k.b) * d(k.hq) * d(k.sq) * kFp32Bytes;   // LSE, dO.O row sums
      if (k.kind == KernelKind::kAttentionForward) return 2 * q + 2 * kv + row;
      return 4 * q + 4 * kv + 2 * row;
    }
    case KernelKind::kMemoryBound:
      return d(k.bytes);
  }
  return 0;
}

}  // namespace prism
