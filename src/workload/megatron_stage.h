// StageBuilder: writes the program of one pipeline stage for
// build_megatron() (workload/megatron.h). Internal to workload/: the layer
// ops live in megatron_layers.cc (the MoE block in megatron_moe.cc), the
// memory bookkeeping (which tensor is allocated and freed where) in
// megatron_memory.cc, the schedule, buckets and optimizer in megatron.cc.
//
// Memory: every tensor a layer keeps for its backward is one alloc, named
// "act.<tensor>" after activation_tensors() (megatron_shapes.h), made where
// the forward creates it and freed right after the backward op that last
// reads it; transients (SP gathers, GEMM outputs awaiting their reduction,
// gradients) are allocated and freed around the ops that use them. The hidden
// state that flows between layers is one chain of allocations: a layer's
// output is the next layer's "norm1_input", the last one's is sent to the next
// stage (and freed once the send is issued, or with deallocate_pipeline_outputs
// false held until that micro-batch's backward) or kept by the final norm. The
// gradient flows back the same way. docs/memory.md lists them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "compute/kernel_model.h"
#include "graph/graph.h"
#include "graph/role_builder.h"
#include "workload/job_spec.h"
#include "workload/megatron.h"
#include "workload/megatron_shapes.h"

namespace prism::megatron {

enum Stream : std::uint16_t {
  kCompute,
  kDp,
  kSendFwd,
  kSendBwd,
  kRecvFwd,
  kRecvBwd,
  kCp,
};
inline const std::vector<std::string> kStreamNames = {
    "compute", "dp", "pp_send_fwd", "pp_send_bwd", "pp_recv_fwd", "pp_recv_bwd", "cp"};

// The streams of a stage: "cp" only with context parallelism, then "tp"
// (userbuffers' communication) only with tp_comm_overlap.
inline std::vector<std::string> stage_streams(const Dims& x) {
  std::vector<std::string> s = kStreamNames;
  if (x.c == 1) s.pop_back();
  if (x.ub) s.push_back("tp");
  return s;
}
// The "tp" stream's index in stage_streams().
inline std::uint16_t tp_stream(const Dims& x) {
  return x.c == 1 ? kCp : kCp + 1;
}

// A free's record-stream mask (Op::arg) for one stream.
constexpr std::int32_t stream_bit(Stream s) {
  return std::int32_t{1} << s;
}

constexpr std::int32_t kTagActivation = 0;
constexpr std::int32_t kTagGrad = 1;
constexpr std::int32_t kTagCpForward = 2;
constexpr std::int32_t kTagCpBackward = 3;
constexpr std::int32_t kTagTpRing = 4;

struct SlotIds {
  int tp = -1, cp = -1, dp_cp = -1, pp_next = -1, pp_prev = -1, cp_next = -1, cp_prev = -1;
  int ep = -1, etp = -1, edp = -1, embd = -1;
  int amax = -1;                   // FP8 delayed scaling: the stage's tp x cp x dp ranks
  int tp_next = -1, tp_prev = -1;  // the TP ring, with tp_comm_overlap
};

// A gradient bucket: consecutive layers (in backward order) of one chunk.
struct Bucket {
  std::int64_t params = 0;
  bool expert = false;
  std::int64_t linear = 0;  // of params, TE linear weights (FP8 with fp8_param_gather)
};

// A live allocation and the streams it was recorded on (Tensor.record_stream),
// which its free carries.
struct Held {
  int op = -1;
  std::int32_t record_streams = 0;
};

// The tensors one layer (or the embedding, or the output layer) of one
// micro-batch holds, by tensor name ("qkv", not "act.qkv").
using HeldTensors = std::map<std::string, Held, std::less<>>;

// One MLP of a layer: the dense MLP, the routed experts (one grouped GEMM over
// `batch` experts of `tokens` each) or the shared expert.
struct MlpShape {
  std::string_view prefix;  // "", "expert_" or "shared_": op and tensor names
  std::int64_t tokens, batch, f_in, f_out;
  bool tensor_parallel;    // TP collectives (and SP gathers) around it
  std::string_view input;  // the kept tensor FC1 reads, released by its backward; "" if none
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
        uses_(*uses),
        b_("stage" + std::to_string(stage), stage_streams(x_)) {
    for (int c = 0; c < v_; ++c) chunk_layers_.push_back(job.layers_in_chunk(stage, c));
    lp_ = layer_params(job, x_);
    JobSpec no_recompute = job;
    no_recompute.training.recompute = Recompute::kNone;
    kept_ = activation_tensors(job, x_, x_.moe);
    all_tensors_ = activation_tensors(no_recompute, x_, x_.moe);
  }

