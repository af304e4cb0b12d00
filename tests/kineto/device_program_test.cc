// GPU traces: streams, NCCL kernels, stream waits, markers and memory, from
// the hand-written fixture tests/data/kineto/gpu_rank{0,1}.json (PyTorch 2.x
// format with CUDA and NCCL; no GPU machine recorded it) and small traces
// written in code.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kineto/kineto.h"
#include "kineto_test_util.h"

namespace prism::kineto_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(KinetoDeviceTest, HandWrittenGpuTraceRank0) {
  Result<KinetoTrace> t = load_kineto_trace(fixture("gpu_rank0.json"));
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_EQ(t->world_size, 2);
  EXPECT_EQ(t->program.rank, 0);
  EXPECT_EQ(t->program.role.streams, (std::vector<std::string>{"stream7", "stream20", "stream24"}));
  // Issue order: by each op's launch time on the host. The all-reduce waits
  // on stream 7's record, which follows the first GEMM; memory and markers
  // sit on stream 7, which has the most compute.
  EXPECT_THAT(describe(t->program),
              ElementsAre("iteration stream7 0",                            //
                          "compute stream7 ampere_sgemm_128x64_nn 100400",  //
                          "event_record stream7 event0",                    //
                          "event_wait stream20 event0",                     //
                          "all_reduce stream20 TENSOR_MODEL_PARALLEL_GROUP [0,1] 4096 fp32 root=0",
                          "alloc stream7 4096",  //
                          "all_gather stream20 default_pg [0,1] 2048 bf16 root=0",
                          "send stream24 peer=1 1024 fp32",  //
                          "compute stream7 Memcpy HtoD (Pageable -> Device) 10000",
                          "free stream7 op5",                              //
                          "iteration stream7 1",                           //
                          "compute stream7 ampere_sgemm_128x64_nn 99600",  //
                          "broadcast stream20 TENSOR_MODEL_PARALLEL_GROUP [0,1] 256 fp32 root=0",
                          "iteration_end stream7 0"));
  const KinetoSummary& s = t->summary;
  EXPECT_TRUE(s.gpu);
  EXPECT_EQ(s.compute_ops, 3);
  EXPECT_EQ(s.collectives, 3);
  EXPECT_EQ(s.sends, 1);
  EXPECT_EQ(s.recvs, 0);
  EXPECT_EQ(s.stream_waits, 1);
  EXPECT_EQ(s.iterations, 2);
  EXPECT_EQ(s.allocs, 1);
  EXPECT_EQ(s.frees, 1);
  EXPECT_EQ(s.frees_without_alloc, 1);  // a block from before the trace
  EXPECT_EQ(s.waits_without_record, 0);
}

TEST(KinetoDeviceTest, RecvPeerComesFromTheHostOpsRank) {
  // Rank 1's kernel has no "Src Rank": the peer is "Rank" of the launching
  // record_param_comms (a group rank) mapped through the group.
  Result<KinetoTrace> t = load_kineto_trace(fixture("gpu_rank1.json"));
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_EQ(t->program.rank, 1);
  EXPECT_EQ(describe(t->program)[7], "recv stream24 peer=0 1024 fp32");
  EXPECT_EQ(t->summary.recvs, 1);
}

TEST(KinetoDeviceTest, MemoryCanBeLeftOut) {
  KinetoTraceOptions o;
  o.memory = false;
  Result<KinetoTrace> t = load_kineto_trace(fixture("gpu_rank0.json"), o);
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_EQ(t->summary.allocs, 0);
  EXPECT_EQ(t->program.role.ops.size(), 12u);
}

TEST(KinetoDeviceTest, OptionsOverrideRankAndWorld) {
  KinetoTraceOptions o;
  o.world_size = 4;
  Result<KinetoTrace> t = load_kineto_trace(fixture("gpu_rank0.json"), o);
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_EQ(t->program.rank, 0);
  EXPECT_EQ(t->world_size, 4);
  o.rank = 1;  // rank 0's trace as rank 1: its send to rank 1 goes to itself
  t = load_kineto_trace(fixture("gpu_rank0.json"), o);
  ASSERT_FALSE(t.is_ok());
  EXPECT_THAT(t.status().message(),
              HasSubstr("gpu_rank0.json: event 22 ('ncclDevKernel_SendRecv'): a send with rank 1 "
                        "itself"));
}

TEST(KinetoDeviceTest, TraceWithoutDistributedInfoIsRankZeroOfOne) {
  TraceJson t;
  t.kernel("a", 10, 5, 7);
  Result<KinetoTrace> r = parse_kineto_trace(t.text(), "t.json");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->program.rank, 0);
  EXPECT_EQ(r->world_size, 1);
  KinetoTraceOptions o;
  o.rank = 3;
  r = parse_kineto_trace(t.text(), "t.json", o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(), "t.json: rank 3 is outside the world of 1 ranks");
}

