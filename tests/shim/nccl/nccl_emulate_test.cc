// End to end: nccl_program plays rank 0 of a 4-rank graph through
// libnccl.so.2 against the real coordinator (runtime::Coordinator), which
// replays ranks 1..3. Every op must match the graph's (kind, bytes, element
// type, root, peer), which checks the drop-in's byte-size conventions
// against the graph format's; the emulation must finish with the rank's
// goodbye.
#include <future>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compute/compute_model.h"
#include "graph/graph_json.h"
#include "mem/memory_model.h"
#include "net/alpha_beta.h"
#include "program_runner.h"
#include "runtime/coordinator.h"

namespace prism::nccl_test {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

// Rank 0's ops are run_emulate() in nccl_program.c, call for call.
constexpr const char* kGraph = R"({"format": "prism-graph", "version": 1, "name": "nccl-shim",
 "layout": {"world_size": 4, "gpus_per_node": 4},
 "slots": [{"name": "world", "kind": "group", "dims": ["rank"]},
           {"name": "partner", "kind": "peer", "peers": [1, 0, 3, 2]}],
 "roles": [{"name": "r", "streams": ["s"], "ops": [
   {"kind": "compute", "stream": "s", "duration_ns": 20000},
   {"kind": "collective", "stream": "s", "collective": "all_reduce", "slot": "world", "bytes": 4096, "dtype": "fp32"},
   {"kind": "collective", "stream": "s", "collective": "all_gather", "slot": "world", "bytes": 2048},
   {"kind": "collective", "stream": "s", "collective": "reduce_scatter", "slot": "world", "bytes": 2048},
   {"kind": "collective", "stream": "s", "collective": "broadcast", "slot": "world", "bytes": 800, "dtype": "int64", "root": 1},
   {"kind": "collective", "stream": "s", "collective": "reduce", "slot": "world", "bytes": 32, "dtype": "fp16"},
   {"kind": "collective", "stream": "s", "collective": "all_to_all", "slot": "world", "bytes": 512},
   {"kind": "send", "stream": "s", "slot": "partner", "bytes": 1024, "dtype": "uint8", "group": 1},
   {"kind": "recv", "stream": "s", "slot": "partner", "bytes": 1024, "dtype": "uint8", "group": 1},
   {"kind": "collective", "stream": "s", "collective": "all_reduce", "slot": "world", "bytes": 4, "dtype": "int32"}
 ]}],
 "assign": [{"role": "r", "ranks": "0-3"}]})";

// Rank 0's ops are run_split() in nccl_program.c: communicators split from
// the world. The slots are listed pairs first: the first split names
// "evens" by PyTorch's color for ranks {0, 2}, the second passes another
// color and takes the first slot left, "pairs".
constexpr const char* kSplitGraph = R"({"format": "prism-graph", "version": 1, "name": "split",
 "layout": {"world_size": 4, "gpus_per_node": 4},
 "slots": [{"name": "world", "kind": "group", "dims": ["rank"]},
           {"name": "pairs", "kind": "group", "groups": [[0, 1], [2, 3]]},
           {"name": "evens", "kind": "group", "groups": [[0, 2], [1, 3]]}],
 "roles": [{"name": "r", "streams": ["s"], "ops": [
   {"kind": "collective", "stream": "s", "collective": "all_reduce", "slot": "world", "bytes": 64, "dtype": "fp32"},
   {"kind": "collective", "stream": "s", "collective": "all_reduce", "slot": "evens", "bytes": 128, "dtype": "fp32"},
   {"kind": "collective", "stream": "s", "collective": "all_gather", "slot": "pairs", "bytes": 256, "dtype": "fp32"}
 ]}],
 "assign": [{"role": "r", "ranks": "0-3"}]})";

