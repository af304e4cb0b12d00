// The c10d backend "prism" end to end: unmodified torch.distributed programs
// (tests/shim/torch/*.py) run under PRISM_PYTHON as rank 0 of 4, with
// build/python first on PYTHONPATH as `prism emulate` puts it, against a
// fake coordinator that records what they send. Skipped when torch is not
// installed or the module was not built.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "python_rank.h"

namespace prism::torch_shim::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;
using wire::OpCode;

const std::string kPython = PRISM_PYTHON;
const std::string kTimeoutMs = "20000";

class TorchBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = torch_missing(); !why.empty()) GTEST_SKIP() << why;
  }

  // Runs `script` as rank 0 of 4 against `f`, with a TCPStore of its own;
  // `changes` replaces parts of the rank's environment.
  static void run_rank(const FakeCoordinator& f, const std::string& script, RunResult* r,
                       const std::vector<std::string>& args = {}, const Env& changes = {}) {
    StoreServer store(4);
    ASSERT_NE(store.port(), 0);
    Env env = rank_env(f.address().to_string(), store.port(), kTimeoutMs);
    for (const auto& [k, v] : changes) env[k] = v;
    *r = run_script(script, env, args);
  }
};

// One op as the test expects it.
struct Want {
  OpCode code;
  std::int64_t bytes;
  DType dtype;
  std::int32_t peer = 0;
  std::int32_t tag = 0;
  std::uint32_t comm = 0;
};

std::string describe(const wire::Op& o) {
  return std::string(wire::to_string(o.code)) + " " + std::to_string(o.bytes) + " B " +
         std::string(to_string(o.dtype)) + " peer " + std::to_string(o.peer) + " tag " +
         std::to_string(o.tag) + " comm " + std::to_string(o.comm) + " group " +
         std::to_string(o.group);
}

