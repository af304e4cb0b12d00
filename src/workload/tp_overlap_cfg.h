// Transformer Engine's userbuffers configuration (TE's ub_cfgs; Megatron's
// --tp-comm-overlap-cfg YAML, NeMo's and Megatron-Bridge's
// TransformerLayerTPOverlapCfg): for each GEMM that TE overlaps with a
// tensor-parallel collective, how. A job gives any subset of the GEMMs and,
// for each, any subset of the keys; TE fills the rest from its defaults
// (initialize_ub's get_default_config, merged key by key), and so does
// resolve(). docs/job-spec.md lists the keys, docs/simulate.md ("TP
// communication overlap") what each does to the step.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include <yaml-cpp/yaml.h>

#include "util/status.h"

namespace prism {

// TE's GEMM names, in its order of the layer: the all-gathers before
// qkv_fprop, fc1_fprop, proj_dgrad and fc2_dgrad, the reduce-scatters after
// proj_fprop and fc2_fprop, and the bulk overlaps of a column-parallel
// layer's backward (dgrad beside the input's all-gather, wgrad beside the
// input gradient's reduce-scatter).
enum class UbGemm : std::uint8_t {
  kQkvFprop,
  kQkvDgrad,
  kQkvWgrad,
  kProjFprop,
  kProjDgrad,
  kFc1Fprop,
  kFc1Dgrad,
  kFc1Wgrad,
  kFc2Fprop,
  kFc2Dgrad,
};
inline constexpr int kNumUbGemms = 10;

// bulk: one collective beside one whole GEMM; pipeline: the GEMM in
// num_splits chunks, each chunk's output reduce-scattered while the next is
// computed; ring_exchange: the GEMM in tp chunks, one per step of a
// point-to-point ring (copy engines move the chunks).
enum class UbMethod : std::uint8_t { kBulk, kPipeline, kRingExchange };

std::string_view to_string(UbGemm g);    // "qkv_fprop"
std::string_view to_string(UbMethod m);  // "ring_exchange"

// What a job gives for one GEMM; an unset key keeps TE's default.
struct UbGemmSettings {
  std::optional<UbMethod> method;
  std::optional<int> num_sm;      // SMs the communication kernel runs on
  std::optional<int> num_splits;  // pipeline: chunks of the GEMM
  std::optional<int> cga_size;    // the communication kernel's cluster size
  std::optional<bool> set_sm_margin;
  std::optional<bool> fp8_buf;    // FP8 reduce-scatter buffer (pipeline, FP8 GEMMs)
  std::optional<bool> aggregate;  // ring-exchange all-gather: two chunks per GEMM
  std::optional<bool> atomic_gemm;
  bool operator==(const UbGemmSettings&) const = default;
};

struct TpCommOverlapCfg {
  std::array<UbGemmSettings, kNumUbGemms> gemms{};
  const UbGemmSettings& operator[](UbGemm g) const { return gemms[static_cast<int>(g)]; }
  UbGemmSettings& operator[](UbGemm g) { return gemms[static_cast<int>(g)]; }
  bool empty() const;
  bool operator==(const TpCommOverlapCfg&) const = default;
};

// One GEMM's settings as TE applies them.
struct UbGemmConfig {
  UbMethod method = UbMethod::kBulk;
  int num_sm = 16;
  int num_splits = 4;
  int cga_size = 2;
  bool set_sm_margin = true;
  bool fp8_buf = false;  // as TE decides it (ub_resolve)
  bool aggregate = false;
  bool atomic_gemm = false;
};

// TE's default for `g` in a tensor-parallel group of `tp` (get_default_config):
// ring exchange for the all-gathers (1 SM, cluster 1, tp splits, no SM
// margin), pipeline for proj_fprop and fc2_fprop (16 SMs, 4 splits), bulk
// for the rest (16 SMs), the SM margin set for both; FP8 buffers for the
// GEMMs whose input is gathered.
UbGemmConfig ub_default(UbGemm g, int tp);
// `cfg`'s entry for `g` over TE's default, key by key.
UbGemmConfig ub_resolve(const TpCommOverlapCfg& cfg, UbGemm g, int tp);

// Reads the mapping of parallelism.tp_comm_overlap_cfg: GEMM name -> mapping
// of TE's keys (method, num_sm, num_splits, cga_size, set_sm_margin, fp8_buf,
// aggregate, atomic_gemm). The message of an error starts with the GEMM and
// key at fault ("proj_fprop.num_sm: ...").
Result<TpCommOverlapCfg> parse_tp_comm_overlap_cfg(const YAML::Node& n);

// TE's and the model's rules for `cfg` with `tp` and a GPU of `num_sms` SMs
// (0: unknown): a method TE offers for the GEMM (bulk only for the
// backward's bulk overlaps; ring exchange for the all-gathers; pipeline or
// ring exchange for the reduce-scatters), num_sm in [1, num_sms), a
// pipeline's num_splits in [1, 64] and a ring's equal to tp, cga_size in
// [1, 16], aggregation only for a ring-exchange all-gather with an even tp,
// and atomic GEMMs (not modelled) refused. Messages start with
// "<gemm>.<key>: ".
Status validate_tp_comm_overlap_cfg(const TpCommOverlapCfg& cfg, int tp, int num_sms);

}  // namespace prism
