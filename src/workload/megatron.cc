#include "workload/megatron.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "graph/validate.h"

namespace prism {
namespace {

enum Stream : std::uint16_t {
  kCompute,
  kDp,
  kSendFwd,
  kSendBwd,
  kRecvFwd,
  kRecvBwd,
  kCp,
};
const std::vector<std::string> kStreamNames = {
    "compute", "dp", "pp_send_fwd", "pp_send_bwd", "pp_recv_fwd", "pp_recv_bwd", "cp"};

constexpr std::int32_t kTagActivation = 0;
constexpr std::int32_t kTagGrad = 1;
constexpr std::int32_t kTagCpForward = 2;
constexpr std::int32_t kTagCpBackward = 3;

constexpr std::int64_t kBf16 = 2;  // bytes per element of activations and weights
constexpr std::int64_t kFp32 = 4;

struct SlotIds {
  int tp = -1, cp = -1, dp_cp = -1, pp_next = -1, pp_prev = -1, cp_next = -1, cp_prev = -1;
  int ep = -1, etp = -1, edp = -1, embd = -1;
};

// Per-rank shapes of one micro-batch, derived once from the job.
struct Dims {
  std::int64_t t, c, b, s, T, Tsp, h, hq, hkv, d;
  std::int64_t qkv_out;   // per rank: (hq + 2 hkv) d / t
  std::int64_t attn_out;  // per rank: hq d / t
  std::int64_t f_in;      // per rank: ffn / t (FC2's k)
  std::int64_t f_out;     // per rank: FC1's n (2x for gated)
  std::int64_t vocab;     // padded to a multiple of 128 t, per rank / t
  bool sp;                // sequence parallelism in effect (tp > 1)
  bool bias;              // GPT-style linear biases and learned positions
  DType gemm_dtype;
  // MoE.
  bool moe;
  std::int64_t experts, topk, ep, etp, local_experts;
  std::int64_t etp_gather;  // ranks whose routed tokens an expert GEMM sees: etp with SP, else 1
  std::int64_t moe_tokens;  // tokens per local expert
  std::int64_t moe_f_in, moe_f_out;
  std::int64_t shared_f_in, shared_f_out;
};

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
  x.gemm_dtype = job.training.precision == Precision::kFp8 ? DType::kFloat8E4M3 : DType::kBFloat16;
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

// Parameters of one layer on one rank.
struct LayerParams {
  std::int64_t dense = 0;   // attention, norms, dense MLP or router + shared expert
  std::int64_t expert = 0;  // routed experts (reduced over edp)
};

LayerParams layer_params(const JobSpec& job, const Dims& x) {
  const ModelSpec& m = job.model;
  const std::int64_t gate = m.gated() ? 2 : 1;
  const std::int64_t qkv_full = (x.hq + 2 * x.hkv) * x.d;
  LayerParams p;
  p.dense = (x.h * qkv_full + x.hq * x.d * x.h) / x.t;
  if (x.bias) p.dense += qkv_full / x.t + x.h;
  p.dense += (m.normalization == Normalization::kLayerNorm ? 2 : 1) * 2 * x.h;
  if (!x.moe) {
    p.dense += (x.h * gate * m.ffn() + m.ffn() * x.h) / x.t;
    if (x.bias) p.dense += gate * m.ffn() / x.t + x.h;
    return p;
  }
  p.dense += x.h * x.experts;  // router, replicated
  const std::int64_t shared = m.moe_shared_expert_intermediate_size;
  p.dense += (x.h * gate * shared + shared * x.h) / x.t;
  p.expert = x.local_experts * (x.h * gate * m.moe_ffn() + m.moe_ffn() * x.h) / x.etp;
  return p;
}

std::int64_t activation_bytes(const JobSpec& job, const Dims& x, bool moe_layer) {
  const std::int64_t sp = x.sp ? x.t : 1;
  const std::int64_t Th = x.T * x.h;
  if (job.training.recompute == Recompute::kFull) return kBf16 * Th / sp;  // layer input
  // Attention: norm input, QKV input, Q/K/V, attention output (the output
  // projection's input), dropout mask (1 byte).
  std::int64_t a =
      kBf16 * Th / sp * 2 + kBf16 * x.T * x.qkv_out + kBf16 * x.T * x.attn_out + Th / sp;
  // MLP: norm input, FC1 input, FC1 output, activation output, dropout mask.
  a += kBf16 * Th / sp * 2 + Th / sp;
  if (!moe_layer) {
    a += kBf16 * x.T * (x.f_out + x.f_in);
    return a;
  }
  // Router logits (fp32), permuted tokens, expert FC1 output and activation,
  // shared expert like a dense MLP.
  const std::int64_t tokens = x.moe_tokens * x.local_experts;
  a += kFp32 * x.Tsp * x.experts + kBf16 * tokens * x.h;
  a += kBf16 * tokens * (x.moe_f_out + x.moe_f_in);
  a += kBf16 * x.T * (x.shared_f_out + x.shared_f_in);
  return a;
}

// The schedule of one stage: (forward?, chunk, micro-batch) in execution order,
// Megatron-Core's forward_backward_pipelining_with(out)_interleaving.
struct Step {
  bool forward;
  int chunk;
  int microbatch;
};

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

// A gradient bucket: consecutive layers (in backward order) of one chunk.
struct Bucket {
  std::int64_t params = 0;
  bool expert = false;
};

class StageBuilder {
 public:
  StageBuilder(const JobSpec& job, const KernelModel& kernels, const SlotIds& slots, int stage,
               std::map<std::string, KernelUse>* uses)
      : job_(job),
        km_(kernels),
        slots_(slots),
        x_(make_dims(job)),
        stage_(stage),
        p_(job.pp()),
        v_(job.vpp()),
        uses_(*uses) {
    role_.name = "stage" + std::to_string(stage);
    role_.streams = kStreamNames;
    if (x_.c == 1) role_.streams.pop_back();
    layers_per_chunk_ = job.layers_on_stage(stage) / v_;
    lp_ = layer_params(job, x_);
    JobSpec no_recompute = job;
    no_recompute.training.recompute = Recompute::kNone;
    recomputed_bytes_ = activation_bytes(no_recompute, x_, x_.moe);
  }

