// The core attention of StageBuilder (workload/megatron_stage.h): flash
// attention with context parallelism's ring, its corrections, and
// Megatron's unfused DotProductAttention; selective recompute's re-runs of
// either before its backward.
#include <string>

#include <fmt/format.h>

#include "workload/megatron_stage.h"

namespace prism::megatron {

// Flash attention; with context parallelism, ring attention over c steps
// (the diagonal block causal, the others half blocks of the load-balanced
// split) while K and V (and their gradients backward) circulate on the cp
// stream. Forward it makes the attention output; backward it returns the
// alloc of the Q/K/V gradient.
int StageBuilder::attention_core(bool backward) {
  if (is_unfused(job_.training.attention_backend)) {
    if (!backward) {
      unfused_attention_forward(false);
      return -1;
    }
    // The projection's weight gradient was the last reader of the context
    // (under FP8 the projection kept its own copy, released with it).
    if (!x_.fp8) release("attn_out");
    // Selective recompute re-runs the core attention before its backward.
    if (job_.training.recomputes(RecomputeModule::kCoreAttn)) unfused_attention_forward(true);
    return unfused_attention_backward();
  }
  int grad_qkv = -1;
  int remade = -1;
  if (backward) {
    // Checkpointed core attention (selective recompute, core_attn) runs its
    // forward again first and its backward reads that output (Megatron-Core
    // warns that this costs time and saves little with fused attention).
    if (job_.training.recomputes(RecomputeModule::kCoreAttn)) {
      rerun([&] {
        remade = alloc(kBf16 * x_.T * x_.attn_out, tensor_name("attn_out"));
        attention_kernels(false);
      });
    }
    grad_qkv = alloc(kBf16 * x_.T * x_.qkv_out, "grad.qkv");
  } else {
    save("attn_out");
  }
  attention_kernels(backward);
  if (backward) {
    if (remade >= 0) free(remade);
    // The output the forward kept for this backward (in bf16 under selective
    // recompute, the projection's saved input).
    if (holds("attn_out")) release("attn_out");
    release("qkv");
  }
  return grad_qkv;
}

// The flash attention kernels of one pass, with context parallelism's ring
// (its exchanges and corrections).
void StageBuilder::attention_kernels(bool backward) {
  const std::string_view name = backward ? "attn_bwd" : "attn_fwd";
  const std::int64_t hq = x_.hq / x_.t, hkv = x_.hkv / x_.t;
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

}  // namespace prism::megatron
