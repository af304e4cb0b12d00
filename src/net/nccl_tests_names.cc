#include "net/nccl_tests_names.h"

#include <array>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace prism {
namespace {

// nccl-tests' test_typenames, with the aliases its -d accepts.
constexpr std::array<std::pair<std::string_view, DType>, 12> kTestTypes{{
    {"float", DType::kFloat32},
    {"half", DType::kFloat16},
    {"bfloat16", DType::kBFloat16},
    {"double", DType::kFloat64},
    {"int8", DType::kInt8},
    {"uint8", DType::kUint8},
    {"int32", DType::kInt32},
    {"int64", DType::kInt64},
    {"f8e4m3", DType::kFloat8E4M3},
    {"f8e5m2", DType::kFloat8E5M2},
    {"int", DType::kInt32},
    {"char", DType::kInt8},
}};
constexpr std::array<std::pair<std::string_view, TestRedop>, 5> kRedops{{
    {"sum", TestRedop::kSum},
    {"prod", TestRedop::kProd},
    {"max", TestRedop::kMax},
    {"min", TestRedop::kMin},
    {"avg", TestRedop::kAvg},
}};

}  // namespace

Result<DType> parse_test_dtype(std::string_view flag, std::string_view name) {
  for (const auto& [n, d] : kTestTypes)
    if (n == name) return d;
  if (const std::optional<DType> ours = parse_dtype(name)) return *ours;
  std::vector<std::string_view> names;
  for (std::size_t i = 0; i < 10; ++i) names.push_back(kTestTypes[i].first);
  return Status::invalid_argument(
      fmt::format("{}: unknown type \"{}\" (nccl-tests' {}; or fp32, fp16, bf16, fp64, fp8_e4m3, "
                  "fp8_e5m2)",
                  flag, name, fmt::join(names, ", ")));
}

std::string_view test_dtype_name(DType d) {
  for (const auto& [n, t] : kTestTypes)
    if (t == d) return n;
  return to_string(d);
}

Result<TestRedop> parse_test_redop(std::string_view flag, std::string_view name) {
  for (const auto& [n, r] : kRedops)
    if (n == name) return r;
  std::vector<std::string_view> names;
  for (const auto& [n, r] : kRedops) names.push_back(n);
  return Status::invalid_argument(fmt::format("{}: unknown reduction \"{}\" (reductions: {})", flag,
                                              name, fmt::join(names, ", ")));
}

std::string_view to_string(TestRedop r) {
  for (const auto& [n, t] : kRedops)
    if (t == r) return n;
  return "?";
}

}  // namespace prism
