// ASTRA-sim's communicator-group file: a JSON object from group id (a decimal
// string, "1", "2", ...) to the group's ranks in communicator order. A
// collective node names its group by id in its "pg_name" attribute; an empty
// pg_name, or "0", is the group of every rank.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "graph/layout.h"
#include "util/status.h"

namespace prism::chakra {

struct CommGroup {
  std::string id;
  std::vector<Rank> members;
};

// `groups[i]` gets id i + 1. One group per line, ids ascending.
std::string write_comm_groups(const std::vector<std::vector<Rank>>& groups);

// Groups sorted by id (numerically where ids are numbers). Members must be
// ranks of the world, each at most once per group; `source` names the file.
Result<std::vector<CommGroup>> parse_comm_groups(std::string_view json, int world_size,
                                                 const std::string& source);

}  // namespace prism::chakra
