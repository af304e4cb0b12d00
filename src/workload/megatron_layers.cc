#include <string>
#include <vector>

#include <fmt/format.h>

#include "util/check.h"
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
void StageBuilder::tp_input_bwd(bool gather_input) {
  if (x_.t == 1) return;
  if (x_.sp && gather_input) {
    collective(CollectiveKind::kAllGather, kCompute, slots_.tp, kBf16 * x_.T * x_.h,
               "tp_all_gather");
  }
  collective(x_.sp ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce, kCompute,
             slots_.tp, kBf16 * x_.T * x_.h, x_.sp ? "tp_reduce_scatter" : "tp_all_reduce");
}

// Flash attention; with context parallelism, ring attention over c steps
// (the diagonal block causal, the others half blocks of the load-balanced
// split) while K and V (and their gradients backward) circulate on the cp
// stream. Forward it makes the attention output; backward it returns the
// alloc of the Q/K/V gradient.
int StageBuilder::attention_core(bool backward) {
  const std::string_view name = backward ? "attn_bwd" : "attn_fwd";
  const std::int64_t hq = x_.hq / x_.t, hkv = x_.hkv / x_.t;
  if (is_unfused(job_.training.attention_backend)) {
    if (!backward) {
      unfused_attention_forward(false);
      return -1;
    }
    // The projection's weight gradient was the last reader of the context
    // (under FP8 the projection kept its own copy, released with it).
    if (!x_.fp8) release("attn_out");
    // Selective recompute re-runs the core attention before its backward.
    if (job_.training.recompute == Recompute::kSelective) unfused_attention_forward(true);
    return unfused_attention_backward();
  }
  int grad_qkv = -1;
  if (backward) {
    grad_qkv = alloc(kBf16 * x_.T * x_.qkv_out, "grad.qkv");
  } else {
    save("attn_out");
  }
  if (x_.c == 1) {
    kernel(attention(backward, x_.b, hq, hkv, x_.s, x_.s, x_.d, true), name);
  } else {
    const Ring ring{.stream = kCp,
                    .next = slots_.cp_next,
                    .prev = slots_.cp_prev,
                    .bytes = (backward ? 2 : 1) * 2 * kBf16 * x_.b * x_.s * hkv * x_.d,
                    .tag = backward ? kTagCpBackward : kTagCpForward,
                    .begin = "cp_begin",
                    .send = "cp_send_kv",
                    .recv = "cp_recv_kv",
                    .arrived = "cp_kv"};
    // The diagonal block is causal; the others are half blocks.
    const int steps = static_cast<int>(x_.c);
    const int per_step =
        backward ? -1 : alloc(kBf16 * x_.b * x_.s * hq * x_.d * steps, "cp.out_per_step");
    ring_exchange(ring, steps, [&](int i) {
      kernel(i == 0 ? attention(backward, x_.b, hq, hkv, x_.s, x_.s, x_.d, true)
                    : attention(backward, x_.b, hq, hkv, x_.s, x_.s / 2, x_.d, false),
             name);
      cp_step_correction(backward, i);
    });
    if (!backward) {
      cp_out_correction();
      free(per_step);
    }
  }
  if (backward) {
    release("attn_out");  // flash attention's backward reads its output
    release("qkv");
  }
  return grad_qkv;
}

// What Transformer Engine's ring attention (AttnFuncWithCPAndKVP2P, bshd/sbhd)
// adds around each step's kernel, as element-wise kernels. Forward, from the
// second step on, the running softmax statistics (b x hq x s, fp32) merge with
// the step's (flash_attn_fwd_softmax_lse_correction: read both, write one).
// Backward, each step's dQ and dK/dV (bf16) go into the running gradients: a
// copy at the first step, an add (read both, write one) after it.
void StageBuilder::cp_step_correction(bool backward, int step) {
  const std::int64_t q = x_.b * x_.s * (x_.hq / x_.t) * x_.d;        // elements of Q (and O)
  const std::int64_t kv = 2 * x_.b * x_.s * (x_.hkv / x_.t) * x_.d;  // of K and V
  if (!backward) {
    if (step > 0) mem("cp_lse_correction", kFp32 * 3 * x_.b * (x_.hq / x_.t) * x_.s);
    return;
  }
  mem("cp_grad_accumulate", kBf16 * (step == 0 ? 2 : 3) * (q + kv));
}

