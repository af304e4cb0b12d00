#include "workload/job_spec.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <string>
#include <string_view>
#include <utility>

#include <gtest/gtest.h>

namespace prism {
namespace {

// Llama-2 7B on 8 DGX H100 nodes: tp 2, pp 2, dp 16, 8 micro-batches.
JobSpec base_job() {
  JobSpec j;
  j.name = "t";
  j.model = model_preset("llama2-7b").value();
  j.training.seq_length = 4096;
  j.training.micro_batch_size = 1;
  j.training.global_batch_size = 128;
  j.parallelism.tensor_model_parallel_size = 2;
  j.parallelism.pipeline_model_parallel_size = 2;
  j.cluster = cluster_preset("dgx-h100").value();
  EXPECT_TRUE(size_cluster(&j.cluster, 64, 0).is_ok());
  j.num_gpus = 64;
  return j;
}

// Mixtral 8x7B: tp 2, ep 4, pp 2 on 64 GPUs (expert dp 4).
JobSpec moe_job() {
  JobSpec j = base_job();
  j.model = model_preset("mixtral-8x7b").value();
  j.parallelism.expert_model_parallel_size = 4;
  j.parallelism.sequence_parallel = true;
  return j;
}

TEST(JobSpec, EnumNames) {
  EXPECT_EQ(to_string(Activation::kSquaredRelu), "squared_relu");
  EXPECT_EQ(to_string(Normalization::kRmsNorm), "RMSNorm");
  EXPECT_EQ(to_string(Precision::kFp8), "fp8");
  EXPECT_EQ(to_string(Recompute::kSelective), "selective");
  EXPECT_EQ(to_string(AttentionBackend::kUnfused), "unfused");
  EXPECT_EQ(to_string(Fp8Recipe::kBlockwise), "blockwise");
  EXPECT_EQ(to_string(CrossEntropyFusionImpl::kTe), "te");
  EXPECT_EQ(to_string(OptimizerImpl::kMegatron), "megatron");
  EXPECT_EQ(to_string(OptimizerImpl::kApexDistributedFusedAdam), "apex_distributed_fused_adam");
  EXPECT_EQ(to_string(CudaGraphScope::kFullIteration), "full_iteration");
}

TEST(JobSpec, UnevenPipelineLayers) {
  JobSpec j = base_job();  // 32 layers
  j.parallelism.pipeline_model_parallel_size = 4;
  j.parallelism.decoder_first_pipeline_num_layers = 5;
  j.parallelism.decoder_last_pipeline_num_layers = 9;
  ASSERT_TRUE(validate_job(j).is_ok()) << validate_job(j).message();
  EXPECT_EQ(j.layers_on_stage(0), 5);
  EXPECT_EQ(j.layers_on_stage(1), 9);
  EXPECT_EQ(j.layers_on_stage(2), 9);
  EXPECT_EQ(j.layers_on_stage(3), 9);
  j.parallelism.decoder_last_pipeline_num_layers = 0;  // 27 over 3 stages
  ASSERT_TRUE(validate_job(j).is_ok()) << validate_job(j).message();
  EXPECT_EQ(j.layers_on_stage(3), 9);
}

// Megatron-Core's get_num_layers_to_build with interleaving: the uneven
// stages' layers split over their chunks.
TEST(JobSpec, UnevenPipelineWithInterleaving) {
  JobSpec j = base_job();  // 32 layers, 8 micro-batches
  j.parallelism.pipeline_model_parallel_size = 4;
  j.parallelism.tensor_model_parallel_size = 1;
  j.parallelism.virtual_pipeline_model_parallel_size = 2;
  j.parallelism.decoder_first_pipeline_num_layers = 4;
  j.parallelism.decoder_last_pipeline_num_layers = 4;
  ASSERT_TRUE(validate_job(j).is_ok()) << validate_job(j).message();
  EXPECT_EQ(j.layers_in_chunk(0, 0), 2);
  EXPECT_EQ(j.layers_in_chunk(0, 1), 2);
  EXPECT_EQ(j.layers_in_chunk(1, 0), 6);
  EXPECT_EQ(j.layers_in_chunk(2, 1), 6);
  EXPECT_EQ(j.layers_in_chunk(3, 1), 2);
  EXPECT_EQ(j.layers_on_stage(1), 12);
}

// The embedding and the loss counted as layers of the even split (Llama 3.1
// 405B's 126 + 2 layers over pp 8, here with vpp 8: one layer in the first
// and last chunks).
TEST(JobSpec, EmbeddingAndLossAccountedForInTheSplit) {
  JobSpec j = base_job();
  j.model.num_layers = 30;
  j.parallelism.pipeline_model_parallel_size = 4;
  j.parallelism.tensor_model_parallel_size = 1;
  j.parallelism.virtual_pipeline_model_parallel_size = 2;
  j.parallelism.account_for_embedding_in_pipeline_split = true;
  j.parallelism.account_for_loss_in_pipeline_split = true;
  ASSERT_TRUE(validate_job(j).is_ok()) << validate_job(j).message();
  EXPECT_EQ(j.layers_in_split(), 32);
  EXPECT_EQ(j.layers_in_chunk(0, 0), 3);  // the embedding takes a layer's place
  EXPECT_EQ(j.layers_in_chunk(0, 1), 4);
  EXPECT_EQ(j.layers_in_chunk(3, 0), 4);
  EXPECT_EQ(j.layers_in_chunk(3, 1), 3);  // the loss does
  EXPECT_EQ(j.layers_on_stage(0), 7);
  EXPECT_EQ(j.layers_on_stage(1), 8);
  EXPECT_EQ(j.layers_on_stage(3), 7);
  int total = 0;
  for (int stage = 0; stage < j.pp(); ++stage) total += j.layers_on_stage(stage);
  EXPECT_EQ(total, 30);

  JobSpec llama = base_job();
  llama.model = model_preset("llama3.1-405b").value();
  llama.parallelism = {.tensor_model_parallel_size = 8,
                       .sequence_parallel = true,
                       .pipeline_model_parallel_size = 8,
                       .virtual_pipeline_model_parallel_size = 8,
                       .account_for_embedding_in_pipeline_split = true,
                       .account_for_loss_in_pipeline_split = true};
  llama.training.global_batch_size = 8;  // dp 1 on 64 GPUs: 8 micro-batches
  ASSERT_TRUE(validate_job(llama).is_ok()) << validate_job(llama).message();
  EXPECT_EQ(llama.layers_in_chunk(0, 0), 1);
  EXPECT_EQ(llama.layers_in_chunk(4, 3), 2);
  EXPECT_EQ(llama.layers_on_stage(0), 15);
  EXPECT_EQ(llama.layers_on_stage(7), 15);
}

// Megatron's --num-layers-per-virtual-pipeline-stage gives the chunks.
TEST(JobSpec, LayersPerVirtualStageGiveTheChunks) {
  JobSpec j = base_job();  // 32 layers over pp 2: 16 per stage
  j.parallelism.num_layers_per_virtual_pipeline_stage = 4;
  apply_job_defaults(&j);
  EXPECT_EQ(j.vpp(), 4);
  ASSERT_TRUE(validate_job(j).is_ok()) << validate_job(j).message();
  j.parallelism.account_for_embedding_in_pipeline_split = true;
  j.parallelism.account_for_loss_in_pipeline_split = true;
  j.model.num_layers = 30;  // (30 + 2) / 2 = 16 per stage again
  ASSERT_TRUE(validate_job(j).is_ok()) << validate_job(j).message();
}

TEST(JobSpec, EveryPresetIsValidOnItsOwnGrid) {
  ASSERT_EQ(model_preset_names().size(), 12u);
  for (std::string_view name : model_preset_names()) {
    Result<ModelSpec> m = model_preset(name);
    ASSERT_TRUE(m.is_ok()) << name;
    EXPECT_EQ(m->preset, name);
    JobSpec j = base_job();
    j.model = *m;
    j.parallelism.pipeline_model_parallel_size = 1;
    j.parallelism.sequence_parallel = true;
    if (m->is_moe()) j.parallelism.expert_model_parallel_size = 8;
    EXPECT_TRUE(validate_job(j).is_ok()) << name << ": " << validate_job(j).message();
  }
}

TEST(JobSpec, UnknownPresetNamesThePresets) {
  Result<ModelSpec> m = model_preset("gpt5");
  ASSERT_FALSE(m.is_ok());
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(m.status().message(),
            "unknown model preset \"gpt5\" (presets: gpt3-175b, llama2-7b, llama2-13b, "
            "llama2-70b, llama3.1-8b, llama3.1-70b, llama3.1-405b, mixtral-8x7b, mixtral-8x22b, "
            "nemotron4-15b, nemotron4-340b, deepseek-v3)");
}

TEST(JobSpec, PresetShapes) {
  const ModelSpec g = model_preset("gpt3-175b").value();
  EXPECT_EQ(g.ffn(), 4 * 12288);
  EXPECT_EQ(g.head_dim(), 128);
  EXPECT_EQ(g.query_groups(), 96);
  EXPECT_FALSE(g.untie_embeddings_and_output_weights);
  const ModelSpec l = model_preset("llama3.1-70b").value();
  EXPECT_EQ(l.query_groups(), 8);
  EXPECT_TRUE(l.gated());
  const ModelSpec d = model_preset("deepseek-v3").value();
  EXPECT_EQ(d.moe_ffn(), 2048);
  EXPECT_EQ(d.moe_router_topk, 8);
  EXPECT_EQ(d.moe_shared_expert_intermediate_size, 2048);
  const ModelSpec n = model_preset("nemotron4-340b").value();
  EXPECT_EQ(n.activation, Activation::kSquaredRelu);
  EXPECT_EQ(n.normalization, Normalization::kLayerNorm);
}

TEST(JobSpec, DerivedSizes) {
  JobSpec j = moe_job();
  EXPECT_EQ(j.dp(), 16);
  EXPECT_EQ(j.etp(), 2);
  EXPECT_EQ(j.expert_dp(), 4);
  EXPECT_EQ(j.num_microbatches(), 8);
  EXPECT_EQ(j.bucket_params(), 40'000'000);
  j.num_gpus = 1024;
  EXPECT_EQ(j.bucket_params(), 256'000'000);  // 1M * dp 256
  EXPECT_EQ(j.model.padded_vocab_size(1), 32000);
  EXPECT_EQ(j.model.padded_vocab_size(3), 32256);
  EXPECT_EQ(model_preset("gpt3-175b")->padded_vocab_size(1), 50304);
}

TEST(JobSpec, DefaultsFollowMegatron) {
  JobSpec j = base_job();
  j.training.global_batch_size = 0;
  j.training.micro_batch_size = 2;
  apply_job_defaults(&j);
  EXPECT_EQ(j.training.global_batch_size, 32);  // mbs 2 * dp 16
  EXPECT_EQ(j.num_microbatches(), 1);
  j.parallelism.tensor_model_parallel_size = 1;
  j.parallelism.sequence_parallel = true;
  apply_job_defaults(&j);
  EXPECT_FALSE(j.parallelism.sequence_parallel);  // ignored with tp 1
  EXPECT_EQ(j.training.global_batch_size, 32);    // already set
  EXPECT_TRUE(validate_job(base_job()).is_ok());
  EXPECT_TRUE(validate_job(moe_job()).is_ok()) << validate_job(moe_job()).message();
}

TEST(JobSpec, AcceptsWhatMegatronAccepts) {
  JobSpec j = base_job();
  j.model.vocab_size = 32001;                              // padded, not an error
  j.parallelism.virtual_pipeline_model_parallel_size = 4;  // 16 layers per stage, 4 chunks
  j.parallelism.context_parallel_size = 2;
  j.training.global_batch_size = 64;  // 8 micro-batches of dp 8
  EXPECT_TRUE(validate_job(j).is_ok()) << validate_job(j).message();
  JobSpec part = base_job();  // fewer GPUs than one node
  part.cluster = cluster_preset("dgx-h100").value();
  ASSERT_TRUE(size_cluster(&part.cluster, 4, 0).is_ok());
  part.num_gpus = 4;
  part.training.global_batch_size = 8;
  EXPECT_TRUE(validate_job(part).is_ok()) << validate_job(part).message();
  JobSpec fp8 = base_job();
  fp8.training.precision = Precision::kFp8;
  EXPECT_TRUE(validate_job(fp8).is_ok());
  // Recipes Hopper runs; fp8 primary weights with the distributed optimizer;
  // an mxfp8 recipe left over in a bf16 job is ignored, as Megatron does.
  for (const Fp8Recipe r : {Fp8Recipe::kDelayed, Fp8Recipe::kTensorwise, Fp8Recipe::kBlockwise}) {
    fp8.training.fp8_recipe = r;
    EXPECT_TRUE(validate_job(fp8).is_ok()) << to_string(r);
  }
  fp8.training.fp8_param_gather = true;
  fp8.training.use_distributed_optimizer = true;
  EXPECT_TRUE(validate_job(fp8).is_ok()) << validate_job(fp8).message();
  fp8.training.optimizer_impl = OptimizerImpl::kApexDistributedFusedAdam;
  EXPECT_TRUE(validate_job(fp8).is_ok()) << validate_job(fp8).message();
  JobSpec bf16 = base_job();
  bf16.training.fp8_recipe = Fp8Recipe::kMxfp8;
  bf16.model.hidden_dropout = 1.0;  // torch.nn.Dropout accepts 0 and 1
  bf16.model.attention_dropout = 0.0;
  EXPECT_TRUE(validate_job(bf16).is_ok()) << validate_job(bf16).message();
  JobSpec b200 = base_job();
  b200.cluster = cluster_preset("dgx-b200").value();
  ASSERT_TRUE(size_cluster(&b200.cluster, 64, 0).is_ok());
  b200.training.precision = Precision::kFp8;
  b200.training.fp8_recipe = Fp8Recipe::kMxfp8;
  EXPECT_TRUE(validate_job(b200).is_ok()) << validate_job(b200).message();
}

struct Rejection {
  const char* what;
  std::function<void(JobSpec*)> change;
  const char* message;
  bool moe = false;
};

class JobSpecRejects : public ::testing::TestWithParam<Rejection> {};

TEST_P(JobSpecRejects, WithTheFieldsAndValues) {
  JobSpec j = GetParam().moe ? moe_job() : base_job();
  GetParam().change(&j);
  const Status s = validate_job(j);
  ASSERT_FALSE(s.is_ok()) << GetParam().what;
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), GetParam().message) << GetParam().what;
}

