// The arithmetic behind build_megatron() (workload/megatron.h): per-rank
// shapes of a micro-batch, parameters and activation bytes of a layer,
// Megatron's pipeline schedules and expert groups. Internal to workload/;
// tests reach it through the graph and layer_activation_bytes().
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "graph/layout.h"
#include "util/vocab.h"
#include "workload/job_spec.h"
#include "workload/megatron.h"

namespace prism::megatron {

constexpr std::int64_t kBf16 = 2;  // bytes per element of activations and weights
constexpr std::int64_t kFp32 = 4;

// Per-rank shapes of one micro-batch, derived once from the job.
struct Dims {
  std::int64_t t, c, b, s, T, Tsp, h, hq, hkv, d;
  std::int64_t qkv_out;   // per rank: (hq + 2 hkv) d / t
  std::int64_t attn_out;  // per rank: hq d / t
  std::int64_t f_in;      // per rank: ffn / t (FC2's k)
  std::int64_t f_out;     // per rank: FC1's n (2x for gated)
  std::int64_t vocab;     // padded to a multiple of 128 t, per rank / t
  bool sp;                // sequence parallelism in effect (tp > 1)
  // tp_comm_overlap (with SP): which of Transformer Engine's userbuffers
  // overlaps run (workload/megatron_tp_overlap.cc).
  bool ub = false, ub_ag = false, ub_rs = false, ub_bulk_dgrad = false, ub_bulk_wgrad = false;
  // Each GEMM's userbuffers settings (TE's defaults under the job's
  // tp_comm_overlap_cfg), indexed by UbGemm.
  std::array<UbGemmConfig, kNumUbGemms> ub_cfg{};
  const UbGemmConfig& ub_of(UbGemm g) const { return ub_cfg[static_cast<int>(g)]; }
  bool bias;  // GPT-style linear biases and learned positions
  bool rope;  // rotary position embeddings (every model but GPT-style)
  // FP8: TE's cast(-transpose) kernels read bf16 and write the FP8 copy and
  // its transpose (4 B per element); current scaling (tensorwise) first
  // reads the tensor for its amax (6 B). Delayed scaling all-reduces the
  // amax history once per model chunk's forward and backward.
  std::int64_t fp8_cast_bytes = 0;  // per element; 0 without FP8
  bool fp8_amax_reduction = false;
  std::int64_t fp8_amax_history = 0;  // delayed scaling's history length
  DType gemm_dtype;
  // Memory as Megatron-Core and Transformer Engine allocate it.
  bool fp8;                   // TE layers run (and save their inputs) in FP8
  bool fp8_block_scales;      // blockwise / mxfp8: one scale per 32 elements' worth
  bool hidden_dropout;        // hidden_dropout > 0: masks after embedding and each block
  bool attention_dropout;     // attention_dropout > 0: the softmax's mask (unfused only)
  std::int64_t grad_bytes;    // main-gradient element: 4 (grad_reduce_in_fp32) or 2
  bool te_cross_entropy;      // the cross entropy keeps the bf16 logits only
  bool native_cross_entropy;  // Megatron-Core's compiled fused cross entropy
  // MoE.
  bool moe;
  std::int64_t experts, topk, ep, etp, local_experts;
  std::int64_t etp_gather;  // ranks whose routed tokens an expert GEMM sees: etp with SP, else 1
  std::int64_t moe_tokens;  // tokens per local expert
  std::int64_t moe_f_in, moe_f_out;
  std::int64_t shared_f_in, shared_f_out;
};

// Parameters of one layer on one rank.
struct LayerParams {
  std::int64_t dense = 0;   // attention, norms, dense MLP or router + shared expert
  std::int64_t expert = 0;  // routed experts (reduced over edp)
  std::int64_t linear = 0;  // weights of TE linear layers among them (FP8 under fp8)
};

// The schedule of one stage: (forward?, chunk, micro-batch) in execution order,
// Megatron-Core's forward_backward_pipelining_with(out)_interleaving.
struct Step {
  bool forward;
  int chunk;
  int microbatch;
};

Dims make_dims(const JobSpec& job);
// Bytes a TE linear keeps of its `elements`-element input for the backward:
// bf16, or under FP8 only its own quantized copy (1 B per element, plus
// 4 B per 128 (blockwise) or 1 B per 32 (mxfp8) of scales).
std::int64_t saved_gemm_input(const Dims& x, std::int64_t elements);
// Bytes per parameter of a TE linear layer's weight on the device: the bf16
// weight plus TE's cached FP8 copies, or with fp8_param_gather the FP8
// weight itself plus its column-wise copy.
std::int64_t linear_weight_bytes(const JobSpec& job, std::int64_t params);
// Bytes per parameter of the distributed optimizer's own state, for the
// parameters of the rank's shard: Megatron-Core's fp32 master weight, Adam m
// and v (12); Apex's DistributedFusedAdam as NeMo configures it, the 16-bit
// remainders that complete the bf16 parameter to fp32 plus m and v (10), or
// with FP8 parameters an fp32 master copy (store_params) plus m and v (12).
std::int64_t optimizer_state_bytes_per_param(const JobSpec& job);
// Bytes the optimizer step moves per parameter of the shard: the gradient
// norm's read of the gradient, then Adam's reads and writes.
std::int64_t optimizer_bytes_per_param(const JobSpec& job);
LayerParams layer_params(const JobSpec& job, const Dims& x);
// tp_comm_overlap's userbuffers, registered once per process by Transformer
// Engine's initialize_ub: one per overlapped GEMM input or output (qkv,
// proj, fc1, fc2: fprop and dgrad; qkv and fc1 wgrad), each the layer's
// (seq x micro-batch / cp) x hidden in bf16. 0 without the overlap.
std::int64_t userbuffer_bytes(const Dims& x);
// The tensors one layer keeps from forward to backward per micro-batch, in the
// order the forward creates them (see layer_activation_tensors() in
// workload/megatron.h). The builder allocates exactly these, by name.
std::vector<ActivationTensor> activation_tensors(const JobSpec& job, const Dims& x, bool moe_layer);
// Their sum.
std::int64_t activation_bytes(const JobSpec& job, const Dims& x, bool moe_layer);
// How full recompute treats layer `layer` (0-based) of a model chunk of
// `layers` layers, as Megatron-Core's TransformerBlock._checkpointed_forward
// does: recomputed layers form groups [first, last] whose first layer keeps
// its input and whose forward is re-run as a whole before the group's
// backward; a layer that is not recomputed keeps all its activations.
struct LayerRecompute {
  bool recomputed = false;
  int first = 0, last = 0;  // the layer's group (itself when not recomputed)
};
LayerRecompute layer_recompute(const TrainingSpec& t, int layer, int layers);
// Stage `rank`'s (forward?, chunk, micro-batch) steps in execution order.
std::vector<Step> pipeline_schedule(int p, int v, int m, int rank);
// Megatron-Core's expert groups: `which` is 0 (etp), 1 (ep) or 2 (edp).
std::vector<std::vector<Rank>> expert_groups(const JobSpec& job, int which);

}  // namespace prism::megatron
