// GraphObjects: what a program's captures recorded besides its ops, kept in
// its graph file. The objects captured ranks sent with torch's object lists
// (slicing/object_keys.h) are answered for virtual ranks from the capture of
// each one's role (runtime/object_payloads.h); `prism emulate --save-graph`
// writes them beside the roles, so that `--graph FILE` answers them as the
// run that captured them did (docs/graph-format.md, "Captured objects"):
//
//   "captured": [{"rank": 0, "role": "stage0"}, ...]   each role's captured rank, in role order
//   "objects": [{"base64": "...", "key": "prism/object/0/to/32/0"}, ...]   by key
//
// The objects are written and read as capture files hold them
// (slicing/capture_objects.h); keys are opaque here but for
// parse_object_key's check. Both are extra sections of the graph file
// (graph/graph_json.h): the graph's own loader leaves them alone.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "graph/graph.h"
#include "graph/graph_json.h"
#include "slicing/capture_file.h"
#include "util/status.h"

namespace prism {

struct GraphObjects {
  std::vector<Rank> captured;           // role -> the rank whose capture it runs; kNone: none
  std::vector<CapturedObject> objects;  // sorted by key, each key once
};

struct GraphWithObjects {
  ExecutionGraph graph;
  std::optional<GraphObjects> objects;  // none: the file holds no "captured"
};

// The extra sections that hold `o` in `g`'s file (for save_graph);
// `o.captured` has one entry per role of `g`.
std::vector<ExtraSection> graph_object_sections(const ExecutionGraph& g, const GraphObjects& o);

// A graph file's objects from the sections parse_graph_json handed over.
// One error for a section that is not a list, an entry that names no role
// of `g` (or one twice) or a rank outside it, an object whose key is not an
// object key (or given twice) or whose value is not base64, and objects
// without "captured"; each names `source` and the entry.
Result<std::optional<GraphObjects>> read_graph_objects(const ExecutionGraph& g,
                                                       const std::vector<ExtraSection>& sections,
                                                       const std::string& source);

Result<GraphWithObjects> parse_graph_with_objects(std::string_view text, const std::string& source);
Result<GraphWithObjects> load_graph_with_objects(const std::string& path);

}  // namespace prism
