#include "workload/job_yaml.h"

#include "net/cluster_yaml.h"

#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "util/file.h"

namespace prism {
namespace {

// Llama-2 7B on 64 H100s, tp 2 x pp 2 x dp 16.
constexpr const char* kBase =
    "name: t\n"                                               // 1
    "model: {preset: llama2-7b}\n"                            // 2
    "training: {seq_length: 4096, global_batch_size: 128}\n"  // 3
    "parallelism:\n"                                          // 4
    "  tensor_model_parallel_size: 2\n"                       // 5
    "  pipeline_model_parallel_size: 2\n"                     // 6
    "cluster: {preset: dgx-h100, num_gpus: 64}\n";            // 7

std::string error_of(const std::string& text, const std::vector<std::string>& overrides = {}) {
  Result<JobSpec> j = parse_job_yaml(text, "job.yaml", overrides);
  if (j.is_ok()) return "(parsed)";
  EXPECT_EQ(j.status().code(), StatusCode::kInvalidArgument);
  return j.status().message();
}

TEST(JobYaml, FullSpec) {
  Result<JobSpec> j = parse_job_yaml(
      "name: llama3-70b-h100\n"
      "model: {preset: llama3.1-70b}\n"
      "training: {seq_length: 8192, micro_batch_size: 1, global_batch_size: 128,\n"
      "           precision: fp8, recompute: selective, use_distributed_optimizer: true,\n"
      "           overlap_grad_reduce: true, overlap_param_gather: true, bucket_size: 50000000}\n"
      "parallelism: {tensor_model_parallel_size: 4, pipeline_model_parallel_size: 4,\n"
      "              virtual_pipeline_model_parallel_size: 5, context_parallel_size: 2,\n"
      "              sequence_parallel: true}\n"
      "cluster: {preset: dgx-h100, num_gpus: 64}\n",
      "job.yaml");
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  EXPECT_EQ(j->name, "llama3-70b-h100");
  EXPECT_EQ(j->model.preset, "llama3.1-70b");
  EXPECT_EQ(j->model.num_layers, 80);
  EXPECT_EQ(j->training.seq_length, 8192);
  EXPECT_EQ(j->training.precision, Precision::kFp8);
  EXPECT_EQ(j->training.recompute, Recompute::kSelective);
  EXPECT_TRUE(j->training.overlap_param_gather);
  EXPECT_EQ(j->bucket_params(), 50'000'000);
  EXPECT_EQ(j->tp(), 4);
  EXPECT_EQ(j->vpp(), 5);
  EXPECT_EQ(j->cp(), 2);
  EXPECT_TRUE(j->parallelism.sequence_parallel);
  EXPECT_EQ(j->num_gpus, 64);
  EXPECT_EQ(j->cluster.num_nodes, 8);
  EXPECT_EQ(j->cluster.name, "dgx-h100");
  EXPECT_EQ(j->dp(), 2);
  EXPECT_EQ(j->num_microbatches(), 64);
}

TEST(JobYaml, EnumValuesIgnoreCase) {
  Result<JobSpec> j = parse_job_yaml(
      "model: {preset: llama2-7b, normalization: layernorm}\n"
      "training: {precision: BF16, attention_backend: Unfused}\n"
      "cluster: {preset: dgx-h100, num_nodes: 1}\n",
      "<test>");
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  EXPECT_EQ(j->model.normalization, Normalization::kLayerNorm);
  EXPECT_EQ(j->training.precision, Precision::kBf16);
  EXPECT_EQ(j->training.attention_backend, AttentionBackend::kUnfused);
  Result<JobSpec> uneven = parse_job_yaml(
      "model: {preset: llama2-7b}\n"
      "parallelism: {pipeline_model_parallel_size: 4, decoder_first_pipeline_num_layers: 5,\n"
      "              decoder_last_pipeline_num_layers: 9}\n"
      "cluster: {preset: dgx-h100, num_nodes: 1}\n",
      "<test>");
  ASSERT_TRUE(uneven.is_ok()) << uneven.status().message();
  EXPECT_EQ(uneven->layers_on_stage(0), 5);
  EXPECT_EQ(uneven->layers_on_stage(3), 9);
}

TEST(JobYaml, Defaults) {
  Result<JobSpec> j = parse_job_yaml(
      "model: {preset: llama2-7b}\nparallelism: {tensor_model_parallel_size: 1, "
      "sequence_parallel: true}\ncluster: {preset: dgx-h100, num_nodes: 2}\n",
      "dir/my-job.yaml");
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  EXPECT_EQ(j->name, "my-job");  // from the file name
  EXPECT_EQ(j->training.seq_length, 2048);
  EXPECT_EQ(j->training.micro_batch_size, 1);
  EXPECT_EQ(j->training.global_batch_size, 16);  // micro_batch_size * dp
  EXPECT_EQ(j->training.precision, Precision::kBf16);
  EXPECT_EQ(j->training.recompute, Recompute::kNone);
  EXPECT_FALSE(j->parallelism.sequence_parallel);  // tp 1: off, as Megatron does
  EXPECT_EQ(j->pp(), 1);
  EXPECT_EQ(j->etp(), 1);
  EXPECT_EQ(j->num_gpus, 16);
}

TEST(JobYaml, CustomModelAndPresetFieldOverrides) {
  Result<JobSpec> j = parse_job_yaml(
      "model:\n  num_layers: 4\n  hidden_size: 256\n  num_attention_heads: 8\n"
      "  vocab_size: 1000\n  activation: squared_relu\n  normalization: RMSNorm\n"
      "  untie_embeddings_and_output_weights: true\n  num_moe_experts: 4\n"
      "  moe_router_topk: 1\n  moe_ffn_hidden_size: 512\n"
      "  moe_shared_expert_intermediate_size: 256\n  num_query_groups: 2\n  kv_channels: 64\n"
      "parallelism: {expert_model_parallel_size: 4, expert_tensor_parallel_size: 1}\n"
      "cluster: {preset: dgx-a100, num_gpus: 4}\n",
      "job.yaml");
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  EXPECT_EQ(j->model.preset, "");
  EXPECT_EQ(j->model.ffn(), 1024);
  EXPECT_EQ(j->model.head_dim(), 64);
  EXPECT_EQ(j->model.activation, Activation::kSquaredRelu);
  EXPECT_EQ(j->model.normalization, Normalization::kRmsNorm);
  EXPECT_EQ(j->ep(), 4);
  EXPECT_EQ(j->expert_dp(), 1);
  EXPECT_EQ(j->cluster.gpus_per_node, 4);  // part of one node

  // A preset's fields can be overridden, wherever `preset:` stands.
  j = parse_job_yaml(
      "model: {num_layers: 16, preset: llama2-7b}\ncluster: {preset: dgx-h100, num_gpus: 8}\n",
      "job.yaml");
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  EXPECT_EQ(j->model.preset, "llama2-7b");
  EXPECT_EQ(j->model.num_layers, 16);
  EXPECT_EQ(j->model.hidden_size, 4096);
}

TEST(JobYaml, Overrides) {
  Result<JobSpec> j =
      parse_job_yaml(kBase, "job.yaml",
                     {"parallelism.tensor_model_parallel_size=4", "model.preset=llama2-13b",
                      "cluster.num_gpus=128", "training.micro_batch_size=2", "name=other",
                      "parallelism.sequence_parallel=true"});
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  EXPECT_EQ(j->name, "other");
  EXPECT_EQ(j->tp(), 4);
  EXPECT_EQ(j->model.preset, "llama2-13b");
  EXPECT_EQ(j->model.num_layers, 40);
  EXPECT_EQ(j->num_gpus, 128);
  EXPECT_EQ(j->training.micro_batch_size, 2);
  EXPECT_EQ(j->training.global_batch_size, 128);
  EXPECT_EQ(j->dp(), 16);
  // An override may create a section, and the last one of a field wins.
  j = parse_job_yaml("model: {preset: llama2-7b}\ncluster: {preset: dgx-h100, num_gpus: 8}\n",
                     "job.yaml", {"training.seq_length=1024", "training.seq_length=512"});
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  EXPECT_EQ(j->training.seq_length, 512);
}

TEST(JobYaml, OverrideErrorsNameTheOverride) {
  EXPECT_EQ(error_of(kBase, {"parallelism.tensor_model_parallel_size=abc"}),
            "--set parallelism.tensor_model_parallel_size=abc: "
            "parallelism.tensor_model_parallel_size: expected an integer (got \"abc\")");
  EXPECT_EQ(error_of(kBase, {"parallelism.tensor_model_parallel_size=3"}),
            "--set parallelism.tensor_model_parallel_size=3: cluster.num_gpus: 64 is not "
            "divisible by parallelism.tensor_model_parallel_size 3 * "
            "pipeline_model_parallel_size 2 * context_parallel_size 1 = 6");
  EXPECT_EQ(
      error_of(kBase, {"training.speed=3"}),
      "--set training.speed=3: training.speed: unknown field (fields of training: "
      "seq_length, micro_batch_size, global_batch_size, precision, recompute, recompute_method, "
      "recompute_num_layers, recompute_modules, attention_backend, "
      "use_distributed_optimizer, overlap_grad_reduce, overlap_param_gather, bucket_size, "
      "grad_reduce_in_fp32, "
      "fp8_recipe, fp8_amax_history_len, fp8_param_gather, cross_entropy_loss_fusion, "
      "cross_entropy_fusion_impl, "
      "defer_embedding_wgrad_compute, wgrad_deferral_limit, deallocate_pipeline_outputs, "
      "optimizer_impl, enable_cuda_graph, external_cuda_graph, cuda_graph_scope)");
  EXPECT_EQ(error_of(kBase, {"optimizer.lr=3"}),
            "--set optimizer.lr=3: optimizer: unknown section (sections: name, model, training, "
            "parallelism, cluster, software)");
  EXPECT_EQ(error_of(kBase, {"model.preset=gpt5"}),
            "--set model.preset=gpt5: model.preset: unknown model preset \"gpt5\" (presets: "
            "gpt3-175b, llama2-7b, llama2-13b, llama2-70b, llama3.1-8b, llama3.1-70b, "
            "llama3.1-405b, mixtral-8x7b, mixtral-8x22b, nemotron4-15b, nemotron4-340b, "
            "deepseek-v3)");
  EXPECT_EQ(error_of(kBase, {"cluster.num_gpus=12"}),
            "--set cluster.num_gpus=12: cluster.num_gpus: 12 is not a whole number of 8-GPU "
            "nodes");
  EXPECT_EQ(error_of(kBase, {"cluster.gpu.arch=pascal"}),
            "--set cluster.gpu.arch=pascal: cluster.gpu.arch: unknown value \"pascal\" (values: "
            "volta, ampere, hopper, blackwell)");
  EXPECT_EQ(error_of(kBase, {"tensor_model_parallel_size"}),
            "--set tensor_model_parallel_size: expected section.key=value");
  EXPECT_EQ(error_of(kBase, {"parallelism..x=1"}),
            "--set parallelism..x=1: expected section.key=value");
  EXPECT_EQ(error_of(kBase, {"name.first=1"}), "--set name.first=1: name is not a mapping");
  EXPECT_EQ(error_of(kBase, {"model.num_layers=[1"}).substr(0, 41),
            "--set model.num_layers=[1: malformed valu");
}

// A name goes into JSON reports and terminals: ill-formed UTF-8 or a control
// character is refused at load, naming the byte (issue 26: found only after
// the whole simulation, in a library's words).
TEST(JobYaml, ANameMustBeText) {
  std::string text = kBase;
  text.replace(text.find("name: t"), 7, "name: \"bad\xffname\"");
  EXPECT_EQ(error_of(text),
            "job.yaml:1:7: name: byte 4 (0xff) is not UTF-8 text or is a control "
            "character");
  text = kBase;
  text.replace(text.find("name: t"), 7, "name: \"tab\\there\"");
  EXPECT_EQ(error_of(text),
            "job.yaml:1:7: name: byte 4 (0x09) is not UTF-8 text or is a control "
            "character");
  text = kBase;
  text.replace(text.find("name: t"), 7,
               "name: \"gr\xc3\xbc\xc3\x9f"
               "e\"");  // UTF-8 is fine
  EXPECT_EQ(error_of(text), "(parsed)");
}

TEST(JobYaml, ErrorsNameFileLineAndColumn) {
  EXPECT_EQ(error_of("model: {preset: llama2-7b}\ncluster: {preset: dgx-h100, num_gpus: 8}\n"
                     "optimizer: {lr: 1}\n"),
            "job.yaml:3:1: optimizer: unknown section (sections: name, model, training, "
            "parallelism, cluster, software)");
  EXPECT_EQ(error_of("model: {preset: llama2-7b, layers: 3}\n"
                     "cluster: {preset: dgx-h100, num_gpus: 8}\n"),
            "job.yaml:1:28: model.layers: unknown field (fields of model: preset, num_layers, "
            "hidden_size, ffn_hidden_size, num_attention_heads, num_query_groups, kv_channels, "
            "vocab_size, activation, normalization, untie_embeddings_and_output_weights, "
            "num_moe_experts, moe_router_topk, moe_ffn_hidden_size, "
            "moe_shared_expert_intermediate_size, hidden_dropout, attention_dropout)");
  EXPECT_EQ(error_of("model: {preset: llama2-7b}\ntraining:\n  seq_length: long\n"
                     "cluster: {preset: dgx-h100, num_gpus: 8}\n"),
            "job.yaml:3:15: training.seq_length: expected an integer (got \"long\")");
  EXPECT_EQ(error_of("model: {preset: llama2-7b}\ntraining: {seq_length: -5}\n"
                     "cluster: {preset: dgx-h100, num_gpus: 8}\n"),
            "job.yaml:2:24: training.seq_length: must be in [0, 1073741824] (got -5)");
  EXPECT_EQ(error_of("model: {preset: llama2-7b}\ntraining: {precision: fp16}\n"
                     "cluster: {preset: dgx-h100, num_gpus: 8}\n"),
            "job.yaml:2:23: training.precision: unknown value \"fp16\" (values: bf16, fp8)");
  EXPECT_EQ(error_of("model: {preset: llama2-7b, activation: relu}\n"
                     "cluster: {preset: dgx-h100, num_gpus: 8}\n"),
            "job.yaml:1:40: model.activation: unknown value \"relu\" (values: gelu, swiglu, "
            "squared_relu)");
  EXPECT_EQ(error_of("model: {preset: llama2-7b, normalization: batchnorm}\n"
                     "cluster: {preset: dgx-h100, num_gpus: 8}\n"),
            "job.yaml:1:43: model.normalization: unknown value \"batchnorm\" (values: LayerNorm, "
            "RMSNorm)");
  EXPECT_EQ(error_of("model: {preset: llama2-7b}\ntraining: {recompute: all}\n"
                     "cluster: {preset: dgx-h100, num_gpus: 8}\n"),
            "job.yaml:2:23: training.recompute: unknown value \"all\" (values: none, selective, "
            "full)");
  EXPECT_EQ(error_of("model: {preset: llama2-7b}\nparallelism: {sequence_parallel: maybe}\n"
                     "cluster: {preset: dgx-h100, num_gpus: 8}\n"),
            "job.yaml:2:34: parallelism.sequence_parallel: expected true or false (got \"maybe\")");
  EXPECT_EQ(error_of("model: {preset: llama2-7b}\nparallelism: 4\n"
                     "cluster: {preset: dgx-h100, num_gpus: 8}\n"),
            "job.yaml:2:14: parallelism: expected a mapping");
  EXPECT_EQ(error_of("name: [a]\nmodel: {preset: llama2-7b}\n"
                     "cluster: {preset: dgx-h100, num_gpus: 8}\n"),
            "job.yaml:1:7: name: expected a string");
  EXPECT_EQ(error_of("- 1\n"), "job.yaml:1:1: the job spec must be a mapping");
  EXPECT_EQ(error_of("model: {preset: [1\n"),
            "job.yaml:2:1: malformed YAML: a '[' list is not closed with ']'");
}

// Megatron's defaults: fp32 gradient reduction for bf16 (validate_args), the
// delayed FP8 recipe, no cross-entropy fusion (native when fused), dropout
// 0.1 unless a preset says how the model was trained.
TEST(JobYaml, MemoryFieldsDefaultToMegatrons) {
  Result<JobSpec> j = parse_job_yaml(
      "model: {num_layers: 2, hidden_size: 256, num_attention_heads: 8, vocab_size: 1000}\n"
      "cluster: {preset: dgx-h100, num_gpus: 8}\n",
      "job.yaml");
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  EXPECT_TRUE(j->training.grad_reduce_in_fp32);
  EXPECT_EQ(j->training.fp8_recipe, Fp8Recipe::kDelayed);
  EXPECT_FALSE(j->training.fp8_param_gather);
  EXPECT_FALSE(j->training.cross_entropy_loss_fusion);
  EXPECT_EQ(j->training.cross_entropy_fusion_impl, CrossEntropyFusionImpl::kNative);
  EXPECT_FALSE(j->training.defer_embedding_wgrad_compute);
  EXPECT_EQ(j->training.wgrad_deferral_limit, 0);
  EXPECT_TRUE(j->training.deallocate_pipeline_outputs);  // core_transformer_config_from_args
  EXPECT_EQ(j->training.optimizer_impl, OptimizerImpl::kMegatron);
  EXPECT_EQ(j->model.hidden_dropout, 0.1);
  EXPECT_EQ(j->model.attention_dropout, 0.1);
  j = parse_job_yaml("model: {preset: llama3.1-8b}\ncluster: {preset: dgx-h100, num_gpus: 8}\n",
                     "job.yaml");
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  EXPECT_EQ(j->model.hidden_dropout, 0.0);
  EXPECT_EQ(j->model.attention_dropout, 0.0);
  EXPECT_EQ(model_preset("gpt3-175b")->hidden_dropout, 0.1);
}

// deallocate_pipeline_outputs, either spelling, in the file or in --set.
TEST(JobYaml, DeallocatePipelineOutputsBothSpellings) {
  const std::string head =
      "model: {preset: llama2-7b}\nparallelism: {pipeline_model_parallel_size: 2}\n"
      "cluster: {preset: dgx-h100, num_gpus: 8}\n";
  for (const std::string key : {"deallocate_pipeline_outputs", "deallocate-pipeline-outputs"}) {
    SCOPED_TRACE(key);
    Result<JobSpec> j = parse_job_yaml(head + "training: {" + key + ": false}\n", "job.yaml");
    ASSERT_TRUE(j.is_ok()) << j.status().message();
    EXPECT_FALSE(j->training.deallocate_pipeline_outputs);
    j = parse_job_yaml(head, "job.yaml", {"training." + key + "=false"});
    ASSERT_TRUE(j.is_ok()) << j.status().message();
    EXPECT_FALSE(j->training.deallocate_pipeline_outputs);
    j = parse_job_yaml(head + "training: {" + key + ": true}\n", "job.yaml");
    ASSERT_TRUE(j.is_ok()) << j.status().message();
    EXPECT_TRUE(j->training.deallocate_pipeline_outputs);
  }
  EXPECT_EQ(error_of(head + "training: {deallocate_pipeline_outputs: true, "
                            "deallocate-pipeline-outputs: false}\n"),
            "job.yaml:4:47: training.deallocate_pipeline_outputs: given twice (as "
            "deallocate_pipeline_outputs and deallocate-pipeline-outputs)");
  EXPECT_EQ(error_of(head + "training: {deallocate_pipeline_outputs: 0.5}\n"),
            "job.yaml:4:41: training.deallocate_pipeline_outputs: expected true or false (got "
            "\"0.5\")");
  EXPECT_EQ(error_of(head, {"training.deallocate-pipeline-outputs=sometimes"}),
            "--set training.deallocate-pipeline-outputs=sometimes: "
            "training.deallocate_pipeline_outputs: expected true or false (got \"sometimes\")");
}

// Megatron's dashed spellings are the same fields, in the file and in --set;
// giving one field both ways is an error.
TEST(JobYaml, DashedSpellingsAreMegatronsArguments) {
  Result<JobSpec> j = parse_job_yaml(
      "model: {preset: llama3.1-8b, hidden-dropout: 0.05}\n"
      "training: {precision: fp8, fp8-recipe: tensorwise, grad-reduce-in-fp32: false,\n"
      "  use-distributed-optimizer: true, fp8-param-gather: true,\n"
      "  cross-entropy-loss-fusion: true, cross-entropy-fusion-impl: te,\n"
      "  defer-embedding-wgrad-compute: true, wgrad-deferral-limit: 3,\n"
      "  optimizer-impl: apex_distributed_fused_adam}\n"
      "parallelism: {tensor-model-parallel-size: 2, pipeline-model-parallel-size: 2}\n"
      "cluster: {preset: dgx-h100, num_gpus: 8}\n",
      "job.yaml", {"model.attention-dropout=0.2"});
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  EXPECT_EQ(j->model.hidden_dropout, 0.05);
  EXPECT_EQ(j->model.attention_dropout, 0.2);
  EXPECT_EQ(j->training.precision, Precision::kFp8);
  EXPECT_EQ(j->training.fp8_recipe, Fp8Recipe::kTensorwise);
  EXPECT_FALSE(j->training.grad_reduce_in_fp32);
  EXPECT_TRUE(j->training.fp8_param_gather);
  EXPECT_TRUE(j->training.cross_entropy_loss_fusion);
  EXPECT_EQ(j->training.cross_entropy_fusion_impl, CrossEntropyFusionImpl::kTe);
  EXPECT_TRUE(j->training.defer_embedding_wgrad_compute);
  EXPECT_EQ(j->training.wgrad_deferral_limit, 3);
  EXPECT_EQ(j->training.optimizer_impl, OptimizerImpl::kApexDistributedFusedAdam);
  EXPECT_EQ(j->tp(), 2);
  EXPECT_EQ(error_of("model: {preset: llama2-7b}\n"
                     "training: {grad_reduce_in_fp32: true, grad-reduce-in-fp32: false}\n"
                     "cluster: {preset: dgx-h100, num_gpus: 8}\n"),
            "job.yaml:2:39: training.grad_reduce_in_fp32: given twice (as grad_reduce_in_fp32 "
            "and grad-reduce-in-fp32)");
  // A validation error names the field by its canonical path, at the override.
  EXPECT_EQ(error_of(kBase, {"model.hidden-dropout=2"}),
            "--set model.hidden-dropout=2: model.hidden_dropout: 2 is not a probability in "
            "[0, 1] (torch.nn.Dropout)");
}

// The software section: a container release or the two library releases,
// as quoted text (YAML would read 2.10 as 2.1); dashed spellings too. Its
// errors point at the field; a release check at the field it refuses.
TEST(JobYaml, SoftwareSection) {
  Result<JobSpec> j =
      parse_job_yaml(std::string(kBase) + "software: {nemo: \"24.07\"}\n", "job.yaml");
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  EXPECT_EQ(j->software.nemo, "24.07");
  EXPECT_FALSE(j->software.megatron_core.given());
  j = parse_job_yaml(
      std::string(kBase) + "software: {megatron-core: \"0.13.0\", transformer_engine: \"2.10\"}\n",
      "job.yaml");
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  EXPECT_EQ(j->software.megatron_core, (Version{0, 13, 0}));
  EXPECT_EQ(j->software.transformer_engine, (Version{2, 10, 0}));
  j = parse_job_yaml(kBase, "job.yaml", {"software.transformer_engine=2.4"});
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  EXPECT_EQ(j->software.transformer_engine, (Version{2, 4, 0}));
  EXPECT_EQ(error_of(std::string(kBase) + "software: {megatron_core: 0.x}\n"),
            "job.yaml:8:27: software.megatron_core: \"0.x\" is not a release number (one to "
            "three numbers with dots, e.g. \"0.13.0\" or \"2.4\"; write it in quotes)");
  EXPECT_EQ(error_of(std::string(kBase) + "software: {pytorch: \"2.4\"}\n"),
            "job.yaml:8:12: software.pytorch: unknown field (fields of software: nemo, "
            "megatron_core, transformer_engine)");
  EXPECT_EQ(error_of(std::string(kBase) + "software: {nemo: \"24.07\"}\n",
                     {"training.cross_entropy_loss_fusion=true",
                      "training.cross_entropy_fusion_impl=te"}),
            "--set training.cross_entropy_fusion_impl=te: training.cross_entropy_fusion_impl: te "
            "needs Megatron-Core 0.12.0 or later (software.nemo 24.07 ships Megatron-Core 0.8.0; "
            "ModelParallelConfig.cross_entropy_fusion_impl is new in 0.12.0)");
  EXPECT_EQ(error_of(std::string(kBase) + "software: {nemo: \"30.01\"}\n"),
            "job.yaml:8:18: software.nemo: \"30.01\" is not a NeMo Framework release PrismLLM "
            "knows (24.05, 24.07, 24.09, 25.02, 25.02.01, 25.09, 25.11, 26.02, 26.04); give "
            "software.megatron_core and software.transformer_engine instead");
}

// CUDA graph fields: Megatron's names and dashed spellings, off by default.
TEST(JobYaml, CudaGraphFields) {
  Result<JobSpec> j = parse_job_yaml(kBase, "job.yaml");
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  EXPECT_FALSE(j->training.enable_cuda_graph);
  EXPECT_FALSE(j->training.external_cuda_graph);
  EXPECT_EQ(j->training.cuda_graph_scope, CudaGraphScope::kFull);
  j = parse_job_yaml(kBase, "job.yaml",
                     {"training.external-cuda-graph=true", "training.cuda-graph-scope=attn"});
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  EXPECT_TRUE(j->training.external_cuda_graph);
  EXPECT_EQ(j->training.cuda_graph_scope, CudaGraphScope::kAttn);
  EXPECT_EQ(error_of(kBase, {"training.cuda_graph_scope=layer"}),
            "--set training.cuda_graph_scope=layer: training.cuda_graph_scope: unknown value "
            "\"layer\" (values: full, attn, full_iteration)");
  EXPECT_EQ(error_of(kBase, {"training.enable_cuda_graph=true", "training.recompute=full"}),
            "--set training.enable_cuda_graph=true: training.enable_cuda_graph: cannot be "
            "combined with training.recompute full (Megatron-Core's TransformerConfig: 'CUDA "
            "graphs not supported with activation recomputation.')");
}

// Megatron's recompute arguments: --recompute-granularity is recompute.
TEST(JobYaml, RecomputeArgumentsAreMegatrons) {
  Result<JobSpec> j = parse_job_yaml(
      "model: {preset: llama2-7b}\n"
      "training: {recompute-granularity: full, recompute-method: block,\n"
      "  recompute-num-layers: 3}\n"
      "cluster: {preset: dgx-h100, num_gpus: 8}\n",
      "job.yaml");
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  EXPECT_EQ(j->training.recompute, Recompute::kFull);
  EXPECT_EQ(j->training.recompute_method, RecomputeMethod::kBlock);
  EXPECT_EQ(j->training.recompute_num_layers, 3);
  EXPECT_EQ(error_of("model: {preset: llama2-7b}\n"
                     "training: {recompute: full, recompute_granularity: selective}\n"
                     "cluster: {preset: dgx-h100, num_gpus: 8}\n"),
            "job.yaml:2:29: training.recompute: given twice (as recompute and "
            "recompute_granularity)");
  EXPECT_EQ(error_of("model: {preset: llama2-7b}\n"
                     "training: {recompute: full, recompute_method: random}\n"
                     "cluster: {preset: dgx-h100, num_gpus: 8}\n"),
            "job.yaml:2:47: training.recompute_method: unknown value \"random\" (values: "
            "uniform, block)");
}

// NeMo's fp8_params is Megatron-LM's --fp8-param-gather.
TEST(JobYaml, Fp8ParamsIsNemosNameOfFp8ParamGather) {
  Result<JobSpec> j = parse_job_yaml(
      "model: {preset: llama2-7b}\n"
      "training: {precision: fp8, use_distributed_optimizer: true, fp8_params: true}\n"
      "cluster: {preset: dgx-h100, num_gpus: 8}\n",
      "job.yaml");
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  EXPECT_TRUE(j->training.fp8_param_gather);
  EXPECT_EQ(error_of("model: {preset: llama2-7b}\n"
                     "training: {fp8_param_gather: true, fp8-params: false}\n"
                     "cluster: {preset: dgx-h100, num_gpus: 8}\n"),
            "job.yaml:2:36: training.fp8_param_gather: given twice (as fp8_param_gather and "
            "fp8-params)");
}

// Values of the wrong type or outside the enums (one each; the relations are
// validate_job's, tests/workload/job_spec_test.cc).
TEST(JobYaml, MemoryFieldValueErrors) {
  const std::string head = "model: {preset: llama2-7b}\ncluster: {preset: dgx-h100, num_gpus: 8}\n";
  EXPECT_EQ(error_of(head + "training: {grad_reduce_in_fp32: maybe}\n"),
            "job.yaml:3:33: training.grad_reduce_in_fp32: expected true or false (got \"maybe\")");
  EXPECT_EQ(error_of(head + "training: {fp8_recipe: hybrid}\n"),
            "job.yaml:3:24: training.fp8_recipe: unknown value \"hybrid\" (values: delayed, "
            "tensorwise, blockwise, mxfp8)");
  EXPECT_EQ(error_of(head + "training: {fp8_param_gather: 1.5}\n"),
            "job.yaml:3:30: training.fp8_param_gather: expected true or false (got \"1.5\")");
  EXPECT_EQ(error_of(head + "training: {cross_entropy_loss_fusion: yes please}\n"),
            "job.yaml:3:39: training.cross_entropy_loss_fusion: expected true or false (got "
            "\"yes please\")");
  EXPECT_EQ(error_of(head + "training: {cross_entropy_fusion_impl: apex}\n"),
            "job.yaml:3:39: training.cross_entropy_fusion_impl: unknown value \"apex\" (values: "
            "native, te)");
  EXPECT_EQ(error_of("model: {preset: llama2-7b, hidden_dropout: some}\n"
                     "cluster: {preset: dgx-h100, num_gpus: 8}\n"),
            "job.yaml:1:44: model.hidden_dropout: expected a number (got \"some\")");
}

TEST(JobYaml, ModelSectionErrors) {
  EXPECT_EQ(error_of("model: {preset: gpt5}\ncluster: {preset: dgx-h100, num_gpus: 8}\n"),
            "job.yaml:1:17: model.preset: unknown model preset \"gpt5\" (presets: gpt3-175b, "
            "llama2-7b, llama2-13b, llama2-70b, llama3.1-8b, llama3.1-70b, llama3.1-405b, "
            "mixtral-8x7b, mixtral-8x22b, nemotron4-15b, nemotron4-340b, deepseek-v3)");
  EXPECT_EQ(error_of("model:\n  num_layers: 2\n  hidden_size: 64\n  num_attention_heads: 4\n"
                     "cluster: {preset: dgx-h100, num_gpus: 8}\n"),
            "job.yaml:2:3: model: missing vocab_size: give a preset (gpt3-175b, llama2-7b, "
            "llama2-13b, llama2-70b, llama3.1-8b, llama3.1-70b, llama3.1-405b, mixtral-8x7b, "
            "mixtral-8x22b, nemotron4-15b, nemotron4-340b, deepseek-v3) or num_layers, "
            "hidden_size, num_attention_heads and vocab_size");
  // Without a model section, a job describes a program (capture_graph.h).
  EXPECT_EQ(error_of("cluster: {preset: dgx-h100, num_gpus: 8}\n"), "(parsed)");
  EXPECT_EQ(error_of("model: 7b\ncluster: {preset: dgx-h100, num_gpus: 8}\n"),
            "job.yaml:1:8: model: expected a mapping");
}

// validate_job()'s reasons point at the line of a field they name.
TEST(JobYaml, ValidationErrorsPointAtTheField) {
  std::string text = kBase;
  text.replace(text.find("tensor_model_parallel_size: 2"), 29, "tensor_model_parallel_size: 3");
  EXPECT_EQ(error_of(text),
            "job.yaml:7:39: cluster.num_gpus: 64 is not divisible by "
            "parallelism.tensor_model_parallel_size 3 * pipeline_model_parallel_size 2 * "
            "context_parallel_size 1 = 6");
  EXPECT_EQ(error_of("model: {preset: llama2-7b}\ntraining: {precision: fp8}\n"
                     "cluster: {preset: dgx-a100, num_gpus: 8}\n"),
            "job.yaml:2:23: training.precision: fp8 needs a hopper or blackwell GPU "
            "(cluster.gpu.arch is ampere)");
  // A field the preset set: the preset's line.
  EXPECT_EQ(error_of("model: {preset: llama2-7b}\nparallelism: {pipeline_model_parallel_size: 3}\n"
                     "cluster: {preset: dgx-h100, num_gpus: 24}\n"),
            "job.yaml:2:45: model.num_layers: 32 is not divisible by "
            "parallelism.pipeline_model_parallel_size 3");
  EXPECT_EQ(error_of("model: {preset: llama2-7b, num_layers: 30}\n"
                     "cluster: {preset: dgx-h100, num_gpus: 8}\n",
                     {"parallelism.pipeline_model_parallel_size=4"}),
            "--set parallelism.pipeline_model_parallel_size=4: model.num_layers: 30 is not "
            "divisible by parallelism.pipeline_model_parallel_size 4");
  EXPECT_EQ(error_of("model: {preset: mixtral-8x7b}\n"
                     "parallelism: {tensor_model_parallel_size: 2, expert_model_parallel_size: 8}\n"
                     "cluster: {preset: dgx-h100, num_gpus: 16}\n"),
            "job.yaml:2:14: parallelism.sequence_parallel: must be true with "
            "expert_model_parallel_size 8 and tensor_model_parallel_size 2 (Megatron-Core MoE)");
}

TEST(JobYaml, ClusterForms) {
  // A preset name with the size from --set.
  Result<JobSpec> j = parse_job_yaml("model: {preset: llama2-7b}\ncluster: dgx-b200\n", "job.yaml",
                                     {"cluster.num_nodes=4"});
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  EXPECT_EQ(j->cluster.name, "dgx-b200");
  EXPECT_EQ(j->cluster.arch, GpuArch::kBlackwell);
  EXPECT_EQ(j->num_gpus, 32);
  // An inline cluster spec in the cluster YAML format.
  j = parse_job_yaml(
      "model: {preset: llama2-7b}\n"
      "cluster:\n  gpu: {arch: ampere}\n  node: {gpus: 4, nvlink_links: 12}\n"
      "  network: {nics_per_node: 4, nic_Gbps: 100}\n  num_gpus: 16\n",
      "job.yaml");
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  EXPECT_EQ(j->cluster.name, "custom");
  EXPECT_EQ(j->cluster.num_nodes, 4);
  EXPECT_EQ(j->num_gpus, 16);
}

TEST(JobYaml, ClusterErrors) {
  EXPECT_EQ(error_of("model: {preset: llama2-7b}\ncluster: dgx-h100\n"),
            "job.yaml:2:10: cluster: give num_gpus or num_nodes (e.g. {preset: dgx-h100, "
            "num_gpus: 64}, or --set cluster.num_gpus=64)");
  EXPECT_EQ(error_of("model: {preset: llama2-7b}\ncluster: dgx-h900\n"),
            "job.yaml:2:10: cluster: \"dgx-h900\" is neither a cluster preset (dgx-a100, "
            "dgx-h100, hgx-h200, dgx-b200) nor a .yaml file");
  EXPECT_EQ(error_of("model: {preset: llama2-7b}\ncluster: [1]\n"),
            "job.yaml:2:10: cluster: expected a preset name, a cluster YAML path or a mapping");
  EXPECT_EQ(error_of("model: {preset: llama2-7b}\n"),
            "job.yaml: cluster: missing section: a preset with a size, e.g. {preset: dgx-h100, "
            "num_gpus: 64}");
  EXPECT_EQ(error_of("model: {preset: llama2-7b}\ncluster:\n  preset: dgx-h100\n"
                     "  node: {gpus: 8, nvlinks: 3}\n  num_gpus: 8\n"),
            "job.yaml:4:19: cluster.node.nvlinks: unknown field (fields of node: gpus, "
            "nvlink_links, nvlink_link_GBps, nvls, pcie_GBps, cpu_vendor)");
  EXPECT_EQ(error_of("model: {preset: llama2-7b}\ncluster: {preset: dgx-h100, num_gpus: 12}\n"),
            "job.yaml:2:39: cluster.num_gpus: 12 is not a whole number of 8-GPU nodes");
  EXPECT_EQ(error_of("model: {preset: llama2-7b}\n"
                     "cluster: {preset: dgx-h100, num_gpus: 16, num_nodes: 2}\n"),
            "job.yaml:2:10: give num_gpus or num_nodes, not both");
  EXPECT_EQ(error_of("model: {preset: llama2-7b}\ncluster: {preset: dgx-h100, num_gpus: 8}\n",
                     {"cluster.network.nic_Gbps=-1"}),
            "--set cluster.network.nic_Gbps=-1: cluster.network.nic_Gbps: must be > 0 and at "
            "most 100000 (got -1)");
}

class JobYamlFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) / "prism_job_yaml_test";
    std::filesystem::create_directories(dir_ / "clusters");
    ASSERT_TRUE(write_file_atomic((dir_ / "clusters" / "pod.yaml").string(),
                                  "preset: dgx-h100\nname: pod\nnetwork: {nic_Gbps: 200}\n"
                                  "num_nodes: 2\n")
                    .is_ok());
    ASSERT_TRUE(write_file_atomic((dir_ / "clusters" / "bad.yaml").string(),
                                  "preset: dgx-h100\nnetwork: {nic_Gbps: fast}\nnum_nodes: 2\n")
                    .is_ok());
  }
  std::string write_job(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    EXPECT_TRUE(write_file_atomic(path, text).is_ok());
    return path;
  }
  std::filesystem::path dir_;
};

