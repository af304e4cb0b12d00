// A graph file's captured objects (slicing/graph_objects.h): written beside
// the roles and read back to the same payloads, a graph without them as
// before, and every rejection of a malformed section naming the file and
// the entry.
#include "slicing/graph_objects.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace prism {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Two stages of two data-parallel ranks: stage0 ranks 0 and 1, stage1 2 and 3.
constexpr std::string_view kGraph = R"({"format": "prism-graph", "version": 1,
  "layout": {"world_size": 4, "dims": [{"name": "dp", "size": 2}, {"name": "pp", "size": 2}]},
  "roles": [
    {"name": "stage0", "streams": ["s"], "ops": [{"kind": "compute", "stream": "s", "duration_ns": 10}]},
    {"name": "stage1", "streams": ["s"], "ops": [{"kind": "compute", "stream": "s", "duration_ns": 20}]}],
  "assign": [{"role": "stage0", "where": {"pp": 0}}, {"role": "stage1", "where": {"pp": 1}}])";

std::vector<std::uint8_t> bytes(std::string_view s) {
  return {s.begin(), s.end()};
}

// kGraph with `sections` (",\"captured\": ...") before its closing brace.
std::string with(std::string_view sections) {
  return std::string(kGraph) + std::string(sections) + "}";
}

ExecutionGraph graph() {
  Result<ExecutionGraph> g = parse_graph_json(with(""), "g.json");
  PRISM_CHECK(g.is_ok(), g.status().message());
  return std::move(g).value();
}

TEST(GraphObjectsTest, ReadBackAsWritten) {
  const ExecutionGraph g = graph();
  GraphObjects o;
  o.captured = {0, 3};
  o.objects = {{"prism/object/3/to/1/0", bytes(std::string_view("meta\x00\xff", 6))},
               {"prism/object/0/group/0:1:4/0", bytes("config")},
               {"prism/object/0/to/2/0", bytes("")}};
  const std::string text = graph_to_json(g, graph_object_sections(g, o));
  // One entry per line, the objects by key, as capture files write them.
  EXPECT_THAT(text, HasSubstr("  \"captured\": [\n    {\"rank\": 0, \"role\": \"stage0\"},\n    "
                              "{\"rank\": 3, \"role\": \"stage1\"}\n  ],\n  \"objects\": [\n    "
                              "{\"base64\": \"Y29uZmln\", \"key\": \"prism/object/0/group/0:1:4/"
                              "0\"},\n    {\"base64\": \"\", \"key\": \"prism/object/0/to/2/0\"},\n"
                              "    {\"base64\": \"bWV0YQD/\", \"key\": \"prism/object/3/to/1/0\"}\n"
                              "  ]\n}\n"));
  Result<GraphWithObjects> back = parse_graph_with_objects(text, "g.json");
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  ASSERT_TRUE(back.value().objects.has_value());
  const GraphObjects& read = *back.value().objects;
  EXPECT_EQ(read.captured, o.captured);
  ASSERT_EQ(read.objects.size(), 3u);
  EXPECT_EQ(read.objects[0].key, "prism/object/0/group/0:1:4/0");
  EXPECT_EQ(read.objects[0].bytes, bytes("config"));
  EXPECT_EQ(read.objects[1].key, "prism/object/0/to/2/0");
  EXPECT_TRUE(read.objects[1].bytes.empty());
  EXPECT_EQ(read.objects[2].key, "prism/object/3/to/1/0");
  EXPECT_EQ(read.objects[2].bytes, o.objects[0].bytes);
  // Written again: the same bytes.
  EXPECT_EQ(graph_to_json(back.value().graph, graph_object_sections(back.value().graph, read)),
            text);
}

TEST(GraphObjectsTest, ARoleNotCapturedAndNoObjects) {
  const ExecutionGraph g = graph();
  const std::string text = graph_to_json(g, graph_object_sections(g, {{kNone, 2}, {}}));
  EXPECT_THAT(text, HasSubstr("\"captured\": [\n    {\"rank\": 2, \"role\": \"stage1\"}\n  ],\n"
                              "  \"objects\": []\n}\n"));
  Result<GraphWithObjects> back = parse_graph_with_objects(text, "g.json");
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  ASSERT_TRUE(back.value().objects.has_value());
  EXPECT_EQ(back.value().objects->captured, (std::vector<Rank>{kNone, 2}));
  EXPECT_TRUE(back.value().objects->objects.empty());
}

