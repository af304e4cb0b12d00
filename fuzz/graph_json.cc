// Fuzz target: the graph JSON loader (graph/graph_json.h) and the captured
// objects a graph file may hold (slicing/graph_objects.h). A graph that
// loads must write back to JSON that loads to the same canonical text, as
// the header promises, its objects with it.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "graph/graph_json.h"
#include "slicing/graph_objects.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const prism::Result<prism::ExecutionGraph> g = prism::parse_graph_json(text, "fuzz.json");
  if (!g.is_ok()) return 0;
  const std::string json = prism::graph_to_json(*g);
  const prism::Result<prism::ExecutionGraph> again = prism::parse_graph_json(json, "again.json");
  PRISM_FUZZ_EXPECT(again.is_ok(), again.status().message());
  PRISM_FUZZ_EXPECT(prism::graph_to_json(*again) == json, "the written graph reads back different");

  const prism::Result<prism::GraphWithObjects> with = prism::parse_graph_with_objects(text, "f");
  if (!with.is_ok() || !with.value().objects) return 0;
  const std::vector<prism::ExtraSection> sections =
      prism::graph_object_sections(with.value().graph, *with.value().objects);
  const std::string saved = prism::graph_to_json(with.value().graph, sections);
  const prism::Result<prism::GraphWithObjects> back = prism::parse_graph_with_objects(saved, "s");
  PRISM_FUZZ_EXPECT(back.is_ok(), back.status().message());
  PRISM_FUZZ_EXPECT(back.value().objects.has_value(), "the written objects read back as none");
  PRISM_FUZZ_EXPECT(prism::graph_to_json(back.value().graph,
                                         prism::graph_object_sections(
                                             back.value().graph, *back.value().objects)) == saved,
                    "the written graph with objects reads back different");
  return 0;
}
