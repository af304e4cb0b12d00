// Check 3 of validate_graph(): every op's fields and references, and the
// bounds on values that keep the replay's 64-bit nanoseconds from
// overflowing (util/units.h).
#include <cstdint>

#include <fmt/format.h>

#include "graph/validate.h"
#include "graph/validate_internal.h"

namespace prism::validate_internal {
namespace {

Status op_error(const Role& role, std::size_t i, std::string_view msg) {
  return Status::invalid_argument(fmt::format("{}: {}", role_op(role, i), msg));
}

Status check_compute(const Role& role, std::size_t i) {
  const Op& op = role.ops[i];
  if (op.cost == kNone) {
    if (op.duration.ns < 0)
      return op_error(role, i, fmt::format("negative duration {} ns", op.duration.ns));
    if (op.duration > kMaxOpDuration) {
      return op_error(role, i,
                      fmt::format("duration {} ns exceeds the limit of {} ns (2^50, about 13 days)",
                                  op.duration.ns, kMaxOpDuration.ns));
    }
    return Status::ok();
  }
  if (op.duration.ns != 0) return op_error(role, i, "has both a duration and a cost");
  const KernelCost& c = role.costs[op.cost];
  if (!(c.flops >= 0 && c.flops <= kMaxCostFlops)) {
    return op_error(
        role, i,
        fmt::format("cost has flops {}; must be finite, >= 0 and <= {}", c.flops, kMaxCostFlops));
  }
  if (c.bytes_accessed.count < 0)
    return op_error(role, i, fmt::format("cost has negative bytes {}", c.bytes_accessed.count));
  if (c.bytes_accessed > kMaxBytes) {
    return op_error(role, i,
                    fmt::format("cost has bytes {}, above the limit of {} (2^50, 1 PiB)",
                                c.bytes_accessed.count, kMaxBytes.count));
  }
  return Status::ok();
}

Status check_comm(const ExecutionGraph& g, const Role& role, std::size_t i) {
  const Op& op = role.ops[i];
  if (op.ref < 0 || static_cast<std::size_t>(op.ref) >= g.slots.size())
    return op_error(role, i, fmt::format("slot {} does not exist", op.ref));
  const CommSlot& slot = g.slots[op.ref];
  const bool collective = op.kind == OpKind::kCollective;
  if (collective && slot.kind != CommSlot::Kind::kGroup) {
    return op_error(role, i,
                    fmt::format("collective on slot '{}', which is not a group slot", slot.name));
  }
  if (!collective && slot.kind != CommSlot::Kind::kPeer) {
    return op_error(
        role, i,
        fmt::format("{} on slot '{}', which is not a peer slot", to_string(op.kind), slot.name));
  }
  if (op.arg < 0) {
    return op_error(role, i, fmt::format("negative {} {}", collective ? "root" : "tag", op.arg));
  }
  return Status::ok();
}

Status check_kind_fields(const ExecutionGraph& g, const Role& role, std::size_t i) {
  const Op& op = role.ops[i];
  switch (op.kind) {
    case OpKind::kCompute:
      return check_compute(role, i);
    case OpKind::kCollective:
    case OpKind::kSend:
    case OpKind::kRecv:
      return check_comm(g, role, i);
    case OpKind::kFree:
      if (op.ref < 0 || static_cast<std::size_t>(op.ref) >= role.ops.size() ||
          role.ops[op.ref].kind != OpKind::kAlloc)
        return op_error(role, i, fmt::format("free of op {}, which is not an alloc", op.ref));
      if (op.arg < 0 || (role.streams.size() <= kMaxRecordStream &&
                         (static_cast<std::uint32_t>(op.arg) >> role.streams.size()) != 0)) {
        return op_error(
            role, i,
            fmt::format("record-stream mask {:#x} names a stream the role does not have",
                        static_cast<std::uint32_t>(op.arg)));
      }
      return Status::ok();
    case OpKind::kEventRecord:
    case OpKind::kEventWait:
      return check_event_ref(role, i);
    case OpKind::kMarker:
      if (op.arg < 0) return op_error(role, i, fmt::format("negative marker index {}", op.arg));
      return Status::ok();
    case OpKind::kAlloc:
      return Status::ok();
  }
  return op_error(role, i, "unknown op kind");
}

Status check_op(const ExecutionGraph& g, const Role& role, std::size_t i) {
  const Op& op = role.ops[i];
  if (op.stream >= role.streams.size()) {
    return op_error(
        role, i,
        fmt::format("stream {} does not exist (the role has {})", op.stream, role.streams.size()));
  }
  if (op.name != kNone && (op.name < 0 || static_cast<std::size_t>(op.name) >= role.names.size()))
    return op_error(role, i, fmt::format("name index {} does not exist", op.name));
  if (op.cost != kNone) {
    if (op.kind != OpKind::kCompute) return op_error(role, i, "only compute ops have a cost");
    if (op.cost < 0 || static_cast<std::size_t>(op.cost) >= role.costs.size())
      return op_error(role, i, fmt::format("cost index {} does not exist", op.cost));
  }
  if (op.bytes.count < 0)
    return op_error(role, i, fmt::format("negative bytes {}", op.bytes.count));
  if (op.bytes > kMaxBytes) {
    return op_error(role, i,
                    fmt::format("bytes {} exceed the limit of {} (2^50, 1 PiB)", op.bytes.count,
                                kMaxBytes.count));
  }
  if (op.group != 0 && !is_communication(op.kind)) {
    return op_error(role, i,
                    fmt::format("group {} on a {} op; only communication ops group", op.group,
                                to_string(op.kind)));
  }
  PRISM_RETURN_IF_ERROR(check_kind_fields(g, role, i));
  PRISM_RETURN_IF_ERROR(check_deps_range(role, i));
  for (std::uint32_t d = op.deps_begin; d < op.deps_end; ++d) {
    const std::int32_t dep = role.deps[d];
    if (dep < 0 || static_cast<std::size_t>(dep) >= role.ops.size())
      return op_error(role, i, fmt::format("depends on op {}, which does not exist", dep));
    if (static_cast<std::size_t>(dep) == i) return op_error(role, i, "depends on itself");
  }
  return Status::ok();
}

}  // namespace

Status validate_role(const ExecutionGraph& g, const Role& role) {
  for (std::size_t i = 0; i < role.ops.size(); ++i) PRISM_RETURN_IF_ERROR(check_op(g, role, i));
  return Status::ok();
}

}  // namespace prism::validate_internal
