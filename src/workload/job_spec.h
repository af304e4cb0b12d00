// JobSpec: one Megatron-style training job as a user would configure
// Megatron-LM or NeMo. Field names are Megatron's argument names (without the
// dashes), so values copy over from real configs. The YAML form
// (workload/job_yaml.h, docs/job-spec.md) has the sections model, training,
// parallelism, cluster and software (workload/software.h).
//
// The data-parallel size is not given: it follows from the GPU count,
//   dp = num_gpus / (tp * pp * cp),
// and, for the experts of MoE layers, expert_dp = num_gpus / (etp * ep * pp),
// as Megatron-Core derives them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "net/cluster_spec.h"
#include "util/status.h"
#include "workload/software.h"
#include "workload/tp_overlap_cfg.h"

namespace prism {

enum class Activation : std::uint8_t { kGelu, kSwiglu, kSquaredRelu };
enum class Normalization : std::uint8_t { kLayerNorm, kRmsNorm };
enum class Precision : std::uint8_t { kBf16, kFp8 };
enum class Recompute : std::uint8_t { kNone, kSelective, kFull };
// Megatron's --recompute-method, with full recompute: uniform checkpoints the
// input of every group of recompute_num_layers consecutive layers of a model
// chunk and re-runs the whole group in the backward; block re-runs the first
// recompute_num_layers layers of each chunk and keeps the others'
// activations. kUnset: not given (full recompute is then uniform, 1 layer).
enum class RecomputeMethod : std::uint8_t { kUnset, kUniform, kBlock };
// Megatron-Core's --recompute-modules (TransformerConfig.recompute_modules,
// 0.13.0): what selective recompute re-runs in the backward. core_attn the
// core attention (Megatron's default, the only one before 0.13.0); mlp a
// dense layer's MLP; moe_act the routed experts' activation; layernorm the
// norms that are modules of their own (in the Transformer Engine layer spec
// only an MoE layer's pre-MLP norm: the others are fused into the next
// linear); shared_experts the MoE shared expert; moe the whole MoE layer;
// mla_up_proj multi-latent attention's up-projections (no MLA here).
enum class RecomputeModule : std::uint8_t {
  kCoreAttn,
  kMoeAct,
  kLayernorm,
  kMlaUpProj,
  kMlp,
  kMoe,
  kSharedExperts,
};
// A set of them, one bit each.
struct RecomputeModules {
  std::uint8_t bits = 1u << static_cast<int>(RecomputeModule::kCoreAttn);
  bool has(RecomputeModule m) const { return (bits >> static_cast<int>(m)) & 1u; }
  void add(RecomputeModule m) { bits |= static_cast<std::uint8_t>(1u << static_cast<int>(m)); }
  bool operator==(const RecomputeModules&) const = default;
};
// Megatron's --attention-backend. flash, fused (cuDNN) and auto run a fused
// flash-style kernel; unfused and local run Megatron's own
// DotProductAttention: two batched GEMMs around a materialized softmax, as
// every Megatron release before fused attention did.
enum class AttentionBackend : std::uint8_t { kAuto, kFlash, kFused, kUnfused, kLocal };
// Megatron's --fp8-recipe: how Transformer Engine scales FP8 tensors. delayed
// and tensorwise keep one scale per tensor; blockwise (1x128 activations,
// 128x128 weights) and mxfp8 (1x32, Blackwell only) one per block.
enum class Fp8Recipe : std::uint8_t { kDelayed, kTensorwise, kBlockwise, kMxfp8 };
// Megatron's --cross-entropy-fusion-impl: Megatron-Core's own fused kernel
// (native) or Transformer Engine's parallel_cross_entropy (te).
enum class CrossEntropyFusionImpl : std::uint8_t { kNative, kTe };
// Which distributed Adam runs the step: Megatron-Core's DistributedOptimizer
// (megatron; NeMo's optim.name mcore_distributed_optim) or Apex's
// DistributedFusedAdam as NeMo's distributed_fused_adam configures it
// (apex_distributed_fused_adam: contiguous grad buffer, fp32 Adam moments,
// bf16 params with 16-bit remainders instead of fp32 master weights).
enum class OptimizerImpl : std::uint8_t { kMegatron, kApexDistributedFusedAdam };

// Megatron-Core's --cuda-graph-scope (TransformerConfig.cuda_graph_scope,
// 0.12.0 to 0.14.0): full captures whole transformer layers, attn only their
// attention part (external graphs), full_iteration the whole forward and
// backward of an iteration (enable_cuda_graph, 0.14.0).
enum class CudaGraphScope : std::uint8_t { kFull, kAttn, kFullIteration };

std::string_view to_string(Activation a);
std::string_view to_string(Normalization n);
std::string_view to_string(Precision p);
std::string_view to_string(Recompute r);
std::string_view to_string(RecomputeMethod m);
std::string_view to_string(RecomputeModule m);
std::string to_string(RecomputeModules m);  // "core_attn, mlp"
// The set of Megatron-Core's module names; an unknown name is refused with
// the list of known ones.
Result<RecomputeModules> parse_recompute_modules(const std::vector<std::string>& names);
std::string_view to_string(AttentionBackend a);
std::string_view to_string(Fp8Recipe r);
std::string_view to_string(CrossEntropyFusionImpl c);
std::string_view to_string(OptimizerImpl o);
std::string_view to_string(CudaGraphScope c);
inline bool is_unfused(AttentionBackend a) {
  return a == AttentionBackend::kUnfused || a == AttentionBackend::kLocal;
}

struct ModelSpec {
  std::string preset;  // the preset it started from, or empty
  int num_layers = 0;
  int hidden_size = 0;
  int ffn_hidden_size = 0;  // 0: 4 * hidden_size
  int num_attention_heads = 0;
  int num_query_groups = 0;  // 0: num_attention_heads (multi-head attention)
  int kv_channels = 0;       // 0: hidden_size / num_attention_heads
  int vocab_size = 0;        // as trained (Megatron pads it to a multiple of 128 * tp)
  Activation activation = Activation::kGelu;
  Normalization normalization = Normalization::kLayerNorm;
  bool untie_embeddings_and_output_weights = false;
  // Mixture of experts; num_moe_experts == 0 is a dense model.
  int num_moe_experts = 0;
  int moe_router_topk = 2;
  int moe_ffn_hidden_size = 0;                  // 0: ffn_hidden_size
  int moe_shared_expert_intermediate_size = 0;  // 0: no shared expert
  // Dropout probabilities (Megatron's --hidden-dropout, --attention-dropout;
  // TransformerConfig fields). hidden_dropout is the embedding's and each
  // bias-dropout-add's; attention_dropout the softmax's. At 0 ATen's dropout
  // returns its input: no mask, no copy.
  double hidden_dropout = 0.1;
  double attention_dropout = 0.1;

