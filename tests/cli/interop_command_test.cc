// `prism export chakra`, `prism import chakra`, `prism import kineto` and
// `prism calibrate kineto` end to end: a built job's
// graph goes out as Chakra traces and comes back with the same ranks, roles
// and ops, and replays to the same iteration time; bad input is one error
// line naming it. (run_prism writes the temporary directory as "{tmp}".)
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "run_prism.h"

namespace prism {
namespace {

using ::testing::HasSubstr;
using testing::run_prism;
using testing::RunResult;
namespace fs = std::filesystem;

class InteropCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "prism_interop_test.XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    tmp_ = templ;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }
  RunResult prism(const std::vector<std::string>& args) { return run_prism(args, tmp_); }
  std::string tmp_;
};

// The "iteration time:" line of a replay's summary.
std::string iteration_line(const std::string& summary) {
  const auto at = summary.find("iteration time:");
  return at == std::string::npos ? "" : summary.substr(at, summary.find('\n', at) - at);
}

TEST_F(InteropCommandTest, ChakraRoundTripKeepsTheGraphAndItsIterationTime) {
  RunResult r = prism({"build", "examples/jobs/llama3-8b-h100-64.yaml", "-o", "{tmp}/g.json"});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  r = prism({"export", "chakra", "{tmp}/g.json", "-o", "{tmp}/et"});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  EXPECT_EQ(r.out,
            "{tmp}/et: 64 ranks written as workload.<rank>.et and "
            "workload.comm_groups.json\n");
  EXPECT_TRUE(fs::exists(tmp_ + "/et/workload.63.et"));
  EXPECT_TRUE(fs::exists(tmp_ + "/et/workload.comm_groups.json"));
  r = prism({"import", "chakra", "{tmp}/et", "-o", "{tmp}/back.json"});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  // 43874 ops: Llama trains without dropout, so no mask allocs and frees;
  // its rotary embeddings add a RoPE kernel per layer forward and backward;
  // the unfused cross entropy casts its gradient in a kernel of its own.
  EXPECT_THAT(r.out, HasSubstr("/back.json: 64 ranks, 1 roles, 43874 ops imported from"));
  const RunResult before = prism({"replay", "{tmp}/g.json"});
  const RunResult after = prism({"replay", "{tmp}/back.json"});
  ASSERT_EQ(before.exit_status, 0) << before.err;
  ASSERT_EQ(after.exit_status, 0) << after.err;
  EXPECT_FALSE(iteration_line(before.out).empty());
  EXPECT_EQ(iteration_line(after.out), iteration_line(before.out));
}

// The two hand-written GPU traces of tests/data/kineto (docs/kineto.md):
// one graph of 2 ranks that replays to completion; a rank without its
// trace is an error.
TEST_F(InteropCommandTest, KinetoTracesBecomeAGraphThatReplays) {
  RunResult r = prism({"import", "kineto", "tests/data/kineto/gpu_rank0.json",
                       "tests/data/kineto/gpu_rank1.json", "-o", "{tmp}/k.json"});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  EXPECT_EQ(r.out, "{tmp}/k.json: 2 ranks, 2 roles, 28 ops imported from 2 Kineto traces\n");
  r = prism({"replay", "{tmp}/k.json"});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("outcome:         completed"));
  r = prism({"import", "kineto", "tests/data/kineto/gpu_rank0.json", "-o", "{tmp}/one.json"});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_EQ(r.err,
            "error: import_kineto: no trace for rank 1 of the world of 2 (1 traces given)\n");
  EXPECT_FALSE(fs::exists(tmp_ + "/one.json"));
}

// A profiled step whose one GEMM is job_small's gemm bf16 m=1024 n=1536
// k=2048 (20 us in kernels_small.csv), measured at 5 ms in the step: the
// calibration writes it, and simulate with that database after the other
// takes the in-situ time (later files win), naming both files.
constexpr const char* kOneGemmStep = R"({"traceEvents": [
 {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 20,
  "args": {"External id": 7, "Input Dims": [[1024, 2048], [2048, 1536]],
           "Input type": ["c10::BFloat16", "c10::BFloat16"], "Concrete Inputs": ["", ""]}},
 {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 12,
  "dur": 2, "args": {"External id": 7, "cbid": 211, "correlation": 55}},
 {"ph": "X", "cat": "kernel", "name": "sm90_gemm", "pid": 0, "tid": 7, "ts": 40, "dur": 5000,
  "args": {"External id": 7, "device": 0, "stream": 7, "correlation": 55}}],
 "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85029158912}],
 "record_shapes": 1})";

