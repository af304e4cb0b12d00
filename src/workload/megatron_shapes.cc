#include "workload/megatron_shapes.h"

#include <algorithm>

#include "workload/megatron.h"

namespace prism {
namespace megatron {

Dims make_dims(const JobSpec& job) {
  const ModelSpec& m = job.model;
  Dims x{};
  x.t = job.tp();
  x.c = job.cp();
  x.b = job.training.micro_batch_size;
  x.s = job.training.seq_length / x.c;
  x.T = x.s * x.b;
  x.sp = job.parallelism.sequence_parallel && x.t > 1;
  x.Tsp = x.sp ? x.T / x.t : x.T;
  const ParallelSpec& par = job.parallelism;
  x.ub = x.sp && par.tp_comm_overlap;
  x.ub_ag = x.ub && par.tp_comm_overlap_ag;
  x.ub_rs = x.ub && par.tp_comm_overlap_rs;
  x.ub_bulk_dgrad = x.ub && par.tp_comm_bulk_dgrad;
  x.ub_bulk_wgrad = x.ub && par.tp_comm_bulk_wgrad;
  for (int i = 0; i < kNumUbGemms; ++i)
    x.ub_cfg[i] = ub_resolve(par.tp_comm_overlap_cfg, static_cast<UbGemm>(i), x.t);
  x.h = m.hidden_size;
  x.hq = m.num_attention_heads;
  x.hkv = m.query_groups();
  x.d = m.head_dim();
  x.qkv_out = (x.hq + 2 * x.hkv) * x.d / x.t;
  x.attn_out = x.hq * x.d / x.t;
  const std::int64_t gate = m.gated() ? 2 : 1;
  x.f_in = m.ffn() / x.t;
  x.f_out = gate * x.f_in;
  const std::int64_t multiple = 128 * x.t;
  x.vocab = (m.vocab_size + multiple - 1) / multiple * multiple / x.t;
  x.bias = m.activation == Activation::kGelu && m.normalization == Normalization::kLayerNorm;
  x.rope = !x.bias;
  x.gemm_dtype = job.training.precision == Precision::kFp8 ? DType::kFloat8E4M3 : DType::kBFloat16;
  const TrainingSpec& tr = job.training;
  x.fp8 = tr.precision == Precision::kFp8;
  if (x.fp8) x.fp8_cast_bytes = tr.fp8_recipe == Fp8Recipe::kTensorwise ? 6 : 4;
  x.fp8_amax_reduction = x.fp8 && tr.fp8_recipe == Fp8Recipe::kDelayed;
  x.fp8_amax_history = tr.fp8_amax_history_len;
  x.fp8_block_scales =
      x.fp8 && (tr.fp8_recipe == Fp8Recipe::kBlockwise || tr.fp8_recipe == Fp8Recipe::kMxfp8);
  x.hidden_dropout = m.hidden_dropout > 0.0;
  x.attention_dropout = m.attention_dropout > 0.0;
  x.grad_bytes = tr.grad_reduce_in_fp32 ? kFp32 : kBf16;
  x.te_cross_entropy =
      tr.cross_entropy_loss_fusion && tr.cross_entropy_fusion_impl == CrossEntropyFusionImpl::kTe;
  x.native_cross_entropy = tr.cross_entropy_loss_fusion &&
                           tr.cross_entropy_fusion_impl == CrossEntropyFusionImpl::kNative;
  x.moe = m.is_moe();
  if (x.moe) {
    x.experts = m.num_moe_experts;
    x.topk = m.moe_router_topk;
    x.ep = job.ep();
    x.etp = job.etp();
    x.local_experts = x.experts / x.ep;
    // Each rank routes its Tsp tokens topk times; balanced routing spreads
    // the EP group's copies evenly over the experts. The ETP group gathers
    // its peers' tokens when they differ (SP, or no TP); with TP and no SP
    // every TP rank holds them already.
    x.etp_gather = x.sp || x.t == 1 ? x.etp : 1;
    x.moe_tokens = std::max<std::int64_t>(1, x.Tsp * x.topk * x.ep * x.etp_gather / x.experts);
    x.moe_f_in = m.moe_ffn() / x.etp;
    x.moe_f_out = gate * x.moe_f_in;
    x.shared_f_in = m.moe_shared_expert_intermediate_size / x.t;
    x.shared_f_out = gate * x.shared_f_in;
  }
  return x;
}

std::int64_t saved_gemm_input(const Dims& x, std::int64_t elements) {
  if (!x.fp8) return kBf16 * elements;
  return elements + (x.fp8_block_scales ? elements / 32 : 0);
}

// TransformerEngineBaseModule.get_weight_workspace caches the quantized
// weight for the whole step (Megatron passes is_first_microbatch). On Hopper
// delayed, tensorwise and blockwise weights keep a row-wise copy (forward)
// and a column-wise one (dgrad): 2 B; mxfp8 adds its E8M0 scales (1 B per 32,
// per copy); on Blackwell a per-tensor-scaled weight needs no transpose: 1 B.
// With fp8_param_gather the row-wise copy is the parameter itself.
std::int64_t linear_weight_bytes(const JobSpec& job, std::int64_t params) {
  const TrainingSpec& tr = job.training;
  if (tr.precision != Precision::kFp8) return kBf16 * params;
  std::int64_t cache = 2 * params;
  if (tr.fp8_recipe == Fp8Recipe::kMxfp8) cache += 2 * params / 32;
  if (job.cluster.arch == GpuArch::kBlackwell &&
      (tr.fp8_recipe == Fp8Recipe::kDelayed || tr.fp8_recipe == Fp8Recipe::kTensorwise))
    cache = params;
  return tr.fp8_param_gather ? cache : kBf16 * params + cache;
}

std::int64_t optimizer_state_bytes_per_param(const JobSpec& job) {
  const TrainingSpec& tr = job.training;
  // DistributedOptimizer: fp32 main params, exp_avg, exp_avg_sq.
  if (tr.optimizer_impl != OptimizerImpl::kApexDistributedFusedAdam) return 3 * kFp32;
  // NeMo's setup_optimization: dtype fp32, param_sync_dtype bf16, and
  // store_params=False, store_param_remainders=True (StateBucket:
  // param_remainders_shard int16, exp_avg_shard, exp_avg_sq_shard in
  // dtype), unless fp8_params, where store_params=True (params_shard fp32).
  return (tr.fp8_param_gather ? kFp32 : kBf16) + 2 * kFp32;
}

std::int64_t optimizer_bytes_per_param(const JobSpec& job) {
  const TrainingSpec& tr = job.training;
  // Megatron-Core: the norm reads the fp32 main grad; Adam reads grad,
  // master, m, v and writes master, m, v and the bf16 weight.
  if (tr.optimizer_impl != OptimizerImpl::kApexDistributedFusedAdam) return 34;
  // Apex: the norm and Adam read the grad_sync_dtype shard; with remainders
  // Adam reads the bf16 parameter and its remainder and writes the remainder
  // and the bf16 params_shard (multi_tensor_fused_adam_with_param_remainders),
  // with store_params it reads and writes the fp32 copy and writes the FP8
  // shard; m and v are read and written either way.
  const std::int64_t g = tr.grad_reduce_in_fp32 ? kFp32 : kBf16;
  const std::int64_t master = tr.fp8_param_gather ? 2 * kFp32 + 1 : 4 * kBf16;
  return 2 * g + master + 4 * kFp32;
}

LayerParams layer_params(const JobSpec& job, const Dims& x) {
  const ModelSpec& m = job.model;
  const std::int64_t gate = m.gated() ? 2 : 1;
  const std::int64_t qkv_full = (x.hq + 2 * x.hkv) * x.d;
  LayerParams p;
  p.dense = (x.h * qkv_full + x.hq * x.d * x.h) / x.t;
  p.linear = p.dense;
  if (x.bias) p.dense += qkv_full / x.t + x.h;
  p.dense += (m.normalization == Normalization::kLayerNorm ? 2 : 1) * 2 * x.h;
  if (!x.moe) {
    const std::int64_t mlp = (x.h * gate * m.ffn() + m.ffn() * x.h) / x.t;
    p.dense += mlp;
    p.linear += mlp;
    if (x.bias) p.dense += gate * m.ffn() / x.t + x.h;
    return p;
  }
  p.dense += x.h * x.experts;  // router, replicated (a plain torch linear, never FP8)
  const std::int64_t shared = m.moe_shared_expert_intermediate_size;
  p.dense += (x.h * gate * shared + shared * x.h) / x.t;
  p.linear += (x.h * gate * shared + shared * x.h) / x.t;
  p.expert = x.local_experts * (x.h * gate * m.moe_ffn() + m.moe_ffn() * x.h) / x.etp;
  p.linear += p.expert;
  return p;
}

// Korthikanti et al. 2022 (arXiv 2205.05198), section 4, per tensor, with the
// job's TP, SP, CP, GQA, gated MLP and MoE. Hidden states (layer and block
// inputs, norm outputs, dropout masks) are sequence-sharded with SP; the GEMM
// outputs of the column-parallel layers are full-sequence and head- or
// ffn-sharded. Flash attention keeps no score matrix; the unfused backend
// keeps the softmax output, and with attention dropout its mask and the
// dropped-out probabilities (the 5 a s^2 b term), unless selective recompute
// re-runs them. Dropout masks (1 B per element) exist only when their
// dropout is > 0. Under FP8 each TE linear keeps its own quantized input
// instead of the bf16 one (saved_gemm_input); flash attention still keeps
// its bf16 output, which the projection quantizes again for itself, unless
// selective recompute checkpoints it.
std::vector<ActivationTensor> activation_tensors(const JobSpec& job, const Dims& x,
                                                 bool moe_layer) {
  const std::int64_t hidden = kBf16 * x.Tsp * x.h;  // one sequence-sharded hidden state
  const std::int64_t mask = x.Tsp * x.h;            // a dropout mask: 1 byte per element
  if (job.training.recompute == Recompute::kFull) return {{"norm1_input", hidden}};
  std::vector<ActivationTensor> t = {
      {"norm1_input", hidden},                          // the layer input, kept by the first norm
      {"qkv_input", saved_gemm_input(x, x.Tsp * x.h)},  // LayerNormLinear's ln_out
      {"qkv", kBf16 * x.T * x.qkv_out},
  };
  const TrainingSpec& tr = job.training;
  const bool unfused = is_unfused(tr.attention_backend);
  if (unfused && !tr.recomputes(RecomputeModule::kCoreAttn)) {
    const std::int64_t scores = x.b * x.hq / x.t * x.s * x.s;  // elements
    t.push_back({"attn_softmax", kBf16 * scores});
    if (x.attention_dropout) {
      t.push_back({"attn_softmax_dropout_mask", scores});
      t.push_back({"attn_probs", kBf16 * scores});
    }
  }
  // The projection's input: kept by flash attention (its backward reads its
  // output) and by the projection, in bf16 one tensor; under FP8 the
  // projection keeps its quantized copy besides (the unfused core keeps none,
  // nor does a checkpointed flash core: selective recompute runs it without
  // autograd and makes its output again before its backward).
  const std::int64_t attn_out = x.T * x.attn_out;
  if (!x.fp8) {
    t.push_back({"attn_out", kBf16 * attn_out});
  } else {
    if (!unfused && !tr.recomputes(RecomputeModule::kCoreAttn))
      t.push_back({"attn_out", kBf16 * attn_out});
    t.push_back({"attn_out_fp8", saved_gemm_input(x, attn_out)});
  }
  if (x.hidden_dropout) t.push_back({"attn_dropout_mask", mask});
  t.push_back({"norm2_input", hidden});
  if (!moe_layer) {
    // Recomputing the MLP keeps only its input (norm2_input): the fused
    // norm's output, FC1's output and the activation are made again.
    if (!tr.recomputes(RecomputeModule::kMlp)) {
      t.push_back({"fc1_input", saved_gemm_input(x, x.Tsp * x.h)});
      t.push_back({"fc1_output", kBf16 * x.T * x.f_out});
      t.push_back({"act_output", saved_gemm_input(x, x.T * x.f_in)});
    }
    if (x.hidden_dropout) t.push_back({"mlp_dropout_mask", mask});
    return t;
  }
  // The norm's output feeds the router, the permutation and the shared
  // expert; layernorm recompute discards it (CheckpointWithoutOutput) and
  // makes it again when the MoE block's backward begins.
  const std::int64_t tokens = x.moe_tokens * x.local_experts;  // routed copies at this rank
  if (!tr.recomputes(RecomputeModule::kLayernorm)) t.push_back({"router_input", hidden});
  // moe: the checkpointed MoE layer keeps only its input (router_input).
  if (tr.recomputes(RecomputeModule::kMoe)) {
    if (x.hidden_dropout) t.push_back({"mlp_dropout_mask", mask});
    return t;
  }
  t.push_back({"router_logits", kFp32 * x.Tsp * x.experts});
  t.push_back({"expert_input", saved_gemm_input(x, tokens * x.h)});
  t.push_back({"expert_fc1_output", kBf16 * tokens * x.moe_f_out});
  // moe_act: the activation's output (FC2's input) is discarded and re-made.
  if (!tr.recomputes(RecomputeModule::kMoeAct))
    t.push_back({"expert_act_output", saved_gemm_input(x, tokens * x.moe_f_in)});
  if (x.shared_f_in > 0 && !tr.recomputes(RecomputeModule::kSharedExperts)) {
    t.push_back({"shared_fc1_output", kBf16 * x.T * x.shared_f_out});
    t.push_back({"shared_act_output", saved_gemm_input(x, x.T * x.shared_f_in)});
  }
  if (x.hidden_dropout) t.push_back({"mlp_dropout_mask", mask});
  return t;
}

std::int64_t userbuffer_bytes(const Dims& x) {
  constexpr int kBuffers = 10;
  return x.ub ? kBuffers * kBf16 * x.T * x.h : 0;
}

LayerRecompute layer_recompute(const TrainingSpec& t, int layer, int layers) {
  if (t.recompute != Recompute::kFull) return {false, layer, layer};
  const int n = std::max(t.recompute_num_layers, 1);
  if (t.recompute_method == RecomputeMethod::kBlock)
    return {layer < n, layer, layer};  // the first n layers of the chunk
  const int first = layer / n * n;     // uniform: groups of n
  return {true, first, std::min(first + n, layers) - 1};
}

std::int64_t activation_bytes(const JobSpec& job, const Dims& x, bool moe_layer) {
  std::int64_t sum = 0;
  for (const ActivationTensor& t : activation_tensors(job, x, moe_layer)) sum += t.bytes;
  return sum;
}

std::vector<Step> pipeline_schedule(int p, int v, int m, int rank) {
  const int total = m * v;
  int warmup;
  if (v == 1) {
    warmup = std::min(p - rank - 1, m);
  } else if (m == p) {
    warmup = total;
  } else {
    warmup = std::min((p - rank - 1) * 2 + (v - 1) * p, total);
  }
  const int group = p * v;
  auto chunk = [&](int k, bool forward) {
    const int c = (k % group) / p;
    return forward ? c : v - 1 - c;
  };
  auto microbatch = [&](int k) { return (k / group) * p + k % p; };
  std::vector<Step> steps;
  steps.reserve(2 * static_cast<std::size_t>(total));
  const int remaining = total - warmup;
  for (int k = 0; k < warmup; ++k) steps.push_back({true, chunk(k, true), microbatch(k)});
  for (int i = 0; i < remaining; ++i) {
    const int k = warmup + i;
    steps.push_back({true, chunk(k, true), microbatch(k)});
    steps.push_back({false, chunk(i, false), microbatch(i)});
  }
  for (int k = remaining; k < total; ++k) steps.push_back({false, chunk(k, false), microbatch(k)});
  return steps;
}

// Megatron-Core's expert rank generator: within a pipeline stage the ranks are
// ordered etp -> ep -> edp. `which` is 0 (etp), 1 (ep) or 2 (edp).
std::vector<std::vector<Rank>> expert_groups(const JobSpec& job, int which) {
  const int stage_size = job.num_gpus / job.pp();
  const int sizes[3] = {job.etp(), job.ep(), job.expert_dp()};
  const int strides[3] = {1, job.etp(), job.etp() * job.ep()};
  std::vector<std::vector<Rank>> groups;
  for (int stage = 0; stage < job.pp(); ++stage) {
    for (int i = 0; i < stage_size; ++i) {
      if ((i / strides[which]) % sizes[which] != 0) continue;  // not a group's first member
      std::vector<Rank>& g = groups.emplace_back();
      for (int j = 0; j < sizes[which]; ++j)
        g.push_back(stage * stage_size + i + j * strides[which]);
    }
  }
  return groups;
}

}  // namespace megatron

std::vector<ActivationTensor> layer_activation_tensors(const JobSpec& job, bool moe_layer) {
  return megatron::activation_tensors(job, megatron::make_dims(job), moe_layer);
}

Bytes layer_activation_bytes(const JobSpec& job, bool moe_layer) {
  return Bytes{megatron::activation_bytes(job, megatron::make_dims(job), moe_layer)};
}

}  // namespace prism