  Role build(RoleFootprint* footprint);

 private:
  bool first_chunk_here(int chunk) const { return stage_ == 0 && chunk == 0; }
  bool last_chunk_here(int chunk) const { return stage_ == p_ - 1 && chunk == v_ - 1; }
  bool has_input_peer(int chunk) const { return stage_ > 0 || chunk > 0; }
  bool has_output_peer(int chunk) const { return stage_ < p_ - 1 || chunk < v_ - 1; }

  void kernel(const Kernel& k, std::string_view name);
  // The kernel's time, looked up once per signature, counted as one use.
  SimTime kernel_time(const Kernel& k);
  void gemm_fwd(std::int64_t m, std::int64_t n, std::int64_t k, std::string_view name,
                std::int64_t batch = 1);
  // A linear layer's backward: dgrad, then the weight gradient accumulated
  // into main_grad (wgrad_gemm()).
  void gemm_bwd(std::int64_t m, std::int64_t n, std::int64_t k, std::string_view dgrad,
                std::string_view wgrad, std::int64_t batch = 1);
  // The same two GEMMs for a product of activations (the unfused attention's
  // score and context bmm): no weight, so the "wgrad" writes a fresh output.
  void bmm_bwd(std::int64_t m, std::int64_t n, std::int64_t k, std::string_view dgrad,
               std::string_view wgrad, std::int64_t batch);
  // A weight's gradient dW[m,n] = X^T dY: Megatron's
  // gradient_accumulation_fusion (LinearWithGradAccumulationAndAsyncCommunication,
  // drain_embedding_wgrad_compute: wgrad_gemm_accum_fp32/_fp16; TE's
  // fuse_wgrad_accumulation: accumulate=True, out=main_grad) adds it into
  // main_grad, in the grad buffer's type.
  Kernel wgrad_gemm(std::int64_t m, std::int64_t n, std::int64_t k, DType dtype,
                    std::int64_t batch = 1) const {
    return gemm(m, n, k, dtype, batch, grad_dtype());
  }
  void mem(std::string_view name, std::int64_t bytes) { kernel(memory_bound(name, bytes), name); }
  // FP8: Transformer Engine's cast of a GEMM operand of `elements`.
  void fp8_cast(std::string_view name, std::int64_t elements) {
    if (x_.fp8_cast_bytes > 0) mem(name, x_.fp8_cast_bytes * elements);
  }
  // Megatron-Core's fused RoPE (apply_rope_fusion) on the query and key
  // heads: reads and writes them.
  void rope(bool backward) {
    if (x_.rope)
      mem(backward ? "rope_bwd" : "rope_fwd", 2 * kBf16 * x_.T * (x_.hq + x_.hkv) / x_.t * x_.d);
  }
  // FP8 delayed scaling: the amax history of the chunk's FP8 tensors
  // all-reduced (TE's reduce_and_update_fp8_tensors).
  void amax_reduction(int chunk, bool backward);
  // A kernel beside a communication kernel that holds `comm_sms` of the
  // GPU's SMs: it runs on the others, proportionally longer.
  void kernel_beside(const Kernel& k, std::string_view name, int comm_sms);

