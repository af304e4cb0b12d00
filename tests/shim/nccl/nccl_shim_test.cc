// The NCCL drop-in against a fake coordinator: nccl_program (C, linked
// against libnccl.so.2) runs in a mode, and the test checks what the
// coordinator received (hello, communicators and their id hashes, every op
// with its bytes, element type, stream, peer and group, memory events, the
// goodbye) and how errors reach the program.
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "program_runner.h"
#include "support/fake_coordinator.h"

namespace prism::nccl_test {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

using prism::testing::FakeCoordinator;
using prism::testing::FakeCoordinatorOptions;

// Answers each op 1 us of virtual time after it was entered, each wait that
// no answer ends with its horizon, and a split with the group {1, 3}; or,
// when `abort`, ends the emulation at the first op as the coordinator does.
FakeCoordinatorOptions fake(bool abort = false) {
  FakeCoordinatorOptions o;
  o.complete_after_ns = 1000;
  o.split = FakeCoordinatorOptions::Group{0, {1, 3}};
  if (abort) {
    o.abort_at_op = 0;
    o.abort_message = "rank 3 crashed";
  }
  return o;
}

std::map<std::string, std::string> env_for(const FakeCoordinator& f) {
  return {{"PRISM_COORDINATOR", f.address().to_string()},
          {"RANK", "1"},
          {"WORLD_SIZE", "4"},
          {"LOCAL_RANK", "3"},
          {"PRISM_TIMEOUT_MS", "10000"}};
}

// The value printed on the program's line "<key> <index> <value>" or "<key> <value>".
std::uint64_t printed(const std::string& output, const std::string& key) {
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + " ", 0) != 0) continue;
    return std::stoull(line.substr(key.size() + 1));
  }
  ADD_FAILURE() << "no '" << key << "' in the output:\n" << output;
  return 0;
}

TEST(NcclShimTest, WithoutACoordinatorOnlyTheLocalEntryPointsWork) {
  Program p("offline", {});
  EXPECT_EQ(p.wait(), 0) << p.output();
}

struct ExpectedOp {
  wire::OpCode code;
  std::uint16_t stream;
  DType dtype;
  std::int64_t bytes;
  std::int32_t peer;
  int group;  // 0: none; otherwise the ops with the same number share one group id
};

TEST(NcclShimTest, EveryImplementedEntryPointReachesTheCoordinator) {
  FakeCoordinator f(fake());
  Program p("functional", env_for(f));
  ASSERT_EQ(p.wait(), 0) << p.output();
  const std::string out = p.output();

  const auto hello = f.seen_of<wire::Hello>();
  ASSERT_EQ(hello.size(), 1u);
  EXPECT_EQ(hello[0].rank, 1);
  EXPECT_EQ(hello[0].world_size, 4);
  EXPECT_EQ(hello[0].local_rank, 3);
  EXPECT_THAT(hello[0].program, HasSubstr("nccl_program"));

  const auto comms = f.seen_of<wire::CommInit>();
  ASSERT_EQ(comms.size(), 3u);
  const std::int32_t sizes[3][2] = {{4, 1}, {2, 0}, {8, 5}};
  for (std::uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(comms[i].comm, i);
    EXPECT_EQ(comms[i].nranks, sizes[i][0]);
    EXPECT_EQ(comms[i].rank_in_comm, sizes[i][1]);
    EXPECT_TRUE(comms[i].members.empty());  // ncclCommInitRank does not know them
    EXPECT_EQ(comms[i].id_hash, printed(out, "id_hash " + std::to_string(i)));
  }

  const auto markers = f.seen_of<wire::Marker>();  // prismNcclMarker
  ASSERT_EQ(markers.size(), 1u);
  EXPECT_EQ(markers[0].code, wire::MarkerCode::kIterationBegin);
  EXPECT_EQ(markers[0].value, 1);

  const auto splits = f.seen_of<wire::CommSplit>();
  ASSERT_EQ(splits.size(), 1u);  // NOCOLOR, a negative color and a bad config stay local
  EXPECT_EQ(splits[0].parent, 0u);
  EXPECT_EQ(splits[0].color, 1);
  EXPECT_EQ(splits[0].key, 7);
  EXPECT_GE(splits[0].comm, 3u);  // after the three ncclCommInitRank handles

  using C = wire::OpCode;
  using D = DType;
  const std::vector<ExpectedOp> want = {
      {C::kAllReduce, 1, D::kFloat32, 4096, 0, 0},
      {C::kBroadcast, 1, D::kBFloat16, 200, 2, 0},
      {C::kBroadcast, 0, D::kInt64, 80, 0, 0},
      {C::kReduce, 2, D::kFloat16, 32, 3, 0},
      {C::kAllGather, 1, D::kBFloat16, 256 * 2 * 4, 0, 0},     // the gathered buffer
      {C::kReduceScatter, 1, D::kFloat32, 128 * 4 * 4, 0, 0},  // the buffer reduced
      {C::kAllToAll, 1, D::kInt8, 64 * 4, 0, 0},
      {C::kSend, 2, D::kUint8, 32, 0, 1},
      {C::kRecv, 2, D::kUint8, 32, 2, 1},  // the send to itself is not entered
      {C::kAllReduce, 1, D::kInt32, 12, 0, 2},
      {C::kRecv, 1, D::kFloat64, 0, 3, 2},
      {C::kAllReduce, 0, D::kFloat32, 32, 0, 0},  // with a PreMulSum op
  };
  const auto ops = f.seen_of<wire::Op>();
  ASSERT_EQ(ops.size(), want.size());
  std::map<int, std::uint32_t> group_ids;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    SCOPED_TRACE("op " + std::to_string(i));
    EXPECT_EQ(ops[i].op_id, i);
    EXPECT_EQ(ops[i].comm, 0u);
    EXPECT_EQ(ops[i].code, want[i].code);
    EXPECT_EQ(ops[i].stream, want[i].stream);
    EXPECT_EQ(ops[i].dtype, want[i].dtype);
    EXPECT_EQ(ops[i].bytes, want[i].bytes);
    EXPECT_EQ(ops[i].peer, want[i].peer);
    EXPECT_EQ(ops[i].tag, 0);
    if (want[i].group == 0) {
      EXPECT_EQ(ops[i].group, 0u);
    } else {
      EXPECT_NE(ops[i].group, 0u);
      const auto [it, fresh] = group_ids.emplace(want[i].group, ops[i].group);
      EXPECT_EQ(it->second, ops[i].group);
    }
  }
  EXPECT_NE(group_ids[1], group_ids[2]);

  const auto memory = f.seen_of<wire::Memory>();
  ASSERT_EQ(memory.size(), 2u);
  EXPECT_EQ(memory[0].action, wire::MemoryAction::kAlloc);
  EXPECT_EQ(memory[1].action, wire::MemoryAction::kFree);
  for (const wire::Memory& m : memory) {
    EXPECT_EQ(m.id, printed(out, "mem"));
    EXPECT_EQ(m.bytes, 1 << 20);
  }

  const auto bye = f.seen_of<wire::Bye>();
  ASSERT_EQ(bye.size(), 1u);
  EXPECT_EQ(bye[0].exit_code, 0);
  // The host path waited for every op: each one's wait reached the coordinator.
  EXPECT_GE(f.seen_of<wire::Wait>().size(), 10u);
}

