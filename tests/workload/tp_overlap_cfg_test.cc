// Transformer Engine's userbuffers settings: TE's defaults per GEMM, a job's
// entries merged over them key by key, the YAML form and every rejection.
#include "workload/tp_overlap_cfg.h"

#include <gtest/gtest.h>

#include <string>

#include <yaml-cpp/yaml.h>

namespace prism {
namespace {

TpCommOverlapCfg parse(const std::string& yaml) {
  Result<TpCommOverlapCfg> c = parse_tp_comm_overlap_cfg(YAML::Load(yaml));
  EXPECT_TRUE(c.is_ok()) << c.status().message();
  return c.is_ok() ? *c : TpCommOverlapCfg{};
}

std::string parse_error(const std::string& yaml) {
  Result<TpCommOverlapCfg> c = parse_tp_comm_overlap_cfg(YAML::Load(yaml));
  EXPECT_FALSE(c.is_ok()) << yaml;
  return c.is_ok() ? "" : std::string(c.status().message());
}

std::string invalid(const std::string& yaml, int tp = 4, int sms = 132) {
  const Status s = validate_tp_comm_overlap_cfg(parse(yaml), tp, sms);
  EXPECT_FALSE(s.is_ok()) << yaml;
  return s.is_ok() ? "" : std::string(s.message());
}

// TE's get_default_config (2.x): ring exchange for the four all-gathers
// (1 SM, no margin, tp splits), pipeline for proj and fc2 forward, bulk for
// the backward's overlaps (16 SMs, margin); FP8 buffers where the input is
// gathered.
TEST(UbDefault, IsTransformerEnginesDefault) {
  for (UbGemm g : {UbGemm::kQkvFprop, UbGemm::kFc1Fprop, UbGemm::kProjDgrad, UbGemm::kFc2Dgrad}) {
    const UbGemmConfig c = ub_default(g, 8);
    EXPECT_EQ(c.method, UbMethod::kRingExchange) << to_string(g);
    EXPECT_EQ(c.num_sm, 1);
    EXPECT_EQ(c.num_splits, 8);
    EXPECT_FALSE(c.set_sm_margin);
    EXPECT_TRUE(c.fp8_buf);
  }
  for (UbGemm g : {UbGemm::kProjFprop, UbGemm::kFc2Fprop}) {
    const UbGemmConfig c = ub_default(g, 8);
    EXPECT_EQ(c.method, UbMethod::kPipeline) << to_string(g);
    EXPECT_EQ(c.num_sm, 16);
    EXPECT_EQ(c.num_splits, 4);
    EXPECT_TRUE(c.set_sm_margin);
    EXPECT_FALSE(c.fp8_buf);
  }
  for (UbGemm g : {UbGemm::kQkvDgrad, UbGemm::kQkvWgrad, UbGemm::kFc1Dgrad, UbGemm::kFc1Wgrad}) {
    const UbGemmConfig c = ub_default(g, 8);
    EXPECT_EQ(c.method, UbMethod::kBulk) << to_string(g);
    EXPECT_EQ(c.num_sm, 16);
  }
  EXPECT_TRUE(ub_default(UbGemm::kQkvDgrad, 8).fp8_buf);  // the gathered input
  EXPECT_FALSE(ub_default(UbGemm::kQkvWgrad, 8).fp8_buf);
  EXPECT_EQ(to_string(UbGemm::kFc2Dgrad), "fc2_dgrad");
  EXPECT_EQ(to_string(UbMethod::kRingExchange), "ring_exchange");
}

// Key by key over the default; a method given alone brings that method's
// defaults; fp8_buf is TE's decision: forced for gathered inputs, the job's
// only for a pipelined reduce-scatter.
TEST(UbResolve, MergesKeyByKey) {
  const TpCommOverlapCfg cfg = parse(
      "proj_fprop: {method: ring_exchange, set_sm_margin: true, fp8_buf: true}\n"
      "fc2_fprop: {num_sm: 20, fp8_buf: true}\n"
      "qkv_fprop: {fp8_buf: false}\n"
      "qkv_wgrad: {num_sm: 24}\n");
  const UbGemmConfig proj = ub_resolve(cfg, UbGemm::kProjFprop, 4);
  EXPECT_EQ(proj.method, UbMethod::kRingExchange);
  EXPECT_EQ(proj.num_sm, 1);
  EXPECT_EQ(proj.num_splits, 4);
  EXPECT_TRUE(proj.set_sm_margin);
  EXPECT_FALSE(proj.fp8_buf);  // not a pipeline
  const UbGemmConfig fc2 = ub_resolve(cfg, UbGemm::kFc2Fprop, 4);
  EXPECT_EQ(fc2.method, UbMethod::kPipeline);
  EXPECT_EQ(fc2.num_sm, 20);
  EXPECT_EQ(fc2.num_splits, 4);
  EXPECT_TRUE(fc2.fp8_buf);
  EXPECT_TRUE(ub_resolve(cfg, UbGemm::kQkvFprop, 4).fp8_buf);  // TE forces it
  EXPECT_EQ(ub_resolve(cfg, UbGemm::kQkvWgrad, 4).num_sm, 24);
  EXPECT_EQ(ub_resolve(cfg, UbGemm::kFc1Wgrad, 4).num_sm, 16);  // not given
  EXPECT_TRUE(TpCommOverlapCfg{}.empty());
  EXPECT_FALSE(cfg.empty());
}

TEST(UbParse, ReadsTheYamlForm) {
  const TpCommOverlapCfg cfg = parse(
      "fc2_dgrad: {method: ring_exchange, aggregate: true, cga-size: 1}\n"
      "proj_fprop: {method: pipeline, num_sm: 24, num_splits: 2, atomic_gemm: false}\n"
      "qkv_wgrad: {set_sm_margin: 0, aggregate: 0}\n");  // TE's 0 / 1
  EXPECT_EQ(cfg[UbGemm::kFc2Dgrad].aggregate, true);
  EXPECT_EQ(cfg[UbGemm::kFc2Dgrad].cga_size, 1);
  EXPECT_EQ(cfg[UbGemm::kProjFprop].num_splits, 2);
  EXPECT_EQ(cfg[UbGemm::kProjFprop].atomic_gemm, false);
  EXPECT_FALSE(cfg[UbGemm::kQkvFprop].method.has_value());
  EXPECT_EQ(cfg[UbGemm::kQkvWgrad].set_sm_margin, false);
  EXPECT_TRUE(parse("~").empty());
}

TEST(UbParse, RejectsMalformedEntries) {
  EXPECT_NE(parse_error("[1, 2]").find("expected a mapping of TE's GEMM names"), std::string::npos);
  EXPECT_NE(parse_error("proj_fwd: {num_sm: 2}").find("proj_fwd: unknown GEMM"), std::string::npos);
  EXPECT_NE(parse_error("proj_fprop: 24").find("proj_fprop: expected a mapping"),
            std::string::npos);
  EXPECT_NE(parse_error("proj_fprop: {num_sms: 2}").find("proj_fprop.num_sms: unknown key"),
            std::string::npos);
  EXPECT_NE(parse_error("proj_fprop: {method: split}").find("unknown method \"split\""),
            std::string::npos);
  EXPECT_NE(
      parse_error("proj_fprop: {num_sm: many}").find("proj_fprop.num_sm: expected an integer"),
      std::string::npos);
  EXPECT_NE(parse_error("proj_fprop: {num_sm: 0}").find("must be in [1, 1024] (got 0)"),
            std::string::npos);
  EXPECT_NE(parse_error("proj_fprop: {fp8_buf: 3}").find("expected true or false (or 0, 1)"),
            std::string::npos);
}

TEST(UbValidate, AcceptsTheRecipesConfigs) {
  // Megatron-Bridge's userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192.
  const TpCommOverlapCfg bridge = parse(
      "qkv_dgrad: {method: bulk, num_sm: 4, cga_size: 2, set_sm_margin: false}\n"
      "qkv_wgrad: {method: bulk, num_sm: 24, cga_size: 2, set_sm_margin: false}\n"
      "fc1_dgrad: {method: bulk, num_sm: 2, cga_size: 2, set_sm_margin: false}\n"
      "fc1_wgrad: {method: bulk, num_sm: 4, cga_size: 2, set_sm_margin: false}\n"
      "qkv_fprop: {method: ring_exchange, num_sm: 1, cga_size: 1, set_sm_margin: false}\n"
      "proj_dgrad: {method: ring_exchange, num_sm: 1, cga_size: 1, set_sm_margin: false}\n"
      "fc1_fprop: {method: ring_exchange, num_sm: 1, cga_size: 1, set_sm_margin: false}\n"
      "fc2_dgrad: {method: ring_exchange, num_sm: 1, cga_size: 1, set_sm_margin: false}\n"
      "proj_fprop: {method: ring_exchange, num_sm: 1, cga_size: 1, set_sm_margin: true}\n"
      "fc2_fprop: {method: ring_exchange, num_sm: 1, cga_size: 1, set_sm_margin: true}\n");
  EXPECT_TRUE(validate_tp_comm_overlap_cfg(bridge, 4, 132).is_ok());
  EXPECT_TRUE(validate_tp_comm_overlap_cfg(parse("fc2_dgrad: {aggregate: true}"), 4, 132).is_ok());
  EXPECT_TRUE(validate_tp_comm_overlap_cfg(TpCommOverlapCfg{}, 2, 0).is_ok());
}

TEST(UbValidate, RejectsWhatTeOrTheModelCannotRun) {
  EXPECT_NE(invalid("qkv_fprop: {method: pipeline}")
                .find("qkv_fprop.method: pipeline is not modelled for an all-gather"),
            std::string::npos);
  EXPECT_NE(invalid("fc2_fprop: {method: bulk}").find("fc2_fprop.method: bulk is not an overlap"),
            std::string::npos);
  EXPECT_NE(invalid("qkv_dgrad: {method: ring_exchange}")
                .find("qkv_dgrad.method: ring_exchange is not an overlap of the backward's input "
                      "all-gather"),
            std::string::npos);
  EXPECT_NE(invalid("fc1_wgrad: {method: pipeline}").find("input-gradient reduce-scatter"),
            std::string::npos);
  EXPECT_NE(invalid("qkv_wgrad: {num_sm: 132}")
                .find("qkv_wgrad.num_sm: must leave the GEMM some of the GPU's 132 SMs (got 132)"),
            std::string::npos);
  EXPECT_NE(invalid("proj_fprop: {num_splits: 65}")
                .find("proj_fprop.num_splits: must be at most 64 (got 65)"),
            std::string::npos);
  EXPECT_NE(invalid("fc1_fprop: {num_splits: 2}")
                .find("fc1_fprop.num_splits: a ring exchange runs one step per tensor-parallel "
                      "rank: 4 (got 2)"),
            std::string::npos);
  EXPECT_NE(invalid("fc1_dgrad: {num_splits: 2}")
                .find("fc1_dgrad.num_splits: a bulk overlap does not split its GEMM"),
            std::string::npos);
  EXPECT_NE(invalid("proj_fprop: {cga_size: 32}").find("proj_fprop.cga_size: must be at most 16"),
            std::string::npos);
  EXPECT_NE(invalid("proj_fprop: {atomic_gemm: true}")
                .find("proj_fprop.atomic_gemm: TE's atomic-GEMM overlap is not modelled"),
            std::string::npos);
  EXPECT_NE(invalid("proj_fprop: {method: ring_exchange, aggregate: true}")
                .find("proj_fprop.aggregate: only a ring-exchange all-gather aggregates"),
            std::string::npos);
  EXPECT_NE(invalid("fc2_dgrad: {aggregate: true}", 3)
                .find("fc2_dgrad.aggregate: pairs the tensor-parallel ranks: needs an even tp "
                      "(got 3)"),
            std::string::npos);
}

}  // namespace
}  // namespace prism
