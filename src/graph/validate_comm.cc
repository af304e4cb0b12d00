// Checks 6-8 of validate_graph(): every slot a rank's role uses resolves for
// that rank (a peer slot to another rank); the members of each communicator
// group issue the same collectives; sends and receives pair up. Work is
// O(roles x ops) to index what each role does on each slot, then
// O(ranks x slots) to walk the ranks, with comparisons cached per (slot, role
// pair) / (role and slot sets) so that ranks with the same programs are
// compared once.
#include <algorithm>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "graph/validate_internal.h"

namespace prism::validate_internal {
namespace {

std::vector<RoleComm> index_roles(const ExecutionGraph& g) {
  std::vector<RoleComm> out(g.roles.size());
  for (std::size_t ri = 0; ri < g.roles.size(); ++ri) {
    const Role& role = g.roles[ri];
    RoleComm& rc = out[ri];
    rc.slot.resize(g.slots.size());
    for (std::size_t i = 0; i < role.ops.size(); ++i) {
      const Op& op = role.ops[i];
      if (!is_communication(op.kind)) continue;
      SlotUse& use = rc.slot[op.ref];
      if (use.first_op == kNone) {
        use.first_op = static_cast<std::int32_t>(i);
        rc.used.push_back(op.ref);
      }
      auto& list = op.kind == OpKind::kCollective ? use.collectives
                   : op.kind == OpKind::kSend     ? use.sends
                                                  : use.recvs;
      list.push_back(static_cast<std::int32_t>(i));
    }
    std::sort(rc.used.begin(), rc.used.end());
  }
  return out;
}

// Why slot `s` fails to resolve for rank `r`, or nullptr when it resolves.
// A grid peer slot that wraps by a multiple of its dim's size (a dim of size
// 1, say) resolves every rank to itself; explicit tables cannot (the slot
// checks reject a rank listed as its own peer).
const char* resolution_problem(const ExecutionGraph& g, const SlotResolver& res, int s, Rank r) {
  const CommSlot& slot = g.slots[s];
  if (slot.kind == CommSlot::Kind::kPeer) {
    const Rank peer = res.peer(s, r);
    if (peer == kNone) return "does not resolve";
    return peer == r ? "resolves to the rank itself" : nullptr;
  }
  return slot.explicit_groups.empty() || slot.group_of_rank[r] != kNone ? nullptr
                                                                        : "does not resolve";
}

Status check_resolution(const ExecutionGraph& g, const std::vector<RoleComm>& comm) {
  const SlotResolver res = g.resolver();
  for (Rank r = 0; r < g.world_size(); ++r) {
    const RoleComm& rc = comm[g.role_of_rank[r]];
    for (int s : rc.used) {
      if (const char* problem = resolution_problem(g, res, s, r)) {
        return Status::invalid_argument(fmt::format("{} op {}: slot '{}' {}", rank_role(g, r),
                                                    rc.slot[s].first_op, g.slots[s].name, problem));
      }
    }
  }
  return Status::ok();
}

bool is_rooted(CollectiveKind k) {
  return k == CollectiveKind::kBroadcast || k == CollectiveKind::kReduce;
}

std::string describe_collective(const Op& op) {
  std::string out =
      fmt::format("{} of {} B {}", to_string(op.collective), op.bytes.count, to_string(op.dtype));
  if (is_rooted(op.collective) || op.arg != 0) out += fmt::format(" root {}", op.arg);
  return out;
}

bool same_collective(const Op& a, const Op& b) {
  return a.collective == b.collective && a.bytes == b.bytes && a.dtype == b.dtype && a.arg == b.arg;
}

// Ranks `a` and `b` share a group of slot `s`; their roles differ.
Status compare_collectives(const ExecutionGraph& g, const std::vector<RoleComm>& comm, int s,
                           Rank a, Rank b) {
  const Role& ra = g.roles[g.role_of_rank[a]];
  const Role& rb = g.roles[g.role_of_rank[b]];
  const auto& la = comm[g.role_of_rank[a]].slot[s].collectives;
  const auto& lb = comm[g.role_of_rank[b]].slot[s].collectives;
  const std::string slot = g.slots[s].name;
  for (std::size_t k = 0; k < std::min(la.size(), lb.size()); ++k) {
    const Op& x = ra.ops[la[k]];
    const Op& y = rb.ops[lb[k]];
    if (same_collective(x, y)) continue;
    return Status::invalid_argument(
        fmt::format("slot '{}': {} op {} is {} but {} op {} is {}", slot, rank_role(g, a), la[k],
                    describe_collective(x), rank_role(g, b), lb[k], describe_collective(y)));
  }
  if (la.size() == lb.size()) return Status::ok();
  const bool a_more = la.size() > lb.size();
  const Role& longer = a_more ? ra : rb;
  const std::int32_t extra = a_more ? la[lb.size()] : lb[la.size()];
  return Status::invalid_argument(fmt::format(
      "slot '{}': {} issues {} collectives but {} issues {} (first unmatched: {} op {}, {})", slot,
      rank_role(g, a), la.size(), rank_role(g, b), lb.size(),
      a_more ? rank_role(g, a) : rank_role(g, b), extra, describe_collective(longer.ops[extra])));
}

// Rooted collectives name a root inside the group.
Status check_roots(const ExecutionGraph& g, const std::vector<RoleComm>& comm, int s, Rank r,
                   std::size_t group_size) {
  const Role& role = g.roles[g.role_of_rank[r]];
  for (std::int32_t i : comm[g.role_of_rank[r]].slot[s].collectives) {
    const Op& op = role.ops[i];
    if (is_rooted(op.collective) && static_cast<std::size_t>(op.arg) >= group_size) {
      return Status::invalid_argument(
          fmt::format("slot '{}': {} op {}: root {} is outside its group of {} ranks",
                      g.slots[s].name, rank_role(g, r), i, op.arg, group_size));
    }
  }
  return Status::ok();
}

// All members of one group against its first member; role pairs already
// found to agree on this slot are skipped.
Status check_group(const ExecutionGraph& g, const std::vector<RoleComm>& comm, int s,
                   const std::vector<Rank>& members, std::set<std::pair<int, int>>* agree) {
  const Rank first = members.front();
  const int ra = g.role_of_rank[first];
  PRISM_RETURN_IF_ERROR(check_roots(g, comm, s, first, members.size()));
  for (std::size_t k = 1; k < members.size(); ++k) {
    const int rb = g.role_of_rank[members[k]];
    if (rb == ra || agree->count({ra, rb}) != 0) continue;
    PRISM_RETURN_IF_ERROR(compare_collectives(g, comm, s, first, members[k]));
    agree->insert({ra, rb});
  }
  return Status::ok();
}

Status check_collectives(const ExecutionGraph& g, const std::vector<RoleComm>& comm) {
  const SlotResolver res = g.resolver();
  std::vector<Rank> members;
  for (int s = 0; s < static_cast<int>(g.slots.size()); ++s) {
    const CommSlot& slot = g.slots[s];
    if (slot.kind != CommSlot::Kind::kGroup) continue;
    std::set<std::pair<int, int>> agree;
    if (!slot.explicit_groups.empty()) {
      for (const std::vector<Rank>& group : slot.explicit_groups)
        PRISM_RETURN_IF_ERROR(check_group(g, comm, s, group, &agree));
      continue;
    }
    for (Rank r = 0; r < g.world_size(); ++r) {
      if (res.group_id(s, r) != r) continue;  // visit each group once, from its lowest rank
      res.members(s, r, &members);
      PRISM_RETURN_IF_ERROR(check_group(g, comm, s, members, &agree));
    }
  }
  return Status::ok();
}

}  // namespace

Status validate_communication(const ExecutionGraph& g) {
  const std::vector<RoleComm> comm = index_roles(g);
  PRISM_RETURN_IF_ERROR(check_resolution(g, comm));
  PRISM_RETURN_IF_ERROR(check_collectives(g, comm));
  return check_p2p(g, comm);
}

}  // namespace prism::validate_internal