// After the forward steps, the step outputs merge into the attention output
// (bf16, the steps' dtype): flash_attn_fwd_out_correction_init scales the
// first (read, write), flash_attn_fwd_out_correction adds each further one
// scaled (read it, read and write the output).
void StageBuilder::cp_out_correction() {
  const std::int64_t q = x_.b * x_.s * (x_.hq / x_.t) * x_.d;
  mem("cp_out_correction", kBf16 * (2 * q + 3 * q * (x_.c - 1)));
}

// Megatron's DotProductAttention: scores = Q K^T as one batched GEMM per
// (micro-batch, head), scale-mask-softmax and dropout materialized, then
// scores x V. Key/value heads are repeated for GQA, as Megatron does. The
// raw scores live only until the softmax has read them. `rerun`: selective
// recompute's re-run in the backward, whose context output nothing reads.
void StageBuilder::unfused_attention_forward(bool rerun) {
  const std::int64_t batch = x_.b * x_.hq / x_.t;
  const std::int64_t scores = batch * x_.s * x_.s;  // elements
  const Pass pass = pass_;
  if (rerun) pass_ = Pass::kRecompute;
  const int raw = alloc(kBf16 * scores, "attn_scores");
  gemm_fwd(x_.s, x_.s, x_.d, "attn_scores_fwd", batch);
  save("attn_softmax");
  mem("softmax_fwd", kBf16 * 2 * scores);
  free(raw);
  // Dropout at p = 0 returns its input: no mask, no copy, no kernel.
  if (x_.attention_dropout) {
    save("attn_softmax_dropout_mask");
    save("attn_probs");
    mem("attn_dropout_fwd", (kBf16 * 2 + 1) * scores);
  }
  // The context; under FP8 nothing keeps it in bf16 (the projection saves
  // its own FP8 copy), so it is freed once the projection has read it.
  if (x_.fp8) {
    unfused_context_ = alloc(kBf16 * x_.T * x_.attn_out, "attn_context");
  } else {
    save("attn_out");
  }
  gemm_fwd(x_.s, x_.d, x_.s, "attn_context_fwd", batch);
  if (rerun) {
    if (x_.fp8) {
      free(unfused_context_);
      unfused_context_ = -1;
    } else {
      release("attn_out");
    }
  } else if (pass_ == Pass::kForward && !is_kept("attn_softmax")) {
    // Checkpointed (selective) or without autograd (full recompute): the
    // score-sized tensors are dropped at once.
    release("attn_softmax");
    if (x_.attention_dropout) {
      release("attn_softmax_dropout_mask");
      release("attn_probs");
    }
  }
  pass_ = pass;
}

int StageBuilder::unfused_attention_backward() {
  const std::int64_t batch = x_.b * x_.hq / x_.t;
  const std::int64_t scores = batch * x_.s * x_.s;
  const int grad_qkv = alloc(kBf16 * x_.T * x_.qkv_out, "grad.qkv");
  const int grad_probs = alloc(kBf16 * scores, "grad.attn_probs");
  bmm_bwd(x_.s, x_.d, x_.s, "attn_context_dgrad", "attn_context_wgrad", batch);
  int grad_scores = grad_probs;  // the softmax's backward works in place
  if (x_.attention_dropout) {
    release("attn_probs");
    grad_scores = alloc(kBf16 * scores, "grad.attn_scores");
    mem("attn_dropout_bwd", (kBf16 * 2 + 1) * scores);
    release("attn_softmax_dropout_mask");
    free(grad_probs);
  }
  mem("softmax_bwd", kBf16 * 3 * scores);
  release("attn_softmax");
  bmm_bwd(x_.s, x_.s, x_.d, "attn_scores_dgrad", "attn_scores_wgrad", batch);
  free(grad_scores);
  release("qkv");
  return grad_qkv;
}

static std::string_view activation_name(Activation a) {
  return a == Activation::kSwiglu ? "swiglu" : a == Activation::kGelu ? "gelu" : "squared_relu";
}