TEST_F(TorchBackendTest, EveryCollectiveReachesTheCoordinator) {
  FakeCoordinator f(torch_fake());
  RunResult r;
  ASSERT_NO_FATAL_FAILURE(run_rank(f, "collectives.py", &r));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("DONE"));
  EXPECT_THAT(r.output,
              HasSubstr("prism: torch.distributed backend 'gloo' runs on PrismLLM's emulated"));
  EXPECT_THAT(r.output, HasSubstr("REFUSED: prism: allreduce: element type Short has no "
                                  "PrismLLM code"));
  EXPECT_THAT(r.output, HasSubstr("REFUSED: prism: alltoall_base: output split sizes add up to "
                                  "7 rows, the tensor has 8"));

  const auto hello = f.seen_of<wire::Hello>();
  ASSERT_EQ(hello.size(), 1u);
  EXPECT_EQ(hello[0].rank, 0);
  EXPECT_EQ(hello[0].world_size, 4);
  EXPECT_EQ(hello[0].program, "python");
  const auto comms = f.seen_of<wire::CommInit>();
  ASSERT_EQ(comms.size(), 2u);  // the world and [0, 2]; rank 0 is not in [1, 3]
  EXPECT_EQ(comms[0].comm, 0u);
  EXPECT_EQ(comms[0].nranks, 4);
  EXPECT_EQ(comms[0].members, (std::vector<std::int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(comms[1].comm, 1u);
  EXPECT_EQ(comms[1].rank_in_comm, 0);
  EXPECT_EQ(comms[1].members, (std::vector<std::int32_t>{0, 2}));

  const std::vector<Want> want{
      {OpCode::kAllReduce, 40, DType::kFloat32},
      {OpCode::kAllReduce, 24, DType::kInt64},
      {OpCode::kBroadcast, 16, DType::kFloat16, 1},
      {OpCode::kReduce, 8, DType::kBFloat16, 0},
      {OpCode::kAllGather, 48, DType::kFloat32},      // output: 12 B × 4
      {OpCode::kAllGather, 32, DType::kInt32},        // all_gather_into_tensor
      {OpCode::kReduceScatter, 32, DType::kFloat32},  // input: 8 B × 4
      {OpCode::kReduceScatter, 32, DType::kFloat32},  // reduce_scatter_tensor
      {OpCode::kAllToAll, 64, DType::kInt64},
      {OpCode::kAllToAll, 32, DType::kFloat32},
      {OpCode::kSend, 20, DType::kFloat32, 2, 7},
      {OpCode::kRecv, 20, DType::kFloat32, 3, 5},
      {OpCode::kSend, 8, DType::kFloat32, 1},
      {OpCode::kRecv, 8, DType::kFloat32, 1},
      {OpCode::kBarrier, 0, DType::kBFloat16},
      {OpCode::kAllReduce, 32, DType::kFloat32},  // coalesced: 12 B + 20 B
      {OpCode::kAllGather, 80, DType::kFloat32},  // coalesced: (8 B + 12 B) × 4
      {OpCode::kRecv, 12, DType::kFloat32, 1},    // gather at the root: NCCL's receives
      {OpCode::kRecv, 12, DType::kFloat32, 2},
      {OpCode::kRecv, 12, DType::kFloat32, 3},
      {OpCode::kSend, 12, DType::kFloat32, 1},  // gather to rank 1
      {OpCode::kSend, 12, DType::kFloat32, 1},  // scatter from the root
      {OpCode::kSend, 12, DType::kFloat32, 2},
      {OpCode::kSend, 12, DType::kFloat32, 3},
      {OpCode::kAllReduce, 24, DType::kFloat32},  // async, through its future
      {OpCode::kAllReduce, 16, DType::kFloat32, 0, 0, 1},
      {OpCode::kSend, 4, DType::kFloat32, 1, 0, 1},  // global rank 2 is rank 1 of [0, 2]
      {OpCode::kAllReduce, 4, DType::kFloat32},
  };
  const auto ops = f.seen_of<wire::Op>();
  ASSERT_EQ(ops.size(), want.size());
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Want& w = want[i];
    const wire::Op& o = ops[i];
    SCOPED_TRACE("op " + std::to_string(i) + ": " + describe(o));
    EXPECT_EQ(o.code, w.code);
    EXPECT_EQ(o.bytes, w.bytes);
    EXPECT_EQ(o.dtype, w.dtype);
    EXPECT_EQ(o.peer, w.peer);
    EXPECT_EQ(o.tag, w.tag);
    EXPECT_EQ(o.comm, w.comm);
    EXPECT_EQ(o.stream, 1);
  }
  // gather's and scatter's sends and receives are groups, as NCCL issues them.
  const std::vector<std::uint32_t> groups{ops[17].group, ops[20].group, ops[21].group};
  EXPECT_NE(groups[0], 0u);
  EXPECT_EQ(ops[18].group, groups[0]);
  EXPECT_EQ(ops[19].group, groups[0]);
  EXPECT_NE(groups[1], 0u);
  EXPECT_NE(groups[1], groups[0]);
  EXPECT_EQ(ops[23].group, groups[2]);
  EXPECT_NE(groups[2], groups[1]);
  EXPECT_EQ(ops[0].group, 0u);

  const auto bye = f.seen_of<wire::Bye>();
  ASSERT_EQ(bye.size(), 1u);
  EXPECT_EQ(bye[0].exit_code, 0);
}

