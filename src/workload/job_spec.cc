#include "workload/job_spec.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "util/enum_names.h"
#include "workload/job_limits.h"

namespace prism {
namespace {

constexpr std::array<std::pair<Activation, std::string_view>, 3> kActivationNames{{
    {Activation::kGelu, "gelu"},
    {Activation::kSwiglu, "swiglu"},
    {Activation::kSquaredRelu, "squared_relu"},
}};
constexpr std::array<std::pair<Normalization, std::string_view>, 2> kNormalizationNames{{
    {Normalization::kLayerNorm, "LayerNorm"},  // Megatron's --normalization values
    {Normalization::kRmsNorm, "RMSNorm"},
}};
constexpr std::array<std::pair<Precision, std::string_view>, 2> kPrecisionNames{{
    {Precision::kBf16, "bf16"},
    {Precision::kFp8, "fp8"},
}};
constexpr std::array<std::pair<Recompute, std::string_view>, 3> kRecomputeNames{{
    {Recompute::kNone, "none"},
    {Recompute::kSelective, "selective"},
    {Recompute::kFull, "full"},
}};

constexpr std::array<std::pair<RecomputeMethod, std::string_view>, 3> kRecomputeMethodNames{{
    {RecomputeMethod::kUnset, "unset"},
    {RecomputeMethod::kUniform, "uniform"},
    {RecomputeMethod::kBlock, "block"},
}};

constexpr std::array<std::pair<RecomputeModule, std::string_view>, 7> kRecomputeModuleNames{{
    {RecomputeModule::kCoreAttn, "core_attn"},
    {RecomputeModule::kMoeAct, "moe_act"},
    {RecomputeModule::kLayernorm, "layernorm"},
    {RecomputeModule::kMlaUpProj, "mla_up_proj"},
    {RecomputeModule::kMlp, "mlp"},
    {RecomputeModule::kMoe, "moe"},
    {RecomputeModule::kSharedExperts, "shared_experts"},
}};

constexpr std::array<std::pair<AttentionBackend, std::string_view>, 5> kAttentionBackendNames{{
    {AttentionBackend::kAuto, "auto"},
    {AttentionBackend::kFlash, "flash"},
    {AttentionBackend::kFused, "fused"},
    {AttentionBackend::kUnfused, "unfused"},
    {AttentionBackend::kLocal, "local"},
}};

constexpr std::array<std::pair<Fp8Recipe, std::string_view>, 4> kFp8RecipeNames{{
    {Fp8Recipe::kDelayed, "delayed"},
    {Fp8Recipe::kTensorwise, "tensorwise"},
    {Fp8Recipe::kBlockwise, "blockwise"},
    {Fp8Recipe::kMxfp8, "mxfp8"},
}};
constexpr std::array<std::pair<CrossEntropyFusionImpl, std::string_view>, 2>
    kCrossEntropyFusionImplNames{{
        {CrossEntropyFusionImpl::kNative, "native"},
        {CrossEntropyFusionImpl::kTe, "te"},
    }};
constexpr std::array<std::pair<OptimizerImpl, std::string_view>, 2> kOptimizerImplNames{{
    {OptimizerImpl::kMegatron, "megatron"},
    {OptimizerImpl::kApexDistributedFusedAdam, "apex_distributed_fused_adam"},
}};

constexpr std::array<std::pair<CudaGraphScope, std::string_view>, 3> kCudaGraphScopeNames{{
    {CudaGraphScope::kFull, "full"},
    {CudaGraphScope::kAttn, "attn"},
    {CudaGraphScope::kFullIteration, "full_iteration"},
}};

// ---------------------------------------------------------------------------
// Model presets. Every number is the released model's (Hugging Face
// config.json, or the Megatron/NeMo recipe it was trained with).

// A Llama-style decoder: SwiGLU, RMSNorm, untied embeddings, no biases.
ModelSpec llama_like(std::string_view preset, int layers, int hidden, int ffn, int heads,
                     int groups, int vocab) {
  ModelSpec m;
  m.preset = std::string(preset);
  m.num_layers = layers;
  m.hidden_size = hidden;
  m.ffn_hidden_size = ffn;
  m.num_attention_heads = heads;
  m.num_query_groups = groups;
  m.vocab_size = vocab;
  m.activation = Activation::kSwiglu;
  m.normalization = Normalization::kRmsNorm;
  m.untie_embeddings_and_output_weights = true;
  // Trained without dropout: the architecture has no hidden dropout and
  // config.json gives attention_dropout 0.0.
  m.hidden_dropout = 0.0;
  m.attention_dropout = 0.0;
  return m;
}

// GPT-3 175B (Brown et al. 2020, table 2.1: 96 layers, d_model 12288, 96
// heads of 128; ffn 4 * d_model); Megatron trains it with the GPT-2 BPE
// vocabulary (50257, padded), GeLU, LayerNorm, tied embeddings and biases.
ModelSpec gpt3_175b() {
  ModelSpec m;
  m.preset = "gpt3-175b";
  m.num_layers = 96;
  m.hidden_size = 12288;
  m.ffn_hidden_size = 4 * 12288;
  m.num_attention_heads = 96;
  m.vocab_size = 50257;
  m.activation = Activation::kGelu;
  m.normalization = Normalization::kLayerNorm;
  m.untie_embeddings_and_output_weights = false;
  return m;  // dropout: Megatron's defaults (0.1, 0.1)
}

// Mixtral of experts (Jiang et al. 2024; HF mistralai/Mixtral-8x7B-v0.1 and
// Mixtral-8x22B-v0.1 config.json): 8 experts, top-2, experts sized like the
// dense FFN.
ModelSpec mixtral(std::string_view preset, int layers, int hidden, int ffn, int heads, int vocab) {
  ModelSpec m = llama_like(preset, layers, hidden, ffn, heads, 8, vocab);
  m.num_moe_experts = 8;
  m.moe_router_topk = 2;
  m.moe_ffn_hidden_size = ffn;
  return m;
}

// Nemotron-4 (NeMo Nemotron4Config15B / Nemotron4Config340B; Parmar et al.
// 2024, arXiv:2402.16819): squared ReLU, LayerNorm (1p), untied embeddings,
// no biases, GQA with 8 groups, 256k SentencePiece vocabulary.
ModelSpec nemotron4(std::string_view preset, int layers, int hidden, int heads) {
  ModelSpec m;
  m.preset = std::string(preset);
  m.num_layers = layers;
  m.hidden_size = hidden;
  m.ffn_hidden_size = 4 * hidden;
  m.num_attention_heads = heads;
  m.num_query_groups = 8;
  m.vocab_size = 256000;
  m.activation = Activation::kSquaredRelu;
  m.normalization = Normalization::kLayerNorm;
  m.untie_embeddings_and_output_weights = true;
  // No dropout (HF NemotronConfig: attention_dropout 0.0, no hidden dropout).
  m.hidden_dropout = 0.0;
  m.attention_dropout = 0.0;
  return m;
}

// DeepSeek-V3 (HF deepseek-ai/DeepSeek-V3 config.json; arXiv:2412.19437):
// 61 layers, hidden 7168, 128 heads, 256 routed experts of 2048 with top-8,
// one shared expert of 2048, dense FFN 18432, vocabulary 129280.
// Approximation: multi-head latent attention is modelled as standard
// multi-head attention with 128 heads of 128 channels (MLA's low-rank Q/KV
// projections are not), every layer is an MoE layer (the real model's first 3
// are dense), and the multi-token-prediction module is left out.
// docs/job-spec.md gives the resulting parameter gap.
ModelSpec deepseek_v3() {
  ModelSpec m = llama_like("deepseek-v3", 61, 7168, 18432, 128, 128, 129280);
  m.kv_channels = 128;
  m.num_moe_experts = 256;
  m.moe_router_topk = 8;
  m.moe_ffn_hidden_size = 2048;
  m.moe_shared_expert_intermediate_size = 2048;
  return m;
}

}  // namespace

std::string_view to_string(Activation a) {
  return internal::enum_name(a, kActivationNames);
}
std::string_view to_string(Normalization n) {
  return internal::enum_name(n, kNormalizationNames);
}
std::string_view to_string(Precision p) {
  return internal::enum_name(p, kPrecisionNames);
}
std::string_view to_string(Recompute r) {
  return internal::enum_name(r, kRecomputeNames);
}
std::string_view to_string(RecomputeMethod m) {
  return internal::enum_name(m, kRecomputeMethodNames);
}
std::string_view to_string(RecomputeModule m) {
  return internal::enum_name(m, kRecomputeModuleNames);
}
std::string to_string(RecomputeModules m) {
  std::string out;
  for (const auto& [module, name] : kRecomputeModuleNames) {
    if (!m.has(module)) continue;
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out.empty() ? "none" : out;
}
Result<RecomputeModules> parse_recompute_modules(const std::vector<std::string>& names) {
  RecomputeModules set;
  set.bits = 0;
  for (const std::string& name : names) {
    const auto it = std::find_if(kRecomputeModuleNames.begin(), kRecomputeModuleNames.end(),
                                 [&](const auto& entry) { return entry.second == name; });
    if (it == kRecomputeModuleNames.end()) {
      std::vector<std::string_view> known;
      for (const auto& entry : kRecomputeModuleNames) known.push_back(entry.second);
      return Status::invalid_argument(
          fmt::format("unknown module \"{}\" (Megatron-Core's: {})", name, fmt::join(known, ", ")));
    }
    set.add(it->first);
  }
  return set;
}
std::string_view to_string(AttentionBackend a) {
  return internal::enum_name(a, kAttentionBackendNames);
}
std::string_view to_string(Fp8Recipe r) {
  return internal::enum_name(r, kFp8RecipeNames);
}
std::string_view to_string(CrossEntropyFusionImpl c) {
  return internal::enum_name(c, kCrossEntropyFusionImplNames);
}
std::string_view to_string(OptimizerImpl o) {
  return internal::enum_name(o, kOptimizerImplNames);
}

std::string_view to_string(CudaGraphScope c) {
  return internal::enum_name(c, kCudaGraphScopeNames);
}

const std::vector<std::string_view>& model_preset_names() {
  static const std::vector<std::string_view> kNames{
      "gpt3-175b",     "llama2-7b",     "llama2-13b",     "llama2-70b",
      "llama3.1-8b",   "llama3.1-70b",  "llama3.1-405b",  "mixtral-8x7b",
      "mixtral-8x22b", "nemotron4-15b", "nemotron4-340b", "deepseek-v3"};
  return kNames;
}

Result<ModelSpec> model_preset(std::string_view name) {
  if (name == "gpt3-175b") return gpt3_175b();
  // Llama 2 (Touvron et al. 2023; HF meta-llama/Llama-2-*-hf config.json).
  if (name == "llama2-7b") return llama_like(name, 32, 4096, 11008, 32, 32, 32000);
  if (name == "llama2-13b") return llama_like(name, 40, 5120, 13824, 40, 40, 32000);
  if (name == "llama2-70b") return llama_like(name, 80, 8192, 28672, 64, 8, 32000);
  // Llama 3.1 (Llama 3 herd paper, table 3; HF meta-llama/Llama-3.1-* config.json).
  if (name == "llama3.1-8b") return llama_like(name, 32, 4096, 14336, 32, 8, 128256);
  if (name == "llama3.1-70b") return llama_like(name, 80, 8192, 28672, 64, 8, 128256);
  if (name == "llama3.1-405b") return llama_like(name, 126, 16384, 53248, 128, 8, 128256);
  if (name == "mixtral-8x7b") return mixtral(name, 32, 4096, 14336, 32, 32000);
  if (name == "mixtral-8x22b") return mixtral(name, 56, 6144, 16384, 48, 32000);
  if (name == "nemotron4-15b") return nemotron4(name, 32, 6144, 48);
  if (name == "nemotron4-340b") return nemotron4(name, 96, 18432, 96);
  if (name == "deepseek-v3") return deepseek_v3();
  return Status::not_found(fmt::format("unknown model preset \"{}\" (presets: {})", name,
                                       fmt::join(model_preset_names(), ", ")));
}

int JobSpec::layers_in_chunk(int stage, int chunk) const {
  const ParallelSpec& p = parallelism;
  const int first = p.decoder_first_pipeline_num_layers;
  const int last = p.decoder_last_pipeline_num_layers;
  if (first > 0 || last > 0) {
    if (pp() > 1 && stage == 0 && first > 0) return first / vpp();
    if (pp() > 1 && stage == pp() - 1 && last > 0) return last / vpp();
    const int fixed = (first > 0 ? 1 : 0) + (last > 0 ? 1 : 0);
    if (pp() == fixed) return 0;
    return (model.num_layers - first - last) / (pp() - fixed) / vpp();
  }
  int layers = layers_in_split() / pp() / vpp();
  if (p.account_for_embedding_in_pipeline_split && stage == 0 && chunk == 0) --layers;
  if (p.account_for_loss_in_pipeline_split && stage == pp() - 1 && chunk == vpp() - 1) --layers;
  return layers;
}

int JobSpec::layers_on_stage(int stage) const {
  int layers = 0;
  for (int chunk = 0; chunk < vpp(); ++chunk) layers += layers_in_chunk(stage, chunk);
  return layers;
}

void apply_job_defaults(JobSpec* job) {
  ParallelSpec& p = job->parallelism;
  if (job->tp() == 1) p.sequence_parallel = false;  // Megatron: ignored, warned
  // --num-layers-per-virtual-pipeline-stage gives the chunks per stage, as
  // Megatron's validate_args derives them; a split it does not divide is
  // left for validate_job to name.
  const int per_chunk = p.num_layers_per_virtual_pipeline_stage;
  if (per_chunk > 0 && p.virtual_pipeline_model_parallel_size == 1 && job->pp() > 0 &&
      job->layers_in_split() % job->pp() == 0 &&
      job->layers_in_split() / job->pp() % per_chunk == 0)
    p.virtual_pipeline_model_parallel_size = job->layers_in_split() / job->pp() / per_chunk;
  const std::int64_t model_size = std::int64_t{job->tp()} * job->pp() * job->cp();
  if (job->training.global_batch_size == 0 && model_size > 0 && job->num_gpus > 0 &&
      job->num_gpus % model_size == 0 && job->training.micro_batch_size > 0) {
    const std::int64_t gbs = std::int64_t{job->training.micro_batch_size} * job->dp();
    if (gbs <= job_limits::kMaxBatch) job->training.global_batch_size = static_cast<int>(gbs);
  }
}

}  // namespace prism
