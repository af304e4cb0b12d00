// Loading and saving the graph file: the fixture, every op kind, the
// canonical text and the round trip. Rejections are in
// graph_json_errors_test.cc.
#include "graph/graph_json.h"

#include <cstdio>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "graph_test_util.h"
#include "util/file.h"

namespace prism {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

ExecutionGraph load_fixture() {
  Result<ExecutionGraph> g = load_graph(testing::graph_fixture("tp2_dp2_pp2.json"));
  PRISM_CHECK(g.is_ok(), g.status().message());
  return std::move(g).value();
}

std::vector<std::int32_t> deps_of(const Role& role, std::size_t op) {
  const Op& o = role.ops[op];
  return {role.deps.begin() + o.deps_begin, role.deps.begin() + o.deps_end};
}

TEST(GraphJsonTest, LoadsTheFixture) {
  const ExecutionGraph g = load_fixture();
  EXPECT_EQ(g.name, "gpt-tp2-dp2-pp2");
  EXPECT_EQ(g.world_size(), 8);
  EXPECT_EQ(g.layout.gpus_per_node(), 4);
  ASSERT_EQ(g.layout.dims().size(), 3u);
  EXPECT_EQ(g.layout.dims()[2].name, "pp");
  ASSERT_EQ(g.slots.size(), 7u);
  EXPECT_THAT(g.slots[1].dims, ElementsAre(1));
  EXPECT_THAT(g.slots[2].group_of_rank, ElementsAre(0, 0, 0, 0, 0, 0, 0, 0));
  EXPECT_EQ(g.slots[4].peer_dim, 2);
  EXPECT_EQ(g.slots[4].offset, -1);
  EXPECT_FALSE(g.slots[4].wrap);
  EXPECT_TRUE(g.slots[5].wrap);
  EXPECT_THAT(g.slots[6].explicit_peers, ElementsAre(4, 5, 6, 7, 0, 1, 2, 3));
  EXPECT_THAT(g.role_of_rank, ElementsAre(0, 0, 0, 0, 1, 1, 1, 1));
  ASSERT_EQ(g.overrides.size(), 1u);
  EXPECT_EQ(g.overrides[0].rank, 5);
  EXPECT_EQ(g.overrides[0].compute_scale_ppm, 1'250'000);
  EXPECT_EQ(g.compute_scale_ppm(5), 1'250'000);
  EXPECT_EQ(g.compute_scale_ppm(4), 1'000'000);
}

TEST(GraphJsonTest, InternsNamesAndCosts) {
  const ExecutionGraph g = load_fixture();
  const Role& s0 = g.roles[0];
  EXPECT_THAT(s0.names, ElementsAre("activations", "fwd", "bwd"));
  EXPECT_EQ(s0.ops[2].name, 1);
  ASSERT_EQ(s0.costs.size(), 1u);
  EXPECT_EQ(s0.costs[0].kernel_class, KernelClass::kGemm);
  EXPECT_DOUBLE_EQ(s0.costs[0].flops, 1.5e9);
  EXPECT_EQ(s0.costs[0].bytes_accessed.count, 4194304);
  EXPECT_EQ(s0.ops[2].cost, 0);
  EXPECT_THAT(g.roles[1].names, ElementsAre("activations", "fwd", "backward", "bwd"));
}

TEST(GraphJsonTest, FinalizesEventWaitsAndFrees) {
  const ExecutionGraph g = load_fixture();
  const Role& s0 = g.roles[0];
  EXPECT_THAT(deps_of(s0, 5), ElementsAre(4));    // wait fwd_done -> its record
  EXPECT_THAT(deps_of(s0, 11), ElementsAre(10));  // wait grads_ready
  EXPECT_THAT(deps_of(s0, 8), ElementsAre(7));    // explicit
  EXPECT_EQ(s0.ops[9].kind, OpKind::kFree);
  EXPECT_EQ(s0.ops[9].ref, 1);
  EXPECT_EQ(s0.ops[9].bytes.count, 1048576);
}

constexpr const char* kEveryKind = R"({
  "format": "prism-graph", "version": 1,
  "layout": {"world_size": 2},
  "slots": [{"name": "all", "kind": "group", "dims": ["rank"]},
            {"name": "other", "kind": "peer", "dim": "rank", "offset": 1, "wrap": true}],
  "roles": [{"name": "r", "streams": ["a", "b"], "events": ["e"], "ops": [
    {"kind": "compute", "stream": "a", "name": "k", "duration_ns": 7},
    {"kind": "compute", "stream": "b", "cost": {"class": "attention", "flops": 2.5, "bytes": 9}},
    {"kind": "collective", "stream": "b", "collective": "broadcast", "slot": "all", "bytes": 16, "dtype": "fp8_e4m3", "root": 1, "group": 3},
    {"kind": "send", "stream": "b", "slot": "other", "bytes": 100, "tag": 4, "dtype": "fp32", "group": 2, "transport": "userbuffers"},
    {"kind": "recv", "stream": "b", "slot": "other", "bytes": 100, "tag": 4, "group": 2},
    {"kind": "alloc", "stream": "a", "bytes": 300},
    {"kind": "free", "stream": "a", "alloc": 5, "record_streams": ["b"]},
    {"kind": "event_record", "stream": "a", "event": "e"},
    {"kind": "event_wait", "stream": "b", "event": "e", "deps": [0]},
    {"kind": "marker", "stream": "a", "marker": "microbatch", "index": 3},
    {"kind": "marker", "stream": "a", "marker": "phase", "name": "optimizer"}
  ]}],
  "assign": [{"role": "r", "ranks": "0-1"}]
})";

