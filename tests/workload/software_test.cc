#include "workload/software.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "workload/job_spec.h"

namespace prism {
namespace {

// Llama 3.1 8B on 8 H100s: tp 2, pp 2, dp 2.
JobSpec base_job() {
  JobSpec j;
  j.model = model_preset("llama3.1-8b").value();
  j.training.seq_length = 4096;
  j.training.global_batch_size = 16;
  j.parallelism.tensor_model_parallel_size = 2;
  j.parallelism.sequence_parallel = true;
  j.parallelism.pipeline_model_parallel_size = 2;
  j.cluster = cluster_preset("dgx-h100").value();
  EXPECT_TRUE(size_cluster(&j.cluster, 8, 0).is_ok());
  j.num_gpus = 8;
  return j;
}

TEST(Software, ParsesReleaseNumbers) {
  EXPECT_EQ(parse_version("0.13.0").value(), (Version{0, 13, 0}));
  EXPECT_EQ(parse_version("2.4").value(), (Version{2, 4, 0}));
  EXPECT_EQ(parse_version("2.10").value(), (Version{2, 10, 0}));
  EXPECT_EQ(parse_version("3").value(), (Version{3, 0, 0}));
  EXPECT_LT(parse_version("2.9").value(), parse_version("2.10").value());
  EXPECT_LT(parse_version("0.9.0").value(), parse_version("0.12.0").value());
  for (const char* bad : {"", "abc", "1.2.3.4", "1..2", "1.", ".1", "-1", "1.2x", "2.4.0rc1"}) {
    const Result<Version> v = parse_version(bad);
    ASSERT_FALSE(v.is_ok()) << bad;
    EXPECT_EQ(v.status().message(),
              std::string("\"") + bad +
                  "\" is not a release number (one to three numbers with dots, e.g. \"0.13.0\" "
                  "or \"2.4\"; write it in quotes)");
  }
  EXPECT_EQ(to_string(Version{0, 12, 0}), "0.12.0");
  EXPECT_EQ(to_string(Version{2, 2, 0}, true), "2.2");
  EXPECT_EQ(to_string(Version{2, 7, 1}, true), "2.7.1");
}

// The container table as the release notes list it (docs/job-spec.md).
TEST(Software, ContainersShipTheirReleases) {
  const struct {
    const char* nemo;
    Version core, te;
  } rows[] = {{"24.07", {0, 8, 0}, {1, 8, 0}},  {"24.09", {0, 9, 0}, {1, 10, 0}},
              {"25.02", {0, 11, 0}, {}},        {"25.09", {0, 14, 0}, {2, 7, 0}},
              {"25.11", {0, 15, 0}, {2, 9, 0}}, {"26.02", {0, 16, 0}, {2, 12, 0}}};
  for (const auto& r : rows) {
    const Result<SoftwareSpec> s = resolve_software({r.nemo, {}, {}});
    ASSERT_TRUE(s.is_ok()) << r.nemo << ": " << s.status().message();
    EXPECT_EQ(s->megatron_core, r.core) << r.nemo;
    EXPECT_EQ(s->transformer_engine, r.te) << r.nemo;
  }
  // A release given beside the container must be the one it ships; one it
  // does not name (25.02's TE) may be given.
  const Result<SoftwareSpec> te = resolve_software({"25.02", {}, {2, 1, 0}});
  ASSERT_TRUE(te.is_ok()) << te.status().message();
  EXPECT_EQ(te->transformer_engine, (Version{2, 1, 0}));
  EXPECT_TRUE(resolve_software({"24.07", {0, 8, 0}, {1, 8, 0}}).is_ok());
  EXPECT_EQ(resolve_software({"24.07", {}, {1, 9, 0}}).status().message(),
            "software.transformer_engine: 1.9 differs from the Transformer Engine 1.8 that "
            "software.nemo 24.07 ships");
  EXPECT_EQ(resolve_software({"25.09", {0, 13, 0}, {}}).status().message(),
            "software.megatron_core: 0.13.0 differs from the Megatron-Core 0.14.0 that "
            "software.nemo 25.09 ships");
  EXPECT_EQ(resolve_software({"23.11", {}, {}}).status().message(),
            "software.nemo: \"23.11\" is not a NeMo Framework release PrismLLM knows (24.05, "
            "24.07, 24.09, 25.02, 25.02.01, 25.09, 25.11, 26.02, 26.04); give "
            "software.megatron_core and software.transformer_engine instead");
}

// Every field below, all at once, with no release given: accepted (today's
// behaviour); with the newest releases too.
TEST(Software, WithoutAReleaseEveryFieldIsAccepted) {
  JobSpec j = base_job();
  j.training.precision = Precision::kFp8;
  j.training.fp8_recipe = Fp8Recipe::kBlockwise;
  j.training.use_distributed_optimizer = true;
  j.training.fp8_param_gather = true;
  j.training.cross_entropy_loss_fusion = true;
  j.training.cross_entropy_fusion_impl = CrossEntropyFusionImpl::kTe;
  j.training.enable_cuda_graph = true;
  j.training.cuda_graph_scope = CudaGraphScope::kFullIteration;
  j.parallelism.account_for_embedding_in_pipeline_split = true;
  j.parallelism.account_for_loss_in_pipeline_split = true;
  j.model.num_layers = 30;  // 30 + 2 over pp 2
  EXPECT_TRUE(validate_job(j).is_ok()) << validate_job(j).message();
  j.software = {"", {0, 14, 0}, {2, 7, 0}};
  EXPECT_TRUE(validate_job(j).is_ok()) << validate_job(j).message();
  j.software = {"26.04", {}, {}};
  EXPECT_TRUE(validate_job(j).is_ok()) << validate_job(j).message();
}

// A release older than the feature: one error naming the field, its value,
// the release that introduced it and where the release says so. Each case
// also holds at the introducing release (accepted there).
struct Gate {
  const char* what;
  std::function<void(JobSpec*)> use;
  SoftwareSpec too_old;
  SoftwareSpec first;  // the first release that has it
  const char* message;
};

class SoftwareRejects : public ::testing::TestWithParam<Gate> {};

TEST_P(SoftwareRejects, NamingTheFieldAndTheRelease) {
  JobSpec j = base_job();
  GetParam().use(&j);
  ASSERT_TRUE(validate_job(j).is_ok()) << GetParam().what << ": " << validate_job(j).message();
  j.software = GetParam().too_old;
  EXPECT_EQ(validate_job(j).message(), GetParam().message) << GetParam().what;
  j.software = GetParam().first;
  EXPECT_TRUE(validate_job(j).is_ok()) << GetParam().what << ": " << validate_job(j).message();
}

void fp8(JobSpec* j, Fp8Recipe r) {
  j->training.precision = Precision::kFp8;
  j->training.fp8_recipe = r;
}
void te_cross_entropy(JobSpec* j) {
  j->training.cross_entropy_loss_fusion = true;
  j->training.cross_entropy_fusion_impl = CrossEntropyFusionImpl::kTe;
}

INSTANTIATE_TEST_SUITE_P(Gates, SoftwareRejects,
                         ::testing::
                             Values(Gate{"fused cross entropy",
                                         [](JobSpec* j) {
                                           j->training.cross_entropy_loss_fusion = true;
                                         },
                                         {"24.05", {}, {}},
                                         {"24.07", {}, {}},
                                         "training.cross_entropy_loss_fusion: true needs "
                                         "Megatron-Core 0.8.0 or later "
                                         "(software.nemo 24.05 ships Megatron-Core 0.7.0; "
                                         "ModelParallelConfig.cross_entropy_loss_fusion is new in "
                                         "0.8.0)"},
                                    Gate{"recompute modules",
                                         [](JobSpec* j) {
                                           j->training.recompute = Recompute::kSelective;
                                           j->training.recompute_modules.add(RecomputeModule::kMlp);
                                         },
                                         {"", {0, 12, 0}, {}},
                                         {"", {0, 13, 0}, {}},
                                         "training.recompute_modules: core_attn, mlp needs "
                                         "Megatron-Core 0.13.0 or later "
                                         "(software.megatron_core is 0.12.0; --recompute-modules "
                                         "is new in 0.13.0 (CHANGELOG: fine-grained "
                                         "recomputation); before it selective recompute re-runs "
                                         "the core attention only)"},
                                    Gate{"shared experts recompute",
                                         [](JobSpec* j) {
                                           j->training.recompute = Recompute::kSelective;
                                           j->training.recompute_modules.add(
                                               RecomputeModule::kSharedExperts);
                                         },
                                         {"", {0, 13, 0}, {}},
                                         {"", {0, 14, 0}, {}},
                                         "training.recompute_modules: shared_experts needs "
                                         "Megatron-Core 0.14.0 or later "
                                         "(software.megatron_core is 0.13.0; 0.13.0's "
                                         "recompute_modules choices are core_attn, moe_act, "
                                         "layernorm, mla_up_proj, mlp and moe)"},
                                    Gate{"fp8 layernorm recompute in te",
                                         [](JobSpec* j) {
                                           fp8(j, Fp8Recipe::kTensorwise);
                                           j->training.recompute = Recompute::kSelective;
                                           j->training.recompute_modules.add(
                                               RecomputeModule::kLayernorm);
                                         },
                                         {"", {0, 14, 0}, {2, 5, 0}},
                                         {"", {0, 14, 0}, {2, 6, 0}},
                                         "training.recompute_modules: moe_act or layernorm with "
                                         "fp8 needs Transformer Engine 2.6 or later "
                                         "(software.transformer_engine is 2.5; Megatron-Core's "
                                         "TransformerConfig: 'moe_act and layernorm recompute "
                                         "for fp8 needs transformer-engine>=2.6.0dev0')"},
                                    Gate{"te cross entropy in megatron-core",
                                         te_cross_entropy,
                                         {"", {0, 11, 0}, {}},
                                         {"", {0, 12, 0}, {}},
                                         "training.cross_entropy_fusion_impl: te needs "
                                         "Megatron-Core 0.12.0 or later "
                                         "(software.megatron_core is 0.11.0; "
                                         "ModelParallelConfig.cross_entropy_fusion_impl "
                                         "is new in 0.12.0)"},
                                    Gate{"te cross entropy in te",
                                         te_cross_entropy,
                                         {"", {}, {2, 0, 0}},
                                         {"", {}, {2, 1, 0}},
                                         "training.cross_entropy_fusion_impl: te needs Transformer "
                                         "Engine 2.1 or later "
                                         "(software.transformer_engine is 2.0; "
                                         "transformer_engine.pytorch.cross_entropy is "
                                         "new in 2.1; without it Megatron-Core raises 'Trying to "
                                         "use a TE block when it's "
                                         "not present.')"},
                                    Gate{"tensorwise in megatron-core",
                                         [](JobSpec* j) { fp8(j, Fp8Recipe::kTensorwise); },
                                         {"24.07", {}, {}},
                                         {"", {0, 12, 0}, {2, 2, 0}},
                                         "training.fp8_recipe: tensorwise needs Megatron-Core "
                                         "0.12.0 or later (software.nemo "
                                         "24.07 ships Megatron-Core 0.8.0; --fp8-recipe and its "
                                         "Fp8Recipe enum are new in "
                                         "0.12.0; before it Megatron-Core always builds TE's "
                                         "DelayedScaling)"},
                                    Gate{"tensorwise in te",
                                         [](JobSpec* j) { fp8(j, Fp8Recipe::kTensorwise); },
                                         {"", {0, 12, 0}, {2, 1, 0}},
                                         {"", {0, 12, 0}, {2, 2, 0}},
                                         "training.fp8_recipe: tensorwise needs Transformer Engine "
                                         "2.2 or later "
                                         "(software.transformer_engine is 2.1; Megatron-Core's "
                                         "get_fp8_recipe: 'Please make "
                                         "sure to use TransformerEngine version >= 2.2.0.dev0 for "
                                         "Float8CurrentScaling')"},
                                    Gate{"blockwise in megatron-core",
                                         [](JobSpec* j) { fp8(j, Fp8Recipe::kBlockwise); },
                                         {"", {0, 12, 0}, {}},
                                         {"", {0, 13, 0}, {}},
                                         "training.fp8_recipe: blockwise needs Megatron-Core "
                                         "0.13.0 or later "
                                         "(software.megatron_core is 0.12.0; Fp8Recipe.blockwise "
                                         "is new in 0.13.0)"},
                                    Gate{"blockwise in te",
                                         [](JobSpec* j) { fp8(j, Fp8Recipe::kBlockwise); },
                                         {"", {}, {2, 2, 0}},
                                         {"", {}, {2, 3, 0}},
                                         "training.fp8_recipe: blockwise needs Transformer Engine "
                                         "2.3 or later "
                                         "(software.transformer_engine is 2.2; Megatron-Core's "
                                         "get_fp8_recipe: '>= "
                                         "2.3.0.dev0 for Float8BlockScaling')"},
                                    Gate{"mxfp8 in te",
                                         [](JobSpec* j) {
                                           fp8(j, Fp8Recipe::kMxfp8);
                                           j->cluster = cluster_preset("dgx-b200").value();
                                           j->cluster.num_nodes = 1;
                                         },
                                         {"", {}, {2, 0, 0}},
                                         {"", {}, {2, 1, 0}},
                                         "training.fp8_recipe: mxfp8 needs Transformer Engine 2.1 "
                                         "or later "
                                         "(software.transformer_engine is 2.0; Megatron-Core's "
                                         "get_fp8_recipe: 'Please make "
                                         "sure to use TransformerEngine version >= 2.2.0.dev0 for "
                                         "Float8CurrentScaling, >= "
                                         "2.1.0 for MXFP8BlockScaling, and >= 2.3.0.dev0 for "
                                         "Float8BlockScaling')"},
                                    Gate{"a deferral limit",
             [](JobSpec* j) {
               j->training.defer_embedding_wgrad_compute = true;
               j->training.wgrad_deferral_limit = 2;
             },
             {"24.05", {}, {}},
             {"24.07", {}, {}},
             "training.wgrad_deferral_limit: 2 needs Megatron-Core 0.8.0 or later (software.nemo "
             "24.05 ships Megatron-Core 0.7.0; ModelParallelConfig.wgrad_deferral_limit is new in "
             "0.8.0; 0.7.0 defers every micro-batch)"},
        Gate{"fp8 param gather",
                                         [](JobSpec* j) {
                                           fp8(j, Fp8Recipe::kDelayed);
                                           j->training.use_distributed_optimizer = true;
                                           j->training.fp8_param_gather = true;
                                         },
                                         {"24.07", {}, {}},
                                         {"24.09", {}, {}},
                                         "training.fp8_param_gather: true needs Megatron-Core "
                                         "0.9.0 or later (software.nemo "
                                         "24.07 ships Megatron-Core 0.8.0; "
                                         "DistributedDataParallelConfig.fp8_param_gather is "
                                         "new in 0.9.0)"},
                                    Gate{"uneven first stage",
                                         [](JobSpec* j) {
                                           j->parallelism.decoder_first_pipeline_num_layers = 14;
                                         },
                                         {"", {0, 8, 0}, {}},
                                         {"", {0, 9, 0}, {}},
                                         "parallelism.decoder_first_pipeline_num_layers: 14 needs "
                                         "Megatron-Core 0.9.0 or "
                                         "later (software.megatron_core is 0.8.0; "
                                         "TransformerConfig.first_pipeline_num_layers "
                                         "/ last_pipeline_num_layers are new in 0.9.0)"},
                                    Gate{"uneven last stage with interleaving",
                                         [](JobSpec* j) {
                                           j->parallelism.decoder_last_pipeline_num_layers = 14;
                                           j->parallelism.virtual_pipeline_model_parallel_size = 2;
                                         },
                                         {"24.09", {}, {}},
                                         {"25.02", {}, {}},
                                         "parallelism.decoder_last_pipeline_num_layers: 14 with "
                                         "parallelism.virtual_pipeline_model_parallel_size 2 needs "
                                         "Megatron-Core 0.11.0 or "
                                         "later (software.nemo 24.09 ships Megatron-Core 0.9.0; "
                                         "0.9.0 and 0.10.0 assert "
                                         "'Uneven number of layer not compatible with interleaved "
                                         "pipeline schedule')"},
                                    Gate{"embedding in the split",
                                         [](JobSpec* j) {
                                           j->model.num_layers = 31;
                                           j->parallelism.account_for_embedding_in_pipeline_split =
                                               true;
                                         },
                                         {"", {0, 10, 0}, {}},
                                         {"", {0, 11, 0}, {}},
                                         "parallelism.account_for_embedding_in_pipeline_split: "
                                         "true needs Megatron-Core 0.11.0 "
                                         "or later (software.megatron_core is 0.10.0; "
                                         "TransformerConfig.account_for_embedding_in_pipeline_"
                                         "split is new in 0.11.0)"},
                                    Gate{"loss in the split",
                                         [](JobSpec* j) {
                                           j->model.num_layers = 31;
                                           j->parallelism.account_for_loss_in_pipeline_split = true;
                                         },
                                         {"", {0, 10, 0}, {}},
                                         {"", {0, 11, 0}, {}},
                                         "parallelism.account_for_loss_in_pipeline_split: true "
                                         "needs Megatron-Core 0.11.0 or "
                                         "later (software.megatron_core is 0.10.0; "
                                         "TransformerConfig.account_for_loss_in_pipeline_split is "
                                         "new in 0.11.0)"},
                                    Gate{"megatron cuda graphs",
                                         [](JobSpec* j) { j->training.enable_cuda_graph = true; },
                                         {"24.07", {}, {}},
                                         {"24.09", {}, {}},
                                         "training.enable_cuda_graph: true needs Megatron-Core "
                                         "0.9.0 or later (software.nemo "
                                         "24.07 ships Megatron-Core 0.8.0; Megatron-Core's own "
                                         "graphs (CudaGraphManager, "
                                         "transformer/cuda_graphs.py) are new in 0.9.0; before it "
                                         "the field only lets "
                                         "TransformerBlock replay graphs the training script "
                                         "captured, which "
                                         "external_cuda_graph names)"},
                                    Gate{"attention-only graphs",
                                         [](JobSpec* j) {
                                           j->training.external_cuda_graph = true;
                                           j->training.cuda_graph_scope = CudaGraphScope::kAttn;
                                         },
                                         {"25.02", {}, {}},
                                         {"", {0, 12, 0}, {}},
                                         "training.cuda_graph_scope: attn needs Megatron-Core "
                                         "0.12.0 or later (software.nemo "
                                         "25.02 ships Megatron-Core 0.11.0; "
                                         "TransformerConfig.cuda_graph_scope is new in "
                                         "0.12.0)"},
                                    Gate{"full-iteration graph",
                                         [](JobSpec* j) {
                                           j->training.enable_cuda_graph = true;
                                           j->training.cuda_graph_scope =
                                               CudaGraphScope::kFullIteration;
                                         },
                                         {"", {0, 13, 0}, {}},
                                         {"25.09", {}, {}},
                                         "training.cuda_graph_scope: full_iteration needs "
                                         "Megatron-Core 0.14.0 or later "
                                         "(software.megatron_core is 0.13.0; the full-iteration "
                                         "graph (full_cuda_graph.py) "
                                         "is new in 0.14.0)"},
                                    Gate{"full-iteration graph with te cross entropy",
                                         [](JobSpec* j) {
                                           j->training.enable_cuda_graph = true;
                                           j->training.cuda_graph_scope =
                                               CudaGraphScope::kFullIteration;
                                           te_cross_entropy(j);
                                         },
                                         {"", {0, 14, 0}, {2, 6, 0}},
                                         {"25.09", {}, {}},
                                         "training.cuda_graph_scope: full_iteration with "
                                         "cross_entropy_fusion_impl te needs "
                                         "Transformer Engine 2.7 or later "
                                         "(software.transformer_engine is 2.6; Megatron-Core's "
                                         "LanguageModule: 'CUDA graph compatible cross entropy "
                                         "requires TransformerEngine >= "
                                         "2.7.0')"}),
                         [](const ::testing::TestParamInfo<Gate>& info) {
                           std::string name = info.param.what;
                           std::replace_if(
                               name.begin(), name.end(),
                               [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); },
                               '_');
                           return name;
                         });

// Deferring every micro-batch (limit 0) is 0.7.0's only behaviour: accepted.
TEST(Software, DeferringEveryMicroBatchRunsOnTheOldestRelease) {
  JobSpec j = base_job();
  j.training.defer_embedding_wgrad_compute = true;
  j.software = {"24.05", {}, {}};
  EXPECT_TRUE(validate_job(j).is_ok()) << validate_job(j).message();
}

// Graphs the training script captures, replayed by TransformerBlock
// (self.cuda_graphs), are in every release of the table: external_cuda_graph
// is accepted on the oldest.
TEST(Software, ExternalGraphsRunOnEveryRelease) {
  JobSpec j = base_job();
  j.training.external_cuda_graph = true;
  j.software = {"24.05", {}, {}};
  EXPECT_TRUE(validate_job(j).is_ok()) << validate_job(j).message();
}

// Options a release lacks but a job leaves off are not checked: a bf16 job
// with an mxfp8 recipe left in it, a scope without graphs.
TEST(Software, FieldsThatAreOffAreNotChecked) {
  JobSpec j = base_job();
  j.training.fp8_recipe = Fp8Recipe::kBlockwise;                       // bf16: ignored
  j.training.cuda_graph_scope = CudaGraphScope::kFullIteration;        // no graphs: ignored
  j.training.cross_entropy_fusion_impl = CrossEntropyFusionImpl::kTe;  // no fusion: ignored
  j.software = {"24.05", {}, {}};
  EXPECT_TRUE(validate_job(j).is_ok()) << validate_job(j).message();
}

}  // namespace
}  // namespace prism
