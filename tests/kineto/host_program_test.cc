// Host-only traces: the real 2-rank gloo run profiled by Debian's torch 1.13
// (tests/data/kineto/cpu113_rank*.json, made by make_cpu113.py; that build has
// no Kineto, so the file is the legacy profiler's bare event array with no
// categories or args), and a trace in PyTorch 2.x's format written in code.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "kineto/kineto.h"
#include "kineto_test_util.h"

namespace prism::kineto_test {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(KinetoHostTest, RealTorch113TraceRank0) {
  Result<KinetoTrace> t = load_kineto_trace(fixture("cpu113_rank0.json"));
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_EQ(t->world_size, 1);  // no distributedInfo
  EXPECT_FALSE(t->summary.gpu);
  // The main thread, then gloo's two worker threads.
  EXPECT_EQ(t->program.role.streams, (std::vector<std::string>{"host0", "host1", "host2"}));
  const std::vector<std::string> ops = describe(t->program);
  ASSERT_EQ(ops.size(), 49u);
  EXPECT_THAT(std::vector<std::string>(ops.begin(), ops.begin() + 4),
              ElementsAre("compute host0 aten::zeros 298000", "iteration host0 0",
                          "compute host0 aten::empty 1000", "compute host0 aten::linear 267000"));
  EXPECT_EQ(ops[25], "iteration host0 1");
  EXPECT_EQ(ops.back(), "iteration_end host0 0");
  // Nested operators are inside their top-level one, not repeated.
  EXPECT_THAT(ops, Not(Contains("compute host0 aten::addmm 0")));
  EXPECT_THAT(ops, Contains("compute host1 gloo:all_reduce 2275000"));
  EXPECT_THAT(ops, Contains("compute host0 c10d::send 42000"));
  // The legacy profiler records no collective args: the c10d calls and gloo's
  // work stay compute, and are counted.
  EXPECT_EQ(t->summary.collectives + t->summary.sends + t->summary.recvs, 0);
  EXPECT_EQ(t->summary.comm_calls_without_metadata, 8);
  EXPECT_EQ(t->summary.compute_ops, 46);
  EXPECT_EQ(t->summary.iterations, 2);
}

TEST(KinetoHostTest, RealTorch113TraceRank1ReceivesInsteadOfSending) {
  Result<KinetoTrace> t = load_kineto_trace(fixture("cpu113_rank1.json"));
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  const std::vector<std::string> ops = describe(t->program);
  EXPECT_THAT(ops, Contains("compute host0 c10d::recv_ 124000"));
  EXPECT_EQ(t->summary.iterations, 2);
}

// A CPU-only PyTorch 2.x trace: record_param_comms carries the metadata.
TraceJson cpu_trace() {
  TraceJson t;
  t.dist(0, 2);
  t.add("user_annotation", "ProfilerStep#3", 0, 100, {}, 7, 1);
  t.add("cpu_op", "aten::linear", 1, 10, {}, 7, 1);
  t.add("cpu_op", "aten::addmm", 2, 8, {}, 7, 1);
  t.add("python_function", "nn.Module: Block", 12, 28, {}, 7, 1);
  t.add("cpu_op", "aten::relu", 13, 2, {}, 7, 1);
  t.add("cpu_op", "c10d::allreduce_", 20, 10, {}, 7, 1);
  t.add("cpu_op", "record_param_comms", 21, 4, comm_args("allreduce", 16, "Float", "[0, 1]"), 7, 1);
  t.add("cpu_op", "gloo:all_reduce", 22, 6, {}, 7, 2);
  Json bcast = comm_args("broadcast", 8, "Float", "[0, 1]");
  bcast["Rank"] = 1;  // the root
  t.add("cpu_op", "c10d::broadcast_", 31, 8, {}, 7, 1);
  t.add("cpu_op", "record_param_comms", 32, 2, bcast, 7, 1);
  Json send = comm_args("send", 4, "Long", "[0, 1]");
  send["Rank"] = 1;  // the peer, as a group rank
  t.add("cpu_op", "c10d::send", 41, 4, {}, 7, 1);
  t.add("cpu_op", "record_param_comms", 42, 1, send, 7, 1);
  t.events().push_back(
      {{"ph", "i"},
       {"cat", "cpu_instant_event"},
       {"name", "[memory]"},
       {"pid", 7},
       {"tid", 1},
       {"ts", 50},
       {"args", {{"Bytes", 512}, {"Addr", 77}, {"Device Type", 1}, {"Device Id", 0}}}});
  t.events().push_back(
      {{"ph", "i"},
       {"cat", "cpu_instant_event"},
       {"name", "[memory]"},
       {"pid", 7},
       {"tid", 1},
       {"ts", 51},
       {"args", {{"Bytes", 64}, {"Addr", 78}, {"Device Type", 0}, {"Device Id", -1}}}});
  return t;
}

TEST(KinetoHostTest, RecordParamCommsBecomeCommunication) {
  Result<KinetoTrace> t = parse_kineto_trace(cpu_trace().text(), "cpu.json");
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_THAT(describe(t->program),
              ElementsAre("iteration host0 3",                                 //
                          "compute host0 aten::linear 10000",                  //
                          "compute host0 aten::relu 2000",                     //
                          "all_reduce host0 default_pg [0,1] 64 fp32 root=0",  //
                          "compute host1 gloo:all_reduce 6000",                //
                          "broadcast host0 default_pg [0,1] 32 fp32 root=1",   //
                          "send host0 peer=1 32 int64",                        //
                          "alloc host0 512",                                   //
                          "iteration_end host0 0"));
  // gloo's worker-side op has no metadata of its own.
  EXPECT_EQ(t->summary.comm_calls_without_metadata, 1);
  EXPECT_EQ(t->program.role.names[static_cast<std::size_t>(t->program.role.ops[3].name)],
            "c10d::allreduce_");
}

TEST(KinetoHostTest, RejectsATraceWithNothingToImport) {
  TraceJson t;
  t.add("Trace", "PyTorch Profiler (0)", 0, 10);
  Result<KinetoTrace> r = parse_kineto_trace(t.text(), "empty.json");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(),
            "empty.json: no GPU activity and no host operators: nothing to import");
}

