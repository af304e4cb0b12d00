// Check 3 (every op's fields and references) and check 4 (the ops of a role
// form no dependency cycle).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include <fmt/format.h>

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
    return Status::ok();
  }
  if (op.duration.ns != 0) return op_error(role, i, "has both a duration and a cost");
  const KernelCost& c = role.costs[op.cost];
  if (!(c.flops >= 0) || !std::isfinite(c.flops))
    return op_error(role, i, fmt::format("cost has flops {}; must be finite and >= 0", c.flops));
  if (c.bytes_accessed.count < 0)
    return op_error(role, i, fmt::format("cost has negative bytes {}", c.bytes_accessed.count));
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

// "op 3 -> op 7 -> op 3", eliding the middle of long cycles.
std::string format_cycle(const std::vector<std::int32_t>& cycle) {
  constexpr std::size_t kHead = 8, kTail = 4;
  std::string out;
  for (std::size_t k = 0; k < cycle.size(); ++k) {
    if (cycle.size() > kHead + kTail && k == kHead) {
      out += fmt::format("... ({} more ops) -> ", cycle.size() - kHead - kTail);
      k = cycle.size() - kTail;
    }
    out += fmt::format("op {} -> ", cycle[k]);
  }
  return out + fmt::format("op {}", cycle.front());
}

// Some op is left with unfinished predecessors after Kahn's algorithm; every
// such op has such a predecessor, so walking predecessors must close a loop.
std::vector<std::int32_t> find_cycle(const Role& role, const std::vector<std::int32_t>& indegree,
                                     const std::vector<std::int32_t>& prev_on_stream) {
  std::size_t start = 0;
  while (indegree[start] == 0) ++start;
  std::vector<std::int32_t> pos(role.ops.size(), -1);
  std::vector<std::int32_t> path;
  auto x = static_cast<std::int32_t>(start);
  while (pos[x] < 0) {
    pos[x] = static_cast<std::int32_t>(path.size());
    path.push_back(x);
    const Op& op = role.ops[x];
    std::int32_t next = prev_on_stream[x];
    if (next == kNone || indegree[next] == 0) {
      for (std::uint32_t d = op.deps_begin; d < op.deps_end; ++d)
        if (indegree[role.deps[d]] > 0) next = role.deps[d];
    }
    x = next;
  }
  std::vector<std::int32_t> cycle(path.begin() + pos[x], path.end());
  std::reverse(cycle.begin(), cycle.end());  // predecessors were walked backwards
  std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
  return cycle;
}

}  // namespace

Status validate_role(const ExecutionGraph& g, const Role& role) {
  for (std::size_t i = 0; i < role.ops.size(); ++i) PRISM_RETURN_IF_ERROR(check_op(g, role, i));
  return Status::ok();
}

// Kahn's algorithm over edges (previous op on the stream -> op) and
// (dependency -> op).
Status validate_acyclic(const Role& role) {
  const std::size_t n = role.ops.size();
  std::vector<std::int32_t> indegree(n, 0), prev_on_stream(n, kNone), next_on_stream(n, kNone);
  std::vector<std::int32_t> last(role.streams.size(), kNone);
  std::vector<std::uint32_t> succ_begin(n + 1, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const Op& op = role.ops[i];
    if (last[op.stream] != kNone) {
      prev_on_stream[i] = last[op.stream];
      next_on_stream[last[op.stream]] = static_cast<std::int32_t>(i);
      ++indegree[i];
    }
    last[op.stream] = static_cast<std::int32_t>(i);
    indegree[i] += static_cast<std::int32_t>(op.deps_end - op.deps_begin);
    for (std::uint32_t d = op.deps_begin; d < op.deps_end; ++d) ++succ_begin[role.deps[d] + 1];
  }
  for (std::size_t i = 0; i < n; ++i) succ_begin[i + 1] += succ_begin[i];
  std::vector<std::int32_t> succ(succ_begin[n]);
  std::vector<std::uint32_t> fill(succ_begin.begin(), succ_begin.end() - 1);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::uint32_t d = role.ops[i].deps_begin; d < role.ops[i].deps_end; ++d)
      succ[fill[role.deps[d]]++] = static_cast<std::int32_t>(i);
  }

  std::vector<std::int32_t> ready;
  for (std::size_t i = 0; i < n; ++i)
    if (indegree[i] == 0) ready.push_back(static_cast<std::int32_t>(i));
  std::size_t done = 0;
  while (!ready.empty()) {
    const std::int32_t x = ready.back();
    ready.pop_back();
    ++done;
    if (next_on_stream[x] != kNone && --indegree[next_on_stream[x]] == 0)
      ready.push_back(next_on_stream[x]);
    for (std::uint32_t s = succ_begin[x]; s < succ_begin[x + 1]; ++s)
      if (--indegree[succ[s]] == 0) ready.push_back(succ[s]);
  }
  if (done == n) return Status::ok();
  return Status::invalid_argument(
      fmt::format("role '{}': dependency cycle: {}", role.name,
                  format_cycle(find_cycle(role, indegree, prev_on_stream))));
}

}  // namespace prism::validate_internal