// torch 2.x: what DTensor's and FSDP2's functional collectives and
// _coalescing_manager call (allgather_into_tensor_coalesced,
// reduce_scatter_tensor_coalesced): one op per pair, several in one group as
// ProcessGroupNCCL issues them; batch_isend_irecv coalesced into one group;
// objects sent, received and gathered through the store, beside the ops
// torch issues for them (the sizes, then the pickled bytes).
TEST_F(TorchBackendTest, CoalescedCallsAndObjects) {
  FakeCoordinator f(torch_fake());
  RunResult r;
  ASSERT_NO_FATAL_FAILURE(run_rank(f, "torch2.py", &r));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  if (r.output.find("SKIP: torch") != std::string::npos) GTEST_SKIP() << r.output;
  EXPECT_THAT(r.output, HasSubstr("DONE"));
  EXPECT_THAT(r.output, HasSubstr("REFUSED: prism: torch.distributed.broadcast_object_list on "
                                  "rank 0 from rank 2: the capture recorded none"));
  EXPECT_THAT(r.output, HasSubstr("REFUSED: prism: torch.distributed.recv_object_list on rank 0 "
                                  "from rank 1: the sender sent 2 objects, the receiver's list "
                                  "holds 1"));
  EXPECT_THAT(r.output,
              HasSubstr("REFUSED: prism: torch.distributed.scatter_object_list on rank 0 from "
                        "rank 1 is not supported: on PrismLLM's emulated backend objects from "
                        "other ranks travel only by send_object_list"));
  EXPECT_THAT(r.output,
              HasSubstr("prism: warning: torch.distributed.all_gather_object on rank 0 over ranks "
                        "0:1:4: the objects of 1 rank(s) are not known, and their slots hold this "
                        "rank's own (said once per call and group): rank 2's role is captured "
                        "later"));
  EXPECT_THAT(r.output, HasSubstr("REFUSED: prism: torch.distributed.all_gather_object on rank 0: "
                                  "the capture recorded none"));
  EXPECT_THAT(r.output, HasSubstr("REFUSED: prism: torch.distributed.split_group on rank 0 is not "
                                  "supported: PrismLLM's emulated backend does not split "
                                  "communicators"));
  constexpr std::int64_t kAny = -1;  // a pickle's length: checked below
  const std::vector<Want> want{
      {OpCode::kAllGather, 32, DType::kFloat32},      // functional: 2 floats × 4
      {OpCode::kReduceScatter, 32, DType::kFloat32},  // functional: the input's 8 floats
      {OpCode::kAllGather, 32, DType::kFloat32},      // coalesced, one group
      {OpCode::kAllGather, 16, DType::kFloat32},
      {OpCode::kReduceScatter, 16, DType::kFloat32},  // coalesced AVG, one group
      {OpCode::kReduceScatter, 32, DType::kFloat32},
      {OpCode::kSend, 12, DType::kFloat32, 1},     // batch_isend_irecv: one group
      {OpCode::kRecv, 20, DType::kFloat32, 3, 2},  // tag 2
      {OpCode::kSend, 8, DType::kFloat32, 2},      // one op alone: no group
      {OpCode::kBroadcast, 8, DType::kInt64},      // broadcast_object_list from 0: the size
      {OpCode::kBroadcast, kAny, DType::kUint8},   // then the pickled bytes
      {OpCode::kSend, 8, DType::kInt64, 1},        // send_object_list to 1
      {OpCode::kSend, kAny, DType::kUint8, 1},
      {OpCode::kRecv, 8, DType::kInt64, 1},  // recv_object_list from 1: the same object
      {OpCode::kRecv, kAny, DType::kUint8, 1},
      {OpCode::kRecv, 16, DType::kInt64, 1},  // use_batch: two objects, "a" and 7
      {OpCode::kRecv, kAny, DType::kUint8, 1},
      {OpCode::kBroadcast, 8, DType::kInt64, 2},  // broadcast_object_list from 2
      {OpCode::kBroadcast, kAny, DType::kUint8, 2},
      {OpCode::kAllGather, 32, DType::kInt64},    // all_gather_object: the sizes
      {OpCode::kAllGather, kAny, DType::kUint8},  // the pickles, padded to the largest
      {OpCode::kAllGather, 32, DType::kInt64},    // gather_object at the destination
      {OpCode::kRecv, kAny, DType::kUint8, 1},    // the gather: a recv from each
      {OpCode::kRecv, kAny, DType::kUint8, 2},
      {OpCode::kRecv, kAny, DType::kUint8, 3},
      {OpCode::kAllGather, 32, DType::kInt64},  // gather_object to rank 1
      {OpCode::kSend, kAny, DType::kUint8, 1},
      {OpCode::kAllReduce, 4, DType::kFloat32},  // the failed calls entered nothing
  };
  const auto ops = f.seen_of<wire::Op>();
  ASSERT_EQ(ops.size(), want.size());
  for (std::size_t i = 0; i < ops.size(); ++i) {
    SCOPED_TRACE("op " + std::to_string(i) + ": " + describe(ops[i]));
    EXPECT_EQ(ops[i].code, want[i].code);
    if (want[i].bytes != kAny) EXPECT_EQ(ops[i].bytes, want[i].bytes);
    EXPECT_EQ(ops[i].dtype, want[i].dtype);
    EXPECT_EQ(ops[i].peer, want[i].peer);
    EXPECT_EQ(ops[i].tag, want[i].tag);
  }
  EXPECT_GT(ops[10].bytes, 8);
  EXPECT_EQ(ops[12].bytes, ops[10].bytes);  // one object, pickled once
  EXPECT_EQ(ops[14].bytes, ops[12].bytes);  // the store's pickle is torch's
  EXPECT_GT(ops[16].bytes, 0);
  EXPECT_GT(ops[18].bytes, 0);
  EXPECT_GT(ops[20].bytes, 4 * 100);  // 4 slots of rank 3's pickle, over 100 bytes
  EXPECT_EQ(ops[20].bytes % 4, 0);
  EXPECT_EQ(ops[22].bytes, ops[23].bytes);  // padded alike
  EXPECT_EQ(ops[0].group, 0u);
  EXPECT_EQ(ops[1].group, 0u);
  EXPECT_NE(ops[2].group, 0u);
  EXPECT_EQ(ops[3].group, ops[2].group);
  EXPECT_NE(ops[4].group, 0u);
  EXPECT_NE(ops[4].group, ops[2].group);
  EXPECT_EQ(ops[5].group, ops[4].group);
  EXPECT_NE(ops[6].group, 0u);
  EXPECT_NE(ops[6].group, ops[4].group);
  EXPECT_EQ(ops[7].group, ops[6].group);
  EXPECT_EQ(ops[8].group, 0u);
}