TEST(GraphObjectsTest, AGraphWithoutThemHoldsNone) {
  Result<GraphWithObjects> back = parse_graph_with_objects(with(""), "g.json");
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_FALSE(back.value().objects.has_value());
  EXPECT_EQ(back.value().graph.world_size(), 4);
  // "captured" alone: captured ranks that sent nothing.
  back =
      parse_graph_with_objects(with(R"(, "captured": [{"role": "stage0", "rank": 1}])"), "g.json");
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  ASSERT_TRUE(back.value().objects.has_value());
  EXPECT_EQ(back.value().objects->captured, (std::vector<Rank>{1, kNone}));
}

TEST(GraphObjectsTest, EachMalformedSectionIsOneErrorNamingTheFileAndTheEntry) {
  const std::string captured = R"(, "captured": [{"role": "stage0", "rank": 0}])";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"(, "captured": {"stage0": 0})", "g.json: \"captured\" is not a list"},
      {R"(, "captured": [0])", "g.json: captured 0: not an object {\"rank\": R, \"role\": NAME}"},
      {R"(, "captured": [{"role": "stage0", "rank": 0, "pid": 7}])",
       "g.json: captured 0: unknown field \"pid\""},
      {R"(, "captured": [{"rank": 0}])", "g.json: captured 0: no \"role\" string"},
      {R"(, "captured": [{"role": "stage2", "rank": 0}])",
       "g.json: captured 0: unknown role \"stage2\" (roles: stage0, stage1)"},
      {R"(, "captured": [{"role": "stage0", "rank": 0}, {"role": "stage0", "rank": 1}])",
       "g.json: captured 1: role \"stage0\" is listed twice"},
      {R"(, "captured": [{"role": "stage0", "rank": "0"}])",
       "g.json: captured 0: no \"rank\" integer"},
      {R"(, "captured": [{"role": "stage0", "rank": 4}])",
       "g.json: captured 0: rank 4 of role \"stage0\" is not a rank of the graph (0 to 3)"},
      {R"(, "captured": [{"role": "stage1", "rank": -1}])",
       "g.json: captured 0: rank -1 of role \"stage1\" is not a rank of the graph (0 to 3)"},
      {captured + R"(, "objects": {"prism/object/0/to/2/0": ""})",
       "g.json: \"objects\" is not a list"},
      {captured + R"(, "objects": [{"key": "prism/group/1", "base64": ""}])",
       "g.json: object 0: \"prism/group/1\" is not an object key"},
      {captured + R"(, "objects": [{"key": "prism/object/0/to/2/0"}])",
       "g.json: object 0: no \"base64\" string"},
      {captured + R"(, "objects": [{"key": "prism/object/0/to/2/0", "base64": "Zg="}])",
       "g.json: object 0: \"base64\" is not base64"},
      {captured + R"(, "objects": [{"key": "prism/object/0/to/2/0", "base64": ""},
                                   {"key": "prism/object/0/to/2/0", "base64": "Zg=="}])",
       "g.json: object 1: \"prism/object/0/to/2/0\" is given twice"},
      {R"(, "objects": [])", "g.json: \"objects\" without \"captured\""},
  };
  for (const auto& [sections, error] : cases) {
    Result<GraphWithObjects> r = parse_graph_with_objects(with(sections), "g.json");
    ASSERT_FALSE(r.is_ok()) << sections;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << sections;
    EXPECT_THAT(r.status().message(), StartsWith(error)) << sections;
  }
}

TEST(GraphObjectsTest, TheGraphsOwnErrorsComeFirst) {
  Result<GraphWithObjects> r =
      parse_graph_with_objects(with(R"(, "captured": 3, "capturd": [])"), "g.json");
  ASSERT_FALSE(r.is_ok());
  EXPECT_THAT(r.status().message(), HasSubstr("g.json: /: unknown field \"capturd\""));
}

}  // namespace
}  // namespace prism