  // Transformer Engine's userbuffers overlaps (megatron_tp_overlap.cc), each
  // in place of a TP collective and the GEMM Y[m,n] = X[m,k] W[k,n] beside it,
  // as the job's settings for TE's GEMM `g` (Dims::ub_of) have it.
  // All-gather of X (sequence shards) by ring exchange, one chunk of m / t
  // rows multiplied while the next arrives.
  void ring_all_gather_gemm(std::int64_t m, std::int64_t n, std::int64_t k, std::string_view name,
                            UbGemm g);
  // Reduce-scatter of Y: pipeline (the GEMM in num_splits row chunks, each
  // reduce-scattered while the next is computed) or ring exchange (t chunks,
  // each sent to its rank while the next is computed, then summed).
  void gemm_reduce_scatter(std::int64_t m, std::int64_t n, std::int64_t k, std::string_view name,
                           UbGemm g);
  // A whole collective of `bytes` on the tp stream beside one GEMM.
  void bulk_overlap(CollectiveKind kind, std::int64_t bytes, const Kernel& gemm,
                    std::string_view name, int comm_sms);
  // A column-parallel layer's backward under tp_comm_overlap (`layer`:
  // "qkv" or "fc1", whose bulk overlaps are TE's `dgrad` and `wgrad`), from
  // its output gradient `grad_output` (freed here): dgrad beside the input's
  // all-gather, wgrad beside the input gradient's reduce-scatter (sequential
  // where the bulk overlap is off). The input is re-gathered into, and its
  // gradient reduce-scattered from, userbuffers when the bulk overlaps run.
  // Returns the alloc of the input's gradient.
  int column_parallel_backward(std::string_view layer, std::int64_t m, std::int64_t n,
                               std::int64_t k, UbGemm dgrad, UbGemm wgrad, int grad_output);
  // SMs the GEMM beside TE's communication for `g` goes without: a pipeline
  // or bulk kernel's num_sm; a ring exchange's copies run on the copy
  // engines, so only the margin TE sets aside for them (set_sm_margin).
  int ub_held_sms(UbGemm g) const {
    const UbGemmConfig& c = x_.ub_of(g);
    return c.method != UbMethod::kRingExchange || c.set_sm_margin ? c.num_sm : 0;
  }
  // Bytes per element a userbuffer of GEMM `g` carries: FP8 with fp8_buf on
  // an FP8 GEMM, else bf16.
  std::int64_t ub_element_bytes(UbGemm g) const {
    return x_.ub_of(g).fp8_buf && x_.gemm_dtype == DType::kFloat8E4M3 ? 1 : kBf16;
  }
  // Bias-dropout-add: reads two hidden states, writes one, and the mask when
  // there is dropout.
  DType grad_dtype() const { return x_.grad_bytes == kFp32 ? DType::kFloat32 : DType::kBFloat16; }
  std::int64_t residual_bytes() const {
    return kBf16 * 3 * x_.Tsp * x_.h + (x_.hidden_dropout ? x_.Tsp * x_.h : 0);
  }
  int collective(CollectiveKind kind, std::uint16_t stream, int slot, std::int64_t bytes,
                 std::string_view name, DType dtype = DType::kBFloat16);
  void p2p(OpKind kind, std::uint16_t stream, int slot, std::int64_t bytes, std::int32_t tag,
           std::string_view name, std::uint32_t group = 0, Transport transport = Transport::kNccl);
  void record(std::uint16_t stream, std::string_view event);
  void wait(std::uint16_t stream, std::string_view event);
  // A ring exchange beside computation (CP's K/V ring, userbuffers' TP
  // all-gather): `steps` steps; before each but the last, a paired send to
  // `next` and receive from `prev` of `bytes` on `stream`, recorded as
  // `arrived`; meanwhile step(i) computes on the compute stream, which then
  // waits for the arrival.
  struct Ring {
    std::uint16_t stream;
    int next, prev;
    std::int64_t bytes;
    std::int32_t tag;
    std::string_view begin, send, recv, arrived;  // op and event names
    Transport transport = Transport::kNccl;
  };
  void ring_exchange(const Ring& ring, int steps, const std::function<void(int)>& step);
  // One step of `ring` on its stream: a grouped send of `bytes` to `next`
  // and receive from `prev`.
  void pass_on(const Ring& ring);

