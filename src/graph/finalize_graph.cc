// finalize_graph(): derives what the file does not store. It may run more
// than once on the same graph: tables are rebuilt, and an event wait gets its
// dependency on the record only if it does not hold it already.
#include <algorithm>

#include <fmt/format.h>

#include "graph/validate.h"
#include "graph/validate_internal.h"

namespace prism {
namespace {

using validate_internal::role_op;

Status fill_group_table(int world_size, CommSlot* slot) {
  slot->group_of_rank.assign(static_cast<std::size_t>(std::max(world_size, 0)), kNone);
  for (std::size_t g = 0; g < slot->explicit_groups.size(); ++g) {
    for (Rank r : slot->explicit_groups[g]) {
      if (r < 0 || r >= world_size) {
        return Status::invalid_argument(fmt::format(
            "slot '{}': group {} lists rank {}, outside [0, {})", slot->name, g, r, world_size));
      }
      const std::int32_t prev = slot->group_of_rank[r];
      if (prev == static_cast<std::int32_t>(g)) {
        return Status::invalid_argument(
            fmt::format("slot '{}': group {} lists rank {} twice", slot->name, g, r));
      }
      if (prev != kNone) {
        return Status::invalid_argument(
            fmt::format("slot '{}': rank {} is in group {} and group {}", slot->name, r, prev, g));
      }
      slot->group_of_rank[r] = static_cast<std::int32_t>(g);
    }
  }
  return Status::ok();
}

bool has_dep(const Role& role, const Op& op, std::int32_t dep) {
  return std::find(role.deps.begin() + op.deps_begin, role.deps.begin() + op.deps_end, dep) !=
         role.deps.begin() + op.deps_end;
}

// Each event wait depends on the latest record of its event earlier in issue
// order (cudaStreamWaitEvent semantics).
Status resolve_event_waits(Role& role) {
  std::vector<std::int32_t> last_record(role.events.size(), kNone);
  std::vector<std::int32_t> add(role.ops.size(), kNone);
  bool any = false;
  for (std::size_t i = 0; i < role.ops.size(); ++i) {
    const Op& op = role.ops[i];
    if (op.kind != OpKind::kEventRecord && op.kind != OpKind::kEventWait) continue;
    PRISM_RETURN_IF_ERROR(validate_internal::check_event_ref(role, i));
    if (op.kind == OpKind::kEventRecord) {
      last_record[op.ref] = static_cast<std::int32_t>(i);
      continue;
    }
    const std::int32_t rec = last_record[op.ref];
    if (rec == kNone) {
      return Status::invalid_argument(
          fmt::format("{}: event_wait on event '{}' with no earlier event_record", role_op(role, i),
                      role.events[op.ref]));
    }
    PRISM_RETURN_IF_ERROR(validate_internal::check_deps_range(role, i));
    if (!has_dep(role, op, rec)) {
      add[i] = rec;
      any = true;
    }
  }
  if (!any) return Status::ok();
  std::vector<std::int32_t> deps;
  deps.reserve(role.deps.size() + role.ops.size());
  for (std::size_t i = 0; i < role.ops.size(); ++i) {
    Op& op = role.ops[i];
    PRISM_RETURN_IF_ERROR(validate_internal::check_deps_range(role, i));
    const auto begin = static_cast<std::uint32_t>(deps.size());
    deps.insert(deps.end(), role.deps.begin() + op.deps_begin, role.deps.begin() + op.deps_end);
    if (add[i] != kNone) deps.push_back(add[i]);
    op.deps_begin = begin;
    op.deps_end = static_cast<std::uint32_t>(deps.size());
  }
  role.deps = std::move(deps);
  return Status::ok();
}

// A free names an earlier alloc, freed once; it takes the alloc's size.
Status resolve_frees(Role& role) {
  std::vector<std::int32_t> freed_by;
  for (std::size_t i = 0; i < role.ops.size(); ++i) {
    Op& op = role.ops[i];
    if (op.kind != OpKind::kFree) continue;
    if (freed_by.empty()) freed_by.assign(role.ops.size(), kNone);
    const std::int32_t a = op.ref;
    const std::string where = role_op(role, i);
    if (a < 0 || static_cast<std::size_t>(a) >= role.ops.size()) {
      return Status::invalid_argument(
          fmt::format("{}: free of op {}, which does not exist", where, a));
    }
    if (static_cast<std::size_t>(a) > i) {
      return Status::invalid_argument(
          fmt::format("{}: free of op {}, which comes later", where, a));
    }
    const Op& alloc = role.ops[a];
    if (alloc.kind != OpKind::kAlloc) {
      return Status::invalid_argument(fmt::format(
          "{}: free of op {}, which is a {} op, not an alloc", where, a, to_string(alloc.kind)));
    }
    if (freed_by[a] != kNone) {
      return Status::invalid_argument(
          fmt::format("{}: free of op {}, which op {} already freed", where, a, freed_by[a]));
    }
    freed_by[a] = static_cast<std::int32_t>(i);
    op.bytes = alloc.bytes;
  }
  return Status::ok();
}

}  // namespace

Status finalize_graph(ExecutionGraph& g) {
  for (CommSlot& slot : g.slots) {
    if (slot.kind == CommSlot::Kind::kGroup && !slot.explicit_groups.empty())
      PRISM_RETURN_IF_ERROR(fill_group_table(g.world_size(), &slot));
  }
  for (Role& role : g.roles) {
    PRISM_RETURN_IF_ERROR(resolve_event_waits(role));
    PRISM_RETURN_IF_ERROR(resolve_frees(role));
  }
  return Status::ok();
}

}  // namespace prism