// FC1 -> activation -> FC2. Keeps FC1's and the activation's outputs; returns
// FC2's output (the TP-partial sum before its reduction), which the caller
// frees once the block's output is made, or -1 when the SP reduce-scatter has
// already replaced it.
int StageBuilder::mlp_forward(const MlpShape& m) {
  const std::string p(m.prefix);
  const std::int64_t rows = m.tokens * m.batch;
  const bool ub = userbuffers(m);
  // FP8 casts FC1's input before any gather (its sequence shard with SP).
  fp8_cast(p + "fp8_cast_fc1_input", (m.tensor_parallel && x_.sp ? x_.Tsp : rows) * x_.h);
  int gathered = -1;
  if (m.tensor_parallel && !(ub && x_.ub_ag)) {
    gathered = gathered_input(p + "fc1_input");
    tp_input_fwd();
  }
  save(p + "fc1_output");
  if (ub && x_.ub_ag) {
    ring_all_gather_gemm(m.tokens, m.f_out, x_.h, "fc1_fwd");
  } else {
    gemm_fwd(m.tokens, m.f_out, x_.h, p + "fc1_fwd", m.batch);
  }
  free_transient(gathered);
  save(p + "act_output");
  mem(fmt::format("{}_fwd", activation_name(job_.model.activation)),
      kBf16 * rows * (m.f_out + m.f_in));
  fp8_cast(p + "fp8_cast_fc2_input", rows * m.f_in);
  if (ub && x_.ub_rs) {  // FC2's partial sums stay in the userbuffer
    gemm_pipelined_reduce_scatter(m.tokens, x_.h, m.f_in, "fc2_fwd", kFc2FpropSms);
    return -1;
  }
  int out = alloc(kBf16 * rows * x_.h, p + "fc2_output");
  gemm_fwd(m.tokens, x_.h, m.f_in, p + "fc2_fwd", m.batch);
  if (m.tensor_parallel) {
    tp_output_fwd();
    if (x_.sp) {
      free(out);
      out = -1;
    }
  }
  return out;
}

// The MLP's backward from the gradient of FC2's output (`grad_output`, freed
// after FC2's weight gradient; allocated here when -1); returns the alloc of
// the gradient of FC1's input, which the caller frees.
int StageBuilder::mlp_backward(const MlpShape& m, int grad_output) {
  const std::string p(m.prefix);
  const std::int64_t rows = m.tokens * m.batch;
  const bool ub = userbuffers(m);
  // The block output's gradient, all-gathered with SP (into the userbuffer,
  // which keeps the gathered copy, with the ring-exchange overlap).
  if (grad_output < 0) {
    const std::int64_t grad_rows = ub && x_.ub_ag ? x_.Tsp : rows;
    grad_output = alloc(kBf16 * grad_rows * x_.h, "grad." + p + "fc2_output");
  }
  const int grad_act = alloc(kBf16 * rows * m.f_in, "grad." + p + "act_output");
  fp8_cast("fp8_cast_grad", (m.tensor_parallel && x_.sp ? x_.Tsp : rows) * x_.h);
  if (ub && x_.ub_ag) {
    ring_all_gather_gemm(m.tokens, m.f_in, x_.h, "fc2_dgrad");
    kernel(wgrad_gemm(m.f_in, x_.h, m.tokens, x_.gemm_dtype), "fc2_wgrad");
  } else {
    if (m.tensor_parallel) tp_output_bwd();
    gemm_bwd(m.tokens, x_.h, m.f_in, p + "fc2_dgrad", p + "fc2_wgrad", m.batch);
  }
  release(p + "act_output");
  free(grad_output);
  const int grad_fc1 = alloc(kBf16 * rows * m.f_out, "grad." + p + "fc1_output");
  mem(fmt::format("{}_bwd", activation_name(job_.model.activation)),
      2 * kBf16 * rows * (m.f_out + m.f_in));
  release(p + "fc1_output");
  free(grad_act);
  fp8_cast("fp8_cast_grad", rows * m.f_out);
  if (ub) {
    const int grad_input = column_parallel_backward("fc1", m.tokens, m.f_out, x_.h, kFc1DgradSms,
                                                    kFc1WgradSms, grad_fc1);
    if (!m.input.empty()) release(m.input);
    return grad_input;
  }
  const int gathered = m.tensor_parallel ? gathered_input(p + "fc1_input") : -1;
  const int grad_input = alloc(kBf16 * rows * x_.h, "grad." + p + "fc1_input");
  gemm_bwd(m.tokens, m.f_out, x_.h, p + "fc1_dgrad", p + "fc1_wgrad", m.batch);
  free(grad_fc1);
  if (m.tensor_parallel) tp_input_bwd();
  free_transient(gathered);
  if (!m.input.empty()) release(m.input);
  return grad_input;
}