TEST_F(JobYamlFiles, ClusterFileRelativeToTheJob) {
  const std::string path =
      write_job("job.yaml", "model: {preset: llama2-7b}\ncluster: clusters/pod.yaml\n");
  Result<JobSpec> j = load_job_yaml(path);
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  EXPECT_EQ(j->name, "job");
  EXPECT_EQ(j->cluster.name, "pod");
  EXPECT_DOUBLE_EQ(j->cluster.nic_Gbps, 200);
  EXPECT_EQ(j->num_gpus, 16);
  // --set reaches into the cluster file's settings.
  j = load_job_yaml(path, {"cluster.num_nodes=4", "cluster.network.nic_Gbps=400"});
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  EXPECT_EQ(j->num_gpus, 32);
  EXPECT_DOUBLE_EQ(j->cluster.nic_Gbps, 400);
}

TEST_F(JobYamlFiles, ClusterFileErrors) {
  const std::string bad =
      write_job("bad-job.yaml", "model: {preset: llama2-7b}\ncluster: clusters/bad.yaml\n");
  Result<JobSpec> j = load_job_yaml(bad);
  ASSERT_FALSE(j.is_ok());
  EXPECT_EQ(j.status().message(), (dir_ / "clusters" / "bad.yaml").string() +
                                      ":2:21: cluster.network.nic_Gbps: expected a number (got "
                                      "\"fast\")");
  const std::string pod =
      write_job("pod-job.yaml", "model: {preset: llama2-7b}\ncluster: clusters/pod.yaml\n");
  j = load_job_yaml(pod, {"cluster.num_gpus=8"});
  ASSERT_FALSE(j.is_ok());
  EXPECT_EQ(j.status().message(), "--set cluster.num_gpus=8: give num_gpus or num_nodes, not both");
  const std::string missing =
      write_job("missing.yaml", "model: {preset: llama2-7b}\ncluster: clusters/none.yaml\n");
  j = load_job_yaml(missing);
  ASSERT_FALSE(j.is_ok());
  EXPECT_EQ(
      j.status().message(),
      missing + ":2:10: cluster: " + (dir_ / "clusters" / "none.yaml").string() + ": no such file");
  EXPECT_FALSE(load_job_yaml((dir_ / "nope.yaml").string()).is_ok());
  // A device is not a cluster spec: refused, not read without end.
  const std::string device =
      write_job("device.yaml", "model: {preset: llama2-7b}\ncluster: /dev/zero\n");
  j = load_job_yaml(device);
  ASSERT_FALSE(j.is_ok());
  EXPECT_EQ(j.status().message(), device + ":2:10: cluster: /dev/zero: not a regular file");
  EXPECT_EQ(load_cluster_yaml("/dev/zero").status().message(), "/dev/zero: not a regular file");
}

