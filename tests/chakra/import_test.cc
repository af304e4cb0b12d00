// import_chakra on traces written node by node (as Chakra's own tools and
// ASTRA-sim's generators write them), and every way traces are refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "../replay/test_graphs.h"
#include "chakra/chakra.h"
#include "chakra_test_util.h"

namespace prism {
namespace {

using ::testing::HasSubstr;
using namespace chakra_test;  // NOLINT(google-build-using-namespace)

class ChakraImportTest : public ::testing::Test {
 protected:
  void trace(int rank, const std::vector<Node>& nodes, const std::string& prefix = "w") {
    write_trace(dir_.file(prefix + "." + std::to_string(rank) + ".et"), nodes);
  }
  void groups(const std::string& json, const std::string& name = "w.comm_groups.json") {
    ASSERT_TRUE(write_file_atomic(dir_.file(name), json).is_ok());
  }
  Result<ExecutionGraph> import(const ChakraImportOptions& o = {}) {
    return import_chakra(dir_.path(), o);
  }
  std::string error(const ChakraImportOptions& o = {}) {
    Result<ExecutionGraph> g = import(o);
    EXPECT_FALSE(g.is_ok());
    return g.is_ok() ? "" : g.status().message();
  }
  std::string file(int rank) const { return dir_.file("w." + std::to_string(rank) + ".et"); }

