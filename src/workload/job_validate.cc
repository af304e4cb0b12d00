// validate_job(): every impossible combination of a job spec, with the
// fields and values that make it so (job_spec.h).
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "compute/gpu_spec.h"
#include "workload/job_limits.h"
#include "workload/job_spec.h"
#include "workload/software.h"

namespace prism {
namespace {

using namespace job_limits;

// ---------------------------------------------------------------------------
// Validation helpers. Every message starts with the path of the field most at
// fault; values are printed next to the field they belong to.

Status fail(std::string_view field, std::string msg) {
  return Status::invalid_argument(fmt::format("{}: {}", field, msg));
}

Status check_at_least(std::string_view field, std::int64_t v, std::int64_t lo, std::int64_t hi) {
  if (v < lo) return fail(field, fmt::format("must be >= {} (got {})", lo, v));
  if (v > hi) return fail(field, fmt::format("must be at most {} (got {})", hi, v));
  return Status::ok();
}

Status check_divisible(std::string_view field, std::int64_t v, std::string_view by_name,
                       std::int64_t by) {
  if (v % by != 0) return fail(field, fmt::format("{} is not divisible by {} {}", v, by_name, by));
  return Status::ok();
}

Status validate_sizes(const JobSpec& j) {
  const ModelSpec& m = j.model;
  const TrainingSpec& t = j.training;
  const ParallelSpec& p = j.parallelism;
  const std::pair<std::string_view, std::pair<std::int64_t, std::int64_t>> required[] = {
      {"model.num_layers", {m.num_layers, kMaxLayers}},
      {"model.hidden_size", {m.hidden_size, kMaxDim}},
      {"model.num_attention_heads", {m.num_attention_heads, kMaxDim}},
      {"model.vocab_size", {m.vocab_size, kMaxVocab}},
      {"training.seq_length", {t.seq_length, kMaxSeq}},
      {"training.micro_batch_size", {t.micro_batch_size, kMaxBatch}},
      {"training.global_batch_size", {t.global_batch_size, kMaxBatch}},
      {"parallelism.tensor_model_parallel_size", {p.tensor_model_parallel_size, kMaxGpus}},
      {"parallelism.pipeline_model_parallel_size", {p.pipeline_model_parallel_size, kMaxGpus}},
      {"parallelism.virtual_pipeline_model_parallel_size",
       {p.virtual_pipeline_model_parallel_size, kMaxLayers}},
      {"parallelism.context_parallel_size", {p.context_parallel_size, kMaxGpus}},
      {"parallelism.expert_model_parallel_size", {p.expert_model_parallel_size, kMaxGpus}},
      {"cluster.num_gpus", {j.num_gpus, kMaxGpus}},
  };
  for (const auto& [field, v] : required)
    PRISM_RETURN_IF_ERROR(check_at_least(field, v.first, 1, v.second));
  // 0 means "the default" for these.
  const std::pair<std::string_view, std::pair<std::int64_t, std::int64_t>> optional[] = {
      {"model.ffn_hidden_size", {m.ffn_hidden_size, 4 * kMaxDim}},
      {"model.num_query_groups", {m.num_query_groups, kMaxDim}},
      {"model.kv_channels", {m.kv_channels, kMaxDim}},
      {"model.num_moe_experts", {m.num_moe_experts, kMaxExperts}},
      {"model.moe_ffn_hidden_size", {m.moe_ffn_hidden_size, 4 * kMaxDim}},
      {"model.moe_shared_expert_intermediate_size",
       {m.moe_shared_expert_intermediate_size, 4 * kMaxDim}},
      {"parallelism.expert_tensor_parallel_size", {p.expert_tensor_parallel_size, kMaxGpus}},
      {"training.bucket_size", {t.bucket_size, std::int64_t{1} << 40}},
  };
  for (const auto& [field, v] : optional)
    PRISM_RETURN_IF_ERROR(check_at_least(field, v.first, 0, v.second));
  return Status::ok();
}

Status validate_cluster_fit(const JobSpec& j) {
  const ClusterSpec& c = j.cluster;
  const Status s = validate_cluster(c);  // "node.gpus: ..."
  if (!s.is_ok()) return Status::invalid_argument(fmt::format("cluster.{}", s.message()));
  if (j.num_gpus >= c.gpus_per_node && j.num_gpus % c.gpus_per_node != 0)
    return fail("cluster.num_gpus",
                fmt::format("{} is not a whole number of {}-GPU nodes (cluster.node.gpus)",
                            j.num_gpus, c.gpus_per_node));
  if (j.num_gpus > c.num_gpus())
    return fail("cluster.num_gpus", fmt::format("{} GPUs do not fit in the cluster's {} ({} nodes)",
                                                j.num_gpus, c.num_gpus(), c.num_nodes));
  return Status::ok();
}

Status validate_grid(const JobSpec& j) {
  const std::int64_t model_size = std::int64_t{j.tp()} * j.pp() * j.cp();
  if (j.num_gpus % model_size != 0)
    return fail("cluster.num_gpus",
                fmt::format("{} is not divisible by parallelism.tensor_model_parallel_size {} * "
                            "pipeline_model_parallel_size {} * context_parallel_size {} = {}",
                            j.num_gpus, j.tp(), j.pp(), j.cp(), model_size));
  const std::int64_t expert_size = std::int64_t{j.etp()} * j.ep() * j.pp();
  if (j.num_gpus % expert_size != 0)
    return fail("cluster.num_gpus",
                fmt::format("{} is not divisible by parallelism.expert_tensor_parallel_size {} * "
                            "expert_model_parallel_size {} * pipeline_model_parallel_size {} = {} "
                            "(the expert data-parallel groups)",
                            j.num_gpus, j.etp(), j.ep(), j.pp(), expert_size));
  return Status::ok();
}

Status validate_attention(const JobSpec& j) {
  const ModelSpec& m = j.model;
  const int tp = j.tp();
  PRISM_RETURN_IF_ERROR(check_divisible("model.num_attention_heads", m.num_attention_heads,
                                        "parallelism.tensor_model_parallel_size", tp));
  if (m.num_query_groups > 0) {
    PRISM_RETURN_IF_ERROR(check_divisible("model.num_attention_heads", m.num_attention_heads,
                                          "model.num_query_groups", m.num_query_groups));
    PRISM_RETURN_IF_ERROR(check_divisible("model.num_query_groups", m.num_query_groups,
                                          "parallelism.tensor_model_parallel_size", tp));
  }
  if (m.kv_channels == 0 && m.hidden_size % m.num_attention_heads != 0)
    return fail("model.hidden_size",
                fmt::format("{} is not divisible by model.num_attention_heads {} (give "
                            "model.kv_channels for a head size of its own)",
                            m.hidden_size, m.num_attention_heads));
  return Status::ok();
}

Status validate_mlp(const JobSpec& j) {
  const ModelSpec& m = j.model;
  if (m.ffn() % j.tp() != 0)
    return fail("model.ffn_hidden_size",
                fmt::format("{} is not divisible by parallelism.tensor_model_parallel_size {}",
                            m.ffn(), j.tp()));
  if (!m.is_moe()) {
    if (j.ep() > 1)
      return fail("parallelism.expert_model_parallel_size",
                  fmt::format("{} needs an MoE model (model.num_moe_experts is 0)", j.ep()));
    return Status::ok();
  }
  PRISM_RETURN_IF_ERROR(check_divisible("model.num_moe_experts", m.num_moe_experts,
                                        "parallelism.expert_model_parallel_size", j.ep()));
  if (m.moe_router_topk < 1 || m.moe_router_topk > m.num_moe_experts)
    return fail("model.moe_router_topk",
                fmt::format("must be in [1, model.num_moe_experts {}] (got {})", m.num_moe_experts,
                            m.moe_router_topk));
  if (m.moe_ffn() % j.etp() != 0)
    return fail("model.moe_ffn_hidden_size",
                fmt::format("{} is not divisible by parallelism.expert_tensor_parallel_size {}",
                            m.moe_ffn(), j.etp()));
  PRISM_RETURN_IF_ERROR(check_divisible("model.moe_shared_expert_intermediate_size",
                                        m.moe_shared_expert_intermediate_size,
                                        "parallelism.tensor_model_parallel_size", j.tp()));
  // Megatron-Core: "When using expert parallelism and tensor parallelism,
  // sequence parallelism must be used."
  if (j.ep() > 1 && j.tp() > 1 && !j.parallelism.sequence_parallel)
    return fail("parallelism.sequence_parallel",
                fmt::format("must be true with expert_model_parallel_size {} and "
                            "tensor_model_parallel_size {} (Megatron-Core MoE)",
                            j.ep(), j.tp()));
  return Status::ok();
}

Status validate_batch(const JobSpec& j) {
  const TrainingSpec& t = j.training;
  const std::int64_t per_step = std::int64_t{t.micro_batch_size} * j.dp();
  if (t.global_batch_size % per_step != 0)
    return fail("training.global_batch_size",
                fmt::format("{} is not divisible by training.micro_batch_size {} * data-parallel "
                            "size {} = {}",
                            t.global_batch_size, t.micro_batch_size, j.dp(), per_step));
  return Status::ok();
}

// Megatron's uneven pipelines: the first and/or last stage take the given
// number of layers, the other stages an equal share of the rest; with
// interleaving each stage's share splits evenly over its chunks
// (Megatron-Core's TransformerConfig checks the same).
Status validate_uneven_pipeline(const JobSpec& j) {
  const ParallelSpec& p = j.parallelism;
  const int first = p.decoder_first_pipeline_num_layers;
  const int last = p.decoder_last_pipeline_num_layers;
  const std::string_view field = first > 0 ? "parallelism.decoder_first_pipeline_num_layers"
                                           : "parallelism.decoder_last_pipeline_num_layers";
  for (const auto& [name, v] : {std::pair{"parallelism.decoder_first_pipeline_num_layers", first},
                                std::pair{"parallelism.decoder_last_pipeline_num_layers", last}}) {
    if (v < 0) return fail(name, fmt::format("{} must be at least 0", v));
    if (v > 0 && j.pp() == 1) return fail(name, "needs pipeline_model_parallel_size > 1 (got 1)");
  }
  for (const auto& [name, on] : {std::pair{"parallelism.account_for_embedding_in_pipeline_split",
                                           p.account_for_embedding_in_pipeline_split},
                                 std::pair{"parallelism.account_for_loss_in_pipeline_split",
                                           p.account_for_loss_in_pipeline_split}}) {
    if (on)
      return fail(name, fmt::format("cannot be combined with {} (Megatron-Core's uneven split "
                                    "places the embedding and loss with the first and last "
                                    "stages' layers)",
                                    field));
  }
  if (p.num_layers_per_virtual_pipeline_stage > 0)
    return fail("parallelism.num_layers_per_virtual_pipeline_stage",
                fmt::format("cannot be combined with {}; give "
                            "parallelism.virtual_pipeline_model_parallel_size instead",
                            field));
  const int fixed = (first > 0 ? 1 : 0) + (last > 0 ? 1 : 0);
  const int rest = j.model.num_layers - first - last;
  const int others = j.pp() - fixed;
  if (rest < 0 || (others == 0 && rest != 0) || (others > 0 && (rest <= 0 || rest % others != 0)))
    return fail(field,
                fmt::format("model.num_layers {} minus the first ({}) and last ({}) stages' "
                            "layers leaves {}, which does not divide evenly over the other {} "
                            "stages",
                            j.model.num_layers, first, last, rest, others));
  if (j.vpp() == 1) return Status::ok();
  struct Share {
    std::string_view field, stage;
    int layers;
  };
  const Share shares[] = {
      {"parallelism.decoder_first_pipeline_num_layers", "the first stage", first},
      {"parallelism.decoder_last_pipeline_num_layers", "the last stage", last},
      {field, "each of the other stages", others > 0 ? rest / others : 0}};
  for (const Share& s : shares) {
    if (s.layers % j.vpp() != 0)
      return fail(s.field, fmt::format("{} layers on {}, not divisible by "
                                       "parallelism.virtual_pipeline_model_parallel_size {} (the "
                                       "model chunks of a stage hold as many layers each)",
                                       s.layers, s.stage, j.vpp()));
  }
  return Status::ok();
}

// The even split: num_layers (plus the embedding and loss when they are
// accounted for) over pp stages and vpp chunks each; --num-layers-per-
// virtual-pipeline-stage, when given, must agree with the chunks.
Status validate_even_pipeline(const JobSpec& j) {
  const ParallelSpec& p = j.parallelism;
  const int layers = j.layers_in_split();
  const std::string accounted =
      layers == j.model.num_layers
          ? std::string()
          : fmt::format(" (+{} for the embedding and loss accounted for in the split)",
                        layers - j.model.num_layers);
  if (layers % j.pp() != 0)
    return fail("model.num_layers",
                fmt::format("{}{} is not divisible by parallelism.pipeline_model_parallel_size {}",
                            j.model.num_layers, accounted, j.pp()));
  const int per_stage = layers / j.pp();
  const int per_chunk = p.num_layers_per_virtual_pipeline_stage;
  if (per_chunk < 0)
    return fail("parallelism.num_layers_per_virtual_pipeline_stage",
                fmt::format("{} must be at least 0", per_chunk));
  if (per_chunk > 0 && (per_stage % per_chunk != 0 || per_stage / per_chunk != j.vpp()))
    return fail("parallelism.num_layers_per_virtual_pipeline_stage",
                fmt::format("{} does not split a stage's {} layers{} into "
                            "parallelism.virtual_pipeline_model_parallel_size {} chunks",
                            per_chunk, per_stage, accounted, j.vpp()));
  if (per_stage % j.vpp() != 0)
    return fail("model.num_layers",
                fmt::format("{} layers{} over parallelism.pipeline_model_parallel_size {} give {} "
                            "per stage, not divisible by virtual_pipeline_model_parallel_size {}",
                            j.model.num_layers, accounted, j.pp(), per_stage, j.vpp()));
  // A chunk of only the embedding or the loss: Megatron-Core builds it, the
  // builder's chain of hidden states needs a layer in every chunk.
  const std::pair<std::string_view, int> ends[] = {
      {"parallelism.account_for_embedding_in_pipeline_split", j.layers_in_chunk(0, 0)},
      {"parallelism.account_for_loss_in_pipeline_split",
       j.layers_in_chunk(j.pp() - 1, j.vpp() - 1)}};
  for (const auto& [name, chunk_layers] : ends) {
    if (chunk_layers < 1)
      return fail(name, fmt::format("leaves a model chunk with no transformer layer ({} per "
                                    "chunk); PrismLLM needs at least one in every chunk",
                                    per_stage / j.vpp()));
  }
  return Status::ok();
}

Status validate_pipeline(const JobSpec& j) {
  const ParallelSpec& p = j.parallelism;
  if (j.cp() > 1 && is_unfused(j.training.attention_backend))
    return fail("training.attention_backend",
                fmt::format("{} cannot run context parallelism (context_parallel_size {}): "
                            "Megatron's ring attention needs a fused backend (flash, fused, auto)",
                            to_string(j.training.attention_backend), j.cp()));
  if (j.vpp() > 1 && j.pp() == 1)
    return fail("parallelism.virtual_pipeline_model_parallel_size",
                fmt::format("{} needs pipeline_model_parallel_size > 1 (got 1)", j.vpp()));
  const bool uneven =
      p.decoder_first_pipeline_num_layers != 0 || p.decoder_last_pipeline_num_layers != 0;
  PRISM_RETURN_IF_ERROR(uneven ? validate_uneven_pipeline(j) : validate_even_pipeline(j));
  if (j.vpp() > 1 && j.num_microbatches() % j.pp() != 0)
    return fail("training.global_batch_size",
                fmt::format("{} gives {} micro-batches, not divisible by "
                            "parallelism.pipeline_model_parallel_size {} (the interleaved "
                            "schedule needs whole rounds)",
                            j.training.global_batch_size, j.num_microbatches(), j.pp()));
  return Status::ok();
}

// Bounded work: micro-batches per iteration times the layers of the fullest
// stage, refused up front above kMaxLayerPasses (docs/job-spec.md).
Status validate_work(const JobSpec& j) {
  int layers = 0;
  for (const int stage : {0, j.pp() / 2, j.pp() - 1})
    layers = std::max(layers, j.layers_on_stage(stage));
  const std::int64_t passes = std::int64_t{j.num_microbatches()} * std::max(layers, 1);
  if (passes <= kMaxLayerPasses) return Status::ok();
  return fail("training.global_batch_size",
              fmt::format("{} / (micro_batch_size {} x data-parallel size {}) = {} micro-batches "
                          "per iteration, x {} layers on the fullest pipeline stage = {} layer "
                          "passes, more than the {} a simulation unrolls (it would take minutes "
                          "and gigabytes); lower the global batch: the iteration time grows in "
                          "proportion to the micro-batches",
                          j.training.global_batch_size, j.training.micro_batch_size, j.dp(),
                          j.num_microbatches(), layers, passes, kMaxLayerPasses));
}

Status validate_sequence(const JobSpec& j) {
  const TrainingSpec& t = j.training;
  if (j.cp() > 1) {
    // The causal load-balanced split cuts the sequence into 2 * cp chunks.
    if (t.seq_length % (2 * std::int64_t{j.cp()}) != 0)
      return fail("training.seq_length",
                  fmt::format("{} is not divisible by 2 * parallelism.context_parallel_size {} "
                              "(the causal load-balanced split)",
                              t.seq_length, j.cp()));
  }
  if (j.parallelism.sequence_parallel && j.tp() > 1) {
    // Sequence parallelism splits each CP rank's sequence across TP ranks.
    const int local = t.seq_length / j.cp();
    if (local % j.tp() != 0)
      return fail("training.seq_length",
                  fmt::format("{} / parallelism.context_parallel_size {} = {} is not divisible by "
                              "tensor_model_parallel_size {} (sequence_parallel)",
                              t.seq_length, j.cp(), local, j.tp()));
  }
  return Status::ok();
}

// torch.nn.Dropout: "dropout probability has to be between 0 and 1".
Status validate_dropout(const ModelSpec& m) {
  for (const auto& [field, p] : {std::pair{"model.hidden_dropout", m.hidden_dropout},
                                 std::pair{"model.attention_dropout", m.attention_dropout}}) {
    if (!(p >= 0.0 && p <= 1.0))
      return fail(field, fmt::format("{} is not a probability in [0, 1] (torch.nn.Dropout)", p));
  }
  return Status::ok();
}

// Megatron's TransformerConfig rules for --recompute-method and
// --recompute-num-layers: both belong to full recompute.
Status validate_recompute(const TrainingSpec& t) {
  const bool full = t.recompute == Recompute::kFull;
  if (t.recompute_method != RecomputeMethod::kUnset && !full)
    return fail("training.recompute_method",
                fmt::format("{} needs training.recompute full (got {}; Megatron's rule: the "
                            "method places whole-layer recompute)",
                            to_string(t.recompute_method), to_string(t.recompute)));
  if (t.recompute_num_layers < 0)
    return fail("training.recompute_num_layers",
                fmt::format("{} must be at least 1", t.recompute_num_layers));
  if (t.recompute_num_layers > 0 && !full)
    return fail("training.recompute_num_layers",
                fmt::format("needs training.recompute full (got {}; Megatron's rule: selective "
                            "recompute re-runs modules, not layers)",
                            to_string(t.recompute)));
  if (t.recompute_method == RecomputeMethod::kBlock && t.recompute_num_layers == 0)
    return fail("training.recompute_num_layers",
                "must be given with training.recompute_method block (the layers of each model "
                "chunk that are recomputed)");
  // Megatron-Core checks recompute_modules only with selective recompute.
  if (t.recomputes(RecomputeModule::kMlaUpProj))
    return fail("training.recompute_modules",
                "mla_up_proj needs multi-latent attention (Megatron-Core: 'mla_up_proj in "
                "recompute_modules is only supported with multi_latent_attention'), which "
                "PrismLLM does not model");
  if (t.precision == Precision::kFp8 && t.fp8_recipe == Fp8Recipe::kDelayed &&
      (t.recomputes(RecomputeModule::kMoeAct) || t.recomputes(RecomputeModule::kLayernorm)))
    return fail("training.recompute_modules",
                "moe_act and layernorm cannot be recomputed under FP8 delayed scaling "
                "(Megatron-Core: 'Delayed scaling does not support moe_act and layernorm "
                "recompute for fp8'; Transformer Engine's save_original_input refuses "
                "DelayedScaling); use training.fp8_recipe tensorwise, or leave them out");
  return Status::ok();
}

// CUDA graphs, as Megatron-LM's validate_args and Megatron-Core's
// TransformerConfig and TECudaGraphHelper check them (0.11.0 to 0.14.0).
Status validate_cuda_graphs(const TrainingSpec& t) {
  if (t.enable_cuda_graph && t.external_cuda_graph)
    return fail("training.enable_cuda_graph",
                "cannot be combined with training.external_cuda_graph (Megatron-LM: "
                "'--enable-cuda-graph and --external-cuda-graph cannot be enabled at the same "
                "time.')");
  if (t.enable_cuda_graph && t.recompute != Recompute::kNone)
    return fail("training.enable_cuda_graph",
                fmt::format("cannot be combined with training.recompute {} (Megatron-Core's "
                            "TransformerConfig: 'CUDA graphs not supported with activation "
                            "recomputation.')",
                            to_string(t.recompute)));
  if (t.external_cuda_graph && t.cuda_graph_scope == CudaGraphScope::kFullIteration)
    return fail("training.cuda_graph_scope",
                "full_iteration needs training.enable_cuda_graph, not external_cuda_graph "
                "(Megatron-Core's TECudaGraphHelper: 'full_iteration cuda graph is not supported "
                "for --external-cuda-graph. Please use --enable-cuda-graph instead.')");
  return Status::ok();
}

Status validate_training(const JobSpec& j) {
  const TrainingSpec& t = j.training;
  if (t.precision == Precision::kFp8 && j.cluster.arch != GpuArch::kHopper &&
      j.cluster.arch != GpuArch::kBlackwell)
    return fail("training.precision",
                fmt::format("fp8 needs a hopper or blackwell GPU (cluster.gpu.arch is {})",
                            to_string(j.cluster.arch)));
  if (t.precision == Precision::kFp8 && t.fp8_recipe == Fp8Recipe::kMxfp8 &&
      j.cluster.arch != GpuArch::kBlackwell)
    return fail("training.fp8_recipe",
                fmt::format("mxfp8 needs a blackwell GPU (cluster.gpu.arch is {}; Transformer "
                            "Engine's check_mxfp8_support: 'Device compute capability 10.0 or "
                            "higher required for MXFP8 execution.')",
                            to_string(j.cluster.arch)));
  // Transformer Engine's DelayedScaling: "amax_history_len must be >= 1"
  // (TE asserts a positive length; Megatron passes the argument through).
  if (t.fp8_amax_history_len < 1 || t.fp8_amax_history_len > kMaxAmaxHistory)
    return fail(
        "training.fp8_amax_history_len",
        fmt::format("must be in [1, {}] (got {})", kMaxAmaxHistory, t.fp8_amax_history_len));
  // TransformerConfig.__post_init__: "fp8_param must be used together with fp8 mode."
  if (t.fp8_param_gather && t.precision != Precision::kFp8)
    return fail("training.fp8_param_gather",
                fmt::format("needs training.precision fp8 (got {}; Megatron's rule)",
                            to_string(t.precision)));
  if (t.fp8_param_gather && !t.use_distributed_optimizer)
    return fail("training.fp8_param_gather",
                "needs training.use_distributed_optimizer (Megatron's rule)");
  // Apex's DistributedFusedAdam is a ZeRO optimizer: NeMo's
  // distributed_fused_adam always shards its state, and shards every
  // parameter over one group, the data-parallel group with context parallel
  // (MegatronDistributedFusedAdam.__init__: process_group =
  // get_data_parallel_group(with_context_parallel=True)); expert parameters,
  // which Megatron shards over the expert data-parallel group, have no place
  // in it.
  if (t.optimizer_impl == OptimizerImpl::kApexDistributedFusedAdam && !t.use_distributed_optimizer)
    return fail("training.optimizer_impl",
                "apex_distributed_fused_adam needs training.use_distributed_optimizer (Apex's "
                "DistributedFusedAdam always shards its state over data parallel)");
  if (t.optimizer_impl == OptimizerImpl::kApexDistributedFusedAdam && j.ep() > 1)
    return fail("training.optimizer_impl",
                fmt::format("apex_distributed_fused_adam needs "
                            "parallelism.expert_model_parallel_size 1 (got {}; NeMo's "
                            "MegatronDistributedFusedAdam shards every parameter over the one "
                            "data-parallel group)",
                            j.ep()));
  if (t.overlap_param_gather && !t.use_distributed_optimizer)
    return fail("training.overlap_param_gather",
                "needs training.use_distributed_optimizer (Megatron's rule)");
  if (t.overlap_param_gather && !t.overlap_grad_reduce)
    return fail("training.overlap_param_gather",
                "needs training.overlap_grad_reduce (Megatron's rule)");
  // Megatron's validate_args: "Tensor parallel communication/GEMM overlap
  // can happen only when sequence parallelism is enabled".
  if (j.parallelism.tp_comm_overlap && j.tp() == 1)
    return fail("parallelism.tp_comm_overlap",
                "needs parallelism.tensor_model_parallel_size > 1 (got 1): it overlaps the "
                "tensor-parallel collectives");
  if (j.parallelism.tp_comm_overlap && !j.parallelism.sequence_parallel)
    return fail("parallelism.tp_comm_overlap",
                "needs parallelism.sequence_parallel (Megatron's rule: the overlap replaces "
                "sequence parallelism's all-gathers and reduce-scatters)");
  if (!j.parallelism.tp_comm_overlap_cfg.empty()) {
    if (!j.parallelism.tp_comm_overlap)
      return fail("parallelism.tp_comm_overlap_cfg",
                  "configures parallelism.tp_comm_overlap, which is off");
    const Result<GpuSpec> gpu = gpu_spec(j.cluster.gpu_model);
    const Status s = validate_tp_comm_overlap_cfg(j.parallelism.tp_comm_overlap_cfg, j.tp(),
                                                  gpu.is_ok() ? gpu->num_sms : 0);
    if (!s.is_ok()) return fail("parallelism.tp_comm_overlap_cfg", s.message());
  }
  // ModelParallelConfig.__post_init__: "Cannot defer embedding wgrad compute
  // when pipeline model parallel is not used"; "Wgrad deferral limit should
  // be greater than or equal to 0 when it is enabled!". Its third rule,
  // gradient_accumulation_fusion, always holds here: the weight-gradient
  // GEMMs are modelled accumulating into main_grad.
  if (t.defer_embedding_wgrad_compute && j.pp() == 1)
    return fail("training.defer_embedding_wgrad_compute",
                "needs parallelism.pipeline_model_parallel_size > 1 (got 1; Megatron's rule: "
                "the deferred GEMMs run in the pipeline flush)");
  if (t.defer_embedding_wgrad_compute && t.wgrad_deferral_limit < 0)
    return fail(
        "training.wgrad_deferral_limit",
        fmt::format("{} must be at least 0 (0: every micro-batch deferred; Megatron's rule)",
                    t.wgrad_deferral_limit));
  PRISM_RETURN_IF_ERROR(validate_cuda_graphs(t));
  return validate_recompute(t);
}

// Keeps count_parameters() and the FLOP count far from int64 overflow.
Status validate_magnitude(const ModelSpec& m) {
  const double h = m.hidden_size;
  const double attn = h * m.head_dim() * (2.0 * m.num_attention_heads + 2.0 * m.query_groups());
  const double mlp = 3.0 * h * m.ffn() + 3.0 * h *
                                             (static_cast<double>(m.num_moe_experts) * m.moe_ffn() +
                                              m.moe_shared_expert_intermediate_size);
  const double total = m.num_layers * (attn + mlp) + 2.0 * h * m.vocab_size;
  if (total > 1e15)
    return fail("model", fmt::format("{:.3g} parameters is beyond what is modelled (1e15)", total));
  return Status::ok();
}

}  // namespace

// A program's job: the grid and the cluster are all there is to check.
Status validate_program_job(const JobSpec& j) {
  const ParallelSpec& p = j.parallelism;
  const std::pair<std::string_view, std::int64_t> sizes[] = {
      {"parallelism.tensor_model_parallel_size", p.tensor_model_parallel_size},
      {"parallelism.pipeline_model_parallel_size", p.pipeline_model_parallel_size},
      {"parallelism.context_parallel_size", p.context_parallel_size},
      {"parallelism.expert_model_parallel_size", p.expert_model_parallel_size},
      {"cluster.num_gpus", j.num_gpus},
  };
  for (const auto& [field, v] : sizes) PRISM_RETURN_IF_ERROR(check_at_least(field, v, 1, kMaxGpus));
  const std::pair<std::string_view, bool> layer_fields[] = {
      {"parallelism.virtual_pipeline_model_parallel_size",
       p.virtual_pipeline_model_parallel_size != 1},
      {"parallelism.num_layers_per_virtual_pipeline_stage",
       p.num_layers_per_virtual_pipeline_stage != 0},
      {"parallelism.account_for_embedding_in_pipeline_split",
       p.account_for_embedding_in_pipeline_split},
      {"parallelism.account_for_loss_in_pipeline_split", p.account_for_loss_in_pipeline_split},
      {"parallelism.tp_comm_overlap", p.tp_comm_overlap}};
  for (const auto& [field, given] : layer_fields) {
    if (given)
      return fail(
          field,
          "describes a Megatron model's layers: a job without a model section cannot use it");
  }
  if (j.training.defer_embedding_wgrad_compute)
    return fail("training.defer_embedding_wgrad_compute",
                "defers a Megatron model's output-layer GEMMs: a job without a model section "
                "cannot use it");
  for (const auto& [field, on] :
       {std::pair{"training.enable_cuda_graph", j.training.enable_cuda_graph},
        std::pair{"training.external_cuda_graph", j.training.external_cuda_graph}}) {
    if (on)
      return fail(
          field, "captures a Megatron model's layers: a job without a model section cannot use it");
  }
  PRISM_RETURN_IF_ERROR(validate_cluster_fit(j));
  PRISM_RETURN_IF_ERROR(validate_grid(j));
  return validate_software(j);
}

Status validate_job(const JobSpec& job) {
  if (!job.has_model) return validate_program_job(job);
  PRISM_RETURN_IF_ERROR(validate_sizes(job));
  PRISM_RETURN_IF_ERROR(validate_magnitude(job.model));
  PRISM_RETURN_IF_ERROR(validate_cluster_fit(job));
  PRISM_RETURN_IF_ERROR(validate_grid(job));
  PRISM_RETURN_IF_ERROR(validate_attention(job));
  PRISM_RETURN_IF_ERROR(validate_mlp(job));
  PRISM_RETURN_IF_ERROR(validate_batch(job));
  PRISM_RETURN_IF_ERROR(validate_pipeline(job));
  PRISM_RETURN_IF_ERROR(validate_work(job));
  PRISM_RETURN_IF_ERROR(validate_sequence(job));
  PRISM_RETURN_IF_ERROR(validate_dropout(job.model));
  PRISM_RETURN_IF_ERROR(validate_training(job));
  return validate_software(job);
}

}  // namespace prism
