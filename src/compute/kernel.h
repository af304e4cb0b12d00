// Kernel: one GPU kernel of a training step, described by what it computes
// (a GEMM's shape, an attention's shape, a memory-bound op's traffic) rather
// than by its time. The compute model (compute/kernel_model.h) turns it into
// time for a GPU, from a measured-kernel database where the kernel was
// measured and from efficiency curves otherwise.
//
// signature() is the kernel's key in the database (CSV, docs/compute.md):
//   gemm bf16 m=16384 n=3072 k=8192            C[m,n] = A[m,k] B[k,n]
//   gemm fp8 m=... n=... k=... batch=8          `batch` independent GEMMs (grouped experts)
//   gemm bf16 m=... n=... k=... acc=fp32        C[m,n] += A B, C fp32 (a weight gradient)
//   attn_fwd bf16 b=1 hq=16 hkv=2 sq=8192 skv=8192 d=128 causal
//   attn_bwd bf16 b=1 hq=16 hkv=2 sq=8192 skv=8192 d=128 causal
//   mem layernorm_fwd bytes=134217728           memory-bound kernels, by HBM traffic
// Fields appear in this order, integers in decimal, `batch` only when > 1,
// `acc` only when set, `causal` only when set. The type prints as vocab's
// name (`bf16`, `fp16`, `fp32`) except that both FP8 formats print as `fp8`.
// A signature never contains a comma (the database is CSV without quoting).
//
// Causal masking is bottom-right aligned, as FlashAttention >= 2.1: query row
// i (of sq) sees keys j <= i + skv - sq.
#pragma once

#include <cstdint>
#include <optional>
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
  // GEMM: the output is accumulated into (C += A B, cuBLAS beta = 1) in this
  // type: Megatron's gradient_accumulation_fusion adds each weight gradient
  // into main_grad (fp32, or bf16 without grad_reduce_in_fp32). None: C is
  // written once.
  std::optional<DType> acc;
  // Attention (flash): batch b, query heads hq, key/value heads hkv, query
  // and key lengths, head dim; causal masking.
  std::int64_t b = 0, hq = 0, hkv = 0, sq = 0, skv = 0, d = 0;
  bool causal = false;
  // Memory-bound: a short name ("layernorm_fwd", "swiglu_bwd", "adam") and
  // the bytes it reads and writes; flops are counted but rarely matter.
  // `op` is not owned: a literal, or a name that outlives the Kernel.
  std::string_view op;
  std::int64_t bytes = 0;
  double mem_flops = 0;
};

// Named constructors. Sizes must be >= 0 (a zero size is an empty kernel
// that costs only its launch); hq must be a multiple of hkv; `op` must be a
// non-empty word without spaces or commas; `acc` must be fp32, fp16 or
// bf16. Violations are PRISM_CHECK failures: kernels come from the workload
// builder, not from user files.
Kernel gemm(std::int64_t m, std::int64_t n, std::int64_t k, DType dtype = DType::kBFloat16,
            std::int64_t batch = 1, std::optional<DType> acc = std::nullopt);
Kernel attention(bool backward, std::int64_t b, std::int64_t hq, std::int64_t hkv, std::int64_t sq,
                 std::int64_t skv, std::int64_t d, bool causal, DType dtype = DType::kBFloat16);
Kernel memory_bound(std::string_view op, std::int64_t bytes, double flops = 0);

std::string signature(const Kernel& k);
// FLOPs the kernel performs (2 per multiply-add). Attention forward is
// 4 b hq sq skv d; causal with sq == skv counts half of it (FlashAttention's
// convention), causal with sq != skv counts the unmasked area exactly
// (causal_area()); backward is 2.5x forward, as FlashAttention counts.
double kernel_flops(const Kernel& k);
// Minimum HBM traffic: operands read once and results written once. GEMM:
// A, B in the input type, C in bf16 for FP8 inputs (else the input type);
// with `acc`, C read and written in the acc type instead; none when m, n or
// batch is 0.
// Attention forward: Q, K, V, O and the fp32 log-sum-exp; backward: Q, K, V,
// O, dO, dQ, dK, dV and two fp32 row vectors.
double kernel_bytes(const Kernel& k);
// (query, key) pairs left unmasked by a causal mask over sq queries and skv
// keys, bottom-right aligned; exact (sq (sq + 1) / 2 when sq == skv).
double causal_area(std::int64_t sq, std::int64_t skv);
// The type's name in a signature: "fp8" for both FP8 formats, else vocab's.
std::string_view signature_dtype(DType d);

}  // namespace prism