TEST_F(InteropCommandTest, CalibratedKernelTimesOverrideTheDatabaseInSimulate) {
  std::ofstream(tmp_ + "/step.json") << kOneGemmStep;
  RunResult r = prism(
      {"calibrate", "kineto", "{tmp}/step.json", "-o", "{tmp}/insitu.csv", "--date", "2026-11-27"});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  EXPECT_EQ(r.out,
            "{tmp}/insitu.csv: 1 kernel signatures for H100-SXM5-80GB (the trace's device "
            "'NVIDIA H100 80GB HBM3') from 1 trace\n"
            "  matched: 1 ops, 1 of 1 GPU kernels, 5.000 of 5.000 ms\n");
  std::ifstream csv(tmp_ + "/insitu.csv");
  const std::string rows((std::istreambuf_iterator<char>(csv)), std::istreambuf_iterator<char>());
  EXPECT_EQ(rows,
            "gpu,signature,us,source,count\n"
            "H100-SXM5-80GB,gemm bf16 m=1024 n=1536 k=2048,5000.000,kineto step.json "
            "2026-11-27,1\n");

  const std::string job = "tests/cli/data/job_small.yaml";
  const std::string shipped = "tests/cli/data/kernels_small.csv";
  const RunResult before = prism({"simulate", job, "--kernel-db", shipped});
  r = prism({"simulate", job, "--kernel-db", shipped, "--kernel-db", "{tmp}/insitu.csv",
             "--kernels", "{tmp}/k.csv"});
  ASSERT_EQ(before.exit_status, 0) << before.err;
  ASSERT_EQ(r.exit_status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("2 measured (" + shipped + ", {tmp}/insitu.csv)"));
  EXPECT_THAT(iteration_line(before.out), HasSubstr("0.014 s"));
  EXPECT_THAT(iteration_line(r.out), HasSubstr("0.064 s"));  // 16 uses x (5000 - 20) us
  std::ifstream kernels(tmp_ + "/k.csv");
  const std::string list((std::istreambuf_iterator<char>(kernels)),
                         std::istreambuf_iterator<char>());
  // The trace's GEMM (a plain signature) is the job's qkv weight gradient,
  // which accumulates into main_grad: its plain time scaled by the curves'
  // ratio (1 here: compute-bound).
  EXPECT_THAT(list, HasSubstr("H100-SXM5-80GB,gemm bf16 m=1024 n=1536 k=2048 acc=fp32,5000.000,"
                              "measured (plain) x model,16\n"));
}

TEST_F(InteropCommandTest, CalibrateBadInputIsOneErrorLine) {
  std::ofstream(tmp_ + "/graph.json") << R"({"nodes": []})";
  RunResult r = prism({"calibrate", "kineto", "{tmp}/graph.json", "-o", "{tmp}/k.csv"});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_EQ(r.err, "error: {tmp}/graph.json: no \"traceEvents\" (not a PyTorch profiler trace)\n");
  EXPECT_FALSE(fs::exists(tmp_ + "/k.csv"));
  r = prism({"calibrate", "kineto", "tests/data/kineto/cpu113_rank0.json", "-o", "{tmp}/k.csv"});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_THAT(r.err, HasSubstr("no GPU kernels"));
  r = prism({"calibrate", "kineto", "{tmp}/graph.json", "-o", "{tmp}/graph.json"});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_EQ(r.err, "error: --output would overwrite the input trace {tmp}/graph.json\n");
}

TEST_F(InteropCommandTest, BadInputIsOneErrorLine) {
  RunResult r = prism({"import", "chakra", "{tmp}/missing", "-o", "{tmp}/g.json"});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_EQ(r.err,
            "error: {tmp}/missing: no Chakra traces (<prefix>.<rank>.et) of this "
            "prefix\n");
  EXPECT_FALSE(fs::exists(tmp_ + "/g.json"));
  r = prism({"export", "chakra", "{tmp}/none.json", "-o", "{tmp}/et"});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_THAT(r.err, HasSubstr("none.json"));
  r = prism({"import", "chakra", "{tmp}/et", "-o", "{tmp}/g.json", "--gpus-per-node", "0"});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_EQ(r.err, "error: --gpus-per-node 0 is below 1\n");
  r = prism({"import"});
  EXPECT_EQ(r.exit_status, 1);
}

}  // namespace
}  // namespace prism