// Megatron's --tp-comm-overlap-cfg names a YAML file of TE's ub_cfgs (TE's
// own files write 0 and 1): read relative to the job; its errors name it.
TEST_F(JobYamlFiles, TpCommOverlapCfgFile) {
  ASSERT_TRUE(write_file_atomic((dir_ / "ub.yaml").string(),
                                "qkv_dgrad:\n  method: bulk\n  num_sm: 4\n  set_sm_margin: 0\n"
                                "proj_fprop:\n  method: ring_exchange\n  set_sm_margin: 1\n")
                  .is_ok());
  ASSERT_TRUE(
      write_file_atomic((dir_ / "bad-ub.yaml").string(), "proj_fprop: {num_sm: lots}\n").is_ok());
  const std::string head =
      "model: {preset: llama2-7b}\ncluster: {preset: dgx-h100, num_gpus: 8}\n"
      "parallelism: {tensor_model_parallel_size: 4, sequence_parallel: true, tp_comm_overlap: "
      "true,\n  tp-comm-overlap-cfg: ";
  Result<JobSpec> j = load_job_yaml(write_job("ub-job.yaml", head + "ub.yaml}\n"));
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  const TpCommOverlapCfg& cfg = j->parallelism.tp_comm_overlap_cfg;
  EXPECT_EQ(cfg[UbGemm::kQkvDgrad].num_sm, 4);
  EXPECT_EQ(cfg[UbGemm::kQkvDgrad].set_sm_margin, false);
  EXPECT_EQ(cfg[UbGemm::kProjFprop].method, UbMethod::kRingExchange);
  EXPECT_EQ(cfg[UbGemm::kProjFprop].set_sm_margin, true);
  const std::string bad = write_job("bad-ub-job.yaml", head + "bad-ub.yaml}\n");
  j = load_job_yaml(bad);
  ASSERT_FALSE(j.is_ok());
  EXPECT_EQ(j.status().message(),
            bad + ":4:24: parallelism.tp_comm_overlap_cfg: " + (dir_ / "bad-ub.yaml").string() +
                ": proj_fprop.num_sm: expected an integer (got \"lots\")");
  const std::string missing = write_job("missing-ub-job.yaml", head + "none.yaml}\n");
  j = load_job_yaml(missing);
  ASSERT_FALSE(j.is_ok());
  EXPECT_EQ(j.status().message(), missing + ":4:24: parallelism.tp_comm_overlap_cfg: " +
                                      (dir_ / "none.yaml").string() + ": no such file");
}

}  // namespace
}  // namespace prism
