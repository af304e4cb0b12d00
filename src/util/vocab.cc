#include "util/vocab.h"

#include <array>
#include <utility>

#include "util/enum_names.h"

namespace prism {
namespace {

constexpr std::array<std::pair<CollectiveKind, std::string_view>, 7> kCollectives{{
    {CollectiveKind::kAllReduce, "all_reduce"},
    {CollectiveKind::kAllGather, "all_gather"},
    {CollectiveKind::kReduceScatter, "reduce_scatter"},
    {CollectiveKind::kBroadcast, "broadcast"},
    {CollectiveKind::kReduce, "reduce"},
    {CollectiveKind::kAllToAll, "all_to_all"},
    {CollectiveKind::kBarrier, "barrier"},
}};
constexpr std::array<std::pair<DType, std::string_view>, 10> kDTypes{{
    {DType::kFloat32, "fp32"},
    {DType::kFloat16, "fp16"},
    {DType::kBFloat16, "bf16"},
    {DType::kFloat8E4M3, "fp8_e4m3"},
    {DType::kFloat8E5M2, "fp8_e5m2"},
    {DType::kFloat64, "fp64"},
    {DType::kInt8, "int8"},
    {DType::kUint8, "uint8"},
    {DType::kInt32, "int32"},
    {DType::kInt64, "int64"},
}};
}  // namespace

std::string_view to_string(CollectiveKind k) {
  return internal::enum_name(k, kCollectives);
}
std::string_view to_string(DType k) {
  return internal::enum_name(k, kDTypes);
}
std::optional<CollectiveKind> parse_collective_kind(std::string_view s) {
  return internal::parse_enum(s, kCollectives);
}
std::optional<DType> parse_dtype(std::string_view s) {
  return internal::parse_enum(s, kDTypes);
}

bool is_fp8(DType d) {
  return d == DType::kFloat8E4M3 || d == DType::kFloat8E5M2;
}

int dtype_size(DType d) {
  switch (d) {
    case DType::kFloat64:
    case DType::kInt64:
      return 8;
    case DType::kFloat32:
    case DType::kInt32:
      return 4;
    case DType::kFloat16:
    case DType::kBFloat16:
      return 2;
    case DType::kFloat8E4M3:
    case DType::kFloat8E5M2:
    case DType::kInt8:
    case DType::kUint8:
      return 1;
  }
  return 1;
}

}  // namespace prism
