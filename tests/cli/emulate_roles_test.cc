// The capture checks its roles (issue 22, item 4): a second rank of each
// role is captured and compared op by op with the role's representative, so
// that a rank-dependent program is found before any emulation. The program
// is tests/cli/programs/even_odd.py on an 8-rank data-parallel job (one
// role). Skipped where torch or PrismLLM's backend is missing.
#include <cstdlib>
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "python_program_test.h"
#include "run_prism.h"

namespace prism {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::run_prism;
using testing::RunResult;
namespace fs = std::filesystem;

using testing::kPython;
const std::string kJob = "tests/cli/programs/even_odd-8.yaml";
const std::string kProgram = "tests/cli/programs/even_odd.py";

class EmulateRolesTest : public testing::PythonProgramTest {
 protected:
  RunResult emulate(std::vector<std::string> options, bool same) {
    std::vector<std::string> args = {"emulate", kJob, "--real-ranks", "2", "--master-port", "0"};
    args.insert(args.end(), options.begin(), options.end());
    for (const char* a : {"--", "env", "OMP_NUM_THREADS=1"}) args.emplace_back(a);
    args.push_back(kPython);
    args.push_back(kProgram);
    if (same) args.emplace_back("--same");
    return run_prism(args, tmp_);
  }
};

TEST_F(EmulateRolesTest, ASecondRankOfTheRoleIsCapturedAndFoundTheSame) {
  const RunResult r = emulate({}, /*same=*/true);
  ASSERT_EQ(r.exit_status, 0) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("capturing role 1 of 1 (stage0, 8 ranks): rank 2"));
  EXPECT_THAT(r.err, HasSubstr("checking role 1 of 1 (stage0): rank 7 runs too"));
  EXPECT_THAT(r.err, HasSubstr("built from 2 captured ranks"));
  EXPECT_THAT(r.err, HasSubstr("captured rank 2; the same program as captured rank 7"));
}

TEST_F(EmulateRolesTest, RanksThatRunDifferentProgramsStopTheRunBeforeTheEmulation) {
  const RunResult r = emulate({}, /*same=*/false);
  EXPECT_EQ(r.exit_status, 1) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("role 'stage0' (a pipeline stage): its ranks do not all run one "
                               "program"));
  EXPECT_THAT(r.err, HasSubstr("rank 7 (the capture of rank 7) does not run rank 2's program"));
  EXPECT_THAT(r.err, HasSubstr("rank 2 has send of 64 bytes to rank 3 (tag 0), rank 7 has recv "
                               "of 64 bytes from rank 6 (tag 0)"));
  EXPECT_THAT(r.err, HasSubstr("found here before any emulation"));
  EXPECT_THAT(r.out, Not(HasSubstr("iteration time:")));  // nothing was emulated
}

TEST_F(EmulateRolesTest, CaptureRanksAddsChecksAndNoVerifyRolesDropsThem) {
  RunResult r = emulate({"--capture-ranks", "4,5"}, /*same=*/true);
  ASSERT_EQ(r.exit_status, 0) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("built from 4 captured ranks"));
  EXPECT_THAT(r.err, HasSubstr("the same program as captured ranks 4,5,7"));
  r = emulate({"--no-verify-roles"}, /*same=*/true);
  ASSERT_EQ(r.exit_status, 0) << r.out << r.err;
  EXPECT_THAT(r.err, Not(HasSubstr("checking role")));
  EXPECT_THAT(r.err, HasSubstr("built from 1 captured rank"));
}

TEST_F(EmulateRolesTest, CaptureRanksOutsideTheJobAreRefused) {
  const RunResult r = emulate({"--capture-ranks", "8"}, /*same=*/true);
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_THAT(r.err, HasSubstr("--capture-ranks"));
}

}  // namespace
}  // namespace prism
