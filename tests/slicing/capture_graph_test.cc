// program_from_capture and graph_from_capture: a data-parallel program's
// graph from one rank's capture, and every way a capture or a job is refused.
#include "slicing/capture_graph.h"
#include "slicing/slices.h"

#include <map>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "graph/graph_json.h"
#include "workload/job_yaml.h"

namespace prism {
namespace {

using ::testing::HasSubstr;

JobSpec program_job(const std::string& extra = "") {
  Result<JobSpec> j =
      parse_job_yaml("name: ddp\ncluster: {preset: dgx-h100, num_gpus: 16}\n" + extra, "ddp.yaml");
  EXPECT_TRUE(j.is_ok()) << j.status().message();
  return j.value();
}

std::string capture(std::string events, int world = 16, int rank = 3) {
  if (!events.empty() && events.back() == ',') events.pop_back();
  return "{\"format\":\"prism-capture\",\"version\":1,\"rank\":" + std::to_string(rank) +
         ",\"events\":[{\"type\":\"hello\",\"rank\":" + std::to_string(rank) +
         ",\"world_size\":" + std::to_string(world) + ",\"pid\":1}," + events + "]}";
}

const std::string kWorldComm =
    "{\"type\":\"comm_init\",\"comm\":1,\"nranks\":16,\"rank_in_comm\":3,\"id_hash\":0,"
    "\"members\":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]},";

std::string op(int id, std::int64_t at, const std::string& code = "all_reduce",
               std::int64_t bytes = 4096, int peer = 0) {
  return "{\"type\":\"op\",\"at\":" + std::to_string(at) + ",\"op_id\":" + std::to_string(id) +
         ",\"code\":\"" + code +
         "\",\"comm\":1,\"stream\":1,\"dtype\":\"fp32\",\"bytes\":" + std::to_string(bytes) +
         ",\"peer\":" + std::to_string(peer) + ",\"tag\":0,\"group\":0},";
}

// Two iterations of a DDP-like step: compute 1000 ns, all-reduce, wait.
const std::string kTwoSteps =
    kWorldComm + op(0, 1000) + "{\"type\":\"complete\",\"op_id\":0,\"at\":1000}," +
    "{\"type\":\"wait\",\"at\":1100,\"wait_id\":0,\"op_id\":0,\"answers_seen\":1}," +
    "{\"type\":\"marker\",\"at\":1200,\"marker\":\"iteration_begin\",\"value\":0}," + op(1, 2200) +
    "{\"type\":\"wait\",\"at\":2300,\"wait_id\":1,\"op_id\":1,\"answers_seen\":2}," +
    "{\"type\":\"marker\",\"at\":2400,\"marker\":\"iteration_end\",\"value\":0}," +
    "{\"type\":\"bye\",\"at\":2500,\"exit_code\":0}";

// Op -> when the first host op that depends on it starts (the host's
// compute ops run back to back from 0).
std::map<std::int32_t, std::int64_t> first_waited_at(const Role& role) {
  std::map<std::int32_t, std::int64_t> at;
  std::int64_t start = 0;
  for (const Op& o : role.ops) {
    if (o.kind != OpKind::kCompute) continue;
    for (std::uint32_t d = o.deps_begin; d < o.deps_end; ++d) at.try_emplace(role.deps[d], start);
    start += o.duration.ns;
  }
  return at;
}

TEST(CaptureGraphTest, OneRoleForEveryRankWithTheWorldAsDataParallelSlot) {
  Result<ExecutionGraph> g = graph_from_capture(program_job(), capture(kTwoSteps), "cap");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  EXPECT_EQ(g.value().world_size(), 16);
  ASSERT_EQ(g.value().roles.size(), 1u);
  EXPECT_EQ(g.value().role_of_rank, std::vector<std::int32_t>(16, 0));
  ASSERT_EQ(g.value().slots.size(), 1u);
  EXPECT_EQ(g.value().slots[0].name, "world");
  const Role& role = g.value().roles[0];
  EXPECT_EQ(role.streams, (std::vector<std::string>{"host", "stream1"}));
  int collectives = 0, markers = 0;
  SimTime host;
  for (const Op& o : role.ops) {
    if (o.kind == OpKind::kCollective) {
      ++collectives;
      EXPECT_EQ(o.bytes.count, 4096);
      EXPECT_EQ(o.dtype, DType::kFloat32);
      EXPECT_EQ(o.stream, 1);
      EXPECT_GT(o.deps_end, o.deps_begin);  // after the host issued it
    }
    if (o.kind == OpKind::kMarker) ++markers;
    if (o.kind == OpKind::kCompute) host += o.duration;
  }
  EXPECT_EQ(collectives, 2);
  EXPECT_EQ(markers, 2);
  EXPECT_EQ(host.ns, 2500);  // the host's time from 0 to the goodbye, all of it
}

// PyTorch 2.x makes new_group(all ranks) by ncclCommSplit: the capture
// answers it with the world, and that answer declares the communicator.
TEST(CaptureGraphTest, ASplitsAnswerDeclaresItsCommunicator) {
  const std::string world = "[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]";
  const std::string events =
      "{\"type\":\"comm_init\",\"comm\":0,\"nranks\":16,\"rank_in_comm\":3,\"members\":" + world +
      "},{\"type\":\"comm_split\",\"parent\":0,\"comm\":1,\"color\":7,\"key\":3}," +
      "{\"type\":\"comm_info\",\"comm\":1,\"nranks\":16,\"rank_in_comm\":3,\"members\":" + world +
      "}," + op(0, 1000) + "{\"type\":\"bye\",\"at\":2000,\"exit_code\":0}";
  Result<ExecutionGraph> g = graph_from_capture(program_job(), capture(events), "cap");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  // Only communicators that ops use become slots; the split one is the
  // rank's second over these members.
  ASSERT_EQ(g.value().slots.size(), 1u);
  EXPECT_EQ(g.value().slots[0].name, "world#2");
  EXPECT_EQ(g.value().roles[0].ops[1].ref, 0);
}

TEST(CaptureGraphTest, TheHostWaitsWhereTheRankWaited) {
  Result<ExecutionGraph> g = graph_from_capture(program_job(), capture(kTwoSteps), "cap");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  const Role& role = g.value().roles[0];
  // The host's work from the wait at 1100 on depends on the first
  // all-reduce; its work before (1000 to 1100) does not.
  int first = -1;
  std::int64_t start = 0, waiter_start = -1;
  for (int i = 0; i < static_cast<int>(role.ops.size()); ++i) {
    const Op& o = role.ops[static_cast<std::size_t>(i)];
    if (o.kind == OpKind::kCollective && first < 0) first = i;
    if (o.kind != OpKind::kCompute) continue;
    const std::vector<std::int32_t> deps(role.deps.begin() + o.deps_begin,
                                         role.deps.begin() + o.deps_end);
    if (first >= 0 && waiter_start < 0 && !deps.empty()) {
      EXPECT_THAT(deps, ::testing::ElementsAre(first));
      waiter_start = start;
    }
    start += o.duration.ns;
  }
  EXPECT_EQ(waiter_start, 1100);
}

// A progress thread's polls consume completions: the host's wait is not on
// the wire. An all-reduce's is depended on at the next iteration marker; a
// receive's at the host's next op, since the host goes on with its data.
TEST(CaptureGraphTest, APolledReceiveIsWaitedForAtOnceAPolledAllReduceAtTheMarker) {
  const auto poll = [](int at) {
    return "{\"type\":\"wait\",\"at\":" + std::to_string(at) +
           ",\"wait_id\":" + std::to_string(at) + ",\"until\":" + std::to_string(at) + "},";
  };
  // Every rank sends to the rank 2 ahead and receives from the rank 2 behind.
  const std::string events =
      kWorldComm + op(0, 50, "send", 64, 5) + op(1, 100, "recv", 64, 1) + op(2, 200) + poll(250) +
      poll(300) + poll(400) +
      "{\"type\":\"marker\",\"at\":500,\"marker\":\"iteration_begin\",\"value\":0}," +
      "{\"type\":\"bye\",\"at\":600,\"exit_code\":0}";
  Result<ExecutionGraph> g = graph_from_capture(program_job(), capture(events), "cap");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  const Role& role = g.value().roles[0];
  const std::map<std::int32_t, std::int64_t> waited_at = first_waited_at(role);
  std::int32_t recv = -1, all_reduce = -1;
  for (std::int32_t i = 0; i < static_cast<std::int32_t>(role.ops.size()); ++i) {
    const OpKind kind = role.ops[static_cast<std::size_t>(i)].kind;
    if (kind == OpKind::kRecv) recv = i;
    if (kind == OpKind::kCollective) all_reduce = i;
  }
  ASSERT_GE(recv, 0);
  ASSERT_GE(all_reduce, 0);
  EXPECT_EQ(waited_at.at(recv), 300);        // the host goes on with the data
  EXPECT_EQ(waited_at.at(all_reduce), 500);  // by the next iteration marker
}

// In a capture a progress thread's polls send nothing, and an op nobody
// waited for on the wire (a future's, DDP's reducer's) must still be done
// by the next iteration marker; an op the rank's thread waited for keeps
// that wait.
TEST(CaptureGraphTest, AnOpNobodyWaitedForIsDoneByTheNextMarker) {
  const std::string events =
      kWorldComm + op(0, 100) + op(1, 200) +
      "{\"type\":\"wait\",\"at\":300,\"wait_id\":0,\"op_id\":1,\"answers_seen\":2}," +
      "{\"type\":\"marker\",\"at\":500,\"marker\":\"iteration_end\",\"value\":0}," +
      "{\"type\":\"bye\",\"at\":600,\"exit_code\":0}";
  Result<ExecutionGraph> g = graph_from_capture(program_job(), capture(events), "cap");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  const Role& role = g.value().roles[0];
  const std::map<std::int32_t, std::int64_t> waited_at = first_waited_at(role);
  std::vector<std::int32_t> all_reduces;
  for (std::int32_t i = 0; i < static_cast<std::int32_t>(role.ops.size()); ++i) {
    if (role.ops[static_cast<std::size_t>(i)].kind == OpKind::kCollective) all_reduces.push_back(i);
  }
  ASSERT_EQ(all_reduces.size(), 2u);
  EXPECT_EQ(waited_at.at(all_reduces[0]), 500);  // by the marker
  EXPECT_EQ(waited_at.at(all_reduces[1]), 300);  // where the rank waited
}

TEST(CaptureGraphTest, SameCaptureSameGraphByteForByte) {
  const std::string c = capture(kTwoSteps);
  Result<ExecutionGraph> a = graph_from_capture(program_job(), c, "cap");
  Result<ExecutionGraph> b = graph_from_capture(program_job(), c, "cap");
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  EXPECT_EQ(graph_to_json(a.value()), graph_to_json(b.value()));
}

TEST(CaptureGraphTest, ASendBecomesAGridPeerSlotOfItsOffset) {
  const std::string events = kWorldComm + op(0, 10, "send", 64, 5) + op(1, 20, "recv", 64, 1) +
                             "{\"type\":\"bye\",\"at\":30,\"exit_code\":0}";
  Result<ExecutionGraph> g = graph_from_capture(program_job(), capture(events), "cap");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  std::vector<std::string> names;
  for (const CommSlot& s : g.value().slots) names.push_back(s.name);
  EXPECT_EQ(names, (std::vector<std::string>{"dp+2", "dp+14"}));
  EXPECT_EQ(g.value().resolver().peer(0, 15), 1);  // wraps
}

struct Refusal {
  std::string events;
  std::string message;
};

TEST(CaptureGraphTest, AnInMemoryCaptureGivesTheProgramItsFileGives) {
  wire::Op op;
  op.op_id = 0;
  op.comm = 1;
  op.stream = 1;
  op.dtype = DType::kFloat32;
  op.bytes = 4096;
  op.at = 1000;
  const RankCapture c{
      3,
      16,
      1,
      "train.py",
      "ddp",
      {{wire::Hello{3, 16, 0, 1, ""}},
       {wire::CommInit{1, 16, 3, 0, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}}},
       {op, 0},
       {wire::Wait{0, 0, 1, 1100}},
       {wire::Marker{wire::MarkerCode::kIterationEnd, 0, 1200}},
       {wire::Compute{1, 1200, 300, "gemm"}},
       {wire::Bye{0, 1500}}}};
  Result<RankProgram> memory = program_from_capture(c, "cap", 16);
  Result<RankProgram> file = program_from_capture(format_capture_json(c), "cap", 16);
  ASSERT_TRUE(memory.is_ok()) << memory.status().message();
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  EXPECT_EQ(memory.value().rank, 3);
  EXPECT_EQ(memory.value().role.ops.size(), file.value().role.ops.size());
  EXPECT_EQ(memory.value().role.streams, file.value().role.streams);
  EXPECT_EQ(memory.value().role.names, file.value().role.names);
  EXPECT_EQ(memory.value().role.deps, file.value().role.deps);
  ASSERT_EQ(memory.value().comms.size(), 1u);
  EXPECT_EQ(memory.value().comms[0].members, file.value().comms[0].members);
}

TEST(CaptureGraphTest, RefusesWhatOneRankCannotDescribe) {
  const Refusal cases[] = {
      {"{\"type\":\"comm_init\",\"comm\":1,\"nranks\":4,\"rank_in_comm\":3,\"members\":[0,1,2,3]}"
       "," +
           op(0, 10) + "{\"type\":\"bye\",\"at\":20}",
       "communicator [0,1,2,3] ('dp{0,1,2,3}') does not move with the ranks"},
      {"{\"type\":\"comm_init\",\"comm\":1,\"nranks\":4,\"rank_in_comm\":0,\"members\":[0,1,2,3]},"
       "{\"type\":\"bye\",\"at\":0}",
       "event 1: communicator 1: 4 ranks with rank 3 at position 0"},
      {"{\"type\":\"comm_init\",\"comm\":1,\"nranks\":2,\"rank_in_comm\":1,\"members\":[3,3]},"
       "{\"type\":\"bye\",\"at\":0}",
       "event 1: communicator 1: member 3 is listed twice"},
      {"{\"type\":\"comm_init\",\"comm\":1,\"nranks\":4,\"rank_in_comm\":3},{\"type\":\"bye\","
       "\"at\":0}",
       "event 1: communicator 1 (4 ranks, this rank 3 of them) does not say its members"},
      {kWorldComm + op(0, 10, "send", 64, 16),
       "event 2: peer 16 outside communicator 1's 16 ranks"},
      {kWorldComm + op(0, 10, "send", 64, 3), "event 2: a transfer to the rank itself"},
      {op(0, 10), "event 1: op on undeclared communicator 1"},
      {kWorldComm + op(0, 10) + op(0, 20), "event 3: op_id 0 entered twice"},
      {kWorldComm + op(0, 10) + op(1, 5), "event 3: at 5 ns is before the previous event's 10 ns"},
      {kWorldComm + op(0, 10, "all_sum"), "event 2: unknown op code 'all_sum'"},
      {"{\"type\":\"memory\",\"at\":1,\"action\":\"free\",\"id\":9}",
       "event 1: free of allocation 9, never made"},
      {"{\"type\":\"dance\"}", "event 1: unknown event type 'dance'"},
      {"{\"type\":\"op\"}", "event 1: no \"at\""},
      {"{\"type\":\"bye\",\"at\":1},{\"type\":\"bye\",\"at\":2}",
       "event 2: a bye after the goodbye"},
      {kWorldComm + op(0, 10), "cap: the capture ends without the rank's goodbye"},
  };
  for (const Refusal& c : cases) {
    Result<ExecutionGraph> g = graph_from_capture(program_job(), capture(c.events), "cap");
    ASSERT_FALSE(g.is_ok()) << c.events;
    EXPECT_THAT(g.status().message(), HasSubstr(c.message));
  }
}

TEST(CaptureGraphTest, RefusesAnotherWorldAMalformedDocumentAndUncapturedStages) {
  Result<ExecutionGraph> world =
      graph_from_capture(program_job(), capture("{\"type\":\"bye\",\"at\":1}", 8), "cap");
  EXPECT_THAT(world.status().message(),
              HasSubstr("the captured rank ran in a world of 8 ranks; the job has 16"));
  EXPECT_THAT(graph_from_capture(program_job(), "{\"format\":", "cap").status().message(),
              HasSubstr("cap:1:11: malformed JSON: the text ends before"));
  EXPECT_THAT(graph_from_capture(program_job(), "{\"format\":\"x\"}", "cap").status().message(),
              HasSubstr("not a prism-capture document"));
  // Tensor parallelism keeps one role; a second stage needs its own capture.
  Result<ExecutionGraph> tp = graph_from_capture(
      program_job("parallelism: {tensor_model_parallel_size: 2}\n"), capture(kTwoSteps), "cap");
  EXPECT_TRUE(tp.is_ok()) << tp.status().message();
  Result<ExecutionGraph> pp = graph_from_capture(
      program_job("parallelism: {pipeline_model_parallel_size: 2}\n"), capture(kTwoSteps), "cap");
  EXPECT_THAT(pp.status().message(),
              HasSubstr("role 'stage1' (8 ranks from rank 8) has no captured rank, and the job "
                        "has no model section to fall back on"));
  EXPECT_THAT(graph_from_capture(program_job(),
                                 capture("{\"type\":\"hello\",\"rank\":3,"
                                         "\"world_size\":16}"),
                                 "cap")
                  .status()
                  .message(),
              HasSubstr("event 1: a second hello"));
}

TEST(CaptureGraphTest, AJobWithoutModelRefusesModelOnlySettings) {
  Result<JobSpec> j = parse_job_yaml(
      "cluster: {preset: dgx-h100, num_gpus: 16}\ntraining: {seq_length: 8}\n", "p.yaml");
  ASSERT_FALSE(j.is_ok());
  EXPECT_THAT(j.status().message(), HasSubstr("a job without a model section describes a program"));
  Result<JobSpec> tp = parse_job_yaml(
      "cluster: {preset: dgx-h100, num_gpus: 16}\nparallelism: {tensor_model_parallel_size: 3}\n",
      "p.yaml");
  ASSERT_FALSE(tp.is_ok());
  EXPECT_THAT(tp.status().message(), HasSubstr("not divisible"));
  EXPECT_FALSE(program_job().has_model);
}

}  // namespace
}  // namespace prism
