#include "graph/op.h"

#include <array>
#include <utility>

#include "util/enum_names.h"

namespace prism {
namespace {

constexpr std::array<std::pair<OpKind, std::string_view>, 9> kOpKinds{{
    {OpKind::kCompute, "compute"},
    {OpKind::kCollective, "collective"},
    {OpKind::kSend, "send"},
    {OpKind::kRecv, "recv"},
    {OpKind::kAlloc, "alloc"},
    {OpKind::kFree, "free"},
    {OpKind::kEventRecord, "event_record"},
    {OpKind::kEventWait, "event_wait"},
    {OpKind::kMarker, "marker"},
}};
constexpr std::array<std::pair<MarkerKind, std::string_view>, 4> kMarkers{{
    {MarkerKind::kIteration, "iteration"},
    {MarkerKind::kMicrobatch, "microbatch"},
    {MarkerKind::kPhase, "phase"},
    {MarkerKind::kIterationEnd, "iteration_end"},
}};
constexpr std::array<std::pair<KernelClass, std::string_view>, 4> kKernelClasses{{
    {KernelClass::kGemm, "gemm"},
    {KernelClass::kAttention, "attention"},
    {KernelClass::kElementwise, "elementwise"},
    {KernelClass::kOther, "other"},
}};

constexpr std::array<std::pair<Transport, std::string_view>, 2> kTransports{{
    {Transport::kNccl, "nccl"},
    {Transport::kUserbuffers, "userbuffers"},
}};

}  // namespace

bool is_communication(OpKind k) {
  return k == OpKind::kCollective || k == OpKind::kSend || k == OpKind::kRecv;
}

std::string_view to_string(OpKind k) {
  return internal::enum_name(k, kOpKinds);
}
std::string_view to_string(MarkerKind k) {
  return internal::enum_name(k, kMarkers);
}
std::string_view to_string(KernelClass k) {
  return internal::enum_name(k, kKernelClasses);
}
std::string_view to_string(Transport t) {
  return internal::enum_name(t, kTransports);
}
std::optional<Transport> parse_transport(std::string_view s) {
  return internal::parse_enum(s, kTransports);
}
std::optional<OpKind> parse_op_kind(std::string_view s) {
  return internal::parse_enum(s, kOpKinds);
}
std::optional<MarkerKind> parse_marker_kind(std::string_view s) {
  return internal::parse_enum(s, kMarkers);
}
std::optional<KernelClass> parse_kernel_class(std::string_view s) {
  return internal::parse_enum(s, kKernelClasses);
}

}  // namespace prism
