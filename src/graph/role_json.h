// Reading and writing one role (streams, events, ops) of the graph file;
// internal to src/graph (graph_json_read.cc, graph_json_write.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "graph/graph.h"
#include "graph/json_reader.h"
#include "util/check.h"
#include "util/status.h"

namespace prism::graph_json {

// Reads the role object `j` at `path`. Op names and cost descriptors are
// interned into Role::names / Role::costs (identical ones shared, first-seen
// order); explicit deps go to Role::deps in op order. Stream, event and slot
// names must exist; deps must name other ops of the role.
Status read_role(const Json& j, const JsonPath& path, const std::vector<CommSlot>& slots,
                 Role* role);

// v[i] for the writer, whose graph has passed validate_graph(): an index out
// of range there is a bug, not bad input.
template <typename V>
const typename V::value_type& element(const V& v, std::int64_t i) {
  PRISM_CHECK(i >= 0 && static_cast<std::size_t>(i) < v.size(),
              "graph_to_json: index out of range; was the graph validated?");
  return v[static_cast<std::size_t>(i)];
}

// The canonical JSON object of `role.ops[op]`. `skip_dep`, when not kNone, is
// a dependency left out because loading derives it again (an event wait's
// dependency on its record).
Json op_to_json(const Role& role, std::size_t op, const std::vector<CommSlot>& slots,
                std::int32_t skip_dep);

}  // namespace prism::graph_json