INSTANTIATE_TEST_SUITE_P(
    All, JobSpecRejects,
    ::testing::Values(
        Rejection{"layers", [](JobSpec* j) { j->model.num_layers = 0; },
                  "model.num_layers: must be >= 1 (got 0)"},
        Rejection{"hidden", [](JobSpec* j) { j->model.hidden_size = -4; },
                  "model.hidden_size: must be >= 1 (got -4)"},
        Rejection{"heads", [](JobSpec* j) { j->model.num_attention_heads = 0; },
                  "model.num_attention_heads: must be >= 1 (got 0)"},
        Rejection{"vocab", [](JobSpec* j) { j->model.vocab_size = 0; },
                  "model.vocab_size: must be >= 1 (got 0)"},
        Rejection{"seq", [](JobSpec* j) { j->training.seq_length = 0; },
                  "training.seq_length: must be >= 1 (got 0)"},
        Rejection{"mbs", [](JobSpec* j) { j->training.micro_batch_size = 0; },
                  "training.micro_batch_size: must be >= 1 (got 0)"},
        Rejection{"gbs", [](JobSpec* j) { j->training.global_batch_size = 0; },
                  "training.global_batch_size: must be >= 1 (got 0)"},
        Rejection{"tp", [](JobSpec* j) { j->parallelism.tensor_model_parallel_size = 0; },
                  "parallelism.tensor_model_parallel_size: must be >= 1 (got 0)"},
        Rejection{"pp", [](JobSpec* j) { j->parallelism.pipeline_model_parallel_size = -1; },
                  "parallelism.pipeline_model_parallel_size: must be >= 1 (got -1)"},
        Rejection{"vpp",
                  [](JobSpec* j) { j->parallelism.virtual_pipeline_model_parallel_size = 0; },
                  "parallelism.virtual_pipeline_model_parallel_size: must be >= 1 (got 0)"},
        Rejection{"cp", [](JobSpec* j) { j->parallelism.context_parallel_size = 0; },
                  "parallelism.context_parallel_size: must be >= 1 (got 0)"},
        Rejection{"ep", [](JobSpec* j) { j->parallelism.expert_model_parallel_size = 0; },
                  "parallelism.expert_model_parallel_size: must be >= 1 (got 0)"},
        Rejection{"etp", [](JobSpec* j) { j->parallelism.expert_tensor_parallel_size = -2; },
                  "parallelism.expert_tensor_parallel_size: must be >= 0 (got -2)"},
        Rejection{"ffn", [](JobSpec* j) { j->model.ffn_hidden_size = -1; },
                  "model.ffn_hidden_size: must be >= 0 (got -1)"},
        Rejection{"gpus", [](JobSpec* j) { j->num_gpus = 0; },
                  "cluster.num_gpus: must be >= 1 (got 0)"},
        Rejection{"huge", [](JobSpec* j) { j->model.hidden_size = 1 << 21; },
                  "model.hidden_size: must be at most 1048576 (got 2097152)"},
        Rejection{"magnitude",
                  [](JobSpec* j) {
                    j->model.num_layers = 10000;
                    j->model.hidden_size = 1 << 20;
                  },
                  "model: 4.43e+16 parameters is beyond what is modelled (1e15)"},
        Rejection{"partial node", [](JobSpec* j) { j->num_gpus = 60; },
                  "cluster.num_gpus: 60 is not a whole number of 8-GPU nodes (cluster.node.gpus)"},
        Rejection{"too many", [](JobSpec* j) { j->num_gpus = 128; },
                  "cluster.num_gpus: 128 GPUs do not fit in the cluster's 64 (8 nodes)"},
        Rejection{"recompute method without full",
                  [](JobSpec* j) {
                    j->training.recompute = Recompute::kSelective;
                    j->training.recompute_method = RecomputeMethod::kUniform;
                  },
                  "training.recompute_method: uniform needs training.recompute full (got "
                  "selective; Megatron's rule: the method places whole-layer recompute)"},
        Rejection{"recompute layers without full",
                  [](JobSpec* j) { j->training.recompute_num_layers = 2; },
                  "training.recompute_num_layers: needs training.recompute full (got none; "
                  "Megatron's rule: selective recompute re-runs modules, not layers)"},
        Rejection{"recompute layers negative",
                  [](JobSpec* j) {
                    j->training.recompute = Recompute::kFull;
                    j->training.recompute_num_layers = -1;
                  },
                  "training.recompute_num_layers: -1 must be at least 1"},
        Rejection{"recompute block without layers",
                  [](JobSpec* j) {
                    j->training.recompute = Recompute::kFull;
                    j->training.recompute_method = RecomputeMethod::kBlock;
                  },
                  "training.recompute_num_layers: must be given with training.recompute_method "
                  "block (the layers of each model chunk that are recomputed)"},
        Rejection{"tp overlap without tp",
                  [](JobSpec* j) {
                    j->parallelism.tensor_model_parallel_size = 1;
                    j->parallelism.tp_comm_overlap = true;
                  },
                  "parallelism.tp_comm_overlap: needs parallelism.tensor_model_parallel_size > 1 "
                  "(got 1): it overlaps the tensor-parallel collectives"},
        Rejection{"defer wgrad without pp",
                  [](JobSpec* j) {
                    j->parallelism.pipeline_model_parallel_size = 1;
                    j->training.defer_embedding_wgrad_compute = true;
                  },
                  "training.defer_embedding_wgrad_compute: needs "
                  "parallelism.pipeline_model_parallel_size > 1 (got 1; Megatron's rule: the "
                  "deferred GEMMs run in the pipeline flush)"},
        Rejection{"defer wgrad negative limit",
                  [](JobSpec* j) {
                    j->training.defer_embedding_wgrad_compute = true;
                    j->training.wgrad_deferral_limit = -1;
                  },
                  "training.wgrad_deferral_limit: -1 must be at least 0 (0: every micro-batch "
                  "deferred; Megatron's rule)"},
        Rejection{"tp overlap without sp",
                  [](JobSpec* j) { j->parallelism.tp_comm_overlap = true; },
                  "parallelism.tp_comm_overlap: needs parallelism.sequence_parallel (Megatron's "
                  "rule: the overlap replaces sequence parallelism's all-gathers and "
                  "reduce-scatters)"},
        Rejection{"uneven negative",
                  [](JobSpec* j) { j->parallelism.decoder_first_pipeline_num_layers = -1; },
                  "parallelism.decoder_first_pipeline_num_layers: -1 must be at least 0"},
        Rejection{"uneven without pp",
                  [](JobSpec* j) {
                    j->parallelism.pipeline_model_parallel_size = 1;
                    j->parallelism.decoder_last_pipeline_num_layers = 4;
                  },
                  "parallelism.decoder_last_pipeline_num_layers: needs "
                  "pipeline_model_parallel_size > 1 (got 1)"},
        Rejection{"uneven with vpp",
                  [](JobSpec* j) {
                    j->parallelism.virtual_pipeline_model_parallel_size = 2;
                    j->parallelism.decoder_first_pipeline_num_layers = 9;
                    j->parallelism.decoder_last_pipeline_num_layers = 23;
                  },
                  "parallelism.decoder_first_pipeline_num_layers: 9 layers on the first stage, "
                  "not divisible by parallelism.virtual_pipeline_model_parallel_size 2 (the "
                  "model chunks of a stage hold as many layers each)"},
        Rejection{"uneven other stages with vpp",
                  [](JobSpec* j) {
                    j->parallelism.pipeline_model_parallel_size = 4;
                    j->parallelism.tensor_model_parallel_size = 1;
                    j->parallelism.virtual_pipeline_model_parallel_size = 2;
                    j->parallelism.decoder_first_pipeline_num_layers = 2;
                    j->parallelism.decoder_last_pipeline_num_layers = 12;  // 18 over 2 stages
                  },
                  "parallelism.decoder_first_pipeline_num_layers: 9 layers on each of the other "
                  "stages, not divisible by parallelism.virtual_pipeline_model_parallel_size 2 "
                  "(the model chunks of a stage hold as many layers each)"},
        Rejection{"uneven and embedding accounted for",
                  [](JobSpec* j) {
                    j->parallelism.decoder_last_pipeline_num_layers = 8;
                    j->parallelism.account_for_embedding_in_pipeline_split = true;
                  },
                  "parallelism.account_for_embedding_in_pipeline_split: cannot be combined with "
                  "parallelism.decoder_last_pipeline_num_layers (Megatron-Core's uneven split "
                  "places the embedding and loss with the first and last stages' layers)"},
        Rejection{"uneven and layers per virtual stage",
                  [](JobSpec* j) {
                    j->parallelism.decoder_first_pipeline_num_layers = 8;
                    j->parallelism.num_layers_per_virtual_pipeline_stage = 4;
                  },
                  "parallelism.num_layers_per_virtual_pipeline_stage: cannot be combined with "
                  "parallelism.decoder_first_pipeline_num_layers; give "
                  "parallelism.virtual_pipeline_model_parallel_size instead"},
        Rejection{"accounted layers % pp",
                  [](JobSpec* j) { j->parallelism.account_for_loss_in_pipeline_split = true; },
                  "model.num_layers: 32 (+1 for the embedding and loss accounted for in the "
                  "split) is not divisible by parallelism.pipeline_model_parallel_size 2"},
        Rejection{"a chunk of only the embedding",
                  [](JobSpec* j) {
                    j->model.num_layers = 31;
                    j->parallelism.virtual_pipeline_model_parallel_size = 16;
                    j->parallelism.account_for_embedding_in_pipeline_split = true;
                  },
                  "parallelism.account_for_embedding_in_pipeline_split: leaves a model chunk with "
                  "no transformer layer (1 per chunk); PrismLLM needs at least one in every chunk"},
        Rejection{"layers per virtual stage negative",
                  [](JobSpec* j) { j->parallelism.num_layers_per_virtual_pipeline_stage = -2; },
                  "parallelism.num_layers_per_virtual_pipeline_stage: -2 must be at least 0"},
        Rejection{"layers per virtual stage % stage",
                  [](JobSpec* j) { j->parallelism.num_layers_per_virtual_pipeline_stage = 5; },
                  "parallelism.num_layers_per_virtual_pipeline_stage: 5 does not split a stage's "
                  "16 layers into parallelism.virtual_pipeline_model_parallel_size 1 chunks"},
        Rejection{"layers per virtual stage against vpp",
                  [](JobSpec* j) {
                    j->parallelism.num_layers_per_virtual_pipeline_stage = 4;
                    j->parallelism.virtual_pipeline_model_parallel_size = 2;
                  },
                  "parallelism.num_layers_per_virtual_pipeline_stage: 4 does not split a stage's "
                  "16 layers into parallelism.virtual_pipeline_model_parallel_size 2 chunks"},
        Rejection{"uneven rest",
                  [](JobSpec* j) {
                    j->parallelism.pipeline_model_parallel_size = 4;
                    j->parallelism.decoder_first_pipeline_num_layers = 7;
                  },
                  "parallelism.decoder_first_pipeline_num_layers: model.num_layers 32 minus the "
                  "first (7) and last (0) stages' layers leaves 25, which does not divide evenly "
                  "over the other 3 stages"},
        Rejection{"uneven all taken",
                  [](JobSpec* j) {
                    j->parallelism.decoder_first_pipeline_num_layers = 16;
                    j->parallelism.decoder_last_pipeline_num_layers = 8;
                  },
                  "parallelism.decoder_first_pipeline_num_layers: model.num_layers 32 minus the "
                  "first (16) and last (8) stages' layers leaves 8, which does not divide evenly "
                  "over the other 0 stages"},
        Rejection{"unfused with cp",
                  [](JobSpec* j) {
                    j->parallelism.context_parallel_size = 2;
                    j->training.attention_backend = AttentionBackend::kUnfused;
                  },
                  "training.attention_backend: unfused cannot run context parallelism "
                  "(context_parallel_size 2): Megatron's ring attention needs a fused backend "
                  "(flash, fused, auto)"},
        Rejection{"bad cluster", [](JobSpec* j) { j->cluster.nic_Gbps = 0; },
                  "cluster.network.nic_Gbps: must be > 0 and at most 100000 (got 0)"},
        Rejection{"grid",
                  [](JobSpec* j) { j->parallelism.tensor_model_parallel_size = 3; },
                  "cluster.num_gpus: 64 is not divisible by "
                  "parallelism.tensor_model_parallel_size 3 * pipeline_model_parallel_size 2 * "
                  "context_parallel_size 1 = 6"},
        Rejection{"expert grid",
                  [](JobSpec* j) { j->parallelism.expert_tensor_parallel_size = 3; },
                  "cluster.num_gpus: 64 is not divisible by "
                  "parallelism.expert_tensor_parallel_size 3 * expert_model_parallel_size 4 * "
                  "pipeline_model_parallel_size 2 = 24 (the expert data-parallel groups)",
                  true},
        Rejection{"heads % tp",
                  [](JobSpec* j) {
                    j->model.num_attention_heads = 31;
                    j->model.num_query_groups = 31;
                    j->model.kv_channels = 128;
                  },
                  "model.num_attention_heads: 31 is not divisible by "
                  "parallelism.tensor_model_parallel_size 2"},
        Rejection{"heads % groups", [](JobSpec* j) { j->model.num_query_groups = 6; },
                  "model.num_attention_heads: 32 is not divisible by model.num_query_groups 6"},
        Rejection{"groups % tp",
                  [](JobSpec* j) {
                    j->model.num_query_groups = 4;
                    j->parallelism.tensor_model_parallel_size = 8;
                    j->parallelism.pipeline_model_parallel_size = 1;
                  },
                  "model.num_query_groups: 4 is not divisible by "
                  "parallelism.tensor_model_parallel_size 8"},
        Rejection{"hidden % heads", [](JobSpec* j) { j->model.hidden_size = 4100; },
                  "model.hidden_size: 4100 is not divisible by model.num_attention_heads 32 "
                  "(give model.kv_channels for a head size of its own)"},
        Rejection{"ffn % tp", [](JobSpec* j) { j->model.ffn_hidden_size = 11009; },
                  "model.ffn_hidden_size: 11009 is not divisible by "
                  "parallelism.tensor_model_parallel_size 2"},
        Rejection{"ep without moe", [](JobSpec* j) { j->parallelism.expert_model_parallel_size = 2; },
                  "parallelism.expert_model_parallel_size: 2 needs an MoE model "
                  "(model.num_moe_experts is 0)"},
        Rejection{"experts % ep", [](JobSpec* j) { j->model.num_moe_experts = 6; },
                  "model.num_moe_experts: 6 is not divisible by "
                  "parallelism.expert_model_parallel_size 4",
                  true},
        Rejection{"topk 0", [](JobSpec* j) { j->model.moe_router_topk = 0; },
                  "model.moe_router_topk: must be in [1, model.num_moe_experts 8] (got 0)", true},
        Rejection{"topk > experts", [](JobSpec* j) { j->model.moe_router_topk = 9; },
                  "model.moe_router_topk: must be in [1, model.num_moe_experts 8] (got 9)", true},
        Rejection{"moe ffn % etp", [](JobSpec* j) { j->model.moe_ffn_hidden_size = 14337; },
                  "model.moe_ffn_hidden_size: 14337 is not divisible by "
                  "parallelism.expert_tensor_parallel_size 2",
                  true},
        Rejection{"shared % tp",
                  [](JobSpec* j) { j->model.moe_shared_expert_intermediate_size = 1025; },
                  "model.moe_shared_expert_intermediate_size: 1025 is not divisible by "
                  "parallelism.tensor_model_parallel_size 2",
                  true},
        Rejection{"moe needs sp", [](JobSpec* j) { j->parallelism.sequence_parallel = false; },
                  "parallelism.sequence_parallel: must be true with expert_model_parallel_size 4 "
                  "and tensor_model_parallel_size 2 (Megatron-Core MoE)",
                  true},
        Rejection{"gbs % mbs*dp", [](JobSpec* j) { j->training.global_batch_size = 100; },
                  "training.global_batch_size: 100 is not divisible by training.micro_batch_size "
                  "1 * data-parallel size 16 = 16"},
        Rejection{"layers % pp", [](JobSpec* j) { j->model.num_layers = 33; },
                  "model.num_layers: 33 is not divisible by "
                  "parallelism.pipeline_model_parallel_size 2"},
        Rejection{"stage % vpp",
                  [](JobSpec* j) { j->parallelism.virtual_pipeline_model_parallel_size = 3; },
                  "model.num_layers: 32 layers over parallelism.pipeline_model_parallel_size 2 "
                  "give 16 per stage, not divisible by virtual_pipeline_model_parallel_size 3"},
        Rejection{"vpp without pp",
                  [](JobSpec* j) {
                    j->parallelism.pipeline_model_parallel_size = 1;
                    j->parallelism.virtual_pipeline_model_parallel_size = 2;
                  },
                  "parallelism.virtual_pipeline_model_parallel_size: 2 needs "
                  "pipeline_model_parallel_size > 1 (got 1)"},
        Rejection{"microbatches % pp",
                  [](JobSpec* j) {
                    j->parallelism.pipeline_model_parallel_size = 4;
                    j->parallelism.tensor_model_parallel_size = 1;
                    j->parallelism.virtual_pipeline_model_parallel_size = 2;
                    j->training.global_batch_size = 16 * 6;
                  },
                  "training.global_batch_size: 96 gives 6 micro-batches, not divisible by "
                  "parallelism.pipeline_model_parallel_size 4 (the interleaved schedule needs "
                  "whole rounds)"},
        Rejection{"seq % 2cp",
                  [](JobSpec* j) {
                    j->parallelism.context_parallel_size = 4;
                    j->training.seq_length = 4100;
                    j->training.global_batch_size = 32;
                  },
                  "training.seq_length: 4100 is not divisible by 2 * "
                  "parallelism.context_parallel_size 4 (the causal load-balanced split)"},
        Rejection{"sp split",
                  [](JobSpec* j) {
                    j->parallelism.sequence_parallel = true;
                    j->training.seq_length = 4095;
                  },
                  "training.seq_length: 4095 / parallelism.context_parallel_size 1 = 4095 is not "
                  "divisible by tensor_model_parallel_size 2 (sequence_parallel)"},
        Rejection{"fp8 on ampere",
                  [](JobSpec* j) {
                    j->cluster = cluster_preset("dgx-a100").value();
                    j->cluster.num_nodes = 8;
                    j->training.precision = Precision::kFp8;
                  },
                  "training.precision: fp8 needs a hopper or blackwell GPU (cluster.gpu.arch is "
                  "ampere)"},
        Rejection{"param gather without distopt",
                  [](JobSpec* j) {
                    j->training.overlap_param_gather = true;
                    j->training.overlap_grad_reduce = true;
                  },
                  "training.overlap_param_gather: needs training.use_distributed_optimizer "
                  "(Megatron's rule)"},
        Rejection{"param gather without grad reduce",
                  [](JobSpec* j) {
                    j->training.overlap_param_gather = true;
                    j->training.use_distributed_optimizer = true;
                  },
                  "training.overlap_param_gather: needs training.overlap_grad_reduce (Megatron's "
                  "rule)"},
        Rejection{"hidden dropout above 1", [](JobSpec* j) { j->model.hidden_dropout = 1.5; },
                  "model.hidden_dropout: 1.5 is not a probability in [0, 1] (torch.nn.Dropout)"},
        Rejection{"attention dropout below 0",
                  [](JobSpec* j) { j->model.attention_dropout = -0.1; },
                  "model.attention_dropout: -0.1 is not a probability in [0, 1] "
                  "(torch.nn.Dropout)"},
        Rejection{"mxfp8 on hopper",
                  [](JobSpec* j) {
                    j->training.precision = Precision::kFp8;
                    j->training.fp8_recipe = Fp8Recipe::kMxfp8;
                  },
                  "training.fp8_recipe: mxfp8 needs a blackwell GPU (cluster.gpu.arch is hopper; "
                  "Transformer Engine's check_mxfp8_support: 'Device compute capability 10.0 or "
                  "higher required for MXFP8 execution.')"},
        Rejection{"both cuda graph implementations",
                  [](JobSpec* j) {
                    j->training.enable_cuda_graph = true;
                    j->training.external_cuda_graph = true;
                  },
                  "training.enable_cuda_graph: cannot be combined with "
                  "training.external_cuda_graph (Megatron-LM: '--enable-cuda-graph and "
                  "--external-cuda-graph cannot be enabled at the same time.')"},
        Rejection{"cuda graphs with recompute",
                  [](JobSpec* j) {
                    j->training.enable_cuda_graph = true;
                    j->training.recompute = Recompute::kSelective;
                  },
                  "training.enable_cuda_graph: cannot be combined with training.recompute "
                  "selective (Megatron-Core's TransformerConfig: 'CUDA graphs not supported with "
                  "activation recomputation.')"},
        Rejection{"full iteration te graph",
                  [](JobSpec* j) {
                    j->training.external_cuda_graph = true;
                    j->training.cuda_graph_scope = CudaGraphScope::kFullIteration;
                  },
                  "training.cuda_graph_scope: full_iteration needs training.enable_cuda_graph, "
                  "not external_cuda_graph (Megatron-Core's TECudaGraphHelper: 'full_iteration "
                  "cuda graph is not supported for --external-cuda-graph. Please use "
                  "--enable-cuda-graph instead.')"},
        Rejection{"unknown container",
                  [](JobSpec* j) { j->software.nemo = "24.08"; },
                  "software.nemo: \"24.08\" is not a NeMo Framework release PrismLLM knows "
                  "(24.05, 24.07, 24.09, 25.02, 25.02.01, 25.09, 25.11, 26.02, 26.04); give "
                  "software.megatron_core and software.transformer_engine instead"},
        Rejection{"mla up projection recompute",
                  [](JobSpec* j) {
                    j->training.recompute = Recompute::kSelective;
                    j->training.recompute_modules.add(RecomputeModule::kMlaUpProj);
                  },
                  "training.recompute_modules: mla_up_proj needs multi-latent attention "
                  "(Megatron-Core: 'mla_up_proj in recompute_modules is only supported with "
                  "multi_latent_attention'), which PrismLLM does not model"},
        Rejection{"moe_act recompute under delayed scaling",
                  [](JobSpec* j) {
                    j->training.precision = Precision::kFp8;
                    j->training.recompute = Recompute::kSelective;
                    j->training.recompute_modules.add(RecomputeModule::kMoeAct);
                  },
                  "training.recompute_modules: moe_act and layernorm cannot be recomputed under "
                  "FP8 delayed scaling (Megatron-Core: 'Delayed scaling does not support moe_act "
                  "and layernorm recompute for fp8'; Transformer Engine's save_original_input "
                  "refuses DelayedScaling); use training.fp8_recipe tensorwise, or leave them out"},
        Rejection{"amax history of 0",
                  [](JobSpec* j) { j->training.fp8_amax_history_len = 0; },
                  "training.fp8_amax_history_len: must be in [1, 1048576] (got 0)"},
        Rejection{"amax history too long",
                  [](JobSpec* j) { j->training.fp8_amax_history_len = (1 << 20) + 1; },
                  "training.fp8_amax_history_len: must be in [1, 1048576] (got 1048577)"},
        Rejection{"fp8 params without fp8",
                  [](JobSpec* j) {
                    j->training.fp8_param_gather = true;
                    j->training.use_distributed_optimizer = true;
                  },
                  "training.fp8_param_gather: needs training.precision fp8 (got bf16; Megatron's "
                  "rule)"},
        Rejection{"fp8 params without distopt",
                  [](JobSpec* j) {
                    j->training.precision = Precision::kFp8;
                    j->training.fp8_param_gather = true;
                  },
                  "training.fp8_param_gather: needs training.use_distributed_optimizer "
                  "(Megatron's rule)"},
        Rejection{"apex adam without distopt",
                  [](JobSpec* j) {
                    j->training.optimizer_impl = OptimizerImpl::kApexDistributedFusedAdam;
                  },
                  "training.optimizer_impl: apex_distributed_fused_adam needs "
                  "training.use_distributed_optimizer (Apex's DistributedFusedAdam always shards "
                  "its state over data parallel)"},
        Rejection{"apex adam with expert parallel",
                  [](JobSpec* j) {
                    *j = moe_job();
                    j->training.use_distributed_optimizer = true;
                    j->training.optimizer_impl = OptimizerImpl::kApexDistributedFusedAdam;
                  },
                  "training.optimizer_impl: apex_distributed_fused_adam needs "
                  "parallelism.expert_model_parallel_size 1 (got 4; NeMo's "
                  "MegatronDistributedFusedAdam shards every parameter over the one data-parallel "
                  "group)"}),
    [](const ::testing::TestParamInfo<Rejection>& info) {
      std::string name = info.param.what;
      std::replace_if(
          name.begin(), name.end(), [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); },
          '_');
      return name;
    });