TEST(KinetoDeviceTest, StreamOrderSurvivesMissingLaunches) {
  // Without runtime events a kernel's issue time is its start; a stream's
  // order is kept even when a later kernel's launch would sort earlier.
  TraceJson t;
  t.events().push_back({{"ph", "X"},
                        {"cat", "cuda_runtime"},
                        {"name", "cudaLaunchKernel"},
                        {"pid", 1},
                        {"tid", 1},
                        {"ts", 1.0},
                        {"dur", 1.0},
                        {"args", {{"correlation", 9}}}});
  t.kernel("a", 10, 5, 7);
  t.kernel("b", 20, 5, 7, {{"correlation", 9}});  // launched at 1 us, runs after "a"
  t.kernel("c", 12, 3, 8);
  Result<KinetoTrace> r = parse_kineto_trace(t.text(), "t.json");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_THAT(describe(r->program), ElementsAre("compute stream7 a 5000", "compute stream7 b 5000",
                                                "compute stream8 c 3000"));
}

TEST(KinetoDeviceTest, WaitWithoutItsRecordIsCountedNotImported) {
  TraceJson t;
  t.kernel("a", 10, 5, 7);
  t.kernel("b", 20, 5, 8);
  t.add("cuda_sync", "Stream Wait Event", 15, 0,
        {{"stream", 8},
         {"device", 0},
         {"wait_on_stream", 7},
         {"correlation", 5},
         {"wait_on_cuda_event_record_corr_id", 4}},
        0, 8);
  Result<KinetoTrace> r = parse_kineto_trace(t.text(), "t.json");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->summary.waits_without_record, 1);
  EXPECT_EQ(r->summary.stream_waits, 0);
}

TEST(KinetoDeviceTest, RejectsNcclKernelWithoutMetadata) {
  TraceJson t;
  t.kernel("sgemm", 1, 1, 7);
  t.kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 5, 1, 20);
  Result<KinetoTrace> r = parse_kineto_trace(t.text(), "t.json");
  ASSERT_FALSE(r.is_ok());
  EXPECT_THAT(r.status().message(),
              HasSubstr("t.json: event 1 ('ncclDevKernel_AllReduce_Sum_f32_RING_LL'): an NCCL "
                        "kernel without collective metadata"));
}

TEST(KinetoDeviceTest, RejectsKernelsOnTwoDevices) {
  TraceJson t;
  t.kernel("a", 1, 1, 7, {}, 0);
  t.kernel("b", 2, 1, 7, {}, 1);
  Result<KinetoTrace> r = parse_kineto_trace(t.text(), "t.json");
  ASSERT_FALSE(r.is_ok());
  EXPECT_THAT(r.status().message(),
              HasSubstr("t.json: event 1 ('b'): runs on device 1, but earlier GPU activity on "
                        "device 0"));
}

TEST(KinetoDeviceTest, RejectsBadCollectiveArgsNamingTheKernel) {
  TraceJson t;
  t.dist(0, 2);
  t.kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 5, 1, 20,
           comm_args("allreduce", 16, "Float", "[0, 0]"));
  Result<KinetoTrace> r = parse_kineto_trace(t.text(), "t.json");
  ASSERT_FALSE(r.is_ok());
  EXPECT_THAT(r.status().message(),
              HasSubstr("t.json: event 0 ('ncclDevKernel_AllReduce_Sum_f32_RING_LL'): process "
                        "group lists rank 0 twice"));
}

TEST(KinetoDeviceTest, ACollectiveBeyondAnUnknownWorldAsksForItsSize) {
  TraceJson t;  // no distributedInfo: rank 0 of 1
  Json a = comm_args("allreduce", 16, "Float", "[0, 1]");
  a["Group size"] = 2;
  t.kernel("ncclDevKernel_AllReduce", 5, 1, 20, a);
  Result<KinetoTrace> r = parse_kineto_trace(t.text(), "t.json");
  ASSERT_FALSE(r.is_ok());
  EXPECT_THAT(r.status().message(),
              HasSubstr("process group rank 1 is outside the world of 1 ranks (give the world "
                        "size if distributedInfo is missing)"));
  KinetoTraceOptions o;
  o.world_size = 2;
  EXPECT_TRUE(parse_kineto_trace(t.text(), "t.json", o).is_ok());
}

TEST(KinetoDeviceTest, RejectsOneKeyWithTwoGroups) {
  TraceJson t;
  t.dist(0, 4);
  t.kernel("ncclDevKernel_AllReduce", 5, 1, 20,
           comm_args("allreduce", 16, "Float", "[0, 1]", "dp"));
  t.kernel("ncclDevKernel_AllReduce", 7, 1, 20,
           comm_args("allreduce", 16, "Float", "[0, 2]", "dp"));
  Result<KinetoTrace> r = parse_kineto_trace(t.text(), "t.json");
  ASSERT_FALSE(r.is_ok());
  EXPECT_THAT(r.status().message(),
              HasSubstr("t.json: event 1 ('ncclDevKernel_AllReduce'): process group 'dp' has "
                        "ranks 0,2 here but 0,1 in an earlier call"));
}

TEST(KinetoDeviceTest, RejectsMoreStreamsThanAStreamIndexHolds) {
  TraceJson t;
  for (int stream = 0; stream <= 65535; ++stream) t.add("kernel", "k", stream, 1, {}, 0, stream);
  Result<KinetoTrace> r = parse_kineto_trace(t.text(), "t.json");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(), "t.json: 65536 CUDA streams; at most 65535 are supported");
}

}  // namespace
}  // namespace prism::kineto_test
