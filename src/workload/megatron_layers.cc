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
    ring_all_gather_gemm(m.tokens, m.f_out, x_.h, "fc1_fwd", UbGemm::kFc1Fprop);
  } else {
    gemm_fwd(m.tokens, m.f_out, x_.h, p + "fc1_fwd", m.batch);
  }
  free_transient(gathered);
  save(p + "act_output");
  mem(fmt::format("{}_fwd", activation_name(job_.model.activation)),
      kBf16 * rows * (m.f_out + m.f_in));
  fp8_cast(p + "fp8_cast_fc2_input", rows * m.f_in);
  if (ub && x_.ub_rs) {  // FC2's partial sums stay in the userbuffer
    gemm_reduce_scatter(m.tokens, x_.h, m.f_in, "fc2_fwd", UbGemm::kFc2Fprop);
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

// moe_act's re-run before the experts' backward: the kept FC1 output goes
// through the activation again (and, under FP8, is quantized again for FC2).
void StageBuilder::recompute_activation(const MlpShape& m) {
  const std::string p(m.prefix);
  const std::int64_t rows = m.tokens * m.batch;
  save(p + "act_output");
  mem(fmt::format("{}_fwd", activation_name(job_.model.activation)),
      kBf16 * rows * (m.f_out + m.f_in));
  fp8_cast(p + "fp8_cast_fc2_input", rows * m.f_in);
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
    ring_all_gather_gemm(m.tokens, m.f_in, x_.h, "fc2_dgrad", UbGemm::kFc2Dgrad);
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
    const int grad_input = column_parallel_backward("fc1", m.tokens, m.f_out, x_.h,
                                                    UbGemm::kFc1Dgrad, UbGemm::kFc1Wgrad, grad_fc1);
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
    ring_all_gather_gemm(x_.T, x_.qkv_out, x_.h, "qkv_fwd", UbGemm::kQkvFprop);
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
    gemm_reduce_scatter(x_.T, x_.h, x_.attn_out, "proj_fwd", UbGemm::kProjFprop);
  } else {
    out = alloc(kBf16 * x_.T * x_.h, "proj_output");
    gemm_fwd(x_.T, x_.h, x_.attn_out, "proj_fwd");
  }
  if (unfused_context_ >= 0) {
    free(unfused_context_);
    unfused_context_ = -1;
  }
  // Under FP8 a checkpointed flash core's output has no reader left once the
  // projection has quantized it.
  if (pass_ == Pass::kForward && job_.training.recompute == Recompute::kSelective &&
      holds("attn_out") && !is_kept("attn_out"))
    release("attn_out");
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
    ring_all_gather_gemm(x_.T, x_.attn_out, x_.h, "proj_dgrad", UbGemm::kProjDgrad);
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
    const int grad_in = column_parallel_backward("qkv", x_.T, x_.qkv_out, x_.h, UbGemm::kQkvDgrad,
                                                 UbGemm::kQkvWgrad, grad_qkv);
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
  if (!x_.moe && job_.training.recomputes(RecomputeModule::kMlp)) {
    // The checkpointed MLP runs its whole forward again from its input: the
    // fused norm, FC1 (and its SP gather), the activation, FC2 and its TP
    // reduction, whose output nothing reads.
    rerun([&] {
      save("fc1_input");
      mem("norm_fwd", 2 * hidden);
      free_transient(mlp_forward(dense_mlp()));
    });
  }
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
//
// Memory traffic per logit (e = T x V/t elements; docs/memory.md, "The
// cross entropy's passes"). Unfused, eager PyTorch runs one kernel per op:
// forward upcast 6 B, max 4, in-place subtract 8, in-place exp 8, sum 4,
// in-place divide 8 (38 B); backward the in-place scaling 8 and autograd's
// cast back to bf16 6 (14 B). Fused 'native' compiles three forward graphs
// (upcast + max 6 B; subtract + exp + sum in place 8; divide in place 8:
// 22 B) and one backward graph, in which Inductor copies the saved softmax
// into a fresh fp32 buffer before the target scatter (read 4, write 4), then
// writes the scaled gradient back into the softmax and its bf16 cast (read 4,
// write 4 + 2): 18 B, with that fp32 scratch allocated beside the softmax.
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
      // 38 or 22 bytes per logit: 19 or 11 times the bf16 logits' bytes.
      mem("cross_entropy_fwd", (x_.native_cross_entropy ? 11 : 19) * logits);
      free(bf16_logits);
    } else {
      mem("cross_entropy_fwd", 2 * logits);
    }
    if (x_.t > 1)
      collective(CollectiveKind::kAllReduce, kCompute, slots_.tp, kFp32 * 3 * x_.T, "tp_all_reduce",
                 DType::kFloat32);
    return;
  }
  int grad_logits = -1;
  if (x_.te_cross_entropy) {
    mem("cross_entropy_bwd", 2 * logits);
  } else if (x_.native_cross_entropy) {
    grad_logits = alloc(logits, "grad.logits");
    const int scratch = alloc(kFp32 * x_.T * x_.vocab, "cross_entropy_scratch");
    mem("cross_entropy_bwd", 9 * logits);  // 18 bytes per logit
    free(scratch);
  } else {
    mem("cross_entropy_bwd", 4 * logits);  // the in-place scaling, 8 bytes per logit
    grad_logits = alloc(logits, "grad.logits");
    mem("cross_entropy_grad_cast", 3 * logits);  // fp32 to bf16, 6 bytes per logit
  }
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
