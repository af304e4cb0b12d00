// Pieces of finalize_graph() / validate_graph() shared between their files;
// internal to src/graph.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "util/status.h"

namespace prism::validate_internal {

// "role 'name' op 12", the place every op-level message starts with.
std::string role_op(const Role& role, std::size_t op);
// "rank 3 (role 'stage1')".
std::string rank_role(const ExecutionGraph& g, Rank r);

// The op's explicit-dependency range lies inside Role::deps.
Status check_deps_range(const Role& role, std::size_t op);
// An event op names one of the role's events.
Status check_event_ref(const Role& role, std::size_t op);

// Check 3 (per-op fields and references; validate_role.cc) and check 4 (no
// dependency cycle, NCCL groups counted as one node; every free ordered after
// its alloc; validate_order.cc). Check 4 assumes check 3 passed.
Status validate_role(const ExecutionGraph& g, const Role& role);
Status validate_order(const Role& role);

// What one role does on one slot: op indices in issue order.
struct SlotUse {
  std::int32_t first_op = kNone;
  std::vector<std::int32_t> collectives, sends, recvs;
};

// What one role does on each slot.
struct RoleComm {
  std::vector<int> used;      // slots the role uses, ascending
  std::vector<SlotUse> slot;  // indexed by slot
};

// Check 8 (validate_p2p.cc), given every role's RoleComm and every slot
// resolving where it is used.
Status check_p2p(const ExecutionGraph& g, const std::vector<RoleComm>& comm);

// Checks 6-8: slots resolve for every rank that uses them, collective
// members agree, sends and receives pair up. Assumes checks 1-5 passed.
Status validate_communication(const ExecutionGraph& g);

}  // namespace prism::validate_internal
