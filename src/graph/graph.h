// ExecutionGraph: one job at its full scale, stored by role.
//
// A role is a program (streams and ops in issue order). Every rank maps to
// exactly one role; ranks with identical programs share it, so memory is
// O(roles x ops + ranks), never O(ranks x ops). A loaded graph has passed
// validation (graph/validate.h): every index below is in range, every slot
// used by a rank resolves, dependencies form no cycle, and collective members
// agree. Code that consumes a graph may PRISM_CHECK those properties.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/comm_slot.h"
#include "graph/layout.h"
#include "graph/op.h"

namespace prism {

inline constexpr int kGraphFormatVersion = 1;

struct Role {
  std::string name;
  std::vector<std::string> streams;
  std::vector<std::string> events;  // event names; kEventRecord/kEventWait refer by index
  std::vector<std::string> names;   // op names; Op::name refers by index
  std::vector<KernelCost> costs;    // Op::cost refers by index
  std::vector<Op> ops;              // issue order
  std::vector<std::int32_t> deps;   // Op::deps_begin/deps_end index this
};

// Per-rank deviations from the role's program. A rank with an override is
// distinguishable from its role peers, so folding gives it its own class.
struct RankOverride {
  Rank rank = 0;
  // Multiplies every compute duration of the rank, in parts per million
  // (1'000'000 = unchanged; 1'200'000 = 20% slower): a straggler.
  std::int64_t compute_scale_ppm = 1'000'000;
};

struct ExecutionGraph {
  std::string name;
  Layout layout;
  std::vector<CommSlot> slots;
  std::vector<Role> roles;
  std::vector<std::int32_t> role_of_rank;  // size world_size
  std::vector<RankOverride> overrides;     // sorted by rank, at most one per rank
  // The cluster the graph was built for, as a cluster spec
  // (net/cluster_yaml.h's format; opaque here); empty when unknown.
  std::string cluster;

  int world_size() const { return layout.world_size(); }
  SlotResolver resolver() const { return SlotResolver(layout, slots); }
  int find_slot(const std::string& name) const;
  int find_role(const std::string& name) const;
  // Compute scale of `r` in ppm (1'000'000 when it has no override).
  std::int64_t compute_scale_ppm(Rank r) const;
  std::size_t total_ops() const;  // sum over roles, not ranks
};

// `d` scaled by `ppm` parts per million (a rank's compute scale), rounded to
// the nearest nanosecond and clamped to kMaxOpDuration.
SimTime scale_duration(SimTime d, std::int64_t ppm);

}  // namespace prism