// Norm, QKV, core attention, projection, bias-dropout-add. The projection's
// output (a TP-partial sum with t > 1) lives until its reduce-scatter (SP)
// or the residual add has consumed it.
void StageBuilder::attention_forward() {
  save("qkv_input");
  mem("norm_fwd", kBf16 * 2 * x_.Tsp * x_.h);
  fp8_cast("fp8_cast_qkv_input", x_.Tsp * x_.h);
  if (x_.ub_ag) {
    save("qkv");
    ring_all_gather_gemm(x_.T, x_.qkv_out, x_.h, "qkv_fwd");
  } else {
    const int gathered = gathered_input("qkv_input");
    tp_input_fwd();
    save("qkv");
    gemm_fwd(x_.T, x_.qkv_out, x_.h, "qkv_fwd");
    free_transient(gathered);
  }
  rope(false);
  attention_core(false);
  if (x_.fp8) save("attn_out_fp8");  // the projection's own quantized input
  fp8_cast("fp8_cast_attn_out", x_.T * x_.attn_out);
  int out = -1;
  if (x_.ub_rs) {  // the partial sums stay in the userbuffer
    gemm_pipelined_reduce_scatter(x_.T, x_.h, x_.attn_out, "proj_fwd", kProjFpropSms);
  } else {
    out = alloc(kBf16 * x_.T * x_.h, "proj_output");
    gemm_fwd(x_.T, x_.h, x_.attn_out, "proj_fwd");
  }
  if (unfused_context_ >= 0) {
    free(unfused_context_);
    unfused_context_ = -1;
  }
  if (!x_.ub_rs) {
    tp_output_fwd();
    if (x_.sp) {
      free(out);
      out = -1;
    }
  }
  if (x_.hidden_dropout) save("attn_dropout_mask");
  save("norm2_input");
  mem("residual_fwd", residual_bytes());
  free_transient(out);
}

void StageBuilder::layer_forward(std::string_view output_name) {
  const std::int64_t hidden = kBf16 * x_.Tsp * x_.h;
  attention_forward();
  std::vector<int> later;
  if (x_.moe) {
    save("router_input");
    mem("norm_fwd", 2 * hidden);
    later = moe_forward();
  } else {
    save("fc1_input");
    mem("norm_fwd", 2 * hidden);
    later = {mlp_forward(dense_mlp())};
  }
  if (x_.hidden_dropout) save("mlp_dropout_mask");
  const int out = alloc(hidden, output_name);
  mem("residual_fwd", residual_bytes());
  for (const int op : later) free_transient(op);
  if (pass_ == Pass::kRecompute) {
    recomputed_output_ = out;
  } else {
    hidden_ = {out, 0};
  }
  end_layer_forward();
}

// Returns the alloc of the gradient of the QKV GEMM's input.
int StageBuilder::attention_backward() {
  // The output's gradient, all-gathered with SP (into the userbuffer with
  // the ring-exchange overlap, which keeps the gathered copy).
  const int grad_out = alloc(kBf16 * (x_.ub_ag ? x_.Tsp : x_.T) * x_.h, "grad.proj_output");
  mem("residual_bwd", residual_bytes());
  if (x_.hidden_dropout) release("attn_dropout_mask");
  const int grad_attn = alloc(kBf16 * x_.T * x_.attn_out, "grad.attn_out");
  fp8_cast("fp8_cast_grad", x_.Tsp * x_.h);
  if (x_.ub_ag) {
    ring_all_gather_gemm(x_.T, x_.attn_out, x_.h, "proj_dgrad");
    kernel(wgrad_gemm(x_.attn_out, x_.h, x_.T, x_.gemm_dtype), "proj_wgrad");
  } else {
    tp_output_bwd();
    gemm_bwd(x_.T, x_.h, x_.attn_out, "proj_dgrad", "proj_wgrad");
  }
  if (x_.fp8) release("attn_out_fp8");
  free(grad_out);
  const int grad_qkv = attention_core(true);
  free(grad_attn);
  rope(true);
  fp8_cast("fp8_cast_grad", x_.T * x_.qkv_out);
  if (x_.ub) {
    const int grad_in = column_parallel_backward("qkv", x_.T, x_.qkv_out, x_.h, kQkvDgradSms,
                                                 kQkvWgradSms, grad_qkv);
    release("qkv_input");
    return grad_in;
  }
  const int gathered = gathered_input("qkv_input");
  const int grad_in = alloc(kBf16 * x_.T * x_.h, "grad.qkv_input");
  gemm_bwd(x_.T, x_.qkv_out, x_.h, "qkv_dgrad", "qkv_wgrad");
  free(grad_qkv);
  tp_input_bwd();
  free_transient(gathered);
  release("qkv_input");
  return grad_in;
}

