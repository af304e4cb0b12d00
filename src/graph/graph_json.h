// The versioned JSON file format of an ExecutionGraph (docs/graph-format.md).
//
// parse_graph_json() rejects bad input with one Status whose message names the
// place: "<source>:<line>:<col>" for malformed JSON, a JSON path such as
// "/roles/2/ops/17/kind" for a bad field, and role / op / rank for semantic
// errors found by validate_graph(). graph_to_json() writes the canonical form,
// which parse_graph_json() reads back to an equal graph.
#pragma once

#include <string>
#include <string_view>

#include "graph/graph.h"
#include "util/status.h"

namespace prism {

Result<ExecutionGraph> parse_graph_json(std::string_view text, std::string_view source_name);
Result<ExecutionGraph> load_graph(const std::string& path);

std::string graph_to_json(const ExecutionGraph& g);
Status save_graph(const ExecutionGraph& g, const std::string& path);

}  // namespace prism