// CUDA graphs as Megatron accepts them: TE's graphs with recompute (only
// Megatron-Core's own refuse it), either scope, Megatron's own full-iteration
// graph; a scope without graphs is ignored.
TEST(JobSpec, CudaGraphsAsMegatronAcceptsThem) {
  JobSpec j = base_job();
  j.training.external_cuda_graph = true;
  j.training.recompute = Recompute::kSelective;
  j.training.cuda_graph_scope = CudaGraphScope::kAttn;
  EXPECT_TRUE(validate_job(j).is_ok()) << validate_job(j).message();
  j = base_job();
  j.training.enable_cuda_graph = true;
  for (const CudaGraphScope s :
       {CudaGraphScope::kFull, CudaGraphScope::kAttn, CudaGraphScope::kFullIteration}) {
    j.training.cuda_graph_scope = s;
    EXPECT_TRUE(validate_job(j).is_ok()) << to_string(s) << ": " << validate_job(j).message();
  }
  j = base_job();
  j.training.cuda_graph_scope = CudaGraphScope::kFullIteration;
  j.training.recompute = Recompute::kFull;
  EXPECT_TRUE(validate_job(j).is_ok()) << validate_job(j).message();
}

// CUDA graphs capture a Megatron model's layers.
TEST(JobSpec, ProgramJobRefusesCudaGraphs) {
  for (const bool external : {false, true}) {
    JobSpec j = base_job();
    j.has_model = false;
    (external ? j.training.external_cuda_graph : j.training.enable_cuda_graph) = true;
    EXPECT_EQ(
        validate_job(j).message(),
        std::string(external ? "training.external_cuda_graph" : "training.enable_cuda_graph") +
            ": captures a Megatron model's layers: a job without a model section cannot use "
            "it");
  }
}

