// `prism export chakra`, `prism import chakra` and `prism import kineto` end
// to end: a built job's
// graph goes out as Chakra traces and comes back with the same ranks, roles
// and ops, and replays to the same iteration time; bad input is one error
// line naming it. (run_prism writes the temporary directory as "{tmp}".)
#include <cstdlib>
#include <filesystem>

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
  // 43858 ops: Llama trains without dropout, so no mask allocs and frees;
  // its rotary embeddings add a RoPE kernel per layer forward and backward.
  EXPECT_THAT(r.out, HasSubstr("/back.json: 64 ranks, 1 roles, 43858 ops imported from"));
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