TEST_F(TorchBackendTest, DdpTrainsAndMarksIterations) {
  FakeCoordinator f(torch_fake());
  RunResult r;
  ASSERT_NO_FATAL_FAILURE(run_rank(f, "ddp.py", &r));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("DONE"));

  // One bucket of every gradient per step: (8×16 + 16 + 16×4 + 4) floats.
  int bucket_reductions = 0;
  for (const wire::Op& o : f.seen_of<wire::Op>()) {
    EXPECT_EQ(o.comm, 0u);
    if (o.code == OpCode::kAllReduce && o.bytes == 212 * 4 && o.dtype == DType::kFloat32)
      ++bucket_reductions;
  }
  EXPECT_EQ(bucket_reductions, 3);
  // Three steps: begin, end, begin, end, begin; the first step's iteration
  // (start-up) is not one.
  std::vector<wire::MarkerCode> codes;
  for (const wire::Marker& m : f.seen_of<wire::Marker>()) codes.push_back(m.code);
  using wire::MarkerCode;
  EXPECT_EQ(codes, (std::vector<MarkerCode>{MarkerCode::kIterationBegin, MarkerCode::kIterationEnd,
                                            MarkerCode::kIterationBegin, MarkerCode::kIterationEnd,
                                            MarkerCode::kIterationBegin}));
  const auto bye = f.seen_of<wire::Bye>();
  ASSERT_EQ(bye.size(), 1u);
  EXPECT_EQ(bye[0].exit_code, 0);
}