TEST(GraphJsonTest, ParsesEveryOpKind) {
  Result<ExecutionGraph> g = parse_graph_json(kEveryKind, "every.json");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  EXPECT_EQ(g->layout.gpus_per_node(), 8);  // default
  const Role& r = g->roles[0];
  ASSERT_EQ(r.ops.size(), 11u);
  EXPECT_EQ(r.ops[0].duration.ns, 7);
  EXPECT_EQ(r.ops[0].cost, kNone);
  EXPECT_EQ(r.costs[r.ops[1].cost].kernel_class, KernelClass::kAttention);
  const Op& coll = r.ops[2];
  EXPECT_EQ(coll.collective, CollectiveKind::kBroadcast);
  EXPECT_EQ(coll.ref, 0);
  EXPECT_EQ(coll.dtype, DType::kFloat8E4M3);
  EXPECT_EQ(coll.arg, 1);
  EXPECT_EQ(coll.group, 3u);
  EXPECT_EQ(coll.bytes.count, 16);
  EXPECT_EQ(r.ops[3].kind, OpKind::kSend);
  EXPECT_EQ(r.ops[3].arg, 4);
  EXPECT_EQ(r.ops[3].ref, 1);
  EXPECT_EQ(r.ops[3].dtype, DType::kFloat32);
  EXPECT_EQ(r.ops[3].transport, Transport::kUserbuffers);
  EXPECT_EQ(r.ops[2].transport, Transport::kNccl);  // default
  EXPECT_EQ(r.ops[4].kind, OpKind::kRecv);
  EXPECT_EQ(r.ops[4].dtype, DType::kBFloat16);  // default
  EXPECT_EQ(r.ops[5].bytes.count, 300);
  EXPECT_EQ(r.ops[6].bytes.count, 300);  // copied from the alloc
  EXPECT_EQ(r.ops[6].arg, 0b10);         // record_streams: stream 1 ("b")
  EXPECT_EQ(r.ops[7].ref, 0);
  EXPECT_THAT(deps_of(r, 8), ElementsAre(0, 7));  // explicit, then the record
  EXPECT_EQ(r.ops[9].marker, MarkerKind::kMicrobatch);
  EXPECT_EQ(r.ops[9].arg, 3);
  EXPECT_EQ(r.ops[10].marker, MarkerKind::kPhase);
  EXPECT_EQ(r.names[r.ops[10].name], "optimizer");
}

void expect_round_trip(const ExecutionGraph& g) {
  const std::string text = graph_to_json(g);
  Result<ExecutionGraph> back = parse_graph_json(text, "saved.json");
  ASSERT_TRUE(back.is_ok()) << back.status().message() << "\n" << text;
  EXPECT_EQ(testing::dump_graph(*back), testing::dump_graph(g));
  EXPECT_EQ(graph_to_json(*back), text);
}

TEST(GraphJsonTest, RoundTripsTheFixture) {
  expect_round_trip(load_fixture());
}

TEST(GraphJsonTest, RoundTripsEveryOpKind) {
  Result<ExecutionGraph> g = parse_graph_json(kEveryKind, "every.json");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  expect_round_trip(*g);
}

TEST(GraphJsonTest, RoundTripsAGraphBuiltInMemory) {
  expect_round_trip(testing::make_pipeline(2, 2, 3, 2));
}

// The cluster a graph was built for travels with it, as text the graph does
// not read; a graph without one writes no field.
TEST(GraphJsonTest, KeepsTheClusterItWasBuiltFor) {
  ExecutionGraph g = testing::make_pipeline(2, 2, 3, 2);
  EXPECT_THAT(graph_to_json(g), Not(HasSubstr("\"cluster\"")));
  g.cluster = "name: \"pod\"\nnum_nodes: 2\n";
  expect_round_trip(g);
  EXPECT_THAT(graph_to_json(g),
              HasSubstr("\n  \"cluster\": \"name: \\\"pod\\\"\\nnum_nodes: 2\\n\",\n"));
  std::string text = graph_to_json(g);
  text.replace(text.find("\"name: "), std::string("\"name: \\\"pod\\\"\\nnum_nodes: 2\\n\"").size(),
               "7");
  Result<ExecutionGraph> bad = parse_graph_json(text, "g.json");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("cluster"));
}