// Each block's input gradient is a fresh buffer: the norm's backward plus the
// residual's gradient, which is freed once both have been read.
void StageBuilder::layer_backward(std::string_view grad_input_name) {
  const std::int64_t hidden = kBf16 * x_.Tsp * x_.h;
  mem("residual_bwd", residual_bytes());
  if (x_.hidden_dropout) release("mlp_dropout_mask");
  const std::vector<int> mlp_grads =
      x_.moe ? moe_backward() : std::vector<int>{mlp_backward(dense_mlp(), -1)};
  const int grad_mid = alloc(hidden, "grad.norm2_input");
  mem("norm_bwd", 2 * 2 * hidden);
  for (const int op : mlp_grads) free(op);
  release("norm2_input");
  free(grad_);
  const int grad_qkv_in = attention_backward();
  const int grad_in = alloc(hidden, grad_input_name);
  mem("norm_bwd", 2 * 2 * hidden);
  free(grad_qkv_in);
  release("norm1_input");
  free(grad_mid);
  if (recomputed_output_ >= 0) {
    free(recomputed_output_);
    recomputed_output_ = -1;
  }
  PRISM_CHECK(layer_.empty(), "a layer's backward left activations allocated");
  grad_ = {grad_in, 0};
}

// Vocabulary-parallel embedding: a lookup (a TP-partial sum with t > 1), the
// sum over TP (reduce-scattered to sequence shards with SP), then dropout,
// whose output is the first layer's input. Backward, the weight gradient is a
// dense bf16 [V/t, h] tensor until the DDP hook adds it to the fp32 main
// gradient (the linear layers write theirs there directly).
void StageBuilder::embedding(bool backward) {
  if (!backward) {
    const int lookup = alloc(kBf16 * x_.T * x_.h, "embedding_lookup");
    mem("embedding_fwd", kBf16 * 2 * x_.T * x_.h);
    tp_output_fwd();
    if (x_.hidden_dropout) keep("embedding_dropout_mask", x_.Tsp * x_.h);
    hidden_ = {alloc(kBf16 * x_.Tsp * x_.h, "act.norm1_input"), 0};
    free(lookup);
    return;
  }
  const int grad_lookup = alloc(kBf16 * x_.T * x_.h, "grad.embedding_lookup");
  tp_output_bwd();
  const int grad_weight = alloc(kBf16 * x_.vocab * x_.h, "grad.embedding_weight");
  mem("embedding_bwd", kBf16 * 2 * x_.T * x_.h + kFp32 * x_.T * x_.h);
  if (x_.hidden_dropout) release("embedding_dropout_mask");
  free(grad_lookup);
  free(grad_weight);
  free(grad_);
  grad_ = {};
}