// PyTorch's own ProcessGroupNCCL on the NCCL drop-in (PRISM_NCCL_DROPIN=1):
// the backend stays the program's, new groups are declared to the store,
// and the markers go through the drop-in's connection (prismNcclMarker).
TEST_F(TorchBackendTest, WithTheNcclDropInTheBackendStaysAndGroupsAreDeclared) {
  const std::string dropin = PRISM_BINARY_DIR "/lib/libnccl.so.2";
  if (!std::filesystem::exists(dropin)) GTEST_SKIP() << "the NCCL drop-in was not built";
  FakeCoordinator f(torch_fake());
  Env env = rank_env(f.address().to_string(), 0, kTimeoutMs);
  env["PRISM_NCCL_DROPIN"] = "1";
  env["LD_PRELOAD"] = dropin;
  env["WORLD_SIZE"] = "1";
  const RunResult r = run_script("dropin.py", env);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("backend gloo"));
  EXPECT_THAT(r.output, HasSubstr("declared 1 0"));
  EXPECT_THAT(r.output, Not(HasSubstr("runs on PrismLLM's emulated backend")));
  std::vector<wire::MarkerCode> codes;
  for (const wire::Marker& m : f.seen_of<wire::Marker>()) codes.push_back(m.code);
  using wire::MarkerCode;
  EXPECT_EQ(codes, (std::vector<MarkerCode>{MarkerCode::kIterationBegin, MarkerCode::kIterationEnd,
                                            MarkerCode::kIterationBegin, MarkerCode::kIterationEnd,
                                            MarkerCode::kIterationBegin}));
  EXPECT_EQ(f.seen_of<wire::Hello>().size(), 1u);  // one connection: the drop-in's
  ASSERT_EQ(f.seen_of<wire::Bye>().size(), 1u);
}

TEST_F(TorchBackendTest, AbortedEmulationFailsAWaitingProgram) {
  for (const std::string mode : {"wait", "future"}) {
    SCOPED_TRACE(mode);
    FakeCoordinator f(torch_fake({.abort_at_op = 2}));
    RunResult r;
    ASSERT_NO_FATAL_FAILURE(run_rank(f, "abort.py", &r, {mode}));
    EXPECT_FALSE(r.timed_out) << r.output;
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr("virtual rank 3 ran out of memory (torch_backend_test)"));
    EXPECT_THAT(r.output, Not(HasSubstr("NOT ABORTED")));
    EXPECT_LT(r.took, 60s);
  }
}

// A coordinator that answers only once the rank's polls reach the
// completion: the future completes then, within a poll or so, not earlier.
TEST_F(TorchBackendTest, AFutureCompletesAtItsEmulatedTime) {
  FakeCoordinator f(torch_fake({.complete_after_ns = 50'000'000, .answer_when_due = true}));
  RunResult r;
  ASSERT_NO_FATAL_FAILURE(run_rank(f, "future_timing.py", &r, {"50", "20"}));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::cerr << r.output;  // what polling cost the rank's compute, for people
  const std::size_t at = r.output.find("LATE_MS ");
  ASSERT_NE(at, std::string::npos) << r.output;
  // A poll is 0.2 ms apart; a loaded 2-core machine may add scheduling.
  EXPECT_LT(std::stod(r.output.substr(at + 8)), 20.0) << r.output;
}