  // Resolved values (defaults applied).
  int ffn() const { return ffn_hidden_size > 0 ? ffn_hidden_size : 4 * hidden_size; }
  int query_groups() const { return num_query_groups > 0 ? num_query_groups : num_attention_heads; }
  int head_dim() const { return kv_channels > 0 ? kv_channels : hidden_size / num_attention_heads; }
  int moe_ffn() const { return moe_ffn_hidden_size > 0 ? moe_ffn_hidden_size : ffn(); }
  bool is_moe() const { return num_moe_experts > 0; }
  bool gated() const { return activation == Activation::kSwiglu; }
  // Megatron pads the vocabulary to a multiple of make_vocab_size_divisible_by
  // (128) times the tensor-parallel size, so each TP shard is equal and aligned.
  int padded_vocab_size(int tp) const {
    const int multiple = 128 * tp;
    return (vocab_size + multiple - 1) / multiple * multiple;
  }
};

struct TrainingSpec {
  // Selective recompute re-runs module m (its activations are not kept).
  bool recomputes(RecomputeModule m) const {
    return recompute == Recompute::kSelective && recompute_modules.has(m);
  }
  int seq_length = 2048;
  int micro_batch_size = 1;
  int global_batch_size = 0;  // 0: micro_batch_size * dp (one micro-batch per rank)
  Precision precision = Precision::kBf16;
  Recompute recompute = Recompute::kNone;  // Megatron's --recompute-granularity (none: not given)
  RecomputeMethod recompute_method = RecomputeMethod::kUnset;
  int recompute_num_layers = 0;  // 0: not given (uniform: 1)
  // With selective recompute: which modules (recomputes() says whether one is).
  RecomputeModules recompute_modules;
  AttentionBackend attention_backend = AttentionBackend::kAuto;
  bool use_distributed_optimizer = false;
  bool overlap_grad_reduce = false;
  bool overlap_param_gather = false;
  // Gradient bucket size in parameters (Megatron's --ddp-bucket-size); 0:
  // Megatron's default, max(40,000,000, 1,000,000 * dp).
  std::int64_t bucket_size = 0;
  // Megatron's DDP grad_reduce_in_fp32 (--accumulate-allreduce-grads-in-fp32;
  // --grad-reduce-in-bf16 turns it off): the main-gradient buffer, and so the
  // data-parallel reduction, in fp32 rather than bf16. Megatron-LM's
  // validate_args turns it on for every bf16 run.
  bool grad_reduce_in_fp32 = true;
  Fp8Recipe fp8_recipe = Fp8Recipe::kDelayed;  // with precision fp8
  // Delayed scaling's amax history per FP8 tensor (Megatron's
  // --fp8-amax-history-len, TE's DelayedScaling.amax_history_len; Megatron's
  // default 1, NeMo's recipes 1024): what each scale update rolls and reads.
  int fp8_amax_history_len = 1;
  // The linear layers' weights are FP8 tensors (Megatron's --fp8-param-gather,
  // TransformerConfig.fp8_param): no bf16 copy, gathered in FP8.
  bool fp8_param_gather = false;
  bool cross_entropy_loss_fusion = false;
  CrossEntropyFusionImpl cross_entropy_fusion_impl = CrossEntropyFusionImpl::kNative;
  // Megatron's --defer-embedding-wgrad-compute: the last pipeline stage keeps
  // each micro-batch's output-layer input and logits gradient and computes
  // the output layer's weight-gradient GEMMs at the pipeline flush
  // (drain_embedding_wgrad_compute); --wgrad-deferral-limit: at most that many
  // micro-batches deferred (0: all), the later ones computed at once.
  bool defer_embedding_wgrad_compute = false;
  int wgrad_deferral_limit = 0;
  // ModelParallelConfig.deallocate_pipeline_outputs: a stage frees the
  // output it sent to the next stage right after the send (schedules.py
  // deallocate_output_tensor) rather than holding it until that
  // micro-batch's backward. No Megatron-LM argument: its
  // core_transformer_config_from_args always sets it; NeMo 1.0 leaves
  // ModelParallelConfig's False.
  bool deallocate_pipeline_outputs = true;
  // The distributed optimizer's implementation (with use_distributed_optimizer);
  // grad_reduce_in_fp32 is then Apex's grad_sync_dtype (fp32 or bf16).
  OptimizerImpl optimizer_impl = OptimizerImpl::kMegatron;
  // CUDA graphs: Megatron-Core's own per-layer graphs (--enable-cuda-graph,
  // TransformerConfig.enable_cuda_graph) or Transformer Engine's
  // make_graphed_callables (--external-cuda-graph), and what they capture
  // (--cuda-graph-scope). What they change in the model: docs/simulate.md.
  bool enable_cuda_graph = false;
  bool external_cuda_graph = false;
  CudaGraphScope cuda_graph_scope = CudaGraphScope::kFull;
};

struct ParallelSpec {
  int tensor_model_parallel_size = 1;
  bool sequence_parallel = false;  // with tp == 1 Megatron turns it off; so does apply_job_defaults
  int pipeline_model_parallel_size = 1;
  int virtual_pipeline_model_parallel_size = 1;  // model chunks per stage; 1: not interleaved
  int context_parallel_size = 1;
  int expert_model_parallel_size = 1;
  int expert_tensor_parallel_size = 0;  // 0: tensor_model_parallel_size
  // Uneven pipelines (Megatron's --decoder-first/last-pipeline-num-layers):
  // layers on the first / last stage; the other stages share the rest
  // evenly. 0: an even split.
  int decoder_first_pipeline_num_layers = 0;
  int decoder_last_pipeline_num_layers = 0;
  // Megatron's --num-layers-per-virtual-pipeline-stage: the interleaving
  // given by layers per model chunk instead of chunks per stage;
  // apply_job_defaults turns it into virtual_pipeline_model_parallel_size.
  // 0: not given.
  int num_layers_per_virtual_pipeline_stage = 0;
  // Megatron-Core's --account-for-embedding-in-pipeline-split and
  // --account-for-loss-in-pipeline-split: the embedding (the loss) counts as
  // one layer of the even split, so the model's first (last) chunk holds one
  // transformer layer fewer than the others. Not with the uneven split.
  bool account_for_embedding_in_pipeline_split = false;
  bool account_for_loss_in_pipeline_split = false;
  // Megatron's --tp-comm-overlap: Transformer Engine's userbuffers overlap
  // the TP all-gathers and reduce-scatters (sequence parallel) with the
  // GEMMs beside them; the four switches are Megatron's
  // --disable-tp-comm-overlap-ag/-rs and --disable-tp-comm-bulk-dgrad/-wgrad
  // (TransformerConfig's tp_comm_overlap_ag, ...; on by default).
  bool tp_comm_overlap = false;
  bool tp_comm_overlap_ag = true;
  bool tp_comm_overlap_rs = true;
  bool tp_comm_bulk_dgrad = true;
  bool tp_comm_bulk_wgrad = true;
  // Megatron's --tp-comm-overlap-cfg: Transformer Engine's userbuffers
  // settings per GEMM (method, SMs, splits), over TE's defaults.
  TpCommOverlapCfg tp_comm_overlap_cfg;
};

struct JobSpec {
  std::string name;  // from `name:` or the file name
  // Without a `model` section a job describes the user's own program by its
  // world size, cluster and parallel sizes; its graph comes from capturing
  // the program (prism emulate), not from the Megatron builder.
  bool has_model = true;
  ModelSpec model;
  TrainingSpec training;
  ParallelSpec parallelism;
  ClusterSpec cluster;    // sized: cluster.num_gpus() == num_gpus rounded up to whole nodes
  SoftwareSpec software;  // the Megatron-Core / TE releases; unset: no release check
  int num_gpus = 0;

