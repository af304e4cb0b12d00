// Kernel: one GPU kernel of a training step, described by what it computes
// (a GEMM's shape, an attention's shape, a memory-bound op's traffic) rather
// than by its time. The compute model (compute/kernel_model.h) turns it into
// time for a GPU, from a measured-kernel database where the kernel was
// measured and from efficiency curves otherwise.
//
// signature() is the kernel's key in the database (CSV, docs/compute.md):
//   gemm bf16 m=16384 n=3072 k=8192            C[m,n] = A[m,k] B[k,n]
//   gemm fp8 m=... n=... k=... batch=8          `batch` independent GEMMs (grouped experts)
//   attn_fwd bf16 b=1 hq=16 hkv=2 sq=8192 skv=8192 d=128 causal
//   attn_bwd bf16 b=1 hq=16 hkv=2 sq=8192 skv=8192 d=128 causal
//   mem layernorm_fwd bytes=134217728           memory-bound kernels, by HBM traffic
// Fields appear in this order, integers in decimal, `batch` only when > 1,
// `causal` only when set.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "util/vocab.h"

namespace prism {

enum class KernelKind : std::uint8_t { kGemm, kAttentionForward, kAttentionBackward, kMemoryBound };

struct Kernel {
  KernelKind kind = KernelKind::kGemm;
  DType dtype = DType::kBFloat16;  // GEMM/attention input type (bf16, or fp8 e4m3 GEMMs)
  // GEMM: C[m,n] = A[m,k] B[k,n], `batch` independent GEMMs of that shape.
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
  // Attention (flash): batch b, query heads hq, key/value heads hkv, query
  // and key lengths, head dim; causal masking.
  std::int64_t b = 0, hq = 0, hkv = 0, sq = 0, skv = 0, d = 0;
  bool causal = false;
  // Memory-bound: a short name ("layernorm_fwd", "swiglu_bwd", "adam") and
  // the bytes it reads and writes; flops are counted but rarely matter.
  std::string_view op;
  std::int64_t bytes = 0;
  double mem_flops = 0;
};

// Named constructors.
Kernel gemm(std::int64_t m, std::int64_t n, std::int64_t k, DType dtype = DType::kBFloat16,
            std::int64_t batch = 1);
Kernel attention(bool backward, std::int64_t b, std::int64_t hq, std::int64_t hkv, std::int64_t sq,
                 std::int64_t skv, std::int64_t d, bool causal, DType dtype = DType::kBFloat16);
Kernel memory_bound(std::string_view op, std::int64_t bytes, double flops = 0);

std::string signature(const Kernel& k);
// FLOPs the kernel performs (2 per multiply-add; causal attention counts the
// unmasked half; attention backward is 2.5x forward, as FlashAttention counts).
double kernel_flops(const Kernel& k);
// Minimum HBM traffic: operands read once and results written once.
double kernel_bytes(const Kernel& k);

}  // namespace prism