// Under a capture every Work.wait() is on the wire, once, even when the
// progress thread took the op's answer first; the progress thread's polls
// send nothing, and a work waited for only through its future is not said.
TEST_F(TorchBackendTest, UnderACaptureEveryWorkWaitIsOnTheWire) {
  FakeCoordinator f(torch_fake({.capture = true}));
  RunResult r;
  ASSERT_NO_FATAL_FAILURE(run_rank(f, "capture_waits.py", &r));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("CAPTURE_WAITS_DONE"));
  f.seen_through_bye();
  std::vector<std::uint32_t> all_reduces, waited;
  for (const wire::Op& o : f.seen_of<wire::Op>())
    if (o.code == OpCode::kAllReduce && o.bytes == 16) all_reduces.push_back(o.op_id);
  ASSERT_EQ(all_reduces.size(), 4u) << r.output;
  for (const wire::Wait& w : f.seen_of<wire::Wait>()) {
    EXPECT_NE(w.op_id, wire::kAnyOp) << "a poll's wait under a capture";
    waited.push_back(w.op_id);
  }
  EXPECT_THAT(waited, ::testing::IsSupersetOf({all_reduces[0], all_reduces[2]}));
  EXPECT_EQ(std::count(waited.begin(), waited.end(), all_reduces[0]), 1);
  EXPECT_EQ(std::count(waited.begin(), waited.end(), all_reduces[2]), 1);
  EXPECT_EQ(std::count(waited.begin(), waited.end(), all_reduces[1]), 0);
  EXPECT_EQ(std::count(waited.begin(), waited.end(), all_reduces[3]), 0);
}

TEST_F(TorchBackendTest, MissingCoordinatorIsAClearError) {
  FakeCoordinator f(torch_fake());
  RunResult r;
  ASSERT_NO_FATAL_FAILURE(run_rank(
      f, "ddp.py", &r, {}, {{"PRISM_COORDINATOR", "unix:/nonexistent/prism/coordinator.sock"}}));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("RuntimeError: prism: rank 0 of 4 cannot connect to the "
                                  "coordinator at 'unix:/nonexistent/prism/coordinator.sock'"));
}

TEST_F(TorchBackendTest, DirectProcessGroupGlooIsRefused) {
  FakeCoordinator f(torch_fake());
  StoreServer store(4);
  const RunResult r =
      run_script("direct_gloo.py", rank_env(f.address().to_string(), store.port(), kTimeoutMs));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("REFUSED: prism: torch.distributed.ProcessGroupGloo was "
                                  "constructed directly"));
  EXPECT_THAT(r.output, HasSubstr("create the group with dist.new_group(backend=...) instead"));
  EXPECT_TRUE(f.seen().empty());  // it never connected
}

TEST_F(TorchBackendTest, SitecustomizeWithoutCoordinatorLeavesTorchAlone) {
  const RunResult r =
      run({kPython, "-c",
           "import sys, torch.distributed as dist; "
           "print('plugins', sorted(dist.Backend._plugins)); "
           "print('gloo', type(dist.ProcessGroupGloo).__name__); "
           "print('prism_torch' in sys.modules)"},
          {{"PYTHONPATH", PRISM_BINARY_DIR "/python"}}, {"PRISM_COORDINATOR"}, 120s);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("plugins []"));
  EXPECT_THAT(r.output, HasSubstr("gloo pybind11_type"));
  EXPECT_THAT(r.output, HasSubstr("False"));
}

TEST_F(TorchBackendTest, SitecustomizeLeavesOtherProgramsAloneAndChains) {
  // Another sitecustomize later on the path, like Debian's in /etc/python3.11.
  const auto other = std::filesystem::temp_directory_path() /
                     ("prism-torch-test-site-" + std::to_string(::getpid()));
  std::filesystem::create_directories(other);
  std::ofstream(other / "sitecustomize.py") << "print('the next sitecustomize ran')\n";
  const RunResult r = run({kPython, "-c",
                           "import sys; print('loaded', sorted(m for m in sys.modules if "
                           "m.split('.')[0] in ('torch', 'prism_torch')))"},
                          {{"PYTHONPATH", PRISM_BINARY_DIR "/python:" + other.string()},
                           {"PRISM_COORDINATOR", "unix:/nonexistent.sock"}},
                          {}, 60s);
  std::filesystem::remove_all(other);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("loaded []"));
  EXPECT_THAT(r.output, HasSubstr("the next sitecustomize ran"));
}

}  // namespace
}  // namespace prism::torch_shim::testing