// The sections a layer above owns ("captured", "objects":
// slicing/graph_objects.h) are neither read nor checked by the graph: handed
// over as JSON text, written after the graph's own one item per line, and
// left alone by a reader that does not ask for them.
TEST(GraphJsonTest, KeepsTheSectionsOfALayerAbove) {
  const ExecutionGraph g = testing::make_pipeline(2, 2, 3, 2);
  const std::vector<ExtraSection> extra = {{"captured", R"([{"role": "stage0", "rank": 3}])"},
                                           {"objects", R"([{"key": "k", "base64": ""}, 7])"}};
  const std::string text = graph_to_json(g, extra);
  EXPECT_THAT(text, HasSubstr("\n  ],\n  \"captured\": [\n    {\"role\": \"stage0\", \"rank\": 3}\n"
                              "  ],\n  \"objects\": [\n    {\"key\": \"k\", \"base64\": \"\"},\n"
                              "    7\n  ]\n}\n"));
  std::vector<ExtraSection> back;
  Result<ExecutionGraph> loaded = parse_graph_json(text, "g.json", &back);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
  EXPECT_EQ(testing::dump_graph(*loaded), testing::dump_graph(g));
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].key, "captured");
  EXPECT_EQ(back[0].json, R"([{"role":"stage0","rank":3}])");
  EXPECT_EQ(back[1].key, "objects");
  EXPECT_EQ(back[1].json, R"([{"key":"k","base64":""},7])");
  EXPECT_EQ(graph_to_json(*loaded, extra), text);
  // Whatever they hold, the graph loads; without them, none is handed over.
  std::string odd = text;
  odd.replace(odd.find("\"objects\": ["), 12, "\"objects\": 5, \"x\": [");
  EXPECT_THAT(parse_graph_json(odd, "g.json").status().message(), HasSubstr("unknown field \"x\""));
  odd = graph_to_json(g, {{"objects", "[]"}});
  odd.replace(odd.find("\"objects\": []"), 13, "\"objects\": 5");
  ASSERT_TRUE(parse_graph_json(odd, "g.json", &back).is_ok());
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].json, "5");
  ASSERT_TRUE(parse_graph_json(graph_to_json(g), "g.json", &back).is_ok());
  EXPECT_TRUE(back.empty());
  EXPECT_THAT(graph_to_json(g), Not(HasSubstr("objects")));
}

TEST(GraphJsonTest, CanonicalTextIsReadable) {
  const std::string text = graph_to_json(load_fixture());
  EXPECT_THAT(text,
              HasSubstr("\n        {\"kind\": \"compute\", \"stream\": \"compute\", \"name\": "
                        "\"fwd\", \"cost\": {\"class\": \"gemm\", \"flops\": 1500000000.0, "
                        "\"bytes\": 4194304}},\n"));
  // Defaults are left out; derived dependencies and sizes are not written.
  EXPECT_THAT(text, HasSubstr("{\"kind\": \"event_wait\", \"stream\": \"comm\", \"event\": "
                              "\"fwd_done\"},\n"));
  EXPECT_THAT(text, HasSubstr("{\"kind\": \"free\", \"stream\": \"compute\", \"alloc\": 1},\n"));
  EXPECT_THAT(text, HasSubstr("\"collective\": \"all_reduce\", \"slot\": \"tp\", \"bytes\": "
                              "1048576},\n"));
  EXPECT_THAT(text, HasSubstr("\n    {\"role\": \"stage0\", \"ranks\": \"0-3\"},\n"
                              "    {\"role\": \"stage1\", \"ranks\": \"4-7\"}\n"));
  EXPECT_THAT(text, HasSubstr("{\"rank\": 5, \"compute_scale\": 1.25}"));
  EXPECT_THAT(text, HasSubstr("{\"name\": \"mirror\", \"kind\": \"peer\", \"peers\": [4, 5, 6, "
                              "7, 0, 1, 2, 3]}"));
  EXPECT_THAT(text, Not(HasSubstr("\"dtype\": \"bf16\"")));
}

TEST(GraphJsonTest, SaveAndLoadAFile) {
  const ExecutionGraph g = load_fixture();
  const std::string path = ::testing::TempDir() + "prism_graph_json_test.json";
  ASSERT_TRUE(save_graph(g, path).is_ok());
  Result<ExecutionGraph> back = load_graph(path);
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(testing::dump_graph(*back), testing::dump_graph(g));
  std::remove(path.c_str());
}

TEST(GraphJsonTest, MissingFileIsNotFound) {
  Result<ExecutionGraph> g = load_graph("/nonexistent/graph.json");
  EXPECT_EQ(g.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(g.status().message(), HasSubstr("/nonexistent/graph.json"));
}

TEST(GraphJsonTest, DirectoryIsRejectedAsSuch) {
  const std::string dir = std::string(PRISM_SOURCE_DIR) + "/tests/data/graphs";
  Result<ExecutionGraph> g = load_graph(dir);
  EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(g.status().message(), dir + ": is a directory");
}

}  // namespace
}  // namespace prism
