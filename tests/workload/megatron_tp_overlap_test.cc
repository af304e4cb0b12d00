// The builder's userbuffers overlaps under a job's tp_comm_overlap_cfg: ring
// exchange or pipeline for the reduce-scatters, the pipeline's splits, the
// SMs a communication kernel holds, the aggregated ring and FP8 buffers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "workload/megatron.h"

#include "megatron_test_util.h"

namespace prism {
namespace {

using testing::build;
using testing::check_random_job;
using testing::cluster;
using testing::parse;
using testing::replay_on_cluster;

// 4 layers x 1 micro-batch per stage (PP 2), TP 4 with SP and the overlap.
JobSpec job_of(const std::string& cfg, const std::string& precision = "bf16") {
  return parse(
      "model: {num_layers: 4, hidden_size: 8192, num_attention_heads: 64, vocab_size: 5000}\n"
      "training: {seq_length: 4096, global_batch_size: 2, precision: " +
      precision + "}\n" + cluster(8) +
      "parallelism: {tensor_model_parallel_size: 4, sequence_parallel: true,\n"
      "  pipeline_model_parallel_size: 2, tp_comm_overlap: true" +
      (cfg.empty() ? "" : ",\n  tp_comm_overlap_cfg: " + cfg) + "}\n");
}

// Ops of the first role named `name` of `kind`.
std::int64_t count(const BuiltJob& b, std::string_view name, OpKind kind) {
  const Role& role = b.graph.roles[0];
  return std::count_if(role.ops.begin(), role.ops.end(), [&](const Op& op) {
    return op.kind == kind && role.names[op.name] == name;
  });
}

// The first op of the first role named `name`.
const Op* first(const BuiltJob& b, std::string_view name) {
  const Role& role = b.graph.roles[0];
  for (const Op& op : role.ops)
    if (role.names[op.name] == name) return &op;
  return nullptr;
}

SimTime iteration(const JobSpec& job) {
  const BuiltJob b = build(job);
  AllocatorMemoryModel mem(DeviceMemoryOptions{});
  return replay_on_cluster(job, b.graph, true, &mem).iteration_time;
}

constexpr int kPasses = 2 * 2;  // layers per stage x micro-batches

// TE's split_overlap_rs_p2p for proj and fc2 forward: t GEMM chunks, t - 1
// paired sends of a chunk's partial sums, one summing kernel; no pipelined
// reduce-scatter left. Every transfer on the tp stream is userbuffers'.
TEST(MegatronTpOverlapCfg, RingExchangeReduceScatter) {
  const JobSpec pipe = job_of(""),
                ring = job_of(
                    "{proj_fprop: {method: ring_exchange}, fc2_fprop: {method: ring_exchange}}");
  check_random_job(ring, "ring-exchange reduce-scatter");
  const BuiltJob bp = build(pipe), br = build(ring);
  EXPECT_EQ(count(bp, "tp_rs_send", OpKind::kSend), 0);
  EXPECT_EQ(count(br, "tp_rs_send", OpKind::kSend), 2 * 3 * kPasses);
  EXPECT_EQ(count(br, "tp_rs_recv", OpKind::kRecv), 2 * 3 * kPasses);
  EXPECT_EQ(count(br, "proj_fwd", OpKind::kCompute), 4 * kPasses);
  EXPECT_EQ(count(br, "tp_rs_reduce", OpKind::kCompute), 2 * kPasses);
  // The pipelined reduce-scatters (4 per GEMM) are gone; the bulk wgrad ones stay.
  EXPECT_EQ(count(bp, "tp_reduce_scatter", OpKind::kCollective) -
                count(br, "tp_reduce_scatter", OpKind::kCollective),
            2 * 4 * kPasses);
  // A chunk: m / t rows of the bf16 output, h = 8192 wide.
  const Op* send = first(br, "tp_rs_send");
  ASSERT_NE(send, nullptr);
  EXPECT_EQ(send->bytes.count, 2 * (4096 / 4) * 8192);
  // Userbuffers carry everything on the tp stream; NCCL what TE does not
  // overlap (the embedding's and output layer's collectives).
  for (const BuiltJob* b : {&bp, &br}) {
    const Role& role = b->graph.roles[0];
    for (const Op& op : role.ops) {
      if (!is_communication(op.kind)) continue;
      const bool on_tp = role.streams[op.stream] == "tp";
      EXPECT_EQ(op.transport, on_tp ? Transport::kUserbuffers : Transport::kNccl)
          << role.names[op.name];
    }
  }
  EXPECT_NE(iteration(ring), iteration(pipe));
}

// A pipeline's num_splits chunks, each reduce-scattered; more SMs held by
// the communication kernel, a slower step.
TEST(MegatronTpOverlapCfg, PipelineSplitsAndSms) {
  const BuiltJob two = build(job_of("{proj_fprop: {num_splits: 2}, fc2_fprop: {num_splits: 8}}"));
  const BuiltJob dflt = build(job_of(""));
  EXPECT_EQ(count(two, "proj_fwd", OpKind::kCompute), 2 * kPasses);
  EXPECT_EQ(count(two, "fc2_fwd", OpKind::kCompute), 8 * kPasses);
  EXPECT_EQ(count(dflt, "proj_fwd", OpKind::kCompute), 4 * kPasses);
  const SimTime few = iteration(job_of("{proj_fprop: {num_sm: 2}, fc2_fprop: {num_sm: 2}}"));
  const SimTime many = iteration(job_of("{proj_fprop: {num_sm: 64}, fc2_fprop: {num_sm: 64}}"));
  EXPECT_LT(few, many);
  const SimTime bulk_few = iteration(job_of("{qkv_wgrad: {num_sm: 2}, fc1_wgrad: {num_sm: 2}}"));
  const SimTime bulk_many = iteration(job_of("{qkv_wgrad: {num_sm: 96}, fc1_wgrad: {num_sm: 96}}"));
  EXPECT_LT(bulk_few, bulk_many);
}

// A ring exchange holds no SMs (copy engines) unless TE sets its margin.
TEST(MegatronTpOverlapCfg, RingMarginSlowsItsGemms) {
  const BuiltJob none = build(job_of("{qkv_fprop: {num_sm: 32}}"));
  const BuiltJob margin = build(job_of("{qkv_fprop: {num_sm: 32, set_sm_margin: true}}"));
  const BuiltJob dflt = build(job_of(""));
  EXPECT_EQ(first(none, "qkv_fwd")->duration, first(dflt, "qkv_fwd")->duration);
  // 132 SMs, 100 left: 1.32x.
  const double ratio = static_cast<double>(first(margin, "qkv_fwd")->duration.ns) /
                       static_cast<double>(first(dflt, "qkv_fwd")->duration.ns);
  EXPECT_NEAR(ratio, 132.0 / 100.0, 1e-3);
}

// aggregate: one pairwise swap, then t / 2 - 1 exchanges of two chunks; the
// GEMM in t / 2 chunks of 2 m / t rows.
TEST(MegatronTpOverlapCfg, AggregatedRing) {
  const JobSpec agg = job_of("{fc2_dgrad: {aggregate: true}}");
  check_random_job(agg, "aggregated ring");
  const BuiltJob a = build(agg), d = build(job_of(""));
  EXPECT_EQ(count(d, "fc2_dgrad", OpKind::kCompute), 4 * kPasses);
  EXPECT_EQ(count(a, "fc2_dgrad", OpKind::kCompute), 2 * kPasses);
  // Four all-gathers of 3 exchanges each, one of them now 1 + 1.
  EXPECT_EQ(count(d, "tp_ring_send", OpKind::kSend), 4 * 3 * kPasses);
  EXPECT_EQ(count(a, "tp_ring_send", OpKind::kSend), (3 * 3 + 2) * kPasses);
}

// FP8: the gathered inputs travel in FP8 (TE forces fp8_buf there); a
// pipelined reduce-scatter only when the job asks for it.
TEST(MegatronTpOverlapCfg, Fp8Buffers) {
  const BuiltJob bf16 = build(job_of("")), fp8 = build(job_of("", "fp8"));
  const std::int64_t shard = (4096 / 4) * 8192;  // rows x hidden
  EXPECT_EQ(first(bf16, "tp_ring_send")->bytes.count, 2 * shard);
  EXPECT_EQ(first(fp8, "tp_ring_send")->bytes.count, shard);
  // The first reduce-scatter on the tp stream: proj_fprop's first chunk.
  auto rs_bytes = [](const BuiltJob& b) {
    const Role& role = b.graph.roles[0];
    for (const Op& op : role.ops)
      if (op.kind == OpKind::kCollective && role.names[op.name] == "tp_reduce_scatter" &&
          role.streams[op.stream] == "tp")
        return op.bytes.count;
    return std::int64_t{-1};
  };
  const std::int64_t chunk = 4096 / 4 * 8192;  // a quarter of the rows, h wide
  EXPECT_EQ(rs_bytes(fp8), 2 * chunk);
  const BuiltJob fp8_rs =
      build(job_of("{proj_fprop: {fp8_buf: true}, fc2_fprop: {fp8_buf: true}}", "fp8"));
  EXPECT_EQ(rs_bytes(fp8_rs), chunk);
  EXPECT_EQ(rs_bytes(build(job_of("{proj_fprop: {fp8_buf: true}, fc2_fprop: {fp8_buf: true}}"))),
            2 * chunk);  // bf16 GEMMs: no FP8 buffer
}

// A configuration without the overlap, or one TE cannot run, is refused
// with the field and the GEMM.
TEST(MegatronTpOverlapCfg, JobRejections) {
  auto error = [](const std::string& yaml) {
    Result<JobSpec> j = parse_job_yaml(yaml, "job.yaml");
    EXPECT_FALSE(j.is_ok()) << yaml;
    return j.is_ok() ? std::string() : std::string(j.status().message());
  };
  const std::string base =
      "model: {num_layers: 4, hidden_size: 1024, num_attention_heads: 8, vocab_size: 5000}\n" +
      cluster(8);
  EXPECT_NE(error(base + "parallelism: {tensor_model_parallel_size: 4, sequence_parallel: true,\n"
                         "  tp_comm_overlap_cfg: {proj_fprop: {num_sm: 8}}}\n")
                .find("parallelism.tp_comm_overlap_cfg: configures parallelism.tp_comm_overlap, "
                      "which is off"),
            std::string::npos);
  EXPECT_NE(
      error(base + "parallelism: {tensor_model_parallel_size: 4, sequence_parallel: true,\n"
                   "  tp_comm_overlap: true, tp-comm-overlap-cfg: {fc2_fprop: {num_sm: 200}}}\n")
          .find("parallelism.tp_comm_overlap_cfg: fc2_fprop.num_sm: must leave the GEMM "
                "some of the GPU's 132 SMs (got 200)"),
      std::string::npos);
  EXPECT_NE(error(base + "parallelism: {tensor_model_parallel_size: 4, sequence_parallel: true,\n"
                         "  tp_comm_overlap: true, tp_comm_overlap_cfg: {fc2: {num_sm: 2}}}\n")
                .find("job.yaml:4:"),
            std::string::npos);
}

}  // namespace
}  // namespace prism