// Final norm, output (logits) layer and vocabulary-parallel cross entropy
// (three small TP all-reduces: max, sum of exponentials, target logit).
// Megatron-Core's cross entropy (unfused, or fused 'native':
// _VocabParallelCrossEntropy.forward) upcasts the bf16 logits to fp32 and
// keeps that copy (as the softmax) for its backward, which turns it into the
// logits' gradient in place, cast back to bf16 for the GEMMs. Transformer
// Engine's (cross_entropy_fusion_impl te: CrossEntropyFunction) computes in
// fp32 inside its kernel and keeps only the bf16 logits, which it overwrites
// with their gradient.
void StageBuilder::output_layer(bool backward) {
  const std::int64_t logits = kBf16 * x_.T * x_.vocab;
  if (!backward) {
    layer_["final_norm_input"] = hidden_;
    keep("logits_input", kBf16 * x_.Tsp * x_.h);
    mem("norm_fwd", kBf16 * 2 * x_.Tsp * x_.h);
    const int gathered = gathered_input("logits_input");
    tp_input_fwd();
    const int bf16_logits = x_.te_cross_entropy ? keep("logits", logits) : alloc(logits, "logits");
    // The output layer is not a Transformer Engine layer: bf16 under fp8 too.
    kernel(gemm(x_.T, x_.vocab, x_.h), "logits_fwd");
    free_transient(gathered);
    if (!x_.te_cross_entropy) {
      keep("logits_fp32", kFp32 * x_.T * x_.vocab);
      mem("cross_entropy_fwd", 2 * logits);
      free(bf16_logits);
    } else {
      mem("cross_entropy_fwd", 2 * logits);
    }
    if (x_.t > 1)
      collective(CollectiveKind::kAllReduce, kCompute, slots_.tp, kFp32 * 3 * x_.T, "tp_all_reduce",
                 DType::kFloat32);
    return;
  }
  const int grad_logits = x_.te_cross_entropy ? -1 : alloc(logits, "grad.logits");
  mem("cross_entropy_bwd", 2 * logits);
  if (!x_.te_cross_entropy) release("logits_fp32");
  const bool defer = defers_wgrad();
  const int gathered = defer ? -1 : gathered_input("logits_input");
  const int grad_in = alloc(kBf16 * x_.T * x_.h, "grad.logits_input");
  kernel(gemm(x_.T, x_.h, x_.vocab), "logits_dgrad");
  if (defer) {
    // The layer's input and the logits gradient (TE's cross entropy wrote it
    // into the kept logits) stay allocated until the drain.
    auto take = [&](std::string_view tensor) {
      const auto it = layer_.find(tensor);
      PRISM_CHECK(it != layer_.end(), fmt::format("'{}' is not held", tensor));
      const Held h = it->second;
      layer_.erase(it);
      return h;
    };
    const Held input = take("logits_input");
    const Held grad = x_.te_cross_entropy ? take("logits") : Held{grad_logits, 0};
    deferred_wgrad_.push_back({input, grad});
  } else {
    kernel(wgrad_gemm(x_.h, x_.vocab, x_.T, DType::kBFloat16), "logits_wgrad");
    if (x_.te_cross_entropy) {
      release("logits");
    } else {
      free(grad_logits);
    }
  }
  tp_input_bwd(!defer);
  free_transient(gathered);
  if (!defer) release("logits_input");
  const int grad_norm = alloc(kBf16 * x_.Tsp * x_.h, "grad.final_norm_input");
  mem("norm_bwd", kBf16 * 4 * x_.Tsp * x_.h);
  free(grad_in);
  release("final_norm_input");
  PRISM_CHECK(layer_.empty(), "the output layer's backward left activations allocated");
  grad_ = {grad_norm, 0};
}

// Megatron-Core's LinearWithGradAccumulationAndAsyncCommunication.backward
// with defer_embedding_wgrad_compute appends its grad_output (and the forward
// its input) while wgrad_deferral_limit is 0 or the buffer is shorter than
// it; later micro-batches compute their weight gradient at once.
bool StageBuilder::defers_wgrad() const {
  const TrainingSpec& tr = job_.training;
  if (!tr.defer_embedding_wgrad_compute) return false;
  return tr.wgrad_deferral_limit == 0 ||
         static_cast<int>(deferred_wgrad_.size()) < tr.wgrad_deferral_limit;
}

// drain_embedding_wgrad_compute, called by the schedule after the last
// micro-batch's backward (finish_embedding_wgrad_compute, before
// finalize_model_grads): per deferred micro-batch, with SP its input
// all-gathered again, then the weight-gradient GEMM into main_grad; each
// buffer freed after its GEMM. Then the data-parallel bucket holding the
// output layer's weight, held back by bucket_ready, is reduced.
void StageBuilder::drain_deferred_wgrad() {
  if (deferred_wgrad_.empty()) return;
  for (const DeferredWgrad& d : deferred_wgrad_) {
    const int gathered = gathered_input("logits_input");
    if (x_.sp)
      collective(CollectiveKind::kAllGather, kCompute, slots_.tp, kBf16 * x_.T * x_.h,
                 "tp_all_gather");
    kernel(wgrad_gemm(x_.h, x_.vocab, x_.T, DType::kBFloat16), "logits_wgrad");
    free_transient(gathered);
    free(d.grad_logits);
    free(d.input);
  }
  deferred_wgrad_.clear();
  if (!job_.training.overlap_grad_reduce) return;
  const Bucket& bucket = buckets_[v_ - 1][kOutputBucket];
  if (bucket_slot(bucket) < 0) return;
  alloc_grad_shard(bucket);
  record(kCompute, "grads_ready");
  wait(kDp, "grads_ready");
  reduce_bucket(bucket);
}

}  // namespace prism::megatron
