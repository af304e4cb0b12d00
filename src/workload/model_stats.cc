#include "workload/model_stats.h"

namespace prism {
namespace {

// Megatron-Core builds biases on every linear layer when add_bias_linear is
// set (its default). The presets trained that way are the GPT-3 family (GeLU +
// LayerNorm); Llama, Mixtral, DeepSeek (SwiGLU + RMSNorm) and Nemotron-4
// (squared ReLU, LayerNorm) are trained with --disable-bias-linear. So biases
// follow from the spec: on exactly for GeLU with LayerNorm.
bool has_bias(const ModelSpec& m) {
  return m.activation == Activation::kGelu && m.normalization == Normalization::kLayerNorm;
}

// LayerNorm has a weight and a bias per channel, RMSNorm only a weight.
std::int64_t norm_params(const ModelSpec& m) {
  const std::int64_t h = m.hidden_size;
  return m.normalization == Normalization::kLayerNorm ? 2 * h : h;
}

// linear_qkv (GQA: hq query heads, g key/value groups, d channels each) and
// linear_proj.
std::int64_t attention_params(const ModelSpec& m) {
  const std::int64_t h = m.hidden_size;
  const std::int64_t q = std::int64_t{m.num_attention_heads} * m.head_dim();
  const std::int64_t kv = std::int64_t{m.query_groups()} * m.head_dim();
  std::int64_t n = h * (q + 2 * kv) + q * h;
  if (has_bias(m)) n += (q + 2 * kv) + h;
  return n;
}

// linear_fc1 (h -> ffn, or h -> 2 * ffn stacked gate and up for SwiGLU) and
// linear_fc2 (ffn -> h); an expert is the same MLP with its own ffn size.
std::int64_t mlp_params(const ModelSpec& m, std::int64_t ffn) {
  const std::int64_t h = m.hidden_size;
  const std::int64_t fc1_out = m.gated() ? 2 * ffn : ffn;
  std::int64_t n = h * fc1_out + ffn * h;
  if (has_bias(m)) n += fc1_out + h;
  return n;
}

}  // namespace

ParameterCount count_parameters(const ModelSpec& m) {
  const std::int64_t h = m.hidden_size;
  // input_layernorm + pre_mlp_layernorm.
  const std::int64_t common = attention_params(m) + 2 * norm_params(m);
  std::int64_t layer_total = common;
  std::int64_t layer_active = common;
  if (m.is_moe()) {
    const std::int64_t router = h * m.num_moe_experts;
    const std::int64_t expert = mlp_params(m, m.moe_ffn());
    const std::int64_t shared = m.moe_shared_expert_intermediate_size > 0
                                    ? mlp_params(m, m.moe_shared_expert_intermediate_size)
                                    : 0;
    layer_total += router + m.num_moe_experts * expert + shared;
    layer_active += router + m.moe_router_topk * expert + shared;
  } else {
    layer_total += mlp_params(m, m.ffn());
    layer_active = layer_total;
  }
  ParameterCount c;
  c.per_layer = layer_total;
  c.embedding = std::int64_t{m.vocab_size} * h;
  if (m.untie_embeddings_and_output_weights) c.embedding *= 2;
  const std::int64_t final_norm = norm_params(m);
  c.total = m.num_layers * layer_total + final_norm + c.embedding;
  c.active = m.num_layers * layer_active + final_norm + c.embedding;
  return c;
}

double model_flops_per_iteration(const JobSpec& job) {
  // Megatron-LM training.py, num_floating_point_operations() for a standard
  // transformer: every GEMM runs 3 times (forward, dgrad, wgrad) at 2 FLOPs
  // per multiply-add; causal attention counts half of the score matrix;
  // every layer is an MoE layer when the model has experts (moe_layer_freq 1).
  const ModelSpec& m = job.model;
  constexpr double kFwdBwd = 3;
  constexpr double kFma = 2;
  const double ffn_factor = m.gated() ? 3 : 2;
  const double h = m.hidden_size;
  const double s = job.training.seq_length;
  const double layers = m.num_layers;
  const double q = static_cast<double>(m.head_dim()) * m.num_attention_heads;
  const double kv = static_cast<double>(m.head_dim()) * m.query_groups();

  const double attention = kFwdBwd * kFma *
                           (h * (q + 2 * kv)  // qkv projection
                            + q * s / 2 * 2   // QK^T and (QK^T)V, causal half
                            + q * h);         // output projection
  double mlp = 0;
  if (m.is_moe()) {
    mlp = (static_cast<double>(m.moe_ffn()) * m.moe_router_topk * ffn_factor +
           static_cast<double>(m.moe_shared_expert_intermediate_size) * ffn_factor) *
          layers;
  } else {
    mlp = static_cast<double>(m.ffn()) * ffn_factor * layers;
  }
  mlp *= kFwdBwd * kFma * h;
  const double logits = kFwdBwd * kFma * h * m.padded_vocab_size(job.tp());
  const double tokens = static_cast<double>(job.training.global_batch_size) * s;
  return tokens * (mlp + attention * layers + logits);
}

}  // namespace prism
