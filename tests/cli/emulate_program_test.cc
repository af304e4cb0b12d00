// The README's demo, asserted: an unmodified PyTorch DDP program
// (examples/ddp_gpt/train.py) as one real rank of a 64-rank emulated job
// whose job spec has no model: `prism emulate` captures the program, builds
// the graph of all 64 ranks from it, and emulates. The real rank must issue
// exactly the graph's collectives and bytes, and the emulated iteration time
// must be reported. Skipped where torch or PrismLLM's backend is missing.
#include <cstdlib>
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "run_prism.h"

namespace prism {
namespace {

using ::testing::HasSubstr;
using testing::run_prism;
using testing::RunResult;
using testing::slurp;
namespace fs = std::filesystem;

const std::string kPython = "/usr/bin/python3";
const std::string kBackend = PRISM_BINARY_DIR "/python/prism_torch";

class EmulateProgramTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system((kPython + " -c 'import torch' >/dev/null 2>&1").c_str()) != 0)
      GTEST_SKIP() << kPython << " cannot import torch (scripts/setup.sh installs python3-torch)";
    if (!fs::exists(kBackend))
      GTEST_SKIP() << "this build has no PrismLLM c10d backend (" << kBackend << ")";
    std::string templ = (fs::temp_directory_path() / "prism_program_test.XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    tmp_ = templ;
  }
  void TearDown() override {
    std::error_code ec;
    if (!tmp_.empty()) fs::remove_all(tmp_, ec);
  }
  std::string tmp_;
};

TEST_F(EmulateProgramTest, DdpGptRunsAsOneRealRankOfSixtyFour) {
  const RunResult r =
      run_prism({"emulate", "examples/jobs/ddp-gpt-64.yaml", "--real-ranks", "0", "--master-port",
                 "0", "--report", "{tmp}/r.json", "--save-graph", "{tmp}/g.json", "--capture",
                 "{tmp}/cap", "--", kPython, "examples/ddp_gpt/train.py", "--steps", "3"},
                tmp_);
  ASSERT_EQ(r.exit_status, 0) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("prism emulate: capturing rank 0 of 64"));
  EXPECT_THAT(r.out, HasSubstr("[rank0]: gpt: "));
  EXPECT_THAT(r.out, HasSubstr("job:                ddp-gpt-64 (64 ranks), 1 real"));
  EXPECT_THAT(r.out, HasSubstr("iteration time:     "));

  const auto report = nlohmann::json::parse(slurp(tmp_ + "/r.json"));
  ASSERT_EQ(report["real_ranks"].size(), 1u);
  const auto& rank = report["real_ranks"][0];
  EXPECT_GT(report["iteration_time_s"].get<double>(), 0);
  EXPECT_GT(rank["iteration_time_s"].get<double>(), 0);
  EXPECT_EQ(rank["iterations"], 2);  // 3 optimizer steps: 2 complete iterations
  EXPECT_EQ(rank["exit_code"], 0);
  // What the real rank issued is the graph's, op for op and byte for byte.
  EXPECT_GT(rank["ops"].get<int>(), 3);  // DDP's start-up, then its buckets each step
  EXPECT_EQ(rank["ops"], rank["graph_ops"]);
  EXPECT_EQ(rank["bytes"], rank["graph_bytes"]);

  // The graph: one role for all 64 ranks, its collectives those counted.
  const auto graph = nlohmann::json::parse(slurp(tmp_ + "/g.json"));
  int collectives = 0;
  std::int64_t bytes = 0;
  ASSERT_EQ(graph["roles"].size(), 1u);
  for (const auto& op : graph["roles"][0]["ops"]) {
    if (op["kind"] != "collective") continue;
    ++collectives;
    bytes += op["bytes"].get<std::int64_t>();
  }
  EXPECT_EQ(rank["ops"].get<int>(), collectives);
  EXPECT_EQ(rank["bytes"].get<std::int64_t>(), bytes);
  EXPECT_TRUE(fs::exists(tmp_ + "/cap/program-rank0.json"));
  EXPECT_TRUE(fs::exists(tmp_ + "/cap/rank0.json"));
}

TEST_F(EmulateProgramTest, AProgramThatIsNotDataParallelIsRefusedBeforeItRuns) {
  const RunResult r = run_prism({"emulate", "examples/jobs/ddp-gpt-64.yaml", "--set",
                                 "parallelism.tensor_model_parallel_size=2", "--real-ranks", "0",
                                 "--master-port", "0", "--", kPython, "examples/ddp_gpt/train.py"},
                                tmp_);
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_THAT(r.err, HasSubstr("one captured rank describes only a purely data-parallel program"));
}

// Needs no torch: a program's job has no graph for the other commands.
TEST(ProgramJobTest, SimulateRefusesAJobWithoutModelAndSaysWhatToRun) {
  std::string templ = (fs::temp_directory_path() / "prism_program_job.XXXXXX").string();
  ASSERT_NE(::mkdtemp(templ.data()), nullptr);
  const RunResult r = run_prism({"simulate", "examples/jobs/ddp-gpt-64.yaml"}, templ);
  fs::remove_all(templ);
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_THAT(r.err, HasSubstr("job 'ddp-gpt-64' has no model section: it describes a program, "
                               "whose graph comes from running it (prism emulate"));
}

}  // namespace
}  // namespace prism
