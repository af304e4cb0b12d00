// The job's software releases and the fields each release lacks
// (software.h). Every minimum below was read in the release itself: the
// megatron-core wheels 0.7.0 to 0.14.0 from PyPI (megatron/core), Megatron-LM's
// CHANGELOG.md, and the TE version checks in Megatron-Core's own code
// (docs/job-spec.md, "software", lists them).
#include "workload/software.h"

#include <charconv>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>

#include <fmt/format.h>

#include "workload/job_spec.h"

namespace prism {
namespace {

enum class Library : std::uint8_t { kMegatronCore, kTransformerEngine };

// One feature a release may lack: the field that asks for it, whether the
// job does, and the first release that has it.
struct Requirement {
  std::string_view field;
  std::function<bool(const JobSpec&)> used;
  std::function<std::string(const JobSpec&)> value;  // the value as named in the error
  Library library;
  Version since;
  std::string_view why;  // where the release says so
};

bool fp8(const JobSpec& j) {
  return j.training.precision == Precision::kFp8;
}
bool fp8_recipe_in(const JobSpec& j, std::initializer_list<Fp8Recipe> rs) {
  for (const Fp8Recipe r : rs)
    if (fp8(j) && j.training.fp8_recipe == r) return true;
  return false;
}
bool te_cross_entropy(const JobSpec& j) {
  return j.training.cross_entropy_loss_fusion &&
         j.training.cross_entropy_fusion_impl == CrossEntropyFusionImpl::kTe;
}
std::string first_layers(const JobSpec& j) {
  return std::to_string(j.parallelism.decoder_first_pipeline_num_layers);
}
std::string last_layers(const JobSpec& j) {
  return std::to_string(j.parallelism.decoder_last_pipeline_num_layers);
}
std::function<std::string(const JobSpec&)> with_vpp(std::string (*layers)(const JobSpec&)) {
  return [layers](const JobSpec& j) {
    return fmt::format("{} with parallelism.virtual_pipeline_model_parallel_size {}", layers(j),
                       j.vpp());
  };
}
constexpr std::string_view kUnevenSince =
    "TransformerConfig.first_pipeline_num_layers / last_pipeline_num_layers are new in 0.9.0";
constexpr std::string_view kUnevenVppSince =
    "0.9.0 and 0.10.0 assert 'Uneven number of layer not compatible with interleaved pipeline "
    "schedule'";
bool any_cuda_graph(const JobSpec& j) {
  return j.training.enable_cuda_graph || j.training.external_cuda_graph;
}
bool fp8_act_or_norm_recompute(const JobSpec& j) {
  return j.training.precision == Precision::kFp8 &&
         (j.training.recomputes(RecomputeModule::kMoeAct) ||
          j.training.recomputes(RecomputeModule::kLayernorm));
}
std::string recipe(const JobSpec& j) {
  return std::string(to_string(j.training.fp8_recipe));
}
auto text(std::string_view s) {
  return [s](const JobSpec&) { return std::string(s); };
}

const std::vector<Requirement>& requirements() {
  using L = Library;
  static const std::vector<Requirement> kRequirements{
      {"training.cross_entropy_loss_fusion",
       [](const JobSpec& j) { return j.training.cross_entropy_loss_fusion; },
       text("true"),
       L::kMegatronCore,
       {0, 8, 0},
       "ModelParallelConfig.cross_entropy_loss_fusion is new in 0.8.0"},
      {"training.cross_entropy_fusion_impl",
       te_cross_entropy,
       text("te"),
       L::kMegatronCore,
       {0, 12, 0},
       "ModelParallelConfig.cross_entropy_fusion_impl is new in 0.12.0"},
      {"training.fp8_recipe",
       [](const JobSpec& j) {
         return fp8_recipe_in(j,
                              {Fp8Recipe::kTensorwise, Fp8Recipe::kMxfp8, Fp8Recipe::kBlockwise});
       },
       recipe,
       L::kMegatronCore,
       {0, 12, 0},
       "--fp8-recipe and its Fp8Recipe enum are new in 0.12.0; before it Megatron-Core always "
       "builds TE's DelayedScaling"},
      {"training.fp8_recipe",
       [](const JobSpec& j) { return fp8_recipe_in(j, {Fp8Recipe::kBlockwise}); },
       recipe,
       L::kMegatronCore,
       {0, 13, 0},
       "Fp8Recipe.blockwise is new in 0.13.0"},
      {"training.wgrad_deferral_limit",
       [](const JobSpec& j) {
         return j.training.defer_embedding_wgrad_compute && j.training.wgrad_deferral_limit > 0;
       },
       [](const JobSpec& j) { return std::to_string(j.training.wgrad_deferral_limit); },
       L::kMegatronCore,
       {0, 8, 0},
       "ModelParallelConfig.wgrad_deferral_limit is new in 0.8.0; 0.7.0 defers every "
       "micro-batch"},
      {"training.fp8_param_gather",
       [](const JobSpec& j) { return j.training.fp8_param_gather; },
       text("true"),
       L::kMegatronCore,
       {0, 9, 0},
       "DistributedDataParallelConfig.fp8_param_gather is new in 0.9.0"},
      {"parallelism.decoder_first_pipeline_num_layers",
       [](const JobSpec& j) { return j.parallelism.decoder_first_pipeline_num_layers > 0; },
       first_layers,
       L::kMegatronCore,
       {0, 9, 0},
       kUnevenSince},
      {"parallelism.decoder_last_pipeline_num_layers",
       [](const JobSpec& j) { return j.parallelism.decoder_last_pipeline_num_layers > 0; },
       last_layers,
       L::kMegatronCore,
       {0, 9, 0},
       kUnevenSince},
      {"parallelism.decoder_first_pipeline_num_layers",
       [](const JobSpec& j) {
         return j.parallelism.decoder_first_pipeline_num_layers > 0 && j.vpp() > 1;
       },
       with_vpp(first_layers),
       L::kMegatronCore,
       {0, 11, 0},
       kUnevenVppSince},
      {"parallelism.decoder_last_pipeline_num_layers",
       [](const JobSpec& j) {
         return j.parallelism.decoder_last_pipeline_num_layers > 0 && j.vpp() > 1;
       },
       with_vpp(last_layers),
       L::kMegatronCore,
       {0, 11, 0},
       kUnevenVppSince},
      {"parallelism.account_for_embedding_in_pipeline_split",
       [](const JobSpec& j) { return j.parallelism.account_for_embedding_in_pipeline_split; },
       text("true"),
       L::kMegatronCore,
       {0, 11, 0},
       "TransformerConfig.account_for_embedding_in_pipeline_split is new in 0.11.0"},
      {"parallelism.account_for_loss_in_pipeline_split",
       [](const JobSpec& j) { return j.parallelism.account_for_loss_in_pipeline_split; },
       text("true"),
       L::kMegatronCore,
       {0, 11, 0},
       "TransformerConfig.account_for_loss_in_pipeline_split is new in 0.11.0"},
      {"training.recompute_modules",
       [](const JobSpec& j) {
         return j.training.recompute == Recompute::kSelective &&
                j.training.recompute_modules != RecomputeModules{};
       },
       [](const JobSpec& j) { return to_string(j.training.recompute_modules); },
       L::kMegatronCore,
       {0, 13, 0},
       "--recompute-modules is new in 0.13.0 (CHANGELOG: fine-grained recomputation); before it "
       "selective recompute re-runs the core attention only"},
      {"training.recompute_modules",
       [](const JobSpec& j) { return j.training.recomputes(RecomputeModule::kSharedExperts); },
       text("shared_experts"),
       L::kMegatronCore,
       {0, 14, 0},
       "0.13.0's recompute_modules choices are core_attn, moe_act, layernorm, mla_up_proj, mlp "
       "and moe"},
      {"training.recompute_modules",
       [](const JobSpec& j) { return fp8_act_or_norm_recompute(j); },
       text("moe_act or layernorm with fp8"),
       L::kMegatronCore,
       {0, 14, 0},
       "FP8 with fine-grained recompute is new in 0.14.0 (MoE README: 'FP8 support for "
       "Fine-grained Recomputations')"},
      {"training.recompute_modules",
       [](const JobSpec& j) { return fp8_act_or_norm_recompute(j); },
       text("moe_act or layernorm with fp8"),
       L::kTransformerEngine,
       {2, 6, 0},
       "Megatron-Core's TransformerConfig: 'moe_act and layernorm recompute for fp8 needs "
       "transformer-engine>=2.6.0dev0'"},
      {"training.enable_cuda_graph",
       [](const JobSpec& j) { return j.training.enable_cuda_graph; },
       text("true"),
       L::kMegatronCore,
       {0, 9, 0},
       "Megatron-Core's own graphs (CudaGraphManager, transformer/cuda_graphs.py) are new "
       "in 0.9.0; before it the field only lets TransformerBlock replay graphs the training "
       "script captured, which external_cuda_graph names"},
      {"training.cuda_graph_scope",
       [](const JobSpec& j) {
         return any_cuda_graph(j) && j.training.cuda_graph_scope == CudaGraphScope::kAttn;
       },
       text("attn"),
       L::kMegatronCore,
       {0, 12, 0},
       "TransformerConfig.cuda_graph_scope is new in 0.12.0"},
      {"training.cuda_graph_scope",
       [](const JobSpec& j) {
         return any_cuda_graph(j) && j.training.cuda_graph_scope == CudaGraphScope::kFullIteration;
       },
       text("full_iteration"),
       L::kMegatronCore,
       {0, 14, 0},
       "the full-iteration graph (full_cuda_graph.py) is new in 0.14.0"},
      {"training.fp8_recipe",
       [](const JobSpec& j) { return fp8_recipe_in(j, {Fp8Recipe::kMxfp8}); },
       recipe,
       L::kTransformerEngine,
       {2, 1, 0},
       "Megatron-Core's get_fp8_recipe: 'Please make sure to use TransformerEngine version >= "
       "2.2.0.dev0 for Float8CurrentScaling, >= 2.1.0 for MXFP8BlockScaling, and >= 2.3.0.dev0 for "
       "Float8BlockScaling'"},
      {"training.fp8_recipe",
       [](const JobSpec& j) { return fp8_recipe_in(j, {Fp8Recipe::kTensorwise}); },
       recipe,
       L::kTransformerEngine,
       {2, 2, 0},
       "Megatron-Core's get_fp8_recipe: 'Please make sure to use TransformerEngine version >= "
       "2.2.0.dev0 for Float8CurrentScaling'"},
      {"training.fp8_recipe",
       [](const JobSpec& j) { return fp8_recipe_in(j, {Fp8Recipe::kBlockwise}); },
       recipe,
       L::kTransformerEngine,
       {2, 3, 0},
       "Megatron-Core's get_fp8_recipe: '>= 2.3.0.dev0 for Float8BlockScaling'"},
      {"training.cross_entropy_fusion_impl",
       te_cross_entropy,
       text("te"),
       L::kTransformerEngine,
       {2, 1, 0},
       "transformer_engine.pytorch.cross_entropy is new in 2.1; without it Megatron-Core raises "
       "'Trying to use a TE block when it's not present.'"},
      {"training.cuda_graph_scope",
       [](const JobSpec& j) {
         return j.training.enable_cuda_graph &&
                j.training.cuda_graph_scope == CudaGraphScope::kFullIteration &&
                te_cross_entropy(j);
       },
       text("full_iteration with cross_entropy_fusion_impl te"),
       L::kTransformerEngine,
       {2, 7, 0},
       "Megatron-Core's LanguageModule: 'CUDA graph compatible cross entropy requires "
       "TransformerEngine >= 2.7.0'"},
  };
  return kRequirements;
}

std::string_view library_name(Library l) {
  return l == Library::kMegatronCore ? "Megatron-Core" : "Transformer Engine";
}

// A Megatron-Core release names its patch ("0.12.0"), TE's releases two parts ("2.2").
std::string release_name(Library l, const Version& v) {
  return to_string(v, l == Library::kTransformerEngine);
}

}  // namespace

Result<Version> parse_version(std::string_view text) {
  Version v;
  int* parts[] = {&v.major, &v.minor, &v.patch};
  std::size_t n = 0;
  const char* p = text.data();
  const char* end = text.data() + text.size();
  while (true) {
    if (n == 3) break;
    const auto [next, ec] = std::from_chars(p, end, *parts[n]);
    if (ec != std::errc() || next == p || *parts[n] < 0 || *parts[n] > 9999) break;
    ++n;
    p = next;
    if (p == end) return v;
    if (*p != '.') break;
    ++p;
  }
  return Status::invalid_argument(
      fmt::format("\"{}\" is not a release number (one to three numbers with dots, e.g. "
                  "\"0.13.0\" or \"2.4\"; write it in quotes)",
                  text));
}

std::string to_string(const Version& v, bool short_form) {
  if (short_form && v.patch == 0) return fmt::format("{}.{}", v.major, v.minor);
  return fmt::format("{}.{}.{}", v.major, v.minor, v.patch);
}

// NeMo Framework release notes, "Software Component Versions"
// (docs.nvidia.com/nemo-framework/user-guide/24.09/softwarecomponentversions.html
// for 24.05-24.09; NVIDIA-NeMo/Megatron-Bridge docs/releases/software-versions.md
// for 25.09-26.04); 25.02: NVIDIA/NeMo's README ("NeMo Framework 25.02 and
// NVIDIA Megatron-Core 0.11.0"), which names no TE release. 24.07 lists
// "0.8" and TE "1.8.0.dev0": 0.8.0 and 1.8 here.
const std::vector<ContainerRelease>& nemo_releases() {
  static const std::vector<ContainerRelease> kReleases{
      {"24.05", {0, 7, 0}, {1, 6, 0}},   {"24.07", {0, 8, 0}, {1, 8, 0}},
      {"24.09", {0, 9, 0}, {1, 10, 0}},  {"25.02", {0, 11, 0}, {}},
      {"25.02.01", {0, 11, 0}, {}},      {"25.09", {0, 14, 0}, {2, 7, 0}},
      {"25.11", {0, 15, 0}, {2, 9, 0}},  {"26.02", {0, 16, 0}, {2, 12, 0}},
      {"26.04", {0, 17, 0}, {2, 14, 0}},
  };
  return kReleases;
}

Result<SoftwareSpec> resolve_software(const SoftwareSpec& s) {
  if (s.nemo.empty()) return s;
  const ContainerRelease* found = nullptr;
  std::vector<std::string_view> names;
  for (const ContainerRelease& r : nemo_releases()) {
    if (r.nemo == s.nemo) found = &r;
    names.push_back(r.nemo);
  }
  if (found == nullptr)
    return Status::invalid_argument(
        fmt::format("software.nemo: \"{}\" is not a NeMo Framework release PrismLLM knows "
                    "({}); give software.megatron_core and software.transformer_engine instead",
                    s.nemo, fmt::join(names, ", ")));
  SoftwareSpec out = s;
  const struct {
    std::string_view field;
    Library library;
    Version given, shipped;
    Version* into;
  } parts[] = {
      {"software.megatron_core", Library::kMegatronCore, s.megatron_core, found->megatron_core,
       &out.megatron_core},
      {"software.transformer_engine", Library::kTransformerEngine, s.transformer_engine,
       found->transformer_engine, &out.transformer_engine},
  };
  for (const auto& p : parts) {
    if (p.given.given() && p.shipped.given() && p.given != p.shipped)
      return Status::invalid_argument(
          fmt::format("{}: {} differs from the {} {} that software.nemo {} ships", p.field,
                      release_name(p.library, p.given), library_name(p.library),
                      release_name(p.library, p.shipped), s.nemo));
    if (!p.given.given()) *p.into = p.shipped;
  }
  return out;
}

Status validate_software(const JobSpec& job) {
  PRISM_ASSIGN_OR_RETURN(const SoftwareSpec s, resolve_software(job.software));
  for (const Requirement& r : requirements()) {
    const bool core = r.library == Library::kMegatronCore;
    const Version& have = core ? s.megatron_core : s.transformer_engine;
    if (!have.given() || have >= r.since || !r.used(job)) continue;
    const std::string source =
        s.nemo.empty()
            ? fmt::format("software.{} is {}", core ? "megatron_core" : "transformer_engine",
                          release_name(r.library, have))
            : fmt::format("software.nemo {} ships {} {}", s.nemo, library_name(r.library),
                          release_name(r.library, have));
    return Status::invalid_argument(fmt::format("{}: {} needs {} {} or later ({}; {})", r.field,
                                                r.value(job), library_name(r.library),
                                                release_name(r.library, r.since), source, r.why));
  }
  return Status::ok();
}

}  // namespace prism