TEST(KinetoHostTest, RejectsBadHostCommArgsNamingTheEvent) {
  TraceJson t = cpu_trace();
  t.events()[6]["args"]["dtype"] = "Quaternion";
  Result<KinetoTrace> r = parse_kineto_trace(t.text(), "cpu.json");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(),
            "cpu.json: event 6 ('record_param_comms'): unknown dtype 'Quaternion'");
}

TEST(KinetoHostTest, RejectsMemoryEventsWithoutSizeOrAddress) {
  TraceJson t = cpu_trace();
  t.events()[12]["args"].erase("Addr");
  Result<KinetoTrace> r = parse_kineto_trace(t.text(), "cpu.json");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(),
            "cpu.json: event 12 ('[memory]'): a memory event needs integer args \"Bytes\" and "
            "\"Addr\"");
  t = cpu_trace();
  t.events()[12]["args"]["Bytes"] = std::int64_t{1} << 51;
  r = parse_kineto_trace(t.text(), "cpu.json");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(),
            "cpu.json: event 12 ('[memory]'): \"Bytes\" 2251799813685248 exceeds the limit of "
            "2^50 bytes");
}

TEST(KinetoHostTest, RejectsMoreThreadsThanAStreamIndexHolds) {
  TraceJson t;
  for (int tid = 0; tid <= 65535; ++tid) t.add("cpu_op", "aten::add", tid, 1, {}, 7, tid);
  Result<KinetoTrace> r = parse_kineto_trace(t.text(), "t.json");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(), "t.json: 65536 host threads; at most 65535 are supported");
}

}  // namespace
}  // namespace prism::kineto_test