TEST(NcclShimTest, ReceiveBuffersGetThisRanksOwnBytes) {
  // The program checks every buffer (nccl_program_data.c); here, that it ran.
  FakeCoordinator f(fake());
  Program p("data", env_for(f));
  ASSERT_EQ(p.wait(), 0) << p.output();
  EXPECT_THAT(p.output(), HasSubstr("data ok"));
  EXPECT_EQ(f.seen_of<wire::Op>().size(), 11u);  // the send and recv too
}

TEST(NcclShimTest, NcclMemoryAtFullScaleIsKeptPerCommunicator) {
  // The program checks prismNcclFootprint after each step (nccl_program_data.c).
  FakeCoordinatorOptions o = fake();
  o.nccl_bytes = {{0, 3 << 20}, {2, 1 << 20}, {3, 5 << 20}};
  FakeCoordinator f(o);
  Program p("footprint", env_for(f));
  ASSERT_EQ(p.wait(), 0) << p.output();
  EXPECT_THAT(p.output(), HasSubstr("footprint ok"));
}

TEST(NcclShimTest, AnAbortedEmulationFailsTheOpAndEveryCommunicator) {
  FakeCoordinator f(fake(/*abort=*/true));
  Program p("abort", env_for(f));
  EXPECT_EQ(p.wait(), 0) << p.output();
  EXPECT_EQ(f.seen_of<wire::Op>().size(), 1u);
  // The client's message, which names the coordinator, after the entry point.
  EXPECT_THAT(p.output(), HasSubstr("error ncclAllReduce: ")) << p.output();
}

// The coordinator killed under a rank stuck in its own teardown (PyTorch's
// ProcessGroupNCCL can wait its NCCL timeout to abort communicators): the
// drop-in ends the process PRISM_NCCL_GONE_EXIT_S seconds after the
// connection broke, with one error line and exit status 1. An abort by the
// coordinator (the emulation ended the rank on purpose) arms nothing: the
// abort test above exits 0 by itself.
TEST(NcclShimTest, ARankLeftRunningByAGoneCoordinatorIsEnded) {
  FakeCoordinatorOptions o = fake();
  o.hang_up_at_op = 0;
  FakeCoordinator f(o);
  std::map<std::string, std::string> env = env_for(f);
  env["PRISM_NCCL_GONE_EXIT_S"] = "1";
  Program p("gone", env);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(p.wait(), 1) << p.output();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 15s);
  EXPECT_THAT(p.output(), HasSubstr("error ncclAllReduce: "));
  EXPECT_THAT(p.output(),
              HasSubstr("PrismLLM NCCL: error: the emulation is gone (ncclAllReduce: "));
  EXPECT_THAT(p.output(), HasSubstr("and this process still ran 1 s later: ending it with exit "
                                    "status 1 (PRISM_NCCL_GONE_EXIT_S)"));
  EXPECT_THAT(p.output(), ::testing::Not(HasSubstr("still here")));

  // 0: never; the program ends as it wants (here after its 30 s: cut).
  env["PRISM_NCCL_GONE_EXIT_S"] = "0";
  FakeCoordinator f2(o);
  env["PRISM_COORDINATOR"] = f2.address().to_string();
  Program q("gone", env);
  EXPECT_EQ(q.wait(3s), 128 + SIGKILL) << q.output();
  EXPECT_THAT(q.output(), ::testing::Not(HasSubstr("PrismLLM NCCL: error: the emulation is gone")));
}

}  // namespace
}  // namespace prism::nccl_test