  Role build(RoleFootprint* footprint);

 private:
  bool first_chunk_here(int chunk) const { return stage_ == 0 && chunk == 0; }
  bool last_chunk_here(int chunk) const { return stage_ == p_ - 1 && chunk == v_ - 1; }
  bool has_input_peer(int chunk) const { return stage_ > 0 || chunk > 0; }
  bool has_output_peer(int chunk) const { return stage_ < p_ - 1 || chunk < v_ - 1; }

  Op& emit(OpKind kind, std::uint16_t stream, std::string_view name);
  std::int32_t intern(std::vector<std::string>* table,
                      std::unordered_map<std::string, std::int32_t>* index, std::string_view s);
  void kernel(const Kernel& k, std::string_view name);
  void gemm_fwd(std::int64_t m, std::int64_t n, std::int64_t k, std::string_view name,
                std::int64_t batch = 1);
  void gemm_bwd(std::int64_t m, std::int64_t n, std::int64_t k, std::string_view dgrad,
                std::string_view wgrad, std::int64_t batch = 1);
  void mem(std::string_view name, std::int64_t bytes) { kernel(memory_bound(name, bytes), name); }
  int collective(CollectiveKind kind, std::uint16_t stream, int slot, std::int64_t bytes,
                 std::string_view name, DType dtype = DType::kBFloat16);
  void p2p(OpKind kind, std::uint16_t stream, int slot, std::int64_t bytes, std::int32_t tag,
           std::string_view name, std::uint32_t group = 0);
  void record(std::uint16_t stream, std::string_view event);
  void wait(std::uint16_t stream, std::string_view event);
  int alloc(std::int64_t bytes, std::string_view name);
  void free(int alloc_op, std::string_view name);