  ScratchDir dir_;
};

std::vector<Node> step(const std::string& pg, std::int64_t bytes = 4096) {
  return {comp(0, 10), coll(1, ChakraProtoMsg::ALL_REDUCE, bytes, pg, {0}), comp(2, 5, {1})};
}

TEST_F(ChakraImportTest, DataParallelTracesShareOneRole) {
  groups(R"({"1": [0, 1]})");
  trace(0, step("1"));
  trace(1, step("1"));
  Result<ExecutionGraph> g = import();
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  EXPECT_EQ(g->name, "w");
  EXPECT_EQ(g->world_size(), 2);
  ASSERT_EQ(g->roles.size(), 1u);
  const Role& role = g->roles[0];
  EXPECT_EQ(role.name, "role0");
  EXPECT_EQ(role.streams, (std::vector<std::string>{"compute", "comm"}));
  ASSERT_EQ(role.ops.size(), 3u);
  EXPECT_EQ(role.ops[0].duration, SimTime{10'000});
  EXPECT_EQ(role.ops[1].kind, OpKind::kCollective);
  EXPECT_EQ(role.ops[1].bytes, Bytes{4096});
  EXPECT_EQ(role.names[role.ops[1].name], "n1");
  // Cross-stream dependencies stay; the compute stream orders ops 0 and 2.
  EXPECT_EQ(std::vector<std::int32_t>(role.deps.begin() + role.ops[1].deps_begin,
                                      role.deps.begin() + role.ops[1].deps_end),
            std::vector<std::int32_t>{0});
  EXPECT_EQ(role.ops[2].deps_end - role.ops[2].deps_begin, 1u);
  ASSERT_EQ(g->slots.size(), 1u);
  EXPECT_EQ(g->slots[0].name, "pg1");
  EXPECT_EQ(g->slots[0].explicit_groups, (std::vector<std::vector<Rank>>{{0, 1}}));
  EXPECT_EQ(testing::run(g.value()).outcome, ReplayResult::Outcome::kCompleted);
}

TEST_F(ChakraImportTest, GroupsOfOneDimensionShareAKey) {
  // Ranks 0..3 as TP 2 x DP 2; the group file lists TP groups, then DP.
  groups(R"({"1": [0, 1], "2": [2, 3], "3": [0, 2], "4": [1, 3]})");
  for (int r = 0; r < 4; ++r) {
    trace(r, {coll(0, ChakraProtoMsg::ALL_REDUCE, 64, r < 2 ? "1" : "2"),
              coll(1, ChakraProtoMsg::ALL_GATHER, 128, r % 2 == 0 ? "3" : "4", {0})});
  }
  Result<ExecutionGraph> g = import();
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  EXPECT_EQ(g->roles.size(), 1u);
  ASSERT_EQ(g->slots.size(), 2u);
  EXPECT_EQ(g->slots[0].name, "pg1");
  EXPECT_EQ(g->slots[0].explicit_groups, (std::vector<std::vector<Rank>>{{0, 1}, {2, 3}}));
  EXPECT_EQ(g->slots[1].name, "pg3");
  EXPECT_EQ(testing::run(g.value()).outcome, ReplayResult::Outcome::kCompleted);
}

TEST_F(ChakraImportTest, CollectivesWithoutAGroupRunOverTheWorld) {
  trace(0, step(""));
  trace(1, step("0"));
  Result<ExecutionGraph> g = import();
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  EXPECT_EQ(g->roles.size(), 1u);
  ASSERT_EQ(g->slots.size(), 1u);
  EXPECT_EQ(g->slots[0].name, "world");
}

TEST_F(ChakraImportTest, PipelineOfSendsAndReceives) {
  trace(0, {comp(0, 3), p2p(1, true, 0, 1, 1024, 5, {0})});
  trace(1, {p2p(0, false, 0, 1, 1024, 5), comp(1, 3, {0}), p2p(2, true, 1, 2, 1024, 5, {1})});
  trace(2, {p2p(0, false, 1, 2, 1024, 5), comp(1, 3, {0})});
  Result<ExecutionGraph> g = import();
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  EXPECT_EQ(g->roles.size(), 3u);
  EXPECT_EQ(g->roles[1].streams, (std::vector<std::string>{"recv", "compute", "send"}));
  EXPECT_EQ(g->roles[1].ops[0].arg, 5);
  const ReplayResult r = testing::run(g.value());
  EXPECT_EQ(r.outcome, ReplayResult::Outcome::kCompleted);
}

TEST_F(ChakraImportTest, IssueOrderFollowsDependenciesThenIds) {
  trace(0, {comp(5, 1), comp(1, 2, {5}), comp(3, 4)});
  Result<ExecutionGraph> g = import();
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  const Role& role = g->roles[0];
  std::vector<std::string> names;
  for (const Op& op : role.ops) names.push_back(role.names[op.name]);
  EXPECT_EQ(names, (std::vector<std::string>{"n3", "n5", "n1"}));
}

TEST_F(ChakraImportTest, MetadataAndInvalidNodesHandTheirDependenciesOn) {
  trace(0, {comp(0, 1), node(1, ChakraProtoMsg::METADATA_NODE, {0}),
            node(2, ChakraProtoMsg::INVALID_NODE, {1}),
            coll(3, ChakraProtoMsg::ALL_REDUCE, 8, "", {2})});
  Result<ExecutionGraph> g = import();
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  const Role& role = g->roles[0];
  ASSERT_EQ(role.ops.size(), 2u);
  EXPECT_EQ(std::vector<std::int32_t>(role.deps.begin() + role.ops[1].deps_begin,
                                      role.deps.begin() + role.ops[1].deps_end),
            std::vector<std::int32_t>{0});
}

TEST_F(ChakraImportTest, CpuOpsAndRooflineCosts) {
  Node cpu = comp(0, 7);
  cpu.mutable_attr()->Clear();
  chakra::add_bool(cpu.mutable_attr(), chakra::kIsCpuOp, true);
  Node roofline = comp(1, 0, {0});
  chakra::add_int(roofline.mutable_attr(), chakra::kNumOps, 2'000'000);
  chakra::add_int(roofline.mutable_attr(), chakra::kTensorSize, 4096);
  trace(0, {cpu, roofline});
  Result<ExecutionGraph> g = import();
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  const Role& role = g->roles[0];
  EXPECT_EQ(role.streams, (std::vector<std::string>{"cpu", "compute"}));
  ASSERT_EQ(role.costs.size(), 1u);
  EXPECT_EQ(role.ops[1].cost, 0);
  EXPECT_EQ(role.costs[0].flops, 2e6);
  EXPECT_EQ(role.costs[0].bytes_accessed, Bytes{4096});
}

TEST_F(ChakraImportTest, APrefixChoosesAmongSeveral) {
  trace(0, step(""), "a");
  trace(0, step(""), "b");
  trace(1, step(""), "b");
  EXPECT_THAT(error(), HasSubstr("traces of several prefixes (a, b)"));
  Result<ExecutionGraph> g = import_chakra(dir_.path() / "b");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  EXPECT_EQ(g->world_size(), 2);
  ChakraImportOptions o;
  o.name = "job";
  EXPECT_EQ(import_chakra(dir_.path() / "a", o)->name, "job");
}

// --- rejections ---

TEST_F(ChakraImportTest, RejectsAMissingRank) {
  trace(0, step(""));
  trace(2, step(""));
  EXPECT_THAT(error(), HasSubstr(file(1) + ": no trace of rank 1 (found 2 traces, up to rank 2)"));
}

TEST_F(ChakraImportTest, RejectsADirectoryWithoutTraces) {
  Result<ExecutionGraph> g = import();
  ASSERT_FALSE(g.is_ok());
  EXPECT_EQ(g.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(g.status().message(), HasSubstr("no Chakra traces"));
}

TEST_F(ChakraImportTest, RejectsBadBytesNamingTheFile) {
  trace(0, step(""));
  ASSERT_TRUE(write_file_atomic(file(1), std::string(6, '\xff')).is_ok());
  EXPECT_EQ(error(), file(1) + ": byte 0: bad length prefix (not a varint32)");
}

TEST_F(ChakraImportTest, RejectsUnknownAndUnsupportedNodeTypes) {
  Node odd = comp(3, 1);
  odd.set_type(static_cast<ChakraProtoMsg::NodeType>(42));
  trace(0, {odd});
  EXPECT_EQ(error(), file(0) +
                         ": node 3: node type 42 (not a Chakra node type) is not supported (only "
                         "compute, communication, metadata and invalid nodes are)");
  trace(0, {node(4, ChakraProtoMsg::MEM_LOAD_NODE)});
  EXPECT_THAT(error(), HasSubstr(": node 4: node type MEM_LOAD_NODE is not supported"));
}

TEST_F(ChakraImportTest, RejectsADependencyOnAMissingNode) {
  trace(0, {comp(0, 1), comp(1, 1, {9})});
  EXPECT_EQ(error(), file(0) + ": node 1: depends on node 9, which is not in the file");
}

TEST_F(ChakraImportTest, RejectsACycle) {
  trace(0, {comp(0, 1), comp(1, 1, {2}), comp(2, 1, {1}), comp(3, 1, {2})});
  EXPECT_EQ(error(), file(0) +
                         ": node 1 is part of or waits on a dependency cycle (3 of 4 nodes "
                         "cannot run)");
}

TEST_F(ChakraImportTest, RejectsARepeatedNodeId) {
  trace(0, {comp(0, 1), comp(0, 2)});
  EXPECT_EQ(error(), file(0) + ": node id 0 appears twice");
}

TEST_F(ChakraImportTest, RejectsGroupsThatAreNotInTheFile) {
  trace(0, step("1"));
  trace(1, step("1"));
  EXPECT_EQ(error(), file(0) +
                         ": node 1: pg_name '1' needs a communicator-group file, and "
                         "there is none");
  groups(R"({"2": [0, 1]})");
  EXPECT_EQ(error(),
            file(0) + ": node 1: pg_name '1' is not in " + dir_.file("w.comm_groups.json"));
  groups(R"({"1": [1]})");
  EXPECT_EQ(error(), file(0) + ": node 1: pg_name '1' is a group that does not hold rank 0");
}

TEST_F(ChakraImportTest, RejectsAMissingGroupFileNamedInOptions) {
  trace(0, step(""));
  ChakraImportOptions o;
  o.comm_groups = dir_.path() / "nope.json";
  Result<ExecutionGraph> g = import(o);
  ASSERT_FALSE(g.is_ok());
  EXPECT_EQ(g.status().code(), StatusCode::kNotFound);
}

TEST_F(ChakraImportTest, RejectsCollectivesItCannotRepresent) {
  trace(0, {coll(0, ChakraProtoMsg::GATHER, 8, "")});
  EXPECT_EQ(error(), file(0) + ": node 0: comm_type GATHER is not supported");
  trace(0, {coll(0, 99, 8, "")});
  EXPECT_EQ(error(), file(0) + ": node 0: unknown comm_type 99");
  trace(0, {node(0, ChakraProtoMsg::COMM_COLL_NODE)});
  EXPECT_EQ(error(), file(0) + ": node 0: a collective with no 'comm_type' attribute");
  trace(0, {coll(0, ChakraProtoMsg::ALL_REDUCE, -1, "")});
  EXPECT_EQ(error(), file(0) + ": node 0: comm_size -1 is outside 0..2^50 bytes");
}

TEST_F(ChakraImportTest, RejectsTransfersWithBadPeers) {
  trace(1, {p2p(0, false, 0, 1, 8)});
  Node send = node(0, ChakraProtoMsg::COMM_SEND_NODE);
  chakra::add_int(send.mutable_attr(), chakra::kCommSize, 8);
  trace(0, {send});
  EXPECT_EQ(error(), file(0) + ": node 0: a send with no 'comm_dst'");
  trace(0, {p2p(0, true, 0, 0, 8)});
  EXPECT_EQ(error(), file(0) + ": node 0: comm_dst 0 is the rank itself");
  trace(0, {p2p(0, true, 0, 5, 8)});
  EXPECT_EQ(error(), file(0) + ": node 0: comm_dst 5 is not a rank of the traces");
  trace(0, {p2p(0, true, 1, 1, 8)});
  EXPECT_EQ(error(), file(0) + ": node 0: comm_src 1 in the trace of rank 0");
}

TEST_F(ChakraImportTest, RejectsTwoTracesOfOneRank) {
  trace(0, step(""));
  write_trace(dir_.file("w.00.et"), step(""));
  EXPECT_THAT(error(), HasSubstr(": two traces of rank 0"));
}

TEST_F(ChakraImportTest, RejectsMalformedPrismAttributes) {
  Node op = node(0, ChakraProtoMsg::METADATA_NODE);
  chakra::add_string(op.mutable_attr(), chakra::kPrismOp, "teleport");
  trace(0, {op});
  EXPECT_EQ(error(), file(0) + ": node 0: unknown prism_op 'teleport'");
  Node free = node(1, ChakraProtoMsg::METADATA_NODE, {0});
  chakra::add_string(free.mutable_attr(), chakra::kPrismOp, "free");
  chakra::add_int(free.mutable_attr(), chakra::kPrismAlloc, 0);
  trace(0, {comp(0, 1), free});
  EXPECT_EQ(error(), file(0) + ": node 1: frees node 0, which is no alloc issued before it");
  Node cost = comp(0, 0);
  chakra::add_string(cost.mutable_attr(), chakra::kPrismKernelClass, "magic");
  trace(0, {cost});
  EXPECT_EQ(error(), file(0) + ": node 0: unknown kernel class 'magic'");
  Node typed = coll(0, ChakraProtoMsg::ALL_REDUCE, 8, "");
  chakra::add_string(typed.mutable_attr(), chakra::kPrismDtype, "fp7");
  trace(0, {typed});
  EXPECT_EQ(error(), file(0) + ": node 0: unknown dtype 'fp7'");
  Node carried = coll(0, ChakraProtoMsg::ALL_REDUCE, 8, "");
  chakra::add_string(carried.mutable_attr(), chakra::kPrismTransport, "pigeon");
  trace(0, {carried});
  EXPECT_EQ(error(), file(0) + ": node 0: unknown prism_transport 'pigeon'");
  Node sized = node(0, ChakraProtoMsg::COMM_COLL_NODE);
  chakra::add_int(sized.mutable_attr(), chakra::kCommType, 0);
  chakra::add_string(sized.mutable_attr(), chakra::kCommSize, "big");
  trace(0, {sized});
  EXPECT_EQ(error(), file(0) + ": node 0: attribute 'comm_size' is not an integer");
}

TEST_F(ChakraImportTest, RejectsRanksThatDisagreeNamingTheirFiles) {
  trace(0, step(""));
  trace(1, step("", 8));
  const std::string e = error();
  EXPECT_THAT(e, HasSubstr("w: the assembled graph: slot 'world'"));
  EXPECT_THAT(e, HasSubstr("role 'role1' is the program of " + file(1) + ": rank 1"));
}

}  // namespace
}  // namespace prism
