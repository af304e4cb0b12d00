#include "workload/model_stats.h"

#include <cmath>
#include <string_view>

#include <gtest/gtest.h>

namespace prism {
namespace {

ParameterCount count(std::string_view preset) {
  return count_parameters(model_preset(preset).value());
}

double billions(std::int64_t n) {
  return static_cast<double>(n) / 1e9;
}

// Checkpoint sizes as published (Hugging Face safetensors metadata, which
// counts every tensor) match Megatron-Core's layout exactly.
TEST(ModelStats, ExactCountsOfPublishedCheckpoints) {
  EXPECT_EQ(count("llama2-7b").total, 6'738'415'616);
  EXPECT_EQ(count("llama3.1-8b").total, 8'030'261'248);
  EXPECT_EQ(count("llama3.1-70b").total, 70'553'706'496);
  EXPECT_EQ(count("llama3.1-405b").total, 405'853'388'800);
  EXPECT_EQ(count("mixtral-8x7b").total, 46'702'792'704);
}

// Published totals, rounded as the papers and model cards round them.
TEST(ModelStats, PresetsMatchPublishedSizes) {
  struct Case {
    std::string_view preset;
    double total_b;
    double active_b;
    double tolerance_b;
  };
  const Case cases[] = {
      {"gpt3-175b", 174.6, 174.6, 0.05},  // Brown et al.: 175B; Megatron's count 174.6B
      {"llama2-7b", 6.74, 6.74, 0.005},      {"llama2-13b", 13.0, 13.0, 0.05},
      {"llama2-70b", 68.98, 68.98, 0.005},   {"llama3.1-8b", 8.03, 8.03, 0.005},
      {"llama3.1-70b", 70.55, 70.55, 0.005}, {"llama3.1-405b", 405.85, 405.85, 0.005},
      {"mixtral-8x7b", 46.7, 12.9, 0.05},   // Mistral: 46.7B total, 12.9B active
      {"mixtral-8x22b", 141, 39, 0.5},      // Mistral: 141B total, 39B active
      {"nemotron4-15b", 15.6, 15.6, 0.05},  // Parmar et al.: 15.6B
      {"nemotron4-340b", 341, 341, 0.5},    // NVIDIA: 341B
  };
  for (const Case& c : cases) {
    const ParameterCount p = count(c.preset);
    EXPECT_NEAR(billions(p.total), c.total_b, c.tolerance_b) << c.preset;
    EXPECT_NEAR(billions(p.active), c.active_b, c.tolerance_b) << c.preset;
  }
}

// DeepSeek-V3 is approximated (job_spec.cc): MLA as 128 full heads of 128
// adds ~283M parameters per layer (470M vs MLA's ~187M), and the 3 dense
// layers become MoE layers (+11.3B each, minus the dense FFN). The result is
// 721.0B total (published: 671B without the 14B MTP module, i.e. +7.5%) and
// 54.8B active (published: 37B). The routed experts, which dominate memory
// and the expert-parallel traffic, are exact.
TEST(ModelStats, DeepSeekV3Approximation) {
  const ParameterCount p = count("deepseek-v3");
  EXPECT_NEAR(billions(p.total), 721.04, 0.01);
  EXPECT_NEAR(billions(p.active), 54.80, 0.01);
  EXPECT_GT(billions(p.total), 671);
  EXPECT_LT(billions(p.total) / 671, 1.08);
  const std::int64_t routed_per_layer = 256LL * 3 * 7168 * 2048;
  EXPECT_EQ(routed_per_layer, 11'274'289'152);
  EXPECT_GT(p.per_layer, routed_per_layer);
}

TEST(ModelStats, LayoutOfOneLayer) {
  // GPT-3: 12h^2 + 13h per layer (biases and LayerNorm), tied embedding once.
  const ParameterCount g = count("gpt3-175b");
  const std::int64_t h = 12288;
  EXPECT_EQ(g.per_layer, 12 * h * h + 13 * h);
  EXPECT_EQ(g.embedding, 50257 * h);
  EXPECT_EQ(g.total, 96 * g.per_layer + 2 * h + g.embedding);
  // Llama-2 70B, GQA with 8 groups of 128, SwiGLU, RMSNorm, no biases.
  const ParameterCount l = count("llama2-70b");
  const std::int64_t h2 = 8192;
  EXPECT_EQ(l.per_layer, h2 * (h2 + 2 * 1024) + h2 * h2 + 3 * h2 * 28672 + 2 * h2);
  EXPECT_EQ(l.embedding, 2 * 32000 * h2);
  // Mixtral: router h*E, 8 experts, 2 active.
  const ParameterCount m = count("mixtral-8x7b");
  const std::int64_t expert = 3LL * 4096 * 14336;
  EXPECT_EQ(m.total - m.active, 32 * 6 * expert);
}

// A hand computation of Megatron's num_floating_point_operations().
TEST(ModelStats, FlopsByHand) {
  JobSpec j;
  j.model.num_layers = 2;
  j.model.hidden_size = 64;
  j.model.num_attention_heads = 4;  // head dim 16
  j.model.num_query_groups = 2;
  j.model.ffn_hidden_size = 128;
  j.model.vocab_size = 1000;  // padded to 1024
  j.model.activation = Activation::kSwiglu;
  j.training.seq_length = 32;
  j.training.global_batch_size = 4;
  j.num_gpus = 1;
  // Per token and layer, x3 (fwd + 2 bwd) x2 (multiply-add):
  //   attention 6 * (64 * (64 + 2*32) + 64 * 32 [causal QK^T + AV] + 64 * 64) = 86016
  //   MLP       6 * 64 * 128 * 3 = 147456
  // logits      6 * 64 * 1024 = 393216
  const double per_token = 2 * 86016 + 2 * 147456 + 393216;
  EXPECT_DOUBLE_EQ(model_flops_per_iteration(j), per_token * 4 * 32);

  // MoE: top-2 of 8 experts of 32, one shared expert of 64, every layer MoE.
  j.model.num_moe_experts = 8;
  j.model.moe_router_topk = 2;
  j.model.moe_ffn_hidden_size = 32;
  j.model.moe_shared_expert_intermediate_size = 64;
  const double moe_mlp = 6.0 * 64 * (32 * 2 * 3 + 64 * 3);
  EXPECT_DOUBLE_EQ(model_flops_per_iteration(j), (2 * 86016 + 2 * moe_mlp + 393216) * 4 * 32);

  // The vocabulary is padded per tensor-parallel size (128 * tp).
  j.parallelism.tensor_model_parallel_size = 3;  // 1000 -> 1152
  EXPECT_DOUBLE_EQ(model_flops_per_iteration(j),
                   (2 * 86016 + 2 * moe_mlp + 6.0 * 64 * 1152) * 4 * 32);
}

// Narayanan et al. 2021, eq. 3 without recompute: 72 B s L h^2 (1 + s/6h +
// V/12Lh). It counts the full score matrix; Megatron's causal count is half
// of it, 6 B s^2 L h less.
TEST(ModelStats, FlopsMatchTheClassicFormulaForGpt3) {
  JobSpec j;
  j.model = model_preset("gpt3-175b").value();
  j.training.seq_length = 2048;
  j.training.global_batch_size = 1536;
  j.parallelism.tensor_model_parallel_size = 8;
  j.num_gpus = 1;
  const double B = 1536, s = 2048, L = 96, h = 12288;
  const double V = j.model.padded_vocab_size(8);
  EXPECT_EQ(V, 51200);
  const double classic = 72 * B * s * L * h * h * (1 + s / (6 * h) + V / (12 * L * h));
  const double causal = classic - 6 * B * s * s * L * h;
  EXPECT_NEAR(model_flops_per_iteration(j) / causal, 1.0, 1e-12);
  // About 3.34 EFLOP per batch of 1536 x 2048 tokens.
  EXPECT_NEAR(model_flops_per_iteration(j) / 1e18, 3.34, 0.01);
}

TEST(ModelStats, FlopsApproachSixNDForShortSequences) {
  // With s << h the count is 6 x parameters (non-embedding + output layer) per token.
  JobSpec j;
  j.model = model_preset("llama2-7b").value();
  j.training.seq_length = 1;
  j.training.global_batch_size = 1;
  j.num_gpus = 1;
  const ParameterCount p = count_parameters(j.model);
  const double n = static_cast<double>(p.total - p.embedding / 2);  // input embedding is a lookup
  EXPECT_NEAR(model_flops_per_iteration(j) / (6 * n), 1.0, 1e-3);
}

}  // namespace
}  // namespace prism