  // Memory (megatron_memory.cc).
  int alloc(std::int64_t bytes, std::string_view name);
  // `record_streams`: stream_bit()s of the streams the block was recorded on.
  void free(int alloc_op, std::int32_t record_streams = 0);
  void free(const Held& h) { free(h.op, h.record_streams); }
  void free_transient(int alloc_op) {
    if (alloc_op >= 0) free(alloc_op);
  }
  bool is_kept(std::string_view tensor) const;
  // Whether this layer's forward holds `tensor` now.
  bool holds(std::string_view tensor) const;
  // What layer `layer` of `chunk` keeps for its backward: the job's list, or
  // under full recompute its input (the first layer of a recompute group),
  // nothing (the group's others) or everything (block's other layers).
  const std::vector<ActivationTensor>& kept_by(int chunk, int layer) const;
  std::string tensor_name(std::string_view tensor) const;
  // Allocates `tensor` of activation_tensors() for the current layer, named
  // by the pass (kept "act.", recomputed "recomputed.", else a transient).
  void save(std::string_view tensor);
  // Allocates "act.<tensor>" of the embedding or output layer.
  int keep(std::string_view tensor, std::int64_t bytes);
  // Frees a tensor the current layer holds.
  void release(std::string_view tensor);
  // With SP, the all-gathered full-sequence copy of a column-parallel layer's
  // input; -1 without SP.
  int gathered_input(std::string_view tensor);
  void end_layer_forward();
  void check_holds(const std::vector<ActivationTensor>& tensors) const;
  HeldTensors take_saved(int chunk, int mb, int item);

  // TP collectives around a column-parallel (input) and a row-parallel
  // (output) linear layer, forward and backward.
  void tp_input_fwd();
  void tp_output_fwd();
  void tp_output_bwd();
  // `gather_input`: false where the weight gradient is deferred (no input
  // all-gather with SP).
  void tp_input_bwd(bool gather_input = true);

  // Transformer Engine's ring-attention corrections (context parallelism).
  void cp_step_correction(bool backward, int step);
  void cp_out_correction();
  int attention_core(bool backward);
  void attention_kernels(bool backward);
  void unfused_attention_forward(bool rerun);
  int unfused_attention_backward();
  void attention_forward();
  int attention_backward();
  // The layer's forward; kForward ends by allocating its output as
  // `output_name` (the next hidden state).
  void layer_forward(std::string_view output_name);
  // Consumes grad_ (the output's gradient), leaves the input's, allocated as
  // `grad_input_name`, in grad_.
  void layer_backward(std::string_view grad_input_name);
  MlpShape dense_mlp() const {
    return {.prefix = "",
            .tokens = x_.T,
            .batch = 1,
            .f_in = x_.f_in,
            .f_out = x_.f_out,
            .tensor_parallel = true,
            .input = "fc1_input"};
  }
  MlpShape expert_mlp() const {
    return {.prefix = "expert_",
            .tokens = x_.moe_tokens,
            .batch = x_.local_experts,
            .f_in = x_.moe_f_in,
            .f_out = x_.moe_f_out,
            .tensor_parallel = false,
            .input = "expert_input"};
  }
  MlpShape shared_mlp() const {
    return {.prefix = "shared_",
            .tokens = x_.T,
            .batch = 1,
            .f_in = x_.shared_f_in,
            .f_out = x_.shared_f_out,
            .tensor_parallel = true,
            .input = ""};
  }
  // Whether an MLP's linears run userbuffers' overlaps: Transformer Engine
  // registers them for the dense MLP's fc1 and fc2 only.
  bool userbuffers(const MlpShape& m) const {
    return x_.ub && m.tensor_parallel && m.prefix.empty();
  }
  int mlp_forward(const MlpShape& m);
  int mlp_backward(const MlpShape& m, int grad_output);
  void recompute_activation(const MlpShape& m);
  // Runs `f` as selective recompute's re-run before a backward: what it
  // allocates is named "recomputed.<tensor>".
  template <typename F>
  void rerun(F&& f) {
    const Pass pass = pass_;
    pass_ = Pass::kRecompute;
    f();
    pass_ = pass;
  }
  std::vector<int> moe_forward();
  std::vector<int> moe_backward();
  void embedding(bool backward);
  void output_layer(bool backward);
  // defer_embedding_wgrad_compute: whether this output-layer backward defers
  // its weight gradient (Megatron: while wgrad_deferral_limit is 0 or fewer
  // are deferred), and the drain at the pipeline flush.
  bool defers_wgrad() const;
  void drain_deferred_wgrad();

