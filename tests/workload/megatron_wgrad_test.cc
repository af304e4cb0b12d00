// Weight-gradient GEMMs accumulate into main_grad (Megatron's
// gradient_accumulation_fusion, TE's fuse_wgrad_accumulation): the builder
// emits them with `acc=` the grad buffer's type; the unfused attention's
// score and context products (no weight) and the router stay plain.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>

#include "workload/megatron.h"

#include "megatron_test_util.h"

namespace prism {
namespace {

using testing::build;
using testing::kernel_uses;
using testing::parse;
using Uses = std::map<std::string, std::int64_t>;

// 2 stages of 2 layers (TP 2), 3 micro-batches of 1024 tokens per rank.
std::string job(const std::string& model, const std::string& parallelism,
                const std::string& training) {
  return "model: {num_layers: 4, hidden_size: 1024, num_attention_heads: 8, vocab_size: 5000" +
         model + "}\n" +
         "parallelism: {tensor_model_parallel_size: 2, pipeline_model_parallel_size: 2" +
         parallelism + "}\n" + testing::cluster(8) +
         "training: {seq_length: 1024, global_batch_size: 6" + training + "}\n";
}

// Signatures with `acc=` and their uses over both roles: per layer and
// micro-batch the qkv (1024 x 1536), proj (512 x 1024), fc1 (1024 x 2048)
// and fc2 (2048 x 1024) weight gradients, k the 1024 tokens; on the last
// stage the output layer's (1024 x 5120 / 2), 3 times.
Uses accumulating(const std::string& acc) {
  const std::string a = " acc=" + acc;
  return {{"gemm bf16 m=1024 n=1536 k=1024" + a, 12},
          {"gemm bf16 m=512 n=1024 k=1024" + a, 12},
          {"gemm bf16 m=1024 n=2048 k=1024" + a, 12},
          {"gemm bf16 m=2048 n=1024 k=1024" + a, 12},
          {"gemm bf16 m=1024 n=2560 k=1024" + a, 3}};
}

Uses with_acc(const BuiltJob& b) {
  Uses out;
  for (const auto& [sig, n] : kernel_uses(b, "gemm "))
    if (sig.find(" acc=") != std::string::npos) out[sig] = n;
  return out;
}

TEST(MegatronWgrad, AccumulatesInTheGradBufferType) {
  // grad_reduce_in_fp32 (Megatron's default): main_grad in fp32.
  EXPECT_EQ(with_acc(build(parse(job("", "", "")))), accumulating("fp32"));
  EXPECT_EQ(with_acc(build(parse(job("", "", ", grad_reduce_in_fp32: false")))),
            accumulating("bf16"));
}

TEST(MegatronWgrad, DeferredAndOverlappedWeightGradientsAccumulateToo) {
  // defer_embedding_wgrad_compute: the output layer's GEMMs at the drain.
  EXPECT_EQ(with_acc(build(parse(job("", "", ", defer_embedding_wgrad_compute: true")))),
            accumulating("fp32"));
  // tp_comm_overlap: qkv/fc1 beside the bulk reduce-scatter, proj/fc2 after
  // the ring all-gather.
  EXPECT_EQ(with_acc(build(parse(job("", ", sequence_parallel: true, tp_comm_overlap: true", "")))),
            accumulating("fp32"));
}

TEST(MegatronWgrad, AttentionProductsAreNotWeights) {
  const BuiltJob b = build(parse(job("", "", ", attention_backend: unfused")));
  EXPECT_EQ(with_acc(b), accumulating("fp32"));
  // The score and context bmm (batch = 8 heads / TP 2), their "wgrad"s
  // included, write a fresh output.
  const Uses bmm = kernel_uses(b, "gemm bf16 m=1024 n=1024 k=128 batch=4");
  EXPECT_EQ(bmm, (Uses{{"gemm bf16 m=1024 n=1024 k=128 batch=4", 24}}));
  for (const auto& [sig, n] : kernel_uses(b, "gemm ")) {
    if (sig.find("batch=4") != std::string::npos) {
      EXPECT_EQ(sig.find("acc="), std::string::npos) << sig;
    }
  }
}

TEST(MegatronWgrad, ExpertsAndFp8) {
  // FP8 (TE accumulates the FP8 wgrad GEMM into main_grad), 4 experts over
  // EP 2: the grouped fc1/fc2 weight gradients of the 2 local experts carry
  // acc (2 layers x 3 micro-batches x 2 roles), the router's does not
  // (Megatron-Core's router GEMM hands its gradient to autograd).
  const BuiltJob b = build(
      parse(job(", num_moe_experts: 4, moe_router_topk: 2",
                ", expert_model_parallel_size: 2, sequence_parallel: true", ", precision: fp8")));
  const Uses acc = with_acc(b);
  EXPECT_EQ(acc.at("gemm fp8 m=1024 n=2048 k=1024 batch=2 acc=fp32"), 12);
  EXPECT_EQ(acc.at("gemm fp8 m=2048 n=1024 k=1024 batch=2 acc=fp32"), 12);
  EXPECT_EQ(acc.at("gemm fp8 m=1024 n=1536 k=1024 acc=fp32"), 12);
  EXPECT_EQ(acc.at("gemm bf16 m=1024 n=2560 k=1024 acc=fp32"), 3);  // the output layer: bf16
  EXPECT_EQ(acc.size(), 5u);
  EXPECT_EQ(kernel_uses(b, "gemm bf16 m=1024 n=4 k=512"),
            (Uses{{"gemm bf16 m=1024 n=4 k=512", 12}}));  // router wgrad, plain
}

}  // namespace
}  // namespace prism
