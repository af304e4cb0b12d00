// Fuzz target: the graph JSON loader (graph/graph_json.h). A graph that loads
// must write back to JSON that loads to the same canonical text, as the
// header promises.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "graph/graph_json.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const prism::Result<prism::ExecutionGraph> g = prism::parse_graph_json(text, "fuzz.json");
  if (!g.is_ok()) return 0;
  const std::string json = prism::graph_to_json(*g);
  const prism::Result<prism::ExecutionGraph> again = prism::parse_graph_json(json, "again.json");
  PRISM_FUZZ_EXPECT(again.is_ok(), again.status().message());
  PRISM_FUZZ_EXPECT(prism::graph_to_json(*again) == json, "the written graph reads back different");
  return 0;
}