  void forward(int chunk, int mb);
  void backward(int chunk, int mb);
  // Full recompute: re-runs the forward of layers first..last of `chunk`
  // (their group), leaving each one's tensors in regrown_.
  void recompute_group(int chunk, int mb, int first, int last);
  void plan_buckets();
  void bucket_ready(int chunk, int item);
  int bucket_slot(const Bucket& bucket) const;
  int bucket_shards(const Bucket& bucket) const;
  void alloc_grad_shard(const Bucket& bucket);
  void reduce_bucket(const Bucket& bucket);
  void param_gather(bool overlapped);
  void finish_iteration();
  // Frees `h` if it holds an allocation, and empties it.
  void free_if_held(Held* h);

  const JobSpec& job_;
  const KernelModel& km_;
  SlotIds slots_;
  Dims x_;
  int stage_, p_, v_;
  std::vector<int> chunk_layers_;  // transformer layers of each model chunk
  LayerParams lp_;
  std::map<std::string, KernelUse>& uses_;
  RoleBuilder b_;

  // Memory. The tensors each layer keeps (kept_: this job's list; all_tensors_:
  // without recompute, what full recompute re-makes). saved_: what the
  // forward of (chunk, micro-batch, item) left for its backward; item is the
  // layer, kEmbeddingItem or kOutputItem. layer_: what the layer being built
  // holds. hidden_ / grad_: the hidden state (forward) or its gradient
  // (backward) between layers.
  static constexpr int kEmbeddingItem = -1;
  static constexpr int kOutputItem = -2;
  // The last chunk's first bucket: dense, it holds the output layer's weight
  // (plan_buckets lists the output layer first, dense buckets first).
  static constexpr int kOutputBucket = 0;
  enum class Pass { kForward, kRecompute };
  std::vector<ActivationTensor> kept_, all_tensors_;
  const std::vector<ActivationTensor> nothing_;
  const std::vector<ActivationTensor>* keeping_ = &kept_;  // the current layer's kept_by()
  std::map<int, HeldTensors> regrown_;  // full recompute: the re-run group's layers
  std::map<std::tuple<int, int, int>, HeldTensors> saved_;
  HeldTensors layer_;
  Pass pass_ = Pass::kForward;
  Held hidden_, grad_;
  int recomputed_output_ = -1;  // full recompute: the re-run layer's output
  int unfused_context_ = -1;    // FP8, unfused attention: the bf16 context until the projection
  // Buckets per chunk, and which bucket closes after backward item i of the
  // chunk (items: output layer, layers last to first, embedding).
  std::vector<std::vector<Bucket>> buckets_;
  std::vector<std::vector<std::vector<int>>> closes_after_;
  std::vector<std::vector<int>> bucket_of_layer_;  // [chunk][layer]: dense bucket for param gather
  int num_buckets_ = 0;
  std::vector<bool> gathered_;  // per bucket id: params waited for already
  // The deferred output-layer weight gradients: each micro-batch's layer
  // input and logits gradient, held until drain_deferred_wgrad().
  struct DeferredWgrad {
    Held input, grad_logits;
  };
  std::vector<DeferredWgrad> deferred_wgrad_;
  // deallocate_pipeline_outputs false: each sent output by (chunk,
  // micro-batch), held until its backward (Megatron's output_tensors lists).
  // What the schedule's local `output_tensor` still names after that
  // backward: 1F1B's last backpropagated output until the next step rebinds
  // it (stale_output_), the interleaved schedule's last forward output until
  // the schedule returns (last_output_, of last_forward_).
  std::map<std::pair<int, int>, Held> sent_outputs_;
  Held stale_output_, last_output_;
  std::pair<int, int> last_forward_{-1, -1};
  std::uint32_t next_group_ = 1;
  std::int64_t optimizer_params_ = 0;
  std::vector<int> grad_shards_;  // Apex's reduce-scattered shards, freed after the step
};

}  // namespace prism::megatron