// The coordinator over `graph` with rank 0 live, and nccl_program in `mode`
// as rank 0.
struct Emulation {
  explicit Emulation(const std::string& mode, const char* graph = kGraph) {
    Result<ExecutionGraph> g = parse_graph_json(graph, "nccl-shim.json");
    EXPECT_TRUE(g.is_ok()) << g.status().message();
    if (!g.is_ok()) return;
    AlphaBetaModel network;
    RooflineModel compute;
    AllocatorMemoryModel memory(DeviceMemoryOptions{});
    runtime::CoordinatorOptions o;
    o.live_ranks = {0};
    o.job = "nccl-shim";
    o.timeout = 20s;
    o.capture = true;
    runtime::Coordinator coord(g.value(), ReplayModels{&network, &compute, &memory}, o);
    static int n = 0;
    const std::string path = (scratch_dir() / ("coord" + std::to_string(n++) + ".sock")).string();
    Result<wire::Address> a = coord.listen(wire::Address{wire::Address::Kind::kUnix, path, "", 0});
    EXPECT_TRUE(a.is_ok()) << a.status().message();
    if (!a.is_ok()) return;
    Program p(mode, {{"PRISM_COORDINATOR", "unix:" + a.value().path},
                     {"RANK", "0"},
                     {"WORLD_SIZE", "4"},
                     {"LOCAL_RANK", "0"},
                     {"PRISM_TIMEOUT_MS", "20000"}});
    // As the launcher does: a program that dies ends the emulation.
    result = coord.run([&]() -> Status {
      const std::optional<int> code = p.poll();
      if (code && *code != 0)
        return Status::invalid_argument("nccl_program exited with " + std::to_string(*code));
      return Status::ok();
    });
    exit_code = p.wait();
    output = p.output();
  }
  Result<runtime::CoordinatorResult> result = Status::invalid_argument("not run");
  int exit_code = -1;
  std::string output;
};

TEST(NcclEmulateTest, ARealRankPlaysItsGraphThroughTheDropIn) {
  Emulation e("emulate");
  ASSERT_TRUE(e.result.is_ok()) << e.result.status().message() << "\n" << e.output;
  EXPECT_EQ(e.exit_code, 0) << e.output;

  const runtime::CoordinatorResult& out = e.result.value();
  ASSERT_EQ(out.live.size(), 1u);
  EXPECT_EQ(out.live[0].exit_code, 0);
  EXPECT_EQ(out.live[0].ops, 9);
  EXPECT_EQ(out.replay.outcome, ReplayResult::Outcome::kCompleted);
  // Every op matched a graph op, in order (1..9: op 0 is compute).
  ASSERT_EQ(out.captures.size(), 1u);
  std::vector<std::int32_t> matched;
  for (const CaptureEntry& e : out.captures[0].entries)
    if (std::holds_alternative<wire::Op>(e.message)) matched.push_back(e.graph_op);
  EXPECT_EQ(matched, (std::vector<std::int32_t>{1, 2, 3, 4, 5, 6, 7, 8, 9}));
  // The virtual ranks' 20 us of compute come before the first all-reduce
  // completes, so the live rank's time includes them.
  EXPECT_GE(out.live[0].finish.ns, 20000);
}

TEST(NcclEmulateTest, SplitCommunicatorsAreTheGraphsGroups) {
  Emulation e("split", kSplitGraph);
  ASSERT_TRUE(e.result.is_ok()) << e.result.status().message() << "\n" << e.output;
  EXPECT_EQ(e.exit_code, 0) << e.output;
  const runtime::CoordinatorResult& out = e.result.value();
  ASSERT_EQ(out.live.size(), 1u);
  EXPECT_EQ(out.live[0].ops, 3);
  EXPECT_EQ(out.replay.outcome, ReplayResult::Outcome::kCompleted);
  std::vector<std::vector<std::int32_t>> given;
  for (const CaptureEntry& c : out.captures[0].entries)
    if (const auto* info = std::get_if<wire::CommInfo>(&c.message)) given.push_back(info->members);
  EXPECT_EQ(given, (std::vector<std::vector<std::int32_t>>{{0, 2}, {0, 1}}));
}

TEST(NcclEmulateTest, AnOpTheGraphDoesNotHaveFailsWithTheCoordinatorsReason) {
  Emulation e("mismatch");
  ASSERT_FALSE(e.result.is_ok());
  EXPECT_THAT(e.result.status().message(), HasSubstr("the graph has all_reduce of 4096 bytes"));
  EXPECT_EQ(e.exit_code, 0) << e.output;  // the program saw ncclInvalidUsage and why
}

}  // namespace
}  // namespace prism::nccl_test
