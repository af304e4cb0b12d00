// The versioned JSON file format of an ExecutionGraph (docs/graph-format.md).
//
// parse_graph_json() rejects bad input with one Status whose message names the
// place: "<source>:<line>:<col>" for malformed JSON, a JSON path such as
// "/roles/2/ops/17/kind" for a bad field, and role / op / rank for semantic
// errors found by validate_graph(). graph_to_json() writes the canonical form,
// which parse_graph_json() reads back to an equal graph.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "graph/graph.h"
#include "util/status.h"

namespace prism {

// Top-level sections of the file that a layer above the graph owns: what a
// program's captures recorded besides its ops, which `prism emulate
// --save-graph` keeps for `--graph` (slicing/graph_objects.h). The graph
// neither reads nor checks them: parse_graph_json hands each one present over
// as its value's JSON text (nothing when `extra` is null), and graph_to_json
// writes each given one after its own, in the order given, a list one item
// per line.
inline constexpr std::array<std::string_view, 2> kExtraSections = {"captured", "objects"};
struct ExtraSection {
  std::string key;   // one of kExtraSections
  std::string json;  // its value; a list when written
};

Result<ExecutionGraph> parse_graph_json(std::string_view text, std::string_view source_name,
                                        std::vector<ExtraSection>* extra = nullptr);
Result<ExecutionGraph> load_graph(const std::string& path,
                                  std::vector<ExtraSection>* extra = nullptr);

std::string graph_to_json(const ExecutionGraph& g, const std::vector<ExtraSection>& extra = {});
Status save_graph(const ExecutionGraph& g, const std::string& path,
                  const std::vector<ExtraSection>& extra = {});

}  // namespace prism