  // TP collectives around a column-parallel (input) and a row-parallel
  // (output) linear layer, forward and backward.
  void tp_input_fwd();
  void tp_output_fwd();
  void tp_output_bwd();
  void tp_input_bwd();

  void attention_core(bool backward);
  void unfused_attention(bool backward);
  void layer_forward(bool moe);
  void layer_backward(bool moe);
  void mlp(bool backward, std::int64_t f_in, std::int64_t f_out, std::string_view prefix,
           std::int64_t m, std::int64_t batch);
  void moe_forward();
  void moe_backward();
  void embedding(bool backward);
  void output_layer(bool backward, int mb);

  void forward(int chunk, int mb);
  void backward(int chunk, int mb);
  void plan_buckets();
  void bucket_ready(int chunk, int item);
  void param_gather(bool overlapped);
  void finish_iteration();

  const JobSpec& job_;
  const KernelModel& km_;
  SlotIds slots_;
  Dims x_;
  int stage_, p_, v_;
  int layers_per_chunk_ = 0;
  LayerParams lp_;
  std::map<std::string, KernelUse>& uses_;
  Role role_;
  std::unordered_map<std::string, std::int32_t> name_index_, event_index_;

  // Activations of (chunk, micro-batch, layer): the alloc op, freed in backward.
  std::vector<int> activations_;
  // Buckets per chunk, and which bucket closes after backward item i of the
  // chunk (items: output layer, layers last to first, embedding).
  std::vector<std::vector<Bucket>> buckets_;
  std::vector<std::vector<std::vector<int>>> closes_after_;
  std::vector<std::vector<int>> bucket_of_layer_;  // [chunk][layer]: dense bucket for param gather
  int num_buckets_ = 0;
  std::vector<bool> gathered_;  // per bucket id: params waited for already
  std::uint32_t next_group_ = 1;
  std::int64_t optimizer_params_ = 0;
  std::vector<int>
      logits_;  // per micro-batch: the logits' alloc op, from output forward to backward
  std::int64_t recomputed_bytes_ = 0;  // full recompute: a layer's activations, re-made
};

std::int32_t StageBuilder::intern(std::vector<std::string>* table,
                                  std::unordered_map<std::string, std::int32_t>* index,
                                  std::string_view s) {
  auto [it, inserted] =
      index->try_emplace(std::string(s), static_cast<std::int32_t>(table->size()));
  if (inserted) table->emplace_back(s);
  return it->second;
}

Op& StageBuilder::emit(OpKind kind, std::uint16_t stream, std::string_view name) {
  Op& op = role_.ops.emplace_back();
  op.kind = kind;
  op.stream = stream;
  op.name = intern(&role_.names, &name_index_, name);
  return op;
}

void StageBuilder::kernel(const Kernel& k, std::string_view name) {
  const SimTime t = km_.time(k);
  emit(OpKind::kCompute, kCompute, name).duration = t;
  std::string sig = signature(k);
  KernelUse& use = uses_[sig];
  if (use.count == 0) {
    use.signature = std::move(sig);
    use.time = t;
    use.measured = km_.measured(k);
  }
  ++use.count;
}

void StageBuilder::gemm_fwd(std::int64_t m, std::int64_t n, std::int64_t k, std::string_view name,
                            std::int64_t batch) {
  kernel(gemm(m, n, k, x_.gemm_dtype, batch), name);
}

// Y[m,n] = X[m,k] W[k,n]: dX = dY W^T is (m, k, n); dW = X^T dY is (k, n, m).
void StageBuilder::gemm_bwd(std::int64_t m, std::int64_t n, std::int64_t k, std::string_view dgrad,
                            std::string_view wgrad, std::int64_t batch) {
  kernel(gemm(m, k, n, x_.gemm_dtype, batch), dgrad);
  kernel(gemm(k, n, m, x_.gemm_dtype, batch), wgrad);
}

int StageBuilder::collective(CollectiveKind kind, std::uint16_t stream, int slot,
                             std::int64_t bytes, std::string_view name, DType dtype) {
  Op& op = emit(OpKind::kCollective, stream, name);
  op.collective = kind;
  op.ref = slot;
  op.bytes = Bytes{bytes};
  op.dtype = dtype;
  return static_cast<int>(role_.ops.size() - 1);
}

void StageBuilder::p2p(OpKind kind, std::uint16_t stream, int slot, std::int64_t bytes,
                       std::int32_t tag, std::string_view name, std::uint32_t group) {
  Op& op = emit(kind, stream, name);
  op.ref = slot;
  op.arg = tag;
  op.bytes = Bytes{bytes};
  op.group = group;
}

void StageBuilder::record(std::uint16_t stream, std::string_view event) {
  emit(OpKind::kEventRecord, stream, "event").ref = intern(&role_.events, &event_index_, event);
}

void StageBuilder::wait(std::uint16_t stream, std::string_view event) {
  emit(OpKind::kEventWait, stream, "event").ref = intern(&role_.events, &event_index_, event);
}

int StageBuilder::alloc(std::int64_t bytes, std::string_view name) {
  emit(OpKind::kAlloc, kCompute, name).bytes = Bytes{bytes};
  return static_cast<int>(role_.ops.size() - 1);
}

void StageBuilder::free(int alloc_op, std::string_view name) {
  const Bytes bytes = role_.ops[alloc_op].bytes;
  Op& op = emit(OpKind::kFree, kCompute, name);
  op.ref = alloc_op;
  op.bytes = bytes;
}

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

void StageBuilder::forward(int chunk, int mb) {
  Op& marker = emit(OpKind::kMarker, kCompute, "microbatch");
  marker.marker = MarkerKind::kMicrobatch;
  marker.arg = mb;
  const std::int64_t p2p_bytes = kBf16 * x_.Tsp * x_.h;
  if (has_input_peer(chunk)) {
    p2p(OpKind::kRecv, kRecvFwd, slots_.pp_prev, p2p_bytes, kTagActivation, "pp_recv_activation");
    record(kRecvFwd, "activation_received");
    wait(kCompute, "activation_received");
  }
  if (first_chunk_here(chunk)) embedding(false);
  const bool moe = x_.moe;
  const Bytes act{activation_bytes(job_, x_, moe)};
  for (int l = 0; l < layers_per_chunk_; ++l) {
    if (mb == 0 && job_.training.use_distributed_optimizer && job_.training.overlap_param_gather &&
        slots_.dp_cp >= 0) {
      const int bucket = bucket_of_layer_[chunk][l];
      if (bucket >= 0 && !gathered_[bucket]) {
        wait(kCompute, fmt::format("params_gathered_{}", bucket));
        gathered_[bucket] = true;
      }
    }
    activations_[(static_cast<std::size_t>(chunk) * job_.num_microbatches() + mb) *
                     layers_per_chunk_ +
                 l] = alloc(act.count, "activations");
    layer_forward(moe);
  }
  if (last_chunk_here(chunk)) output_layer(false, mb);
  if (has_output_peer(chunk)) {
    record(kCompute, "forward_done");
    wait(kSendFwd, "forward_done");
    p2p(OpKind::kSend, kSendFwd, slots_.pp_next, p2p_bytes, kTagActivation, "pp_send_activation");
  }
}

void StageBuilder::backward(int chunk, int mb) {
  const std::int64_t p2p_bytes = kBf16 * x_.Tsp * x_.h;
  if (has_output_peer(chunk)) {
    p2p(OpKind::kRecv, kRecvBwd, slots_.pp_next, p2p_bytes, kTagGrad, "pp_recv_grad");
    record(kRecvBwd, "grad_received");
    wait(kCompute, "grad_received");
  }
  const bool last_mb = mb == job_.num_microbatches() - 1;
  int item = 0;
  auto done_item = [&] {
    if (last_mb) bucket_ready(chunk, item);
    ++item;
  };
  if (last_chunk_here(chunk)) {
    output_layer(true, mb);
    done_item();
  }
  const bool full = job_.training.recompute == Recompute::kFull;
  const bool moe = x_.moe;
  for (int l = layers_per_chunk_ - 1; l >= 0; --l) {
    int recomputed = -1;
    if (full) {
      recomputed = alloc(recomputed_bytes_, "recomputed_activations");
      layer_forward(moe);
    }
    layer_backward(moe);
    if (recomputed >= 0) free(recomputed, "recomputed_activations");
    free(activations_[(static_cast<std::size_t>(chunk) * job_.num_microbatches() + mb) *
                          layers_per_chunk_ +
                      l],
         "activations");
    done_item();
  }
  if (first_chunk_here(chunk)) {
    embedding(true);
    done_item();
  }
  if (has_input_peer(chunk)) {
    record(kCompute, "backward_done");
    wait(kSendBwd, "backward_done");
    p2p(OpKind::kSend, kSendBwd, slots_.pp_prev, p2p_bytes, kTagGrad, "pp_send_grad");
  }
}

// Megatron's DDP buckets: parameters in backward order, a bucket closing once
// it holds at least bucket_size parameters; expert parameters in their own
// buckets (reduced over the expert data-parallel group).
void StageBuilder::plan_buckets() {
  const std::int64_t limit = job_.bucket_params();
  const std::int64_t embedding_params = x_.vocab * x_.h;
  buckets_.assign(v_, {});
  closes_after_.assign(v_, {});
  bucket_of_layer_.assign(v_, std::vector<int>(layers_per_chunk_, -1));
  for (int c = 0; c < v_; ++c) {
    std::vector<std::int64_t> dense_items, expert_items;
    if (last_chunk_here(c)) {
      // Output layer (its own weight; with tied embeddings, a copy when the
      // embedding lives on another stage) and the final norm.
      const bool own_weight = job_.model.untie_embeddings_and_output_weights || p_ > 1;
      const std::int64_t norm =
          (job_.model.normalization == Normalization::kLayerNorm ? 2 : 1) * x_.h;
      dense_items.push_back((own_weight ? embedding_params : 0) + norm);
      expert_items.push_back(0);
    }
    for (int l = 0; l < layers_per_chunk_; ++l) {
      dense_items.push_back(lp_.dense);
      expert_items.push_back(lp_.expert);
    }
    if (first_chunk_here(c)) {
      dense_items.push_back(embedding_params + (x_.bias ? job_.training.seq_length * x_.h : 0));
      expert_items.push_back(0);
    }
    closes_after_[c].assign(dense_items.size(), {});
    const bool has_output = last_chunk_here(c);
    for (const bool expert : {false, true}) {
      const std::vector<std::int64_t>& items = expert ? expert_items : dense_items;
      std::int64_t open = 0;
      for (std::size_t i = 0; i < items.size(); ++i) {
        open += items[i];
        const int layer = static_cast<int>(i) - (has_output ? 1 : 0);
        const int bucket_id = num_buckets_ + static_cast<int>(buckets_[c].size());
        if (!expert && layer >= 0 && layer < layers_per_chunk_)
          bucket_of_layer_[c][layers_per_chunk_ - 1 - layer] = bucket_id;
        if (open > 0 && (open >= limit || i + 1 == items.size())) {
          buckets_[c].push_back({open, expert});
          closes_after_[c][i].push_back(static_cast<int>(buckets_[c].size()) - 1);
          open = 0;
        }
      }
    }
    num_buckets_ += static_cast<int>(buckets_[c].size());
  }
  gathered_.assign(num_buckets_, false);
}

int bucket_base(const std::vector<std::vector<Bucket>>& buckets, int chunk) {
  int base = 0;
  for (int c = 0; c < chunk; ++c) base += static_cast<int>(buckets[c].size());
  return base;
}

// Backward item `item` of `chunk` is done in the last micro-batch: reduce the
// buckets it completes, on the dp stream (overlap_grad_reduce), or leave them
// for after the backward.
void StageBuilder::bucket_ready(int chunk, int item) {
  if (!job_.training.overlap_grad_reduce) return;
  for (const int b : closes_after_[chunk][item]) {
    const Bucket& bucket = buckets_[chunk][b];
    const int slot = bucket.expert ? slots_.edp : slots_.dp_cp;
    if (slot < 0) continue;
    record(kCompute, "grads_ready");
    wait(kDp, "grads_ready");
    collective(job_.training.use_distributed_optimizer ? CollectiveKind::kReduceScatter
                                                       : CollectiveKind::kAllReduce,
               kDp, slot, kFp32 * bucket.params, "dp_grad_reduce", DType::kFloat32);
  }
}

// The distributed optimizer's all-gather of updated bf16 parameters, bucket
// by bucket: under the next forward (overlapped: issued at the iteration's
// start, each layer waits for its bucket), or after the optimizer step.
void StageBuilder::param_gather(bool overlapped) {
  if (!job_.training.use_distributed_optimizer) return;
  const std::uint16_t stream = overlapped ? kDp : kCompute;
  for (int c = 0; c < v_; ++c) {
    const int base = bucket_base(buckets_, c);
    // Dense buckets in forward order (the last one, nearest the input, first),
    // then the experts'.
    std::vector<int> order;
    for (const bool expert : {false, true})
      for (int b = static_cast<int>(buckets_[c].size()) - 1; b >= 0; --b)
        if (buckets_[c][b].expert == expert) order.push_back(b);
    for (const int b : order) {
      const Bucket& bucket = buckets_[c][b];
      const int slot = bucket.expert ? slots_.edp : slots_.dp_cp;
      if (slot < 0) continue;
      collective(CollectiveKind::kAllGather, stream, slot, kBf16 * bucket.params,
                 "dp_param_gather");
      if (overlapped && !bucket.expert) record(kDp, fmt::format("params_gathered_{}", base + b));
    }
  }
}

void StageBuilder::finish_iteration() {
  const TrainingSpec& tr = job_.training;
  if (!tr.overlap_grad_reduce) {
    record(kCompute, "grads_ready");
    wait(kDp, "grads_ready");
    for (int c = 0; c < v_; ++c) {
      for (const Bucket& bucket : buckets_[c]) {
        const int slot = bucket.expert ? slots_.edp : slots_.dp_cp;
        if (slot < 0) continue;
        collective(tr.use_distributed_optimizer ? CollectiveKind::kReduceScatter
                                                : CollectiveKind::kAllReduce,
                   kDp, slot, kFp32 * bucket.params, "dp_grad_reduce", DType::kFloat32);
      }
    }
  }
  record(kDp, "grads_synced");
  wait(kCompute, "grads_synced");
  // Tied embeddings: the first and last stages sum their copies' gradients.
  if (slots_.embd >= 0 && (stage_ == 0 || stage_ == p_ - 1)) {
    collective(CollectiveKind::kAllReduce, kCompute, slots_.embd, kFp32 * x_.vocab * x_.h,
               "embd_grad_all_reduce", DType::kFloat32);
  }
  // Gradient norm (read), Adam (fp32 grad, master, m, v in; master, m, v and
  // the bf16 weight out).
  kernel(memory_bound("optimizer", optimizer_params_ * 34), "optimizer");
  if (!tr.overlap_param_gather) param_gather(false);
}

Role StageBuilder::build(RoleFootprint* footprint) {
  plan_buckets();
  const TrainingSpec& tr = job_.training;
  std::int64_t params = 0, opt = 0;
  for (const auto& chunk : buckets_) {
    for (const Bucket& b : chunk) {
      params += b.params;
      const int shards = !tr.use_distributed_optimizer ? 1
                         : b.expert                    ? job_.expert_dp()
                                                       : job_.dp() * job_.cp();
      opt += b.params / shards;
    }
  }
  optimizer_params_ = opt;
  footprint->parameters = params;
  footprint->optimizer_params = opt;
  footprint->num_layers = layers_per_chunk_ * v_;
  footprint->activation_bytes_per_layer = Bytes{activation_bytes(job_, x_, x_.moe)};
  footprint->model_state_bytes = Bytes{params * (kBf16 + kFp32) + opt * 3 * kFp32};

  alloc(params * kBf16, "weights");
  alloc(params * kFp32, "grad_buffer");
  alloc(opt * 3 * kFp32, "optimizer_state");
  Op& it = emit(OpKind::kMarker, kCompute, "iteration");
  it.marker = MarkerKind::kIteration;
  it.arg = 0;
  mem("zero_grad", params * kFp32);
  if (tr.overlap_param_gather) param_gather(true);

  const int m = job_.num_microbatches();
  activations_.assign(static_cast<std::size_t>(v_) * m * layers_per_chunk_, -1);
  logits_.assign(m, -1);
  for (const Step& step : pipeline_schedule(p_, v_, m, stage_)) {
    if (step.forward) {
      forward(step.chunk, step.microbatch);
    } else {
      backward(step.chunk, step.microbatch);
    }
  }
  finish_iteration();
  return std::move(role_);
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

}  // namespace

Bytes layer_activation_bytes(const JobSpec& job, bool moe_layer) {
  return Bytes{activation_bytes(job, make_dims(job), moe_layer)};
}

Result<BuiltJob> build_megatron(const JobSpec& job, const KernelModel& kernels) {
  PRISM_RETURN_IF_ERROR(validate_job(job));
  BuiltJob out;
  ExecutionGraph& g = out.graph;
  g.name = job.name;
  const int world = job.num_gpus;
  const int gpn = std::min(world, job.cluster.gpus_per_node);
  g.layout =
      Layout(world, {{"tp", job.tp()}, {"cp", job.cp()}, {"dp", job.dp()}, {"pp", job.pp()}}, gpn);
  SlotIds s;
  auto add = [&](CommSlot slot) {
    g.slots.push_back(std::move(slot));
    return static_cast<int>(g.slots.size() - 1);
  };
  if (job.tp() > 1) s.tp = add(CommSlot::grid_group("tp", {0}));
  if (job.cp() > 1) {
    s.cp = add(CommSlot::grid_group("cp", {1}));
    s.cp_next = add(CommSlot::grid_peer("cp_next", 1, 1, true));
    s.cp_prev = add(CommSlot::grid_peer("cp_prev", 1, -1, true));
  }
  if (job.dp() * job.cp() > 1) s.dp_cp = add(CommSlot::grid_group("dp_cp", {1, 2}));
  if (job.pp() > 1) {
    const bool wrap = job.vpp() > 1;
    s.pp_next = add(CommSlot::grid_peer("pp_next", 3, 1, wrap));
    s.pp_prev = add(CommSlot::grid_peer("pp_prev", 3, -1, wrap));
  }
  if (job.model.is_moe()) {
    if (job.ep() > 1) s.ep = add(CommSlot::explicit_group("ep", expert_groups(job, 1)));
    if (job.etp() > 1) s.etp = add(CommSlot::explicit_group("etp", expert_groups(job, 0)));
    if (job.expert_dp() > 1) s.edp = add(CommSlot::explicit_group("edp", expert_groups(job, 2)));
  }
  if (job.pp() > 1 && !job.model.untie_embeddings_and_output_weights) {
    std::vector<std::vector<Rank>> groups;
    const int stage_size = world / job.pp();
    for (int i = 0; i < stage_size; ++i) groups.push_back({i, (job.pp() - 1) * stage_size + i});
    s.embd = add(CommSlot::explicit_group("embd", std::move(groups)));
  }

  std::map<std::string, KernelUse> uses;
  g.roles.reserve(job.pp());
  out.roles.resize(job.pp());
  for (int stage = 0; stage < job.pp(); ++stage) {
    g.roles.push_back(StageBuilder(job, kernels, s, stage, &uses).build(&out.roles[stage]));
  }
  g.role_of_rank.resize(world);
  for (Rank r = 0; r < world; ++r) g.role_of_rank[r] = g.layout.coord(r, 3);
  PRISM_RETURN_IF_ERROR(finalize_graph(g).with_context("building " + job.name));
  PRISM_RETURN_IF_ERROR(validate_graph(g).with_context("building " + job.name));
  for (auto& [sig, use] : uses) out.kernels.push_back(std::move(use));
  return out;
}

}  // namespace prism