// Deferring the output layer's weight gradient needs an output layer.
TEST(JobSpec, ProgramJobRefusesDeferredWgrad) {
  JobSpec j = base_job();
  j.has_model = false;
  ASSERT_TRUE(validate_job(j).is_ok()) << validate_job(j).message();
  j.training.defer_embedding_wgrad_compute = true;
  EXPECT_EQ(validate_job(j).message(),
            "training.defer_embedding_wgrad_compute: defers a Megatron model's output-layer "
            "GEMMs: a job without a model section cannot use it");
}

}  // namespace
}  // namespace prism

namespace prism {
namespace {

// Bounded work (issue 26): micro-batches x the fullest stage's layers above
// 2^18 are refused up front, naming the field and the limit; at the limit
// the job is valid.
TEST(JobSpec, WorkBeyondTheUnrollLimitIsRefused) {
  JobSpec j = base_job();  // llama2-7b, 32 layers, tp 2 pp 2 on 64 GPUs: dp 16, 16 layers a stage
  j.training.global_batch_size = 16 * 16384;  // 16,384 micro-batches x 16 layers = 2^18
  EXPECT_TRUE(validate_job(j).is_ok()) << validate_job(j).message();
  j.training.global_batch_size = 16 * 16400;
  const Status s = validate_job(j);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.message(),
            "training.global_batch_size: 262400 / (micro_batch_size 1 x data-parallel size 16) = "
            "16400 micro-batches per iteration, x 16 layers on the fullest pipeline stage = "
            "262400 layer passes, more than the 262144 a simulation unrolls (it would take "
            "minutes and gigabytes); lower the global batch: the iteration time grows in "
            "proportion to the micro-batches");
  // An uneven first stage is the fullest.
  j.model.num_layers = 34;
  j.parallelism.decoder_first_pipeline_num_layers = 18;
  j.training.global_batch_size = 16 * 16384;
  EXPECT_NE(validate_job(j).message().find("x 18 layers on the fullest"), std::string::npos)
      << validate_job(j).message();
}

// A job without a model section (a captured program's) has no layers to
// place: each field that places them is refused by name.
TEST(JobSpec, ProgramJobRefusesLayerPlacement) {
  const std::pair<std::string_view, std::function<void(ParallelSpec*)>> fields[] = {
      {"parallelism.virtual_pipeline_model_parallel_size",
       [](ParallelSpec* p) { p->virtual_pipeline_model_parallel_size = 2; }},
      {"parallelism.num_layers_per_virtual_pipeline_stage",
       [](ParallelSpec* p) { p->num_layers_per_virtual_pipeline_stage = 2; }},
      {"parallelism.account_for_embedding_in_pipeline_split",
       [](ParallelSpec* p) { p->account_for_embedding_in_pipeline_split = true; }},
      {"parallelism.account_for_loss_in_pipeline_split",
       [](ParallelSpec* p) { p->account_for_loss_in_pipeline_split = true; }},
      {"parallelism.tp_comm_overlap", [](ParallelSpec* p) { p->tp_comm_overlap = true; }}};
  for (const auto& [field, set] : fields) {
    JobSpec j = base_job();
    j.has_model = false;
    ASSERT_TRUE(validate_job(j).is_ok()) << validate_job(j).message();
    set(&j.parallelism);
    const Status s = validate_job(j);
    EXPECT_EQ(s.message(), std::string(field) +
                               ": describes a Megatron model's layers: a job without a model "
                               "section cannot use it");
  }
}

}  // namespace
}  // namespace prism
