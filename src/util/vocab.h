// NCCL's vocabulary, shared by the graph IR and the network model (which knows
// nothing of the IR): collective kinds and element types, with the names used
// in files and reports.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace prism {

enum class CollectiveKind : std::uint8_t {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kReduce,
  kAllToAll,
  kBarrier,
};

enum class DType : std::uint8_t {
  kFloat32,
  kFloat16,
  kBFloat16,
  kFloat8E4M3,
  kFloat8E5M2,
  kFloat64,
  kInt8,
  kUint8,
  kInt32,
  kInt64,
};

std::string_view to_string(CollectiveKind k);
std::string_view to_string(DType k);
std::optional<CollectiveKind> parse_collective_kind(std::string_view s);
std::optional<DType> parse_dtype(std::string_view s);
int dtype_size(DType d);
// The two 8-bit float types (e4m3, e5m2).
bool is_fp8(DType d);

}  // namespace prism
