// The job spec's settable fields (workload/job_fields.h): each section.key,
// and how its YAML value is read and range-checked.
#include "workload/job_fields.h"

#include <array>
#include <cctype>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "net/yaml_read.h"

namespace prism {
namespace {

constexpr std::array kActivations{Activation::kGelu, Activation::kSwiglu, Activation::kSquaredRelu};
constexpr std::array kNormalizations{Normalization::kLayerNorm, Normalization::kRmsNorm};
constexpr std::array kPrecisions{Precision::kBf16, Precision::kFp8};
constexpr std::array kRecomputes{Recompute::kNone, Recompute::kSelective, Recompute::kFull};
constexpr std::array kRecomputeMethods{RecomputeMethod::kUniform, RecomputeMethod::kBlock};
constexpr std::array kAttentionBackends{AttentionBackend::kAuto, AttentionBackend::kFlash,
                                        AttentionBackend::kFused, AttentionBackend::kUnfused,
                                        AttentionBackend::kLocal};
constexpr std::array kFp8Recipes{Fp8Recipe::kDelayed, Fp8Recipe::kTensorwise, Fp8Recipe::kBlockwise,
                                 Fp8Recipe::kMxfp8};
constexpr std::array kCrossEntropyFusionImpls{CrossEntropyFusionImpl::kNative,
                                              CrossEntropyFusionImpl::kTe};
constexpr std::array kOptimizerImpls{OptimizerImpl::kMegatron,
                                     OptimizerImpl::kApexDistributedFusedAdam};
constexpr std::array kCudaGraphScopes{CudaGraphScope::kFull, CudaGraphScope::kAttn,
                                      CudaGraphScope::kFullIteration};

template <typename E>
constexpr auto enum_values() {
  if constexpr (std::is_same_v<E, Activation>) return kActivations;
  if constexpr (std::is_same_v<E, Normalization>) return kNormalizations;
  if constexpr (std::is_same_v<E, Precision>) return kPrecisions;
  if constexpr (std::is_same_v<E, Recompute>) return kRecomputes;
  if constexpr (std::is_same_v<E, RecomputeMethod>) return kRecomputeMethods;
  if constexpr (std::is_same_v<E, AttentionBackend>) return kAttentionBackends;
  if constexpr (std::is_same_v<E, Fp8Recipe>) return kFp8Recipes;
  if constexpr (std::is_same_v<E, CrossEntropyFusionImpl>) return kCrossEntropyFusionImpls;
  if constexpr (std::is_same_v<E, OptimizerImpl>) return kOptimizerImpls;
  if constexpr (std::is_same_v<E, CudaGraphScope>) return kCudaGraphScopes;
}

using yaml::scalar;

// Reads one value of type T; integers are range-checked here, their relations
// by validate_job().
template <typename T>
Status read_value(const YAML::Node& n, T* out) {
  if constexpr (std::is_same_v<T, bool>) {
    PRISM_ASSIGN_OR_RETURN(*out, scalar<bool>(n, "true or false"));
  } else if constexpr (std::is_same_v<T, std::string>) {
    PRISM_ASSIGN_OR_RETURN(*out, scalar<std::string>(n, "a string"));
  } else if constexpr (std::is_same_v<T, Version>) {
    // A release as text: YAML would read 2.10 as the number 2.1.
    PRISM_ASSIGN_OR_RETURN(const std::string s, scalar<std::string>(n, "a release number"));
    PRISM_ASSIGN_OR_RETURN(*out, parse_version(s));
  } else if constexpr (std::is_same_v<T, RecomputeModules>) {
    // Megatron's --recompute-modules takes several names: a YAML list, or
    // one string of names split by spaces or commas ("core_attn mlp").
    std::vector<std::string> names;
    if (n.IsSequence()) {
      for (const YAML::Node& item : n) {
        PRISM_ASSIGN_OR_RETURN(std::string name, scalar<std::string>(item, "a module name"));
        names.push_back(std::move(name));
      }
    } else {
      PRISM_ASSIGN_OR_RETURN(const std::string text, scalar<std::string>(n, "a list of modules"));
      std::string name;
      for (const char ch : text + " ") {
        if (ch == ' ' || ch == ',') {
          if (!name.empty()) names.push_back(std::move(name));
          name.clear();
        } else {
          name += ch;
        }
      }
    }
    PRISM_ASSIGN_OR_RETURN(*out, parse_recompute_modules(names));
  } else if constexpr (std::is_same_v<T, TpCommOverlapCfg>) {
    PRISM_ASSIGN_OR_RETURN(*out, parse_tp_comm_overlap_cfg(n));
  } else if constexpr (std::is_same_v<T, double>) {
    PRISM_ASSIGN_OR_RETURN(*out, scalar<double>(n, "a number"));
  } else if constexpr (std::is_enum_v<T>) {
    PRISM_ASSIGN_OR_RETURN(const std::string s, scalar<std::string>(n, "a name"));
    std::vector<std::string_view> names;
    // Case-insensitive: Megatron writes LayerNorm / RMSNorm, NeMo configs
    // often layernorm / rmsnorm.
    auto same = [](std::string_view a, std::string_view b) {
      return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) ==
                      std::tolower(static_cast<unsigned char>(y));
             });
    };
    for (T e : enum_values<T>()) {
      if (same(to_string(e), s)) {
        *out = e;
        return Status::ok();
      }
      names.push_back(to_string(e));
    }
    return Status::invalid_argument(
        fmt::format("unknown value \"{}\" (values: {})", s, fmt::join(names, ", ")));
  } else {
    constexpr long long kMax = std::is_same_v<T, int> ? (1LL << 30) : (1LL << 50);
    PRISM_ASSIGN_OR_RETURN(const long long v, scalar<long long>(n, "an integer"));
    if (v < 0 || v > kMax)
      return Status::invalid_argument(fmt::format("must be in [0, {}] (got {})", kMax, v));
    *out = static_cast<T>(v);
  }
  return Status::ok();
}

