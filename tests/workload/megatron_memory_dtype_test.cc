// Memory as Megatron-Core and Transformer Engine allocate it, per mechanism,
// against figures computed by hand (docs/memory.md gives the sources): the
// tensors one layer saves in BF16 and FP8 (TE keeps its own quantized GEMM
// inputs), dropout masks only when dropout > 0, the main-gradient buffer and
// the data-parallel reduction in the grad_reduce_in_fp32 dtype, TE's cached
// FP8 weights (or FP8 primary weights), and the logits each cross-entropy
// implementation keeps.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "megatron_test_util.h"
#include "workload/megatron.h"

namespace prism {
namespace {

using testing::build;
using testing::cluster;
using testing::kernel_uses;
using testing::parse;

// Llama-like, small: h 256, 8 heads of 32 with 2 KV groups, SwiGLU ffn 512;
// tp 2 with SP, s 1024, b 1. Per rank: S = s b / t = 512 sequence-sharded
// tokens, T = 1024 full-sequence tokens, q = a d / t = 128, kv = g d / t = 32,
// F / t = 256.
constexpr std::int64_t kS = 512, kT = 1024, kH = 256, kAd = 256, kGd = 64, kF = 512;

JobSpec llama_like(const std::string& model_extra, const std::string& training,
                   const std::string& cluster_preset = "dgx-h100") {
  return parse(
      "model: {num_layers: 2, hidden_size: 256, num_attention_heads: 8, num_query_groups: 2,\n"
      "  ffn_hidden_size: 512, vocab_size: 1000, activation: swiglu, normalization: RMSNorm,\n"
      "  untie_embeddings_and_output_weights: true" +
      model_extra + "}\n" + "training: {seq_length: 1024, micro_batch_size: 1" + training + "}\n" +
      "parallelism: {tensor_model_parallel_size: 2, sequence_parallel: true}\n" +
      "cluster: {preset: " + cluster_preset + ", num_gpus: 2}\n");
}

std::map<std::string, std::int64_t> tensors(const JobSpec& job) {
  std::map<std::string, std::int64_t> out;
  for (const ActivationTensor& t : layer_activation_tensors(job, false)) out[t.name] = t.bytes;
  return out;
}

constexpr const char* kNoDropout = ", hidden_dropout: 0, attention_dropout: 0";

// BF16 with flash attention and no dropout: S (8h + 4ad + 4gd + 6F), each
// tensor by the module that saves it.
TEST(MegatronMemoryDtype, Bf16SavedTensorsPerModule) {
  const JobSpec job = llama_like(kNoDropout, "");
  const std::map<std::string, std::int64_t> t = tensors(job);
  const std::map<std::string, std::int64_t> expected = {
      {"norm1_input", 2 * kS * kH},           // the residual, kept by LayerNormLinear
      {"qkv_input", 2 * kS * kH},             // LayerNormLinear's ln_out
      {"qkv", 2 * kT * (kAd + 2 * kGd) / 2},  // Q, K, V kept by core attention
      {"attn_out", 2 * kT * kAd / 2},         // flash attention's output = proj input
      {"norm2_input", 2 * kS * kH},           //
      {"fc1_input", 2 * kS * kH},             // LayerNormLinear's ln_out
      {"fc1_output", 2 * kT * 2 * kF / 2},    // the SwiGLU input
      {"act_output", 2 * kT * kF / 2},        // FC2's input
  };
  EXPECT_EQ(t, expected);
  EXPECT_EQ(layer_activation_bytes(job, false).count, kS * (8 * kH + 4 * kAd + 4 * kGd + 6 * kF));
  EXPECT_EQ(layer_activation_bytes(job, false).count, 3'276'800);
}

// FP8 (delayed or tensorwise): every TE linear keeps its own FP8 input, 1 B
// per element; the residual, Q/K/V and the SwiGLU input stay bf16; flash
// attention keeps its bf16 output and the projection its FP8 copy:
// S (6h + 5ad + 4gd + 5F).
TEST(MegatronMemoryDtype, Fp8KeepsTransformerEnginesQuantizedInputs) {
  for (const std::string recipe : {"delayed", "tensorwise"}) {
    SCOPED_TRACE(recipe);
    const JobSpec job = llama_like(kNoDropout, ", precision: fp8, fp8_recipe: " + recipe);
    const std::map<std::string, std::int64_t> t = tensors(job);
    EXPECT_EQ(t.at("norm1_input"), 2 * kS * kH);
    EXPECT_EQ(t.at("qkv_input"), kS * kH);
    EXPECT_EQ(t.at("qkv"), 2 * kT * (kAd + 2 * kGd) / 2);
    EXPECT_EQ(t.at("attn_out"), 2 * kT * kAd / 2);
    EXPECT_EQ(t.at("attn_out_fp8"), kT * kAd / 2);
    EXPECT_EQ(t.at("norm2_input"), 2 * kS * kH);
    EXPECT_EQ(t.at("fc1_input"), kS * kH);
    EXPECT_EQ(t.at("fc1_output"), 2 * kT * 2 * kF / 2);
    EXPECT_EQ(t.at("act_output"), kT * kF / 2);
    EXPECT_EQ(t.size(), 9u);
    EXPECT_EQ(layer_activation_bytes(job, false).count, kS * (6 * kH + 5 * kAd + 4 * kGd + 5 * kF));
    EXPECT_EQ(layer_activation_bytes(job, false).count, 2'883'584);
  }
  // Blockwise (1x128, one fp32 scale) and mxfp8 (1x32, one E8M0 byte) add
  // 1/32 B per element to each quantized copy.
  const std::int64_t fp8_elements = kS * kH * 2 + kT * kAd / 2 + kT * kF / 2;
  const std::int64_t delayed =
      layer_activation_bytes(llama_like(kNoDropout, ", precision: fp8"), false).count;
  EXPECT_EQ(layer_activation_bytes(
                llama_like(kNoDropout, ", precision: fp8, fp8_recipe: blockwise"), false)
                .count,
            delayed + fp8_elements / 32);
  EXPECT_EQ(layer_activation_bytes(
                llama_like(kNoDropout, ", precision: fp8, fp8_recipe: mxfp8", "dgx-b200"), false)
                .count,
            delayed + fp8_elements / 32);
}

// The unfused core attention keeps no output of its own: under FP8 only the
// projection's FP8 copy remains.
TEST(MegatronMemoryDtype, Fp8UnfusedAttentionKeepsOnlyTheProjectionsCopy) {
  const std::map<std::string, std::int64_t> t =
      tensors(llama_like(kNoDropout, ", precision: fp8, attention_backend: unfused"));
  EXPECT_EQ(t.count("attn_out"), 0u);
  EXPECT_EQ(t.at("attn_out_fp8"), kT * kAd / 2);
  EXPECT_EQ(t.at("attn_softmax"), 2 * (8 / 2) * kT * kT);
}

// Dropout masks, 1 B per element, only where a dropout has p > 0: after
// each block (hidden_dropout) and, unfused, the softmax's mask and its
// dropped-out copy (attention_dropout). Flash attention regenerates its mask.
TEST(MegatronMemoryDtype, DropoutMasksOnlyWithDropout) {
  const std::int64_t none = layer_activation_bytes(llama_like(kNoDropout, ""), false).count;
  const std::map<std::string, std::int64_t> hidden =
      tensors(llama_like(", hidden_dropout: 0.1, attention_dropout: 0", ""));
  EXPECT_EQ(hidden.at("attn_dropout_mask"), kS * kH);
  EXPECT_EQ(hidden.at("mlp_dropout_mask"), kS * kH);
  EXPECT_EQ(
      layer_activation_bytes(llama_like(", hidden_dropout: 0.1, attention_dropout: 0", ""), false)
          .count,
      none + 2 * kS * kH);
  // Flash attention: attention dropout adds nothing.
  EXPECT_EQ(
      layer_activation_bytes(llama_like(", hidden_dropout: 0, attention_dropout: 0.1", ""), false)
          .count,
      none);
  // Unfused: the softmax output alone (2 B), or with its mask and the
  // dropped-out probabilities (2 + 1 + 2 B per score).
  const std::int64_t scores = (8 / 2) * kT * kT;
  const std::string unfused = ", attention_backend: unfused";
  const std::map<std::string, std::int64_t> plain = tensors(llama_like(kNoDropout, unfused));
  EXPECT_EQ(plain.at("attn_softmax"), 2 * scores);
  EXPECT_EQ(plain.count("attn_softmax_dropout_mask"), 0u);
  EXPECT_EQ(plain.count("attn_probs"), 0u);
  EXPECT_EQ(layer_activation_bytes(
                llama_like(", hidden_dropout: 0, attention_dropout: 0.1", unfused), false)
                .count,
            layer_activation_bytes(llama_like(kNoDropout, unfused), false).count + 3 * scores);
}

// Every layer of the graph allocates exactly its list, with and without
// dropout, under FP8 and recompute, and frees it again.
TEST(MegatronMemoryDtype, GraphAllocatesTheList) {
  for (const std::string model : {std::string(kNoDropout), std::string("")}) {
    for (const std::string training :
         {", precision: fp8", ", precision: fp8, attention_backend: unfused",
          ", precision: fp8, attention_backend: unfused, recompute: selective",
          ", precision: fp8, recompute: full", ", attention_backend: unfused"}) {
      SCOPED_TRACE(model + training);
      const JobSpec job = llama_like(model, training + ", global_batch_size: 2");
      const BuiltJob b = build(job);
      ASSERT_EQ(b.graph.roles.size(), 1u);
      const Role& role = b.graph.roles[0];
      std::map<std::string, int> allocs, frees;
      for (const Op& op : role.ops) {
        if (op.kind == OpKind::kAlloc) ++allocs[role.names[op.name]];
        if (op.kind == OpKind::kFree) ++frees[role.names[op.name]];
      }
      for (const ActivationTensor& t : layer_activation_tensors(job, false)) {
        const int expected = 2 * 2;  // 2 micro-batches x 2 layers
        EXPECT_EQ(allocs["act." + t.name], expected) << t.name;
        EXPECT_EQ(frees["act." + t.name], expected) << t.name;
      }
      const bool dropout = model.empty();
      EXPECT_EQ(allocs["act.embedding_dropout_mask"], dropout ? 2 : 0);
      int masks = 0;  // kept, re-made by full recompute, or transient under it
      for (const auto& [name, n] : allocs)
        if (name.find("_dropout_mask") != std::string::npos) masks += n;
      EXPECT_EQ(masks > 0, dropout);
    }
  }
}

// MoE under FP8: the experts' grouped linear keeps its FP8 input; the bf16
// dispatched tokens it quantized are a transient of the forward.
TEST(MegatronMemoryDtype, Fp8ExpertsKeepTheirQuantizedTokens) {
  const JobSpec job = parse(
      "model: {num_layers: 2, hidden_size: 256, num_attention_heads: 8, vocab_size: 1000,\n"
      "  activation: swiglu, normalization: RMSNorm, num_moe_experts: 8, moe_router_topk: 2,\n"
      "  moe_ffn_hidden_size: 512, hidden_dropout: 0, attention_dropout: 0}\n"
      "training: {seq_length: 1024, micro_batch_size: 1, global_batch_size: 2, precision: fp8}\n"
      "parallelism: {tensor_model_parallel_size: 2, sequence_parallel: true,\n"
      "  expert_model_parallel_size: 2}\n" +
      cluster(4));
  std::map<std::string, std::int64_t> t;
  for (const ActivationTensor& a : layer_activation_tensors(job, true)) t[a.name] = a.bytes;
  // Tokens at the 4 local experts: Tsp k ep etp / E each (as MoeLayerTensors).
  const std::int64_t N = 512 * 2 * 2 * 2 / 8 * 4, h = 256;
  EXPECT_EQ(t.at("expert_input"), N * h);
  EXPECT_EQ(t.at("expert_fc1_output"), 2 * N * 2 * 512 / 2);
  EXPECT_EQ(t.at("expert_act_output"), N * 512 / 2);
  EXPECT_EQ(t.at("router_input"), 2 * 512 * h);  // the router is not a TE layer
  const BuiltJob b = build(job);
  for (const Role& role : b.graph.roles) {
    std::int64_t allocs = 0, frees = 0;
    for (const Op& op : role.ops) {
      if (role.names[op.name] != "dispatched_tokens") continue;
      if (op.kind == OpKind::kAlloc) {
        ++allocs;
        EXPECT_EQ(op.bytes.count, 2 * N * h);
      }
      if (op.kind == OpKind::kFree) ++frees;
    }
    EXPECT_EQ(allocs, 2);  // 2 layers x 1 micro-batch (dp 2)
    EXPECT_EQ(frees, allocs);
  }
}

// Bytes of the allocations named `name` before the iteration marker, and
// whether each was freed.
struct Named {
  std::int64_t bytes = 0;
  int allocs = 0, frees = 0;
};

Named named(const Role& role, const std::string& name) {
  Named n;
  for (const Op& op : role.ops) {
    if (op.name < 0 || role.names[op.name] != name) continue;
    if (op.kind == OpKind::kAlloc) {
      n.bytes += op.bytes.count;
      ++n.allocs;
    }
    if (op.kind == OpKind::kFree) ++n.frees;
  }
  return n;
}

JobSpec dp_job(const std::string& training, const std::string& cluster_preset = "dgx-h100") {
  return parse(
      "model: {num_layers: 2, hidden_size: 256, num_attention_heads: 8, vocab_size: 1000}\n"
      "training: {seq_length: 512, use_distributed_optimizer: true" +
      training + "}\n" + "cluster: {preset: " + cluster_preset + ", num_gpus: 4}\n");
}

// The main-gradient buffer in the grad_reduce_in_fp32 dtype
// (DistributedDataParallel._allocate_buffers_for_parameters), the
// data-parallel reduce-scatter in it, and with bf16 gradients the
// optimizer's fp32 copy of its shard (DistributedOptimizer.
// _copy_model_grads_to_main_grads): 2 + 2 + 12/d + (4/d at the step) bytes
// per parameter instead of 2 + 4 + 12/d.
TEST(MegatronMemoryDtype, GradBufferAndReductionFollowTheGradDtype) {
  for (const bool fp32 : {true, false}) {
    SCOPED_TRACE(fp32 ? "fp32 grads" : "bf16 grads");
    const BuiltJob b =
        build(dp_job(std::string(", grad_reduce_in_fp32: ") + (fp32 ? "true" : "false")));
    const Role& role = b.graph.roles[0];
    const std::int64_t P = b.roles[0].parameters, shard = b.roles[0].optimizer_params;
    ASSERT_EQ(shard, P / 4);
    const std::int64_t g = fp32 ? 4 : 2;
    EXPECT_EQ(named(role, "grad_buffer").bytes, g * P);
    EXPECT_EQ(b.roles[0].model_state_bytes.count, 2 * P + g * P + 12 * shard);
    const Named main_grads = named(role, "main_grad_fp32");
    EXPECT_EQ(main_grads.bytes, fp32 ? 0 : 4 * shard);
    EXPECT_EQ(main_grads.frees, main_grads.allocs);
    std::int64_t reduced = 0;
    for (const Op& op : role.ops) {
      if (op.kind != OpKind::kCollective || role.names[op.name] != "dp_grad_reduce") continue;
      EXPECT_EQ(op.collective, CollectiveKind::kReduceScatter);
      EXPECT_EQ(op.dtype, fp32 ? DType::kFloat32 : DType::kBFloat16);
      reduced += op.bytes.count;
    }
    EXPECT_EQ(reduced, g * P);
  }
}

// Apex's DistributedFusedAdam as NeMo's distributed_fused_adam configures it
// (docs/memory.md): the same contiguous grad buffer in grad_sync_dtype; per
// shard parameter a 16-bit remainder and fp32 m and v (10 B; with FP8
// params store_params keeps an fp32 copy instead: 12 B); each bucket's
// reduce-scatter into a fresh grad_sync_dtype shard held to the end of the
// iteration; a bf16 (FP8: uint8) params_shard for the step's output, held to
// its all-gather; no fp32 copy of bf16 gradients.
TEST(MegatronMemoryDtype, ApexDistributedFusedAdamState) {
  struct Case {
    std::string training;
    std::int64_t g, state, param_shard;
  };
  const std::vector<Case> cases = {
      {", grad_reduce_in_fp32: true", 4, 10, 2},
      {", grad_reduce_in_fp32: false", 2, 10, 2},
      {", grad_reduce_in_fp32: false, overlap_grad_reduce: true", 2, 10, 2},
      {", grad_reduce_in_fp32: false, precision: fp8, fp8_param_gather: true", 2, 12, 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.training);
    const BuiltJob megatron = build(dp_job(c.training));
    const BuiltJob apex =
        build(dp_job(c.training + ", optimizer_impl: apex_distributed_fused_adam"));
    const Role& role = apex.graph.roles[0];
    const std::int64_t P = apex.roles[0].parameters, shard = apex.roles[0].optimizer_params;
    ASSERT_EQ(shard, P / 4);
    EXPECT_EQ(named(role, "grad_buffer").bytes, c.g * P);
    EXPECT_EQ(named(role, "optimizer_state").bytes, c.state * shard);
    EXPECT_EQ(named(role, "main_grad_fp32").allocs, 0);
    const Named grad_shards = named(role, "grad_shard");
    EXPECT_EQ(grad_shards.bytes, c.g * shard);
    EXPECT_GE(grad_shards.allocs, 1);
    EXPECT_EQ(grad_shards.frees, grad_shards.allocs);
    const Named param_shards = named(role, "param_sync_shard");
    EXPECT_EQ(param_shards.bytes, c.param_shard * shard);
    EXPECT_EQ(param_shards.allocs, grad_shards.allocs);  // one per bucket
    EXPECT_EQ(param_shards.frees, param_shards.allocs);
    // Weights and TE's FP8 copies as with Megatron-Core; only the
    // optimizer's own state differs in the model state.
    EXPECT_EQ(named(role, "weights").bytes, named(megatron.graph.roles[0], "weights").bytes);
    EXPECT_EQ(apex.roles[0].model_state_bytes.count,
              megatron.roles[0].model_state_bytes.count - (12 - c.state) * shard);
    // The data-parallel traffic is the same: g bytes per parameter reduced.
    std::int64_t reduced = 0;
    for (const Op& op : role.ops)
      if (op.kind == OpKind::kCollective && role.names[op.name] == "dp_grad_reduce")
        reduced += op.bytes.count;
    EXPECT_EQ(reduced, c.g * P);
  }
}

// The same by hand for dp_job's model (GELU, LayerNorm, biases, tied
// embeddings, learned positions; dp 4): per layer QKV 3h^2 + 3h, projection
// h^2 + h, FC1 4h^2 + 4h, FC2 4h^2 + h, two LayerNorms 4h, i.e. 12h^2 + 13h
// = 789,760; two layers, the padded vocabulary 1024 x h, 512 positions x h
// and the final LayerNorm 2h: P = 1,973,248 on the one stage, a shard of
// P / 4 = 493,312. With bf16 gradient sync Apex keeps 2P + 2P + 10 P/4 =
// 12,826,112 bytes of model state (Megatron-Core 2P + 2P + 12 P/4 =
// 13,812,736), and 2 P/4 = 986,624 bytes each of gradient and parameter
// shards around the step.
TEST(MegatronMemoryDtype, ApexDistributedFusedAdamBytesByHand) {
  constexpr std::int64_t h = 256, P = 2 * (12 * h * h + 13 * h) + 1024 * h + 512 * h + 2 * h;
  static_assert(P == 1'973'248);
  const BuiltJob b =
      build(dp_job(", grad_reduce_in_fp32: false, optimizer_impl: "
                   "apex_distributed_fused_adam"));
  const Role& role = b.graph.roles[0];
  EXPECT_EQ(b.roles[0].parameters, P);
  EXPECT_EQ(b.roles[0].optimizer_params, 493'312);
  EXPECT_EQ(named(role, "weights").bytes, 3'946'496);
  EXPECT_EQ(named(role, "grad_buffer").bytes, 3'946'496);
  EXPECT_EQ(named(role, "optimizer_state").bytes, 4'933'120);
  EXPECT_EQ(named(role, "grad_shard").bytes, 986'624);
  EXPECT_EQ(named(role, "param_sync_shard").bytes, 986'624);
  EXPECT_EQ(b.roles[0].model_state_bytes.count, 12'826'112);
  EXPECT_EQ(build(dp_job(", grad_reduce_in_fp32: false")).roles[0].model_state_bytes.count,
            13'812'736);
}

// Every bucket gets its gradient shard at its reduce-scatter, also the
// output layer's, which defer_embedding_wgrad_compute reduces after the
// drain at the pipeline flush: as many gradient shards as parameter shards on
// each stage, fp32 (4/d) against bf16 (2/d).
TEST(MegatronMemoryDtype, ApexGradShardPerBucketWithDeferredWgrad) {
  const BuiltJob b = build(
      parse("model: {num_layers: 2, hidden_size: 256, num_attention_heads: 8, vocab_size: 1000}\n"
            "training: {seq_length: 512, global_batch_size: 8, use_distributed_optimizer: true,\n"
            "  overlap_grad_reduce: true, defer_embedding_wgrad_compute: true,\n"
            "  optimizer_impl: apex_distributed_fused_adam}\n"
            "parallelism: {pipeline_model_parallel_size: 2}\n"
            "cluster: {preset: dgx-h100, num_gpus: 4}\n"));
  ASSERT_EQ(b.graph.roles.size(), 2u);
  for (const Role& role : b.graph.roles) {
    SCOPED_TRACE(role.name);
    const Named grads = named(role, "grad_shard"), params = named(role, "param_sync_shard");
    EXPECT_GE(grads.allocs, 1);
    EXPECT_EQ(grads.allocs, params.allocs);
    EXPECT_EQ(grads.frees, grads.allocs);
    EXPECT_EQ(grads.bytes, 2 * params.bytes);
  }
}

// Linear weights per rank of dp_job's model: per layer QKV + projection
// (4 h^2) and FC1 + FC2 (8 h^2), 2 layers; norms, biases, embeddings stay bf16.
constexpr std::int64_t kLinear = 2 * 12 * 256 * 256;

// TE caches each linear weight's FP8 copies for the whole step
// (get_weight_workspace): row-wise and column-wise, 2 B per parameter on
// Hopper; with fp8_param_gather the parameter itself is the row-wise FP8
// copy (1 B), only the column-wise one is added, and the parameter
// all-gather moves 1 B per linear weight.
TEST(MegatronMemoryDtype, Fp8WeightCacheAndFp8Params) {
  struct Case {
    std::string training, cluster;
    std::int64_t weights_minus_bf16, cache;
  };
  const std::vector<Case> cases = {
      {"", "dgx-h100", 0, 0},
      {", precision: fp8", "dgx-h100", 0, 2 * kLinear},
      {", precision: fp8, fp8_recipe: blockwise", "dgx-h100", 0, 2 * kLinear},
      {", precision: fp8, fp8_param_gather: true", "dgx-h100", -kLinear, kLinear},
      // Blackwell: a per-tensor-scaled weight needs no transposed copy;
      // mxfp8 quantizes both directions, with 1 B of scale per 32.
      {", precision: fp8", "dgx-b200", 0, kLinear},
      {", precision: fp8, fp8_recipe: mxfp8", "dgx-b200", 0, 2 * kLinear + 2 * kLinear / 32},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.training + " on " + c.cluster);
    const BuiltJob b = build(dp_job(c.training, c.cluster));
    const Role& role = b.graph.roles[0];
    const std::int64_t P = b.roles[0].parameters;
    EXPECT_EQ(named(role, "weights").bytes, 2 * P + c.weights_minus_bf16);
    const Named cache = named(role, "fp8_weight_cache");
    EXPECT_EQ(cache.bytes, c.cache);
    EXPECT_EQ(cache.frees, 0);  // resident across steps
    EXPECT_EQ(b.roles[0].model_state_bytes.count,
              2 * P + c.weights_minus_bf16 + c.cache + 4 * P + 12 * b.roles[0].optimizer_params);
    // The distributed optimizer's all-gather moves the weights as they are
    // stored: FP8 linear weights 1 B each (their DDP param buffer is uint8).
    std::int64_t gathered = 0;
    for (const Op& op : role.ops)
      if (op.kind == OpKind::kCollective && role.names[op.name] == "dp_param_gather")
        gathered += op.bytes.count;
    EXPECT_EQ(gathered, 2 * P + c.weights_minus_bf16);
  }
}

// The logits each cross entropy keeps for its backward: Megatron-Core's
// (unfused, or fused native) an fp32 copy, 4 B per logit; Transformer
// Engine's the bf16 logits themselves, 2 B, overwritten by their gradient.
TEST(MegatronMemoryDtype, CrossEntropyKeepsItsLogits) {
  const std::int64_t logits = 512 * 1024;  // s x padded vocabulary (1024 for tp 1)
  struct Case {
    std::string training;
    std::int64_t fp32, bf16, grad;
  };
  for (const Case& c :
       {Case{"", 4 * logits, 0, 2 * logits},
        Case{", cross_entropy_loss_fusion: true", 4 * logits, 0, 2 * logits},
        Case{", cross_entropy_loss_fusion: true, cross_entropy_fusion_impl: native", 4 * logits, 0,
             2 * logits},
        Case{", cross_entropy_loss_fusion: true, cross_entropy_fusion_impl: te", 0, 2 * logits, 0},
        // The implementation alone does nothing without the fusion.
        Case{", cross_entropy_fusion_impl: te", 4 * logits, 0, 2 * logits}}) {
    SCOPED_TRACE(c.training);
    const BuiltJob b = build(dp_job(c.training + ", global_batch_size: 4"));
    const Role& role = b.graph.roles[0];
    EXPECT_EQ(named(role, "act.logits_fp32").bytes, c.fp32);
    EXPECT_EQ(named(role, "act.logits").bytes, c.bf16);
    EXPECT_EQ(named(role, "grad.logits").bytes, c.grad);
  }
}

// Bytes one micro-batch's cross entropy moves, per logit (docs/memory.md,
// "The cross entropy's passes"): eager unfused one kernel per op, the
// compiled native graphs fewer passes but a copy of the softmax in the
// backward (with its fp32 scratch buffer), Transformer Engine's kernels
// the bf16 logits only.
TEST(MegatronMemoryDtype, CrossEntropyPassesPerImplementation) {
  const std::int64_t e = 512 * 1024;  // logits of one micro-batch
  struct Case {
    std::string training;
    std::int64_t fwd, bwd, cast, scratch;
  };
  for (const Case& c : {Case{"", 38 * e, 8 * e, 6 * e, 0},
                        Case{", cross_entropy_loss_fusion: true", 22 * e, 18 * e, 0, 4 * e},
                        Case{", cross_entropy_loss_fusion: true, cross_entropy_fusion_impl: te",
                             4 * e, 4 * e, 0, 0}}) {
    SCOPED_TRACE(c.training);
    const BuiltJob b = build(dp_job(c.training + ", global_batch_size: 4"));
    // One micro-batch per rank (global batch 4 on dp_job's 4 ranks): one use each.
    std::map<std::string, std::int64_t> want;
    for (const auto& [name, bytes] : {std::pair<std::string, std::int64_t>{"fwd", c.fwd},
                                      {"bwd", c.bwd},
                                      {"grad_cast", c.cast}})
      if (bytes > 0) want["mem cross_entropy_" + name + " bytes=" + std::to_string(bytes)] = 1;
    EXPECT_EQ(kernel_uses(b, "mem cross_entropy_"), want);
    const Named scratch = named(b.graph.roles[0], "cross_entropy_scratch");
    EXPECT_EQ(scratch.bytes, c.scratch);
    EXPECT_EQ(scratch.frees, scratch.allocs);
  }
}

}  // namespace
}  // namespace prism
