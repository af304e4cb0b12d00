// Selective recompute's modules (training.recompute_modules, Megatron-Core's
// --recompute-modules): each drops exactly the activations its module makes
// and runs that module's forward again before its backward.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "workload/job_yaml.h"
#include "workload/megatron.h"
#include "workload/megatron_shapes.h"

#include "megatron_test_util.h"

namespace prism {
namespace {

using testing::build;
using testing::check_random_job;
using testing::cluster;
using testing::parse;

// Compute and communication ops named `name` in stage 0's role.
std::int64_t ops_named(const BuiltJob& b, const std::string& name) {
  const Role& role = b.graph.roles[0];
  return std::count_if(role.ops.begin(), role.ops.end(), [&](const Op& op) {
    return op.kind != OpKind::kAlloc && op.kind != OpKind::kFree && role.names[op.name] == name;
  });
}

// Bytes of the named tensors in the activation list of `job` without recompute.
std::int64_t tensor_bytes(const JobSpec& job, bool moe, const std::vector<std::string>& names) {
  JobSpec none = job;
  none.training.recompute = Recompute::kNone;
  std::int64_t sum = 0;
  for (const ActivationTensor& t : layer_activation_tensors(none, moe))
    if (std::find(names.begin(), names.end(), t.name) != names.end()) sum += t.bytes;
  return sum;
}

// A dense job of 4 layers, tp 2 with sequence parallelism, 4 micro-batches;
// the training section is left open for the case's fields.
std::string dense_base() {
  return "model: {num_layers: 4, hidden_size: 512, num_attention_heads: 8, vocab_size: 5000}\n"
         "parallelism: {tensor_model_parallel_size: 2, sequence_parallel: true}\n" +
         cluster(2) + "training: {seq_length: 512, global_batch_size: 4, ";
}

TEST(MegatronRecomputeModules, DenseCoreAttentionAndMlp) {
  const std::string base = dense_base();
  struct Case {
    std::string training;
    int attn_fwd, fc1_fwd;  // per layer and micro-batch
    std::vector<std::string> dropped;
  };
  const Case cases[] = {
      {"recompute: none}", 1, 1, {}},
      {"recompute: selective}", 2, 1, {}},  // core_attn, Megatron's default
      {"recompute: selective, recompute_modules: []}", 1, 1, {}},
      {"recompute: selective, recompute_modules: [mlp]}",
       1,
       2,
       {"fc1_input", "fc1_output", "act_output"}},
      {"recompute-granularity: selective, recompute-modules: core_attn mlp}",
       2,
       2,
       {"fc1_input", "fc1_output", "act_output"}},
  };
  std::int64_t none_bytes = 0;
  for (const Case& c : cases) {
    const std::string yaml = base + c.training + "\n";
    SCOPED_TRACE(yaml);
    const JobSpec job = parse(yaml);
    const BuiltJob b = build(job);
    const int per_stage = 4 * job.num_microbatches();
    EXPECT_EQ(ops_named(b, "attn_fwd"), c.attn_fwd * per_stage);
    EXPECT_EQ(ops_named(b, "fc1_fwd"), c.fc1_fwd * per_stage);
    // The re-run MLP reduces FC2's output over TP again: one more
    // reduce-scatter per layer and micro-batch.
    const std::int64_t bytes = b.roles[0].activation_bytes_per_layer.count;
    if (c.training == "recompute: none}") none_bytes = bytes;
    EXPECT_EQ(bytes, none_bytes - tensor_bytes(job, false, c.dropped));
    check_random_job(job, yaml);
  }
}

// Under FP8 the projection keeps its own quantized input, so a checkpointed
// flash core's bf16 output has no reader left: selective recompute keeps it
// no longer (in bf16 it is the projection's saved input and stays).
TEST(MegatronRecomputeModules, Fp8CheckpointedFlashCoreKeepsNoBf16Output) {
  const std::string base = dense_base();
  struct Case {
    std::string training;
    std::vector<std::string> dropped;  // against the same precision without recompute
  };
  const Case cases[] = {
      {"precision: fp8, recompute: selective}", {"attn_out"}},
      {"precision: fp8, recompute: selective, recompute_modules: []}", {}},
      // The unfused core drops its score-sized tensors (dropout 0.1 here).
      {"precision: fp8, recompute: selective, attention_backend: unfused}",
       {"attn_softmax", "attn_softmax_dropout_mask", "attn_probs"}},
      {"precision: bf16, recompute: selective}", {}},
  };
  for (const Case& c : cases) {
    const std::string yaml = base + c.training + "\n";
    SCOPED_TRACE(yaml);
    const JobSpec job = parse(yaml);
    JobSpec none = job;
    none.training.recompute = Recompute::kNone;
    const std::int64_t bytes = build(job).roles[0].activation_bytes_per_layer.count;
    const std::int64_t none_bytes = build(none).roles[0].activation_bytes_per_layer.count;
    EXPECT_EQ(bytes, none_bytes - tensor_bytes(job, false, c.dropped));
    if (c.dropped == std::vector<std::string>{"attn_out"}) {
      // The dropped output is one bf16 [tokens, heads x channels / tp] tensor.
      EXPECT_EQ(none_bytes - bytes, 2 * 512 * 512 / 2);
    }
    check_random_job(job, yaml);
  }
  // The same under context parallelism's ring, userbuffers' overlaps, an
  // interleaved pipeline and MoE layers: the transient output is freed once
  // and every layout still replays, folds and balances its memory.
  const std::string layouts[] = {
      "parallelism: {context_parallel_size: 2}\n" + cluster(2),
      "parallelism: {tensor_model_parallel_size: 2, sequence_parallel: true, "
      "tp_comm_overlap: true}\n" +
          cluster(2),
      "parallelism: {pipeline_model_parallel_size: 2, "
      "virtual_pipeline_model_parallel_size: 2}\n" +
          cluster(2),
  };
  const std::string models[] = {
      "model: {num_layers: 4, hidden_size: 512, num_attention_heads: 8, vocab_size: 5000}\n",
      "model: {num_layers: 4, hidden_size: 512, num_attention_heads: 8, vocab_size: 5000, "
      "activation: swiglu, normalization: RMSNorm, num_moe_experts: 4, moe_router_topk: 2}\n",
  };
  for (const std::string& model : models) {
    for (const std::string& layout : layouts) {
      const std::string yaml = model + layout +
                               "training: {seq_length: 512, global_batch_size: 4, precision: fp8, "
                               "recompute: selective}\n";
      SCOPED_TRACE(yaml);
      const JobSpec job = parse(yaml);
      JobSpec none = job;
      none.training.recompute = Recompute::kNone;
      EXPECT_EQ(build(job).roles[0].activation_bytes_per_layer.count,
                build(none).roles[0].activation_bytes_per_layer.count -
                    tensor_bytes(job, job.model.is_moe(), {"attn_out"}));
      check_random_job(job, yaml);
    }
  }
}

TEST(MegatronRecomputeModules, MoeNormActivationAndSharedExpert) {
  const std::string base =
      "model: {num_layers: 2, hidden_size: 512, num_attention_heads: 8, vocab_size: 5000, "
      "activation: swiglu, normalization: RMSNorm, num_moe_experts: 4, moe_router_topk: 2, "
      "moe_ffn_hidden_size: 256, moe_shared_expert_intermediate_size: 512}\n"
      "parallelism: {expert_model_parallel_size: 2}\n" +
      cluster(2) + "training: {seq_length: 256, global_batch_size: 4, ";
  const JobSpec none = parse(base + "recompute: none}\n");
  const BuiltJob b_none = build(none);
  const std::int64_t none_bytes = b_none.roles[0].activation_bytes_per_layer.count;
  struct Case {
    std::string modules;
    std::vector<std::string> dropped;
    int norm_fwd, swiglu_fwd, shared_fc1_fwd;  // per layer and micro-batch, beyond none's
  };
  const Case cases[] = {
      {"[layernorm]", {"router_input"}, 1, 0, 0},
      {"[moe_act]", {"expert_act_output"}, 0, 1, 0},
      {"[shared_experts]", {"shared_fc1_output", "shared_act_output"}, 0, 1, 1},
      {"[layernorm, moe_act, shared_experts, mlp]",
       {"router_input", "expert_act_output", "shared_fc1_output", "shared_act_output"},
       1,
       2,
       1},
      // The whole layer: everything but its input, and every forward kernel
      // again (the experts' and the shared expert's activations).
      {"[moe]",
       {"router_logits", "expert_input", "expert_fc1_output", "expert_act_output",
        "shared_fc1_output", "shared_act_output"},
       0,
       2,
       1},
      {"[moe, moe_act, shared_experts]",
       {"router_logits", "expert_input", "expert_fc1_output", "expert_act_output",
        "shared_fc1_output", "shared_act_output"},
       0,
       2,
       1},
  };
  for (const Case& c : cases) {
    const std::string yaml = base + "recompute: selective, recompute_modules: " + c.modules + "}\n";
    SCOPED_TRACE(yaml);
    const JobSpec job = parse(yaml);
    const BuiltJob b = build(job);
    const std::int64_t per_stage = 2 * job.num_microbatches();
    auto extra = [&](const std::string& kernel) {
      return ops_named(b, kernel) - ops_named(b_none, kernel);
    };
    // Flash attention with core_attn absent: no attention re-run.
    EXPECT_EQ(extra("attn_fwd"), 0);
    EXPECT_EQ(extra("norm_fwd"), c.norm_fwd * per_stage);
    EXPECT_EQ(extra("swiglu_fwd"), c.swiglu_fwd * per_stage);
    EXPECT_EQ(extra("shared_fc1_fwd"), c.shared_fc1_fwd * per_stage);
    // The router and the experts' dispatch run again only with moe.
    const bool whole = c.modules == "[moe]" || c.modules.starts_with("[moe,");
    EXPECT_EQ(extra("router_fwd"), whole ? per_stage : 0);
    EXPECT_EQ(extra("ep_dispatch"), whole ? per_stage : 0);
    EXPECT_EQ(b.roles[0].activation_bytes_per_layer.count,
              none_bytes - tensor_bytes(job, true, c.dropped));
    check_random_job(job, yaml);
  }
}

TEST(MegatronRecomputeModules, RecomputeModulesAreReadAsMegatronWritesThem) {
  const std::string base =
      "model: {num_layers: 2, hidden_size: 512, num_attention_heads: 8, vocab_size: 5000}\n" +
      cluster(1) + "training: {recompute: selective, ";
  EXPECT_EQ(parse(base + "}\n").training.recompute_modules, RecomputeModules{});
  EXPECT_EQ(
      to_string(parse(base + "recompute_modules: [mlp, core_attn]}\n").training.recompute_modules),
      "core_attn, mlp");
  EXPECT_EQ(
      to_string(
          parse(base + "recompute_modules: 'layernorm,moe_act'}\n").training.recompute_modules),
      "moe_act, layernorm");
  EXPECT_EQ(to_string(parse(base + "recompute_modules: []}\n").training.recompute_modules), "none");
  Result<JobSpec> bad = parse_job_yaml(base + "recompute_modules: [mlp, attn]}\n", "job.yaml");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find(
                "training.recompute_modules: unknown module \"attn\" (Megatron-Core's: core_attn, "
                "moe_act, layernorm, mla_up_proj, mlp, moe, shared_experts)"),
            std::string::npos)
      << bad.status().message();
  Result<JobSpec> nested = parse_job_yaml(base + "recompute_modules: [[mlp]]}\n", "job.yaml");
  EXPECT_FALSE(nested.is_ok());
  // Without selective recompute the list is read and ignored, as Megatron-Core does.
  const JobSpec full =
      parse("model: {num_layers: 2, hidden_size: 512, num_attention_heads: 8, vocab_size: 5000}\n" +
            cluster(1) + "training: {recompute: full, recompute_modules: [moe]}\n");
  EXPECT_FALSE(full.training.recomputes(RecomputeModule::kMoe));
}

}  // namespace
}  // namespace prism