template <typename S, typename T>
JobField field(std::string_view section, std::string_view key, S JobSpec::*part, T S::*member) {
  return {section, key, [part, member](const YAML::Node& n, JobSpec* j) {
            return read_value(n, &(j->*part.*member));
          }};
}

}  // namespace

const std::vector<JobField>& job_fields() {
  using J = JobSpec;
  using M = ModelSpec;
  using T = TrainingSpec;
  using P = ParallelSpec;
  static const std::vector<JobField> kFields{
      field("model", "num_layers", &J::model, &M::num_layers),
      field("model", "hidden_size", &J::model, &M::hidden_size),
      field("model", "ffn_hidden_size", &J::model, &M::ffn_hidden_size),
      field("model", "num_attention_heads", &J::model, &M::num_attention_heads),
      field("model", "num_query_groups", &J::model, &M::num_query_groups),
      field("model", "kv_channels", &J::model, &M::kv_channels),
      field("model", "vocab_size", &J::model, &M::vocab_size),
      field("model", "activation", &J::model, &M::activation),
      field("model", "normalization", &J::model, &M::normalization),
      field("model", "untie_embeddings_and_output_weights", &J::model,
            &M::untie_embeddings_and_output_weights),
      field("model", "num_moe_experts", &J::model, &M::num_moe_experts),
      field("model", "moe_router_topk", &J::model, &M::moe_router_topk),
      field("model", "moe_ffn_hidden_size", &J::model, &M::moe_ffn_hidden_size),
      field("model", "moe_shared_expert_intermediate_size", &J::model,
            &M::moe_shared_expert_intermediate_size),
      field("model", "hidden_dropout", &J::model, &M::hidden_dropout),
      field("model", "attention_dropout", &J::model, &M::attention_dropout),
      field("training", "seq_length", &J::training, &T::seq_length),
      field("training", "micro_batch_size", &J::training, &T::micro_batch_size),
      field("training", "global_batch_size", &J::training, &T::global_batch_size),
      field("training", "precision", &J::training, &T::precision),
      field("training", "recompute", &J::training, &T::recompute),
      field("training", "recompute_method", &J::training, &T::recompute_method),
      field("training", "recompute_num_layers", &J::training, &T::recompute_num_layers),
      field("training", "recompute_modules", &J::training, &T::recompute_modules),
      field("training", "attention_backend", &J::training, &T::attention_backend),
      field("training", "use_distributed_optimizer", &J::training, &T::use_distributed_optimizer),
      field("training", "overlap_grad_reduce", &J::training, &T::overlap_grad_reduce),
      field("training", "overlap_param_gather", &J::training, &T::overlap_param_gather),
      field("training", "bucket_size", &J::training, &T::bucket_size),
      field("training", "grad_reduce_in_fp32", &J::training, &T::grad_reduce_in_fp32),
      field("training", "fp8_recipe", &J::training, &T::fp8_recipe),
      field("training", "fp8_amax_history_len", &J::training, &T::fp8_amax_history_len),
      field("training", "fp8_param_gather", &J::training, &T::fp8_param_gather),
      field("training", "cross_entropy_loss_fusion", &J::training, &T::cross_entropy_loss_fusion),
      field("training", "cross_entropy_fusion_impl", &J::training, &T::cross_entropy_fusion_impl),
      field("training", "defer_embedding_wgrad_compute", &J::training,
            &T::defer_embedding_wgrad_compute),
      field("training", "wgrad_deferral_limit", &J::training, &T::wgrad_deferral_limit),
      field("training", "deallocate_pipeline_outputs", &J::training,
            &T::deallocate_pipeline_outputs),
      field("training", "optimizer_impl", &J::training, &T::optimizer_impl),
      field("training", "enable_cuda_graph", &J::training, &T::enable_cuda_graph),
      field("training", "external_cuda_graph", &J::training, &T::external_cuda_graph),
      field("training", "cuda_graph_scope", &J::training, &T::cuda_graph_scope),
      field("parallelism", "tensor_model_parallel_size", &J::parallelism,
            &P::tensor_model_parallel_size),
      field("parallelism", "sequence_parallel", &J::parallelism, &P::sequence_parallel),
      field("parallelism", "pipeline_model_parallel_size", &J::parallelism,
            &P::pipeline_model_parallel_size),
      field("parallelism", "virtual_pipeline_model_parallel_size", &J::parallelism,
            &P::virtual_pipeline_model_parallel_size),
      field("parallelism", "context_parallel_size", &J::parallelism, &P::context_parallel_size),
      field("parallelism", "expert_model_parallel_size", &J::parallelism,
            &P::expert_model_parallel_size),
      field("parallelism", "expert_tensor_parallel_size", &J::parallelism,
            &P::expert_tensor_parallel_size),
      field("parallelism", "decoder_first_pipeline_num_layers", &J::parallelism,
            &P::decoder_first_pipeline_num_layers),
      field("parallelism", "decoder_last_pipeline_num_layers", &J::parallelism,
            &P::decoder_last_pipeline_num_layers),
      field("parallelism", "num_layers_per_virtual_pipeline_stage", &J::parallelism,
            &P::num_layers_per_virtual_pipeline_stage),
      field("parallelism", "account_for_embedding_in_pipeline_split", &J::parallelism,
            &P::account_for_embedding_in_pipeline_split),
      field("parallelism", "account_for_loss_in_pipeline_split", &J::parallelism,
            &P::account_for_loss_in_pipeline_split),
      field("parallelism", "tp_comm_overlap", &J::parallelism, &P::tp_comm_overlap),
      field("parallelism", "tp_comm_overlap_ag", &J::parallelism, &P::tp_comm_overlap_ag),
      field("parallelism", "tp_comm_overlap_rs", &J::parallelism, &P::tp_comm_overlap_rs),
      field("parallelism", "tp_comm_bulk_dgrad", &J::parallelism, &P::tp_comm_bulk_dgrad),
      field("parallelism", "tp_comm_bulk_wgrad", &J::parallelism, &P::tp_comm_bulk_wgrad),
      field("parallelism", "tp_comm_overlap_cfg", &J::parallelism, &P::tp_comm_overlap_cfg),
      field("software", "nemo", &J::software, &SoftwareSpec::nemo),
      field("software", "megatron_core", &J::software, &SoftwareSpec::megatron_core),
      field("software", "transformer_engine", &J::software, &SoftwareSpec::transformer_engine),
  };
  return kFields;
}

}  // namespace prism