  int tp() const { return parallelism.tensor_model_parallel_size; }
  int pp() const { return parallelism.pipeline_model_parallel_size; }
  int vpp() const { return parallelism.virtual_pipeline_model_parallel_size; }
  int cp() const { return parallelism.context_parallel_size; }
  int ep() const { return parallelism.expert_model_parallel_size; }
  int etp() const {
    return parallelism.expert_tensor_parallel_size > 0 ? parallelism.expert_tensor_parallel_size
                                                       : tp();
  }
  int dp() const { return num_gpus / (tp() * pp() * cp()); }
  int expert_dp() const { return num_gpus / (etp() * ep() * pp()); }
  // Transformer layers of model chunk `chunk` (0 to vpp - 1) of pipeline
  // stage `stage`, as Megatron-Core's get_num_layers_to_build places them:
  // the stage's share (even, uneven with decoder_first/last_pipeline_num_layers,
  // or counting the embedding and loss as layers) split evenly over its chunks.
  int layers_in_chunk(int stage, int chunk) const;
  // Transformer layers of pipeline stage `stage` (over all its model chunks).
  int layers_on_stage(int stage) const;
  // The layers the even split divides over the stages: num_layers, plus one
  // each for an embedding and a loss accounted for in the split.
  int layers_in_split() const {
    return model.num_layers + (parallelism.account_for_embedding_in_pipeline_split ? 1 : 0) +
           (parallelism.account_for_loss_in_pipeline_split ? 1 : 0);
  }
  int num_microbatches() const {
    return training.global_batch_size / (training.micro_batch_size * dp());
  }
  std::int64_t bucket_params() const {
    return training.bucket_size > 0 ? training.bucket_size
                                    : std::max<std::int64_t>(40'000'000, 1'000'000LL * dp());
  }
};

// Names of the model presets, in a fixed order (gpt3-175b, llama2-7b, ...).
const std::vector<std::string_view>& model_preset_names();
// A model preset, or not_found naming the presets.
Result<ModelSpec> model_preset(std::string_view name);

// Applies the defaults that depend on other fields, as Megatron's
// validate_args does: global_batch_size 0 becomes micro_batch_size * dp, and
// sequence_parallel is turned off when tensor_model_parallel_size is 1.
// Call it before validate_job (parse_job_yaml does).
void apply_job_defaults(JobSpec* job);

// Every impossible combination, with the reason. The message starts with the
// path of the field most at fault and names every field involved with its
// value ("model.num_attention_heads: 96 is not divisible by
// parallelism.tensor_model_parallel_size 5"), so a parser can point at the
// place the value came from. Defaults must already be applied.
Status validate_job(const JobSpec& job);

}  // namespace prism
