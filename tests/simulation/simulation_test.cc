// The library entry point of simulate, replay and emulate: a job prepared
// and simulated (its summary and MFU), a graph replayed, the options' meaning.
#include "simulation/simulation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "graph/graph_json.h"
#include "net/cluster_spec.h"
#include "simulation/memory_settings.h"

namespace prism {
namespace {

using ::testing::HasSubstr;

const std::string kJob = PRISM_SOURCE_DIR "/tests/cli/data/job_small.yaml";

PreparedJob small_job() {
  JobInput input;
  input.job_path = kJob;
  input.no_kernel_db = true;
  Result<PreparedJob> p = prepare_job(input);
  EXPECT_TRUE(p.is_ok()) << p.status().message();
  return std::move(p).value();
}

TEST(SimulationTest, AJobsSummaryCarriesItsThroughputAndMfu) {
  const PreparedJob p = small_job();
  SimulationOptions o;
  Result<DeviceMemoryOptions> device = MemorySettings{}.device(p.gpu.name);
  ASSERT_TRUE(device.is_ok());
  o.models.device = device.value();
  o.trace_ranks = {3};
  Result<JobSimulation> sim = simulate_job(p, o);
  ASSERT_TRUE(sim.is_ok()) << sim.status().message();
  const SimulateSummary& s = sim.value().summary;
  EXPECT_EQ(s.job, "gpt-small");
  EXPECT_EQ(s.num_gpus, 16);
  const double t = s.iteration_time.seconds();
  ASSERT_GT(t, 0);
  EXPECT_DOUBLE_EQ(s.tokens_per_s_per_gpu, 16.0 * 2048 / t / 16);
  EXPECT_DOUBLE_EQ(s.mfu, s.model_tflops_per_gpu * 1e12 / p.gpu.bf16_flops);
  EXPECT_GT(s.mfu, 0);
  ASSERT_EQ(s.roles.size(), 2u);  // two pipeline stages, each with its breakdown
  EXPECT_EQ(s.roles[0].representative, 0);
  // The trace holds the ranks asked for, not the representatives traced
  // for the breakdown.
  ASSERT_FALSE(sim.value().replay.trace.empty());
  for (const TraceRecord& r : sim.value().replay.trace) EXPECT_EQ(r.rank, 3);
}

// The cluster's own chip-to-chip clock spread (gpu.clock_cov) replaces the
// GPU preset's: 0 runs every chip at the database's pace, a larger one
// slows the tensor kernels further (compute/slowest_gpu.h).
TEST(SimulationTest, TheClustersClockSpreadReplacesThePresets) {
  auto run = [](const std::string& cov) {
    JobInput input;
    input.job_path = kJob;
    input.no_kernel_db = true;
    if (!cov.empty()) input.sets = {"cluster.gpu.clock_cov=" + cov};
    Result<PreparedJob> p = prepare_job(input);
    EXPECT_TRUE(p.is_ok()) << p.status().message();
    SimulationOptions o;
    o.models.device = MemorySettings{}.device(p.value().gpu.name).value();
    Result<JobSimulation> sim = simulate_job(p.value(), o);
    EXPECT_TRUE(sim.is_ok()) << sim.status().message();
    return std::make_pair(p.value().gpu.sustained_clock_cov, sim.value().summary);
  };
  const auto [preset_cov, preset] = run("");
  const auto [zero_cov, zero] = run("0");
  const auto [wide_cov, wide] = run("0.05");
  EXPECT_DOUBLE_EQ(preset_cov, 0.016);
  EXPECT_DOUBLE_EQ(zero_cov, 0);
  EXPECT_DOUBLE_EQ(wide_cov, 0.05);
  EXPECT_DOUBLE_EQ(zero.slowest_gpu_slowdown, 1);
  EXPECT_DOUBLE_EQ(wide.clock_cov, 0.05);
  EXPECT_GT(wide.slowest_gpu_slowdown, preset.slowest_gpu_slowdown);
  EXPECT_LT(zero.iteration_time, preset.iteration_time);
  EXPECT_LT(preset.iteration_time, wide.iteration_time);
}

TEST(SimulationTest, TheSameGraphReplaysToTheSameTimeByEitherEntryPoint) {
  const PreparedJob p = small_job();
  SimulationOptions o;
  o.models.device = MemorySettings{}.device(p.gpu.name).value();
  Result<JobSimulation> job = simulate_job(p, o);
  Result<ReplayResult> graph = simulate_graph(p.built.graph, p.job.cluster, o);
  ASSERT_TRUE(job.is_ok() && graph.is_ok());
  EXPECT_EQ(job.value().replay.iteration_time, graph.value().iteration_time);
  o.fold = false;
  Result<ReplayResult> unfolded = simulate_graph(p.built.graph, p.job.cluster, o);
  ASSERT_TRUE(unfolded.is_ok());
  EXPECT_FALSE(unfolded.value().folded);
  EXPECT_EQ(unfolded.value().iteration_time, graph.value().iteration_time);
}

// CUDA graphs change no simulated time or memory (docs/job-spec.md,
// `training`): the same iteration and per-role peaks with either
// implementation; with expandable segments they are refused, as
// Megatron-Core's CudaGraphManager refuses them.
TEST(SimulationTest, CudaGraphsChangeNeitherTimeNorMemory) {
  SimulationOptions o;
  o.models.device = MemorySettings{}.device("H100-SXM5-80GB").value();
  auto run = [&](std::vector<std::string> sets) {
    JobInput input;
    input.job_path = kJob;
    input.no_kernel_db = true;
    input.sets = std::move(sets);
    Result<PreparedJob> p = prepare_job(input);
    EXPECT_TRUE(p.is_ok()) << p.status().message();
    Result<JobSimulation> sim = simulate_job(p.value(), o);
    EXPECT_TRUE(sim.is_ok()) << sim.status().message();
    return std::move(sim).value().summary;
  };
  const SimulateSummary eager = run({});
  for (const char* graphs :
       {"training.enable_cuda_graph=true", "training.external_cuda_graph=true"}) {
    const SimulateSummary graphed = run({graphs, "software.nemo=24.09"});
    EXPECT_EQ(graphed.iteration_time, eager.iteration_time) << graphs;
    ASSERT_EQ(graphed.roles.size(), eager.roles.size());
    for (std::size_t i = 0; i < eager.roles.size(); ++i) {
      EXPECT_EQ(graphed.roles[i].peak_device, eager.roles[i].peak_device)
          << graphs << " role " << i;
      EXPECT_EQ(graphed.roles[i].peak_allocated, eager.roles[i].peak_allocated) << graphs;
    }
  }
  JobInput input;
  input.job_path = kJob;
  input.no_kernel_db = true;
  input.sets = {"training.external_cuda_graph=true"};
  const PreparedJob p = prepare_job(input).value();
  o.models.device.allocator.expandable_segments = true;
  Result<JobSimulation> refused = simulate_job(p, o);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().message(),
            "--alloc-conf: expandable_segments:True cannot run training.external_cuda_graph "
            "(Megatron-Core's CudaGraphManager: 'expandable_segments:True may not be safe when "
            "using CUDA Graphs, and may result in a crash due to illegal memory access or other "
            "undefined behaviour.')");
}

TEST(SimulationTest, AProgramsJobIsRefusedUnlessAsked) {
  JobInput input;
  input.job_path = PRISM_SOURCE_DIR "/examples/jobs/ddp-gpt-64.yaml";
  Result<PreparedJob> p = prepare_job(input);
  ASSERT_FALSE(p.is_ok());
  EXPECT_THAT(p.status().message(), HasSubstr("has no model section"));
  p = prepare_job(input, /*program_ok=*/true);
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  EXPECT_FALSE(p.value().job.has_model);
}

TEST(SimulationTest, MemorySettingsNameTheirOption) {
  MemorySettings m;
  m.memory_fraction = 1.5;
  Result<DeviceMemoryOptions> d = m.device(small_job().gpu.name);
  ASSERT_FALSE(d.is_ok());
  EXPECT_THAT(d.status().message(), HasSubstr("--memory-fraction: 1.5 is outside (0, 1]"));
  m = MemorySettings{};
  m.alloc_conf = "nonsense";
  EXPECT_THAT(m.device(small_job().gpu.name).status().message(), HasSubstr("--alloc-conf"));
}

}  // namespace
}  // namespace prism
