#include <string>

#include <fmt/format.h>

#include "workload/megatron_stage.h"

namespace prism::megatron {

// Forward of a column-parallel linear: with SP its input is gathered.
void StageBuilder::tp_input_fwd() {
  if (x_.sp) {
    collective(CollectiveKind::kAllGather, kCompute, slots_.tp, kBf16 * x_.T * x_.h,
               "tp_all_gather");
  }
}

// Forward of a row-parallel linear: partial sums are all-reduced, or
// reduce-scattered back to sequence shards with SP.
void StageBuilder::tp_output_fwd() {
  if (x_.t == 1) return;
  collective(x_.sp ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce, kCompute,
             slots_.tp, kBf16 * x_.T * x_.h, x_.sp ? "tp_reduce_scatter" : "tp_all_reduce");
}

// Backward of the row-parallel output: with SP the gradient is gathered.
void StageBuilder::tp_output_bwd() {
  if (x_.sp) {
    collective(CollectiveKind::kAllGather, kCompute, slots_.tp, kBf16 * x_.T * x_.h,
               "tp_all_gather");
  }
}

// Backward of the column-parallel input: the input gradient is all-reduced, or
// reduce-scattered with SP (which first re-gathers the input for the weight
// gradient, as Megatron's linear_with_grad_accumulation does).
void StageBuilder::tp_input_bwd() {
  if (x_.t == 1) return;
  if (x_.sp) {
    collective(CollectiveKind::kAllGather, kCompute, slots_.tp, kBf16 * x_.T * x_.h,
               "tp_all_gather");
  }
  collective(x_.sp ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce, kCompute,
             slots_.tp, kBf16 * x_.T * x_.h, x_.sp ? "tp_reduce_scatter" : "tp_all_reduce");
}

// Flash attention; with context parallelism, ring attention over c steps
// (the diagonal block causal, the others half blocks of the load-balanced
// split) while K and V (and their gradients backward) circulate on the cp
// stream.
void StageBuilder::attention_core(bool backward) {
  const std::string_view name = backward ? "attn_bwd" : "attn_fwd";
  const std::int64_t hq = x_.hq / x_.t, hkv = x_.hkv / x_.t;
  if (is_unfused(job_.training.attention_backend)) {
    // Selective recompute re-runs the core attention before its backward.
    if (backward && job_.training.recompute == Recompute::kSelective) unfused_attention(false);
    unfused_attention(backward);
    return;
  }
  if (x_.c == 1) {
    kernel(attention(backward, x_.b, hq, hkv, x_.s, x_.s, x_.d, true), name);
    return;
  }
  const std::int64_t kv_bytes = (backward ? 2 : 1) * 2 * kBf16 * x_.b * x_.s * hkv * x_.d;
  const std::int32_t tag = backward ? kTagCpBackward : kTagCpForward;
  record(kCompute, "cp_begin");
  wait(kCp, "cp_begin");
  for (int i = 0; i < x_.c; ++i) {
    if (i + 1 < x_.c) {
      const std::uint32_t group = next_group_++;
      p2p(OpKind::kSend, kCp, slots_.cp_next, kv_bytes, tag, "cp_send_kv", group);
      p2p(OpKind::kRecv, kCp, slots_.cp_prev, kv_bytes, tag, "cp_recv_kv", group);
      record(kCp, "cp_kv");
    }
    if (i == 0) {
      kernel(attention(backward, x_.b, hq, hkv, x_.s, x_.s, x_.d, true), name);
    } else {
      kernel(attention(backward, x_.b, hq, hkv, x_.s, x_.s / 2, x_.d, false), name);
    }
    if (i + 1 < x_.c) wait(kCompute, "cp_kv");
  }
}

// Megatron's DotProductAttention: scores = Q K^T as one batched GEMM per
// (micro-batch, head), scale-mask-softmax and dropout materialized, then
// scores x V. Key/value heads are repeated for GQA, as Megatron does.
void StageBuilder::unfused_attention(bool backward) {
  const std::int64_t batch = x_.b * x_.hq / x_.t;
  const std::int64_t scores = batch * x_.s * x_.s;  // elements
  if (!backward) {
    gemm_fwd(x_.s, x_.s, x_.d, "attn_scores_fwd", batch);
    mem("softmax_fwd", kBf16 * 2 * scores);
    mem("attn_dropout_fwd", (kBf16 * 2 + 1) * scores);
    gemm_fwd(x_.s, x_.d, x_.s, "attn_context_fwd", batch);
    return;
  }
  gemm_bwd(x_.s, x_.d, x_.s, "attn_context_dgrad", "attn_context_wgrad", batch);
  mem("attn_dropout_bwd", (kBf16 * 2 + 1) * scores);
  mem("softmax_bwd", kBf16 * 3 * scores);
  gemm_bwd(x_.s, x_.s, x_.d, "attn_scores_dgrad", "attn_scores_wgrad", batch);
}

// FC1 -> activation -> FC2 over `m` tokens (`batch` experts of that shape).
void StageBuilder::mlp(bool backward, std::int64_t f_in, std::int64_t f_out,
                       std::string_view prefix, std::int64_t m, std::int64_t batch) {
  const std::string p(prefix);
  const std::string_view act = job_.model.activation == Activation::kSwiglu ? "swiglu"
                               : job_.model.activation == Activation::kGelu ? "gelu"
                                                                            : "squared_relu";
  const std::int64_t act_bytes = kBf16 * m * batch * (f_out + f_in);
  if (!backward) {
    gemm_fwd(m, f_out, x_.h, p + "fc1_fwd", batch);
    mem(fmt::format("{}_fwd", act), act_bytes);
    gemm_fwd(m, x_.h, f_in, p + "fc2_fwd", batch);
    return;
  }
  gemm_bwd(m, x_.h, f_in, p + "fc2_dgrad", p + "fc2_wgrad", batch);
  mem(fmt::format("{}_bwd", act), 2 * act_bytes);
  gemm_bwd(m, f_out, x_.h, p + "fc1_dgrad", p + "fc1_wgrad", batch);
}

void StageBuilder::moe_forward() {
  const std::int64_t routed = kBf16 * x_.Tsp * x_.topk * x_.h;
  // The router stays in bf16 under fp8 training (Transformer Engine's fp8
  // covers the linear layers only).
  kernel(gemm(x_.Tsp, x_.experts, x_.h), "router_fwd");
  mem("router_topk_fwd", kFp32 * x_.Tsp * x_.experts * 2);
  mem("permute_fwd", 2 * routed);
  if (x_.ep > 1) collective(CollectiveKind::kAllToAll, kCompute, slots_.ep, routed, "ep_dispatch");
  if (x_.etp_gather > 1)
    collective(CollectiveKind::kAllGather, kCompute, slots_.etp, routed * x_.etp_gather,
               "etp_all_gather");
  mlp(false, x_.moe_f_in, x_.moe_f_out, "expert_", x_.moe_tokens, x_.local_experts);
  if (x_.etp_gather > 1)
    collective(CollectiveKind::kReduceScatter, kCompute, slots_.etp, routed * x_.etp_gather,
               "etp_reduce_scatter");
  if (x_.ep > 1) collective(CollectiveKind::kAllToAll, kCompute, slots_.ep, routed, "ep_combine");
  mem("unpermute_fwd", 2 * routed);
  if (x_.shared_f_in > 0) {
    tp_input_fwd();
    mlp(false, x_.shared_f_in, x_.shared_f_out, "shared_", x_.T, 1);
    tp_output_fwd();
  }
}

void StageBuilder::moe_backward() {
  const std::int64_t routed = kBf16 * x_.Tsp * x_.topk * x_.h;
  if (x_.shared_f_in > 0) {
    tp_output_bwd();
    mlp(true, x_.shared_f_in, x_.shared_f_out, "shared_", x_.T, 1);
    tp_input_bwd();
  }
  mem("unpermute_bwd", 2 * routed);
  if (x_.ep > 1)
    collective(CollectiveKind::kAllToAll, kCompute, slots_.ep, routed, "ep_combine_bwd");
  if (x_.etp_gather > 1)
    collective(CollectiveKind::kAllGather, kCompute, slots_.etp, routed * x_.etp_gather,
               "etp_all_gather");
  mlp(true, x_.moe_f_in, x_.moe_f_out, "expert_", x_.moe_tokens, x_.local_experts);
  if (x_.etp_gather > 1)
    collective(CollectiveKind::kReduceScatter, kCompute, slots_.etp, routed * x_.etp_gather,
               "etp_reduce_scatter");
  if (x_.ep > 1)
    collective(CollectiveKind::kAllToAll, kCompute, slots_.ep, routed, "ep_dispatch_bwd");
  mem("permute_bwd", 2 * routed);
  mem("router_topk_bwd", kFp32 * x_.Tsp * x_.experts * 2);
  kernel(gemm(x_.Tsp, x_.h, x_.experts), "router_dgrad");
  kernel(gemm(x_.h, x_.experts, x_.Tsp), "router_wgrad");
}

void StageBuilder::layer_forward(bool moe) {
  const std::int64_t norm = kBf16 * 2 * x_.Tsp * x_.h;                      // read + write
  const std::int64_t residual = kBf16 * 3 * x_.Tsp * x_.h + x_.Tsp * x_.h;  // + mask
  mem("norm_fwd", norm);
  tp_input_fwd();
  gemm_fwd(x_.T, x_.qkv_out, x_.h, "qkv_fwd");
  attention_core(false);
  gemm_fwd(x_.T, x_.h, x_.attn_out, "proj_fwd");
  tp_output_fwd();
  mem("residual_fwd", residual);
  mem("norm_fwd", norm);
  if (moe) {
    moe_forward();
  } else {
    tp_input_fwd();
    mlp(false, x_.f_in, x_.f_out, "", x_.T, 1);
    tp_output_fwd();
  }
  mem("residual_fwd", residual);
}

void StageBuilder::layer_backward(bool moe) {
  const std::int64_t norm = kBf16 * 4 * x_.Tsp * x_.h;
  const std::int64_t residual = kBf16 * 3 * x_.Tsp * x_.h + x_.Tsp * x_.h;
  mem("residual_bwd", residual);
  if (moe) {
    moe_backward();
  } else {
    tp_output_bwd();
    mlp(true, x_.f_in, x_.f_out, "", x_.T, 1);
    tp_input_bwd();
  }
  mem("norm_bwd", norm);
  mem("residual_bwd", residual);
  tp_output_bwd();
  gemm_bwd(x_.T, x_.h, x_.attn_out, "proj_dgrad", "proj_wgrad");
  attention_core(true);
  gemm_bwd(x_.T, x_.qkv_out, x_.h, "qkv_dgrad", "qkv_wgrad");
  tp_input_bwd();
  mem("norm_bwd", norm);
}

// Vocabulary-parallel embedding: a lookup, then the partial embeddings summed
// over TP (reduce-scattered to sequence shards with SP).
void StageBuilder::embedding(bool backward) {
  if (!backward) {
    mem("embedding_fwd", kBf16 * 2 * x_.T * x_.h);
    tp_output_fwd();
    return;
  }
  tp_output_bwd();
  mem("embedding_bwd", kBf16 * 2 * x_.T * x_.h + kFp32 * x_.T * x_.h);
}

// Final norm, output (logits) layer and vocabulary-parallel cross entropy
// (three small TP all-reduces: max, sum of exponentials, target logit).
void StageBuilder::output_layer(bool backward, int mb) {
  const std::int64_t logits = kBf16 * x_.T * x_.vocab;
  if (!backward) {
    mem("norm_fwd", kBf16 * 2 * x_.Tsp * x_.h);
    tp_input_fwd();
    // The output layer is not a Transformer Engine layer: bf16 under fp8 too.
    kernel(gemm(x_.T, x_.vocab, x_.h), "logits_fwd");
    // bf16 logits and the fused cross entropy's fp32 copy, kept for its backward.
    logits_[mb] = alloc(x_.T * x_.vocab * (kBf16 + kFp32), "logits");
    mem("cross_entropy_fwd", 2 * logits);
    if (x_.t > 1)
      collective(CollectiveKind::kAllReduce, kCompute, slots_.tp, kFp32 * 3 * x_.T, "tp_all_reduce",
                 DType::kFloat32);
    return;
  }
  mem("cross_entropy_bwd", 2 * logits);
  free(logits_[mb], "logits");
  kernel(gemm(x_.T, x_.h, x_.vocab), "logits_dgrad");
  kernel(gemm(x_.h, x_.vocab, x_.T), "logits_wgrad");
  tp_input_bwd();
  mem("norm_bwd", kBf16 * 4 * x_.Tsp * x_.h);
}

}  // namespace prism::megatron
