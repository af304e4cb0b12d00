// validate_graph(): the structural checks (layout, slots, roles, rank
// assignment, overrides). Per-op checks are in validate_role.cc, cycles and
// the order of frees in validate_order.cc, the checks that need slot
// resolution in validate_comm.cc.
#include "graph/validate.h"

#include <algorithm>
#include <cstdint>
#include <set>

#include <fmt/format.h>

#include "graph/validate_internal.h"

namespace prism {
namespace validate_internal {

std::string role_op(const Role& role, std::size_t op) {
  return fmt::format("role '{}' op {}", role.name, op);
}

std::string rank_role(const ExecutionGraph& g, Rank r) {
  return fmt::format("rank {} (role '{}')", r, g.roles[g.role_of_rank[r]].name);
}

Status check_deps_range(const Role& role, std::size_t op) {
  const Op& o = role.ops[op];
  if (o.deps_begin > o.deps_end || o.deps_end > role.deps.size()) {
    return Status::invalid_argument(
        fmt::format("{}: deps range [{}, {}) is outside the role's {} deps", role_op(role, op),
                    o.deps_begin, o.deps_end, role.deps.size()));
  }
  return Status::ok();
}

Status check_event_ref(const Role& role, std::size_t op) {
  const std::int32_t e = role.ops[op].ref;
  if (e < 0 || static_cast<std::size_t>(e) >= role.events.size()) {
    return Status::invalid_argument(
        fmt::format("{}: event {} does not exist (the role has {} events)", role_op(role, op), e,
                    role.events.size()));
  }
  return Status::ok();
}

}  // namespace validate_internal

namespace {

// The first name that appears twice in `names`, or nullptr.
const std::string* find_duplicate(const std::vector<std::string>& names) {
  std::set<std::string_view> seen;
  for (const std::string& n : names)
    if (!seen.insert(n).second) return &n;
  return nullptr;
}

Status validate_layout(const Layout& layout) {
  if (layout.world_size() < 1) {
    return Status::invalid_argument(
        fmt::format("layout: world_size must be >= 1, got {}", layout.world_size()));
  }
  if (layout.gpus_per_node() < 1) {
    return Status::invalid_argument(
        fmt::format("layout: gpus_per_node must be >= 1, got {}", layout.gpus_per_node()));
  }
  std::vector<std::string> names;
  std::int64_t product = 1;
  for (const GridDim& d : layout.dims()) {
    if (d.size < 1) {
      return Status::invalid_argument(
          fmt::format("layout: dim '{}' has size {}; must be >= 1", d.name, d.size));
    }
    product = std::min<std::int64_t>(product * d.size, std::int64_t{1} << 40);
    names.push_back(d.name);
  }
  if (const std::string* dup = find_duplicate(names))
    return Status::invalid_argument(fmt::format("layout: dim '{}' appears twice", *dup));
  if (product != layout.world_size()) {
    return Status::invalid_argument(
        fmt::format("layout: the product of the dim sizes ({}) must equal world_size ({})", product,
                    layout.world_size()));
  }
  return Status::ok();
}

Status validate_group_slot(const CommSlot& s, const Layout& layout) {
  const std::string where = fmt::format("slot '{}'", s.name);
  if (s.explicit_groups.empty()) {
    for (std::size_t i = 0; i < s.dims.size(); ++i) {
      const int d = s.dims[i];
      if (d < 0 || d >= static_cast<int>(layout.dims().size()))
        return Status::invalid_argument(fmt::format("{}: dim index {} does not exist", where, d));
      if (std::find(s.dims.begin(), s.dims.begin() + i, d) != s.dims.begin() + i) {
        return Status::invalid_argument(
            fmt::format("{}: dim '{}' listed twice", where, layout.dims()[d].name));
      }
    }
    return Status::ok();
  }
  if (s.group_of_rank.size() != static_cast<std::size_t>(layout.world_size())) {
    return Status::invalid_argument(
        fmt::format("{}: group table not built (run finalize_graph)", where));
  }
  for (std::size_t g = 0; g < s.explicit_groups.size(); ++g) {
    if (s.explicit_groups[g].empty())
      return Status::invalid_argument(fmt::format("{}: group {} is empty", where, g));
    for (Rank r : s.explicit_groups[g]) {
      if (r < 0 || r >= layout.world_size() || s.group_of_rank[r] != static_cast<std::int32_t>(g)) {
        return Status::invalid_argument(fmt::format(
            "{}: group {} lists rank {}, which is out of range or listed twice", where, g, r));
      }
    }
  }
  return Status::ok();
}

Status validate_peer_slot(const CommSlot& s, const Layout& layout) {
  const std::string where = fmt::format("slot '{}'", s.name);
  if (s.explicit_peers.empty()) {
    if (s.peer_dim < 0 || s.peer_dim >= static_cast<int>(layout.dims().size())) {
      return Status::invalid_argument(
          fmt::format("{}: peer dim index {} does not exist", where, s.peer_dim));
    }
    if (s.offset == 0)
      return Status::invalid_argument(fmt::format("{}: offset must not be 0", where));
    return Status::ok();
  }
  if (s.explicit_peers.size() != static_cast<std::size_t>(layout.world_size())) {
    return Status::invalid_argument(fmt::format("{}: peer table has {} entries for world_size {}",
                                                where, s.explicit_peers.size(),
                                                layout.world_size()));
  }
  for (Rank r = 0; r < layout.world_size(); ++r) {
    const Rank p = s.explicit_peers[r];
    if (p == r || p < kNone || p >= layout.world_size()) {
      return Status::invalid_argument(
          fmt::format("{}: rank {} has peer {}; must be another rank or -1", where, r, p));
    }
  }
  return Status::ok();
}

Status validate_slots(const ExecutionGraph& g) {
  std::vector<std::string> names;
  for (const CommSlot& s : g.slots) {
    names.push_back(s.name);
    PRISM_RETURN_IF_ERROR(s.kind == CommSlot::Kind::kGroup ? validate_group_slot(s, g.layout)
                                                           : validate_peer_slot(s, g.layout));
  }
  if (const std::string* dup = find_duplicate(names))
    return Status::invalid_argument(fmt::format("slot '{}' is defined twice", *dup));
  return Status::ok();
}

Status validate_role_names(const ExecutionGraph& g) {
  std::vector<std::string> names;
  for (const Role& role : g.roles) {
    names.push_back(role.name);
    const std::string where = fmt::format("role '{}'", role.name);
    if (role.streams.empty())
      return Status::invalid_argument(fmt::format("{}: needs at least one stream", where));
    if (const std::string* dup = find_duplicate(role.streams))
      return Status::invalid_argument(fmt::format("{}: stream '{}' is defined twice", where, *dup));
    if (const std::string* dup = find_duplicate(role.events))
      return Status::invalid_argument(fmt::format("{}: event '{}' is defined twice", where, *dup));
  }
  if (const std::string* dup = find_duplicate(names))
    return Status::invalid_argument(fmt::format("role '{}' is defined twice", *dup));
  return Status::ok();
}

Status validate_assignment(const ExecutionGraph& g) {
  if (g.role_of_rank.size() != static_cast<std::size_t>(g.world_size())) {
    return Status::invalid_argument(fmt::format("role_of_rank has {} entries for world_size {}",
                                                g.role_of_rank.size(), g.world_size()));
  }
  for (Rank r = 0; r < g.world_size(); ++r) {
    const std::int32_t role = g.role_of_rank[r];
    if (role == kNone) return Status::invalid_argument(fmt::format("rank {} has no role", r));
    if (role < 0 || static_cast<std::size_t>(role) >= g.roles.size()) {
      return Status::invalid_argument(
          fmt::format("rank {}: role index {} does not exist", r, role));
    }
  }
  return Status::ok();
}

Status validate_overrides(const ExecutionGraph& g) {
  for (std::size_t i = 0; i < g.overrides.size(); ++i) {
    const RankOverride& o = g.overrides[i];
    if (o.rank < 0 || o.rank >= g.world_size())
      return Status::invalid_argument(fmt::format("override of rank {}: no such rank", o.rank));
    if (i > 0 && o.rank <= g.overrides[i - 1].rank) {
      return Status::invalid_argument(fmt::format(
          "override of rank {}: overrides must be sorted by rank, one per rank", o.rank));
    }
    if (o.compute_scale_ppm <= 0 || o.compute_scale_ppm > kMaxComputeScalePpm) {
      return Status::invalid_argument(
          fmt::format("override of rank {}: compute_scale_ppm must be > 0 and <= {} (x1000), "
                      "got {}",
                      o.rank, kMaxComputeScalePpm, o.compute_scale_ppm));
    }
  }
  return Status::ok();
}

}  // namespace

Status validate_graph(const ExecutionGraph& g) {
  PRISM_RETURN_IF_ERROR(validate_layout(g.layout));
  PRISM_RETURN_IF_ERROR(validate_slots(g));
  PRISM_RETURN_IF_ERROR(validate_role_names(g));
  for (const Role& role : g.roles) {
    PRISM_RETURN_IF_ERROR(validate_internal::validate_role(g, role));
    PRISM_RETURN_IF_ERROR(validate_internal::validate_order(role));
  }
  PRISM_RETURN_IF_ERROR(validate_assignment(g));
  PRISM_RETURN_IF_ERROR(validate_overrides(g));
  return validate_internal::validate_communication(g);
}

}  // namespace prism
