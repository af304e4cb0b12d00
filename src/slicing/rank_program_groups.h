// Internal to assemble_graph() (slicing/rank_program.cc): the group table
// of one communicator key, built from what each rank reports, and role
// equality up to the communicator/peer mapping.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "util/status.h"

namespace prism::rank_program_internal {

// The groups of one communicator key. Each rank that has the key reports its
// group (members in communicator order); the reports must agree: a rank is in
// one group, every member that reports the key reports the same list.
class KeyGroups {
 public:
  KeyGroups(std::string key, int world_size);

  // `where` names the reporting program ("trace.json: rank 3").
  Status add(Rank rank, const std::vector<Rank>& members, const std::string& where);
  const std::string& key() const { return key_; }
  std::vector<std::vector<Rank>> take_groups() && { return std::move(groups_); }

 private:
  std::string key_;
  int world_size_;
  std::vector<std::vector<Rank>> groups_;
  std::vector<Rank> reporter_;          // group -> the rank whose report made it
  std::vector<std::int32_t> group_of_;  // rank -> group, kNone
};

// "[0,1,2,...]", at most a few members.
std::string describe_members(const std::vector<Rank>& members);

// A hash of everything in `role` but its name; equal roles hash equally.
std::uint64_t role_hash(const Role& role);
// Whether `a` and `b` are the same program (their names aside).
bool same_program(const Role& a, const Role& b);

}  // namespace prism::rank_program_internal
