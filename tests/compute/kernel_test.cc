#include "compute/kernel.h"

#include <gtest/gtest.h>

namespace prism {
namespace {

TEST(KernelSignatureTest, Gemm) {
  EXPECT_EQ(signature(gemm(16384, 3072, 8192)), "gemm bf16 m=16384 n=3072 k=8192");
  EXPECT_EQ(signature(gemm(1, 2, 3, DType::kBFloat16, 1)), "gemm bf16 m=1 n=2 k=3");
  EXPECT_EQ(signature(gemm(4096, 1024, 512, DType::kFloat8E4M3, 8)),
            "gemm fp8 m=4096 n=1024 k=512 batch=8");
  EXPECT_EQ(signature(gemm(8, 8, 8, DType::kFloat8E5M2)), "gemm fp8 m=8 n=8 k=8");
  EXPECT_EQ(signature(gemm(8, 8, 8, DType::kFloat16)), "gemm fp16 m=8 n=8 k=8");
  EXPECT_EQ(signature(gemm(0, 8, 8, DType::kBFloat16, 0)), "gemm bf16 m=0 n=8 k=8");
}

TEST(KernelSignatureTest, AccumulatingGemmAppendsAccLast) {
  EXPECT_EQ(signature(gemm(8192, 3072, 8192, DType::kBFloat16, 1, DType::kFloat32)),
            "gemm bf16 m=8192 n=3072 k=8192 acc=fp32");
  EXPECT_EQ(signature(gemm(4096, 1024, 512, DType::kFloat8E4M3, 8, DType::kBFloat16)),
            "gemm fp8 m=4096 n=1024 k=512 batch=8 acc=bf16");
  // Not accumulating: the plain signature, and acc does not change the FLOPs.
  EXPECT_EQ(signature(gemm(8, 8, 8, DType::kBFloat16, 1, std::nullopt)), "gemm bf16 m=8 n=8 k=8");
  EXPECT_DOUBLE_EQ(kernel_flops(gemm(2, 3, 5, DType::kBFloat16, 4, DType::kFloat32)),
                   kernel_flops(gemm(2, 3, 5, DType::kBFloat16, 4)));
}

TEST(KernelSignatureTest, Attention) {
  EXPECT_EQ(signature(attention(false, 1, 16, 2, 8192, 8192, 128, true)),
            "attn_fwd bf16 b=1 hq=16 hkv=2 sq=8192 skv=8192 d=128 causal");
  EXPECT_EQ(signature(attention(true, 2, 32, 8, 4096, 8192, 64, false)),
            "attn_bwd bf16 b=2 hq=32 hkv=8 sq=4096 skv=8192 d=64");
  EXPECT_EQ(signature(attention(false, 1, 8, 8, 128, 128, 128, false, DType::kFloat8E4M3)),
            "attn_fwd fp8 b=1 hq=8 hkv=8 sq=128 skv=128 d=128");
}

TEST(KernelSignatureTest, MemoryBound) {
  EXPECT_EQ(signature(memory_bound("layernorm_fwd", 134217728)),
            "mem layernorm_fwd bytes=134217728");
  EXPECT_EQ(signature(memory_bound("adam", 0, 5.0)), "mem adam bytes=0");
}

TEST(KernelSignatureTest, LargeIntegersAndNoCommas) {
  const std::string s = signature(gemm(std::int64_t{1} << 40, 3, 5, DType::kBFloat16, 1000000));
  EXPECT_EQ(s, "gemm bf16 m=1099511627776 n=3 k=5 batch=1000000");
  EXPECT_EQ(s.find(','), std::string::npos);
}

TEST(KernelFlopsTest, Gemm) {
  EXPECT_DOUBLE_EQ(kernel_flops(gemm(2, 3, 5)), 60);
  EXPECT_DOUBLE_EQ(kernel_flops(gemm(2, 3, 5, DType::kBFloat16, 7)), 420);
  EXPECT_DOUBLE_EQ(kernel_flops(gemm(8192, 8192, 8192)), 2.0 * 8192.0 * 8192.0 * 8192.0);
  EXPECT_DOUBLE_EQ(kernel_flops(gemm(0, 3, 5)), 0);
}

TEST(KernelFlopsTest, AttentionForwardAndBackward) {
  const double fwd = 4.0 * 2 * 16 * 1024 * 2048 * 128;
  EXPECT_DOUBLE_EQ(kernel_flops(attention(false, 2, 16, 4, 1024, 2048, 128, false)), fwd);
  EXPECT_DOUBLE_EQ(kernel_flops(attention(true, 2, 16, 4, 1024, 2048, 128, false)), 2.5 * fwd);
  // GQA does not change the flops.
  EXPECT_DOUBLE_EQ(kernel_flops(attention(false, 2, 16, 16, 1024, 2048, 128, false)), fwd);
}

TEST(KernelFlopsTest, CausalEqualLengthsIsHalf) {
  const double full = 4.0 * 1 * 8 * 4096.0 * 4096.0 * 128;
  EXPECT_DOUBLE_EQ(kernel_flops(attention(false, 1, 8, 8, 4096, 4096, 128, true)), full / 2);
  EXPECT_DOUBLE_EQ(kernel_flops(attention(true, 1, 8, 8, 4096, 4096, 128, true)), 2.5 * full / 2);
}

TEST(KernelFlopsTest, CausalUnequalLengthsCountsTheUnmaskedAreaExactly) {
  // sq=2, skv=4, bottom-right: row 0 sees 3 keys, row 1 sees 4.
  EXPECT_DOUBLE_EQ(kernel_flops(attention(false, 1, 1, 1, 2, 4, 1, true)), 4.0 * 7);
  // sq=4, skv=2: rows 0, 1 see nothing, row 2 sees 1 key, row 3 sees 2.
  EXPECT_DOUBLE_EQ(kernel_flops(attention(false, 1, 1, 1, 4, 2, 1, true)), 4.0 * 3);
  EXPECT_DOUBLE_EQ(kernel_flops(attention(true, 3, 2, 1, 4, 2, 8, true)),
                   2.5 * 4.0 * 3 * 2 * 3 * 8);
}

TEST(KernelFlopsTest, CausalAreaMatchesBruteForce) {
  for (std::int64_t sq = 0; sq <= 24; ++sq) {
    for (std::int64_t skv = 0; skv <= 24; ++skv) {
      std::int64_t area = 0;
      for (std::int64_t i = 0; i < sq; ++i)
        for (std::int64_t j = 0; j < skv; ++j) area += j <= i + skv - sq ? 1 : 0;
      EXPECT_DOUBLE_EQ(causal_area(sq, skv), static_cast<double>(area)) << sq << " " << skv;
    }
  }
}

TEST(KernelFlopsTest, MemoryBoundCarriesItsFlops) {
  EXPECT_DOUBLE_EQ(kernel_flops(memory_bound("swiglu_fwd", 1000, 250)), 250);
}

TEST(KernelBytesTest, Gemm) {
  EXPECT_DOUBLE_EQ(kernel_bytes(gemm(2, 3, 5)), 2.0 * (2 * 5 + 5 * 3 + 2 * 3));
  EXPECT_DOUBLE_EQ(kernel_bytes(gemm(2, 3, 5, DType::kBFloat16, 4)), 4 * 2.0 * 31);
  // FP8 inputs, bf16 output.
  EXPECT_DOUBLE_EQ(kernel_bytes(gemm(2, 3, 5, DType::kFloat8E4M3)), 1.0 * 25 + 2.0 * 6);
  EXPECT_DOUBLE_EQ(kernel_bytes(gemm(2, 3, 5, DType::kFloat32)), 4.0 * 31);
}

TEST(KernelBytesTest, AccumulatingGemmReadsAndWritesItsOutput) {
  // A, B in the input type; C read and written in the acc type.
  EXPECT_DOUBLE_EQ(kernel_bytes(gemm(2, 3, 5, DType::kBFloat16, 1, DType::kFloat32)),
                   2.0 * 25 + 2 * 4.0 * 6);
  EXPECT_DOUBLE_EQ(kernel_bytes(gemm(2, 3, 5, DType::kBFloat16, 4, DType::kBFloat16)),
                   4 * (2.0 * 25 + 2 * 2.0 * 6));
  EXPECT_DOUBLE_EQ(kernel_bytes(gemm(2, 3, 5, DType::kFloat8E4M3, 1, DType::kFloat32)),
                   1.0 * 25 + 2 * 4.0 * 6);
  EXPECT_DOUBLE_EQ(kernel_bytes(gemm(0, 3, 5, DType::kBFloat16, 1, DType::kFloat32)), 0);
}

TEST(KernelBytesTest, Attention) {
  // b=2 hq=4 hkv=2 sq=8 skv=16 d=32, bf16.
  const double q = 2.0 * 8 * 4 * 32 * 2;
  const double kv = 2.0 * 16 * 2 * 32 * 2;
  const double row = 2.0 * 4 * 8 * 4;
  EXPECT_DOUBLE_EQ(kernel_bytes(attention(false, 2, 4, 2, 8, 16, 32, true)), 2 * q + 2 * kv + row);
  EXPECT_DOUBLE_EQ(kernel_bytes(attention(true, 2, 4, 2, 8, 16, 32, false)),
                   4 * q + 4 * kv + 2 * row);
}

TEST(KernelBytesTest, MemoryBound) {
  EXPECT_DOUBLE_EQ(kernel_bytes(memory_bound("adam", 123456789)), 123456789);
}

TEST(KernelDeathTest, InvalidShapesAreBugs) {
  EXPECT_DEATH(gemm(-1, 2, 3), "negative");
  EXPECT_DEATH(gemm(2, 3, 5, DType::kBFloat16, 1, DType::kFloat8E4M3), "cannot accumulate in");
  EXPECT_DEATH(gemm(2, 3, 5, DType::kBFloat16, 1, DType::kInt32), "cannot accumulate in");
  EXPECT_DEATH(attention(false, 1, 6, 4, 8, 8, 8, false), "multiple of hkv");
  EXPECT_DEATH(memory_bound("bad,name", 8), "one word");
  EXPECT_DEATH(memory_bound("", 8), "one word");
}

}  // namespace
}  // namespace prism
