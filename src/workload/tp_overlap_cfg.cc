#include "workload/tp_overlap_cfg.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "net/yaml_read.h"

namespace prism {
namespace {

constexpr std::array<std::string_view, kNumUbGemms> kGemmNames{
    "qkv_fprop", "qkv_dgrad", "qkv_wgrad", "proj_fprop", "proj_dgrad",
    "fc1_fprop", "fc1_dgrad", "fc1_wgrad", "fc2_fprop",  "fc2_dgrad"};
constexpr std::array<std::string_view, 3> kMethodNames{"bulk", "pipeline", "ring_exchange"};
constexpr std::array<std::string_view, 8> kKeys{"method",    "num_sm",        "num_splits",
                                                "cga_size",  "set_sm_margin", "fp8_buf",
                                                "aggregate", "atomic_gemm"};
constexpr int kMaxSplits = 64;
constexpr int kMaxCgaSize = 16;

bool gathers_input(UbGemm g) {  // TE's layers_all_gather_overlap, less the bulk dgrads
  return g == UbGemm::kQkvFprop || g == UbGemm::kFc1Fprop || g == UbGemm::kProjDgrad ||
         g == UbGemm::kFc2Dgrad;
}
bool reduce_scatters_output(UbGemm g) {
  return g == UbGemm::kProjFprop || g == UbGemm::kFc2Fprop;
}

Status at(UbGemm g, std::string_view key, std::string msg) {
  return Status::invalid_argument(fmt::format("{}.{}: {}", to_string(g), key, msg));
}

template <typename T>
Result<T> read_key(const YAML::Node& n, std::string_view type) {
  return yaml::scalar<T>(n, type);
}

Status read_settings(UbGemm g, const YAML::Node& node, UbGemmSettings* s) {
  if (!node.IsMap())
    return Status::invalid_argument(
        fmt::format("{}: expected a mapping of {}", to_string(g), fmt::join(kKeys, ", ")));
  for (const auto& kv : node) {
    std::string key = kv.first.as<std::string>();
    std::replace(key.begin(), key.end(), '-', '_');
    const YAML::Node& v = kv.second;
    auto wrap = [&](const Status& st) { return at(g, key, st.message()); };
    if (key == "method") {
      auto name = read_key<std::string>(v, "a method");
      if (!name.is_ok()) return wrap(name.status());
      bool found = false;
      for (std::size_t i = 0; i < kMethodNames.size(); ++i)
        if (*name == kMethodNames[i]) {
          s->method = static_cast<UbMethod>(i);
          found = true;
        }
      if (!found)
        return at(g, key,
                  fmt::format("unknown method \"{}\" (methods: {})", *name,
                              fmt::join(kMethodNames, ", ")));
    } else if (key == "num_sm" || key == "num_splits" || key == "cga_size") {
      auto v_int = read_key<long long>(v, "an integer");
      if (!v_int.is_ok()) return wrap(v_int.status());
      if (*v_int < 1 || *v_int > 1024)
        return at(g, key, fmt::format("must be in [1, 1024] (got {})", *v_int));
      const int x = static_cast<int>(*v_int);
      (key == "num_sm" ? s->num_sm : key == "num_splits" ? s->num_splits : s->cga_size) = x;
    } else if (key == "set_sm_margin" || key == "fp8_buf" || key == "aggregate" ||
               key == "atomic_gemm") {
      // TE's own configs (the NeMo Launcher's ub_cfg_*.yaml) write 0 and 1.
      Result<bool> b = v.IsScalar() && (v.Scalar() == "0" || v.Scalar() == "1")
                           ? Result<bool>(v.Scalar() == "1")
                           : read_key<bool>(v, "true or false (or 0, 1)");
      if (!b.is_ok()) return wrap(b.status());
      (key == "set_sm_margin" ? s->set_sm_margin
       : key == "fp8_buf"     ? s->fp8_buf
       : key == "aggregate"   ? s->aggregate
                              : s->atomic_gemm) = *b;
    } else {
      return at(g, key, fmt::format("unknown key (keys: {})", fmt::join(kKeys, ", ")));
    }
  }
  return Status::ok();
}

}  // namespace

std::string_view to_string(UbGemm g) {
  return kGemmNames[static_cast<int>(g)];
}
std::string_view to_string(UbMethod m) {
  return kMethodNames[static_cast<int>(m)];
}

bool TpCommOverlapCfg::empty() const {
  for (const UbGemmSettings& s : gemms)
    if (s != UbGemmSettings{}) return false;
  return true;
}

// TE's defaults for a GEMM of `method` (get_default_config): what a method
// brings with it, whether TE's table or the job chose the method.
static UbGemmConfig method_defaults(UbMethod method, int tp) {
  UbGemmConfig c;
  c.method = method;
  const bool ring = method == UbMethod::kRingExchange;
  c.num_sm = ring ? 1 : 16;
  c.cga_size = ring ? 1 : 2;
  c.set_sm_margin = !ring;
  c.num_splits = ring ? tp : 4;
  return c;
}

UbGemmConfig ub_default(UbGemm g, int tp) {
  UbGemmConfig c = method_defaults(gathers_input(g)            ? UbMethod::kRingExchange
                                   : reduce_scatters_output(g) ? UbMethod::kPipeline
                                                               : UbMethod::kBulk,
                                   tp);
  c.fp8_buf = gathers_input(g) || g == UbGemm::kQkvDgrad || g == UbGemm::kFc1Dgrad;
  return c;
}

UbGemmConfig ub_resolve(const TpCommOverlapCfg& cfg, UbGemm g, int tp) {
  const UbGemmSettings& s = cfg[g];
  // A method given without its companions takes that method's defaults for
  // them, as TE's default entry would have.
  const UbGemmConfig dflt = ub_default(g, tp);
  UbGemmConfig c = s.method ? method_defaults(*s.method, tp) : dflt;
  if (s.num_sm) c.num_sm = *s.num_sm;
  if (s.num_splits) c.num_splits = *s.num_splits;
  if (s.cga_size) c.cga_size = *s.cga_size;
  if (s.set_sm_margin) c.set_sm_margin = *s.set_sm_margin;
  if (s.aggregate) c.aggregate = *s.aggregate;
  if (s.atomic_gemm) c.atomic_gemm = *s.atomic_gemm;
  // TE decides fp8_buf itself: always for the GEMMs whose input is gathered
  // (the bulk dgrads' too), and for a reduce-scatter only when the job asks
  // for it and the method is pipeline.
  c.fp8_buf = dflt.fp8_buf || (reduce_scatters_output(g) && c.method == UbMethod::kPipeline &&
                               s.fp8_buf.value_or(false));
  return c;
}

Result<TpCommOverlapCfg> parse_tp_comm_overlap_cfg(const YAML::Node& n) {
  TpCommOverlapCfg cfg;
  if (n.IsNull()) return cfg;
  if (!n.IsMap())
    return Status::invalid_argument(
        fmt::format("expected a mapping of TE's GEMM names ({}) to their settings",
                    fmt::join(kGemmNames, ", ")));
  for (const auto& kv : n) {
    const std::string name = kv.first.as<std::string>();
    int index = -1;
    for (int i = 0; i < kNumUbGemms; ++i)
      if (name == kGemmNames[i]) index = i;
    if (index < 0)
      return Status::invalid_argument(fmt::format("{}: unknown GEMM (Transformer Engine's: {})",
                                                  name, fmt::join(kGemmNames, ", ")));
    PRISM_RETURN_IF_ERROR(read_settings(static_cast<UbGemm>(index), kv.second, &cfg.gemms[index]));
  }
  return cfg;
}

Status validate_tp_comm_overlap_cfg(const TpCommOverlapCfg& cfg, int tp, int num_sms) {
  for (int i = 0; i < kNumUbGemms; ++i) {
    const UbGemm g = static_cast<UbGemm>(i);
    const UbGemmSettings& s = cfg[g];
    const UbGemmConfig c = ub_resolve(cfg, g, tp);
    if (gathers_input(g) && c.method != UbMethod::kRingExchange)
      return at(g, "method",
                fmt::format("{} is not modelled for an all-gather before a GEMM (ring_exchange, "
                            "TE's default, is)",
                            to_string(c.method)));
    if (reduce_scatters_output(g) && c.method == UbMethod::kBulk)
      return at(g, "method",
                "bulk is not an overlap of a reduce-scatter after a GEMM (pipeline or "
                "ring_exchange)");
    if (!gathers_input(g) && !reduce_scatters_output(g) && c.method != UbMethod::kBulk)
      return at(g, "method",
                fmt::format("{} is not an overlap of the backward's {} (bulk)", to_string(c.method),
                            (g == UbGemm::kQkvDgrad || g == UbGemm::kFc1Dgrad)
                                ? "input all-gather"
                                : "input-gradient reduce-scatter"));
    if (num_sms > 0 && c.num_sm >= num_sms)
      return at(
          g, "num_sm",
          fmt::format("must leave the GEMM some of the GPU's {} SMs (got {})", num_sms, c.num_sm));
    if (c.method == UbMethod::kPipeline && c.num_splits > kMaxSplits)
      return at(g, "num_splits",
                fmt::format("must be at most {} (got {})", kMaxSplits, c.num_splits));
    if (c.method == UbMethod::kRingExchange && s.num_splits && *s.num_splits != tp)
      return at(g, "num_splits",
                fmt::format("a ring exchange runs one step per tensor-parallel rank: {} (got {})",
                            tp, *s.num_splits));
    if (c.method == UbMethod::kBulk && s.num_splits)
      return at(g, "num_splits", "a bulk overlap does not split its GEMM");
    if (c.cga_size > kMaxCgaSize)
      return at(g, "cga_size", fmt::format("must be at most {} (got {})", kMaxCgaSize, c.cga_size));
    if (c.atomic_gemm) return at(g, "atomic_gemm", "TE's atomic-GEMM overlap is not modelled");
    if (c.aggregate && !gathers_input(g))
      return at(g, "aggregate", "only a ring-exchange all-gather aggregates its chunks");
    if (c.aggregate && tp % 2 != 0)
      return at(g, "aggregate",
                fmt::format("pairs the tensor-parallel ranks: needs an even tp (got {})", tp));
  }
  return Status::ok();
}

}  // namespace prism
