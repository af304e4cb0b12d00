// Node attributes: Chakra keeps the key fields of a node (comm_type,
// comm_size, pg_name, ...) in a list of typed attributes. Writers differ in
// the integer type they pick (int32, int64, uint64, ...), so readers accept
// any integer type, as ASTRA-sim's feeder does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chakra/et_def.pb.h"
#include "util/status.h"
#include "util/vocab.h"

namespace prism::chakra {

using Attrs = google::protobuf::RepeatedPtrField<ChakraProtoMsg::AttributeProto>;

// Attribute names: Chakra's and ASTRA-sim's, then PrismLLM's own (which other
// readers ignore) that make an export import back to the same graph.
inline constexpr std::string_view kIsCpuOp = "is_cpu_op";
inline constexpr std::string_view kCommType = "comm_type";
inline constexpr std::string_view kCommSize = "comm_size";
inline constexpr std::string_view kCommSrc = "comm_src";
inline constexpr std::string_view kCommDst = "comm_dst";
inline constexpr std::string_view kCommTag = "comm_tag";
inline constexpr std::string_view kPgName = "pg_name";
inline constexpr std::string_view kNumOps = "num_ops";
inline constexpr std::string_view kTensorSize = "tensor_size";
inline constexpr std::string_view kStream = "stream";  // as Chakra's PyTorch converter
inline constexpr std::string_view kPrismDurationNs = "prism_duration_ns";
inline constexpr std::string_view kPrismKernelClass = "prism_kernel_class";
inline constexpr std::string_view kPrismFlops = "prism_flops";
inline constexpr std::string_view kPrismDtype = "prism_dtype";
inline constexpr std::string_view kPrismRoot = "prism_root";
inline constexpr std::string_view kPrismGroup = "prism_nccl_group";
inline constexpr std::string_view kPrismTransport = "prism_transport";
inline constexpr std::string_view kPrismOp = "prism_op";
inline constexpr std::string_view kPrismBytes = "prism_bytes";
inline constexpr std::string_view kPrismAlloc = "prism_alloc";
inline constexpr std::string_view kPrismRecordStreams = "prism_record_streams";
inline constexpr std::string_view kPrismEvent = "prism_event";
inline constexpr std::string_view kPrismMarker = "prism_marker";
inline constexpr std::string_view kPrismIndex = "prism_index";
// GlobalMetadata attributes.
inline constexpr std::string_view kPrismStreams = "prism_streams";
inline constexpr std::string_view kPrismRole = "prism_role";
// The cluster spec a graph was built for (ExecutionGraph::cluster), when it has one.
inline constexpr std::string_view kPrismCluster = "prism_cluster";

// Where an error is, for its message: "<text>: node <id>", or just the text
// (a file, "the GlobalMetadata"). Formatted only when an error needs it, as
// an import visits millions of nodes. It views its text, which must outlive
// it (pass it down a call, do not keep it).
class Place {
 public:
  Place(const char* text) : text_(text) {}         // NOLINT(google-explicit-constructor)
  Place(const std::string& text) : text_(text) {}  // NOLINT(google-explicit-constructor)
  Place(std::string_view file, std::uint64_t node) : text_(file), node_(node) {}
  std::string str() const;

 private:
  std::string_view text_;
  std::optional<std::uint64_t> node_;
};

// The comm_type of a collective kind, and back. REDUCE_SCATTER_BLOCK reads as
// a reduce-scatter; GATHER and SCATTER have no kind (nullopt).
ChakraProtoMsg::CollectiveCommType comm_type_of(CollectiveKind k);
std::optional<CollectiveKind> collective_of(std::int64_t comm_type);

void add_bool(Attrs* attrs, std::string_view name, bool v);
void add_int(Attrs* attrs, std::string_view name, std::int64_t v);
void add_double(Attrs* attrs, std::string_view name, double v);
void add_string(Attrs* attrs, std::string_view name, std::string_view v);
void add_int_list(Attrs* attrs, std::string_view name, const std::vector<std::int64_t>& v);
void add_string_list(Attrs* attrs, std::string_view name, const std::vector<std::string>& v);

// Typed lookups of the first attribute called `name`: nullopt when absent, an
// error (starting with `where`) when present with an unsuitable type or value.
const ChakraProtoMsg::AttributeProto* find_attr(const Attrs& attrs, std::string_view name);
Result<std::optional<std::int64_t>> int_attr(const Attrs& attrs, std::string_view name,
                                             const Place& where);
Result<std::optional<double>> double_attr(const Attrs& attrs, std::string_view name,
                                          const Place& where);
Result<std::optional<std::string>> string_attr(const Attrs& attrs, std::string_view name,
                                               const Place& where);
Result<std::optional<std::vector<std::int64_t>>> int_list_attr(const Attrs& attrs,
                                                               std::string_view name,
                                                               const Place& where);
Result<std::optional<std::vector<std::string>>> string_list_attr(const Attrs& attrs,
                                                                 std::string_view name,
                                                                 const Place& where);

}  // namespace prism::chakra
