// The capture checks its roles and splits them (issue 22, item 4): a
// second rank of each role is captured and compared op by op with the
// role's representative, and a role whose ranks differ is split by a rule
// of the layout, or the run stops before any emulation. The programs are
// tests/cli/programs/even_odd.py on an 8-rank data-parallel job (one role)
// and tests/cli/programs/rank_dependent.py on an 8-rank tp 2 x dp 4 job.
// Skipped where torch or PrismLLM's backend is missing.
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

const std::string kDependentJob = "tests/cli/programs/rank_dependent-8.yaml";
const std::string kDependent = "tests/cli/programs/rank_dependent.py";

class EmulateRolesTest : public testing::PythonProgramTest {
 protected:
  RunResult emulate(std::vector<std::string> options, bool same) {
    return run(kJob, "2", std::move(options), {kProgram, same ? "--same" : ""});
  }
  // `program`: the script and its arguments (empty ones left out).
  RunResult run(const std::string& job, const std::string& real, std::vector<std::string> options,
                const std::vector<std::string>& program) {
    std::vector<std::string> args = {"emulate", job, "--real-ranks", real, "--master-port", "0"};
    args.insert(args.end(), options.begin(), options.end());
    for (const char* a : {"--", "env", "OMP_NUM_THREADS=1"}) args.emplace_back(a);
    args.push_back(kPython);
    for (const std::string& a : program) {
      if (!a.empty()) args.push_back(a);
    }
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

TEST_F(EmulateRolesTest, EvenAndOddRanksAreSplitIntoTwoRolesAndEmulated) {
  const RunResult r = emulate({}, /*same=*/false);
  ASSERT_EQ(r.exit_status, 0) << r.out << r.err;
  // Ranks 2 and 7 differ: the rules of the layout are probed ...
  EXPECT_THAT(r.err,
              HasSubstr("splitting role 1 of 1 (stage0): its ranks differ; rank 0 runs too"));
  EXPECT_THAT(r.err, HasSubstr("built from 5 captured ranks"));
  // ... and the role table says how the role was split, and why.
  EXPECT_THAT(r.err,
              HasSubstr("even-odd-8: 8 ranks (tp 1, cp 1, dp 8, pp 1), 2 roles\n"
                        "  role            ranks  first  program\n"
                        "  stage0.dp-even      4      0  captured rank 0; the same program as "
                        "captured ranks 2,6; ranks 0,2,4,6: stage0's ranks at an even dp rank\n"
                        "  stage0.dp-odd       4      1  captured rank 1; the same program as "
                        "captured rank 7; ranks 1,3,5,7: stage0's ranks at an odd dp rank\n"
                        "  stage0 is split by even and odd dp ranks, as rank 1 (the capture of "
                        "rank 1) does not run rank 0's program (the capture of rank 0) moved to "
                        "its place: at their communication, memory or marker op 0, rank 0 has send "
                        "of 64 bytes to rank 1 (tag 0), rank 1 has recv of 64 bytes from rank 0 "
                        "(tag 0)\n"));
  // The emulation runs to the end.
  EXPECT_THAT(r.out, HasSubstr("iteration time:"));
  EXPECT_THAT(r.out, HasSubstr("replay: 4 of 8 ranks simulated (folded)"));
}

TEST_F(EmulateRolesTest, RankZeroOfEachGroupGathersAndIsARoleOfItsOwn) {
  const RunResult r = run(kDependentJob, "3", {}, {kDependent, "--gather"});
  ASSERT_EQ(r.exit_status, 0) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("built from 7 captured ranks"));
  EXPECT_THAT(r.err, HasSubstr("  stage0.dp0            2      0  captured rank 0; the same "
                               "program as captured rank 1; ranks 0,1: stage0's ranks at dp rank "
                               "0\n"));
  EXPECT_THAT(r.err, HasSubstr("  stage0.dp-others      6      2  captured rank 2; the same "
                               "program as captured ranks 3,5,6,7; ranks 2-7: stage0's ranks at dp "
                               "rank > 0\n"));
  EXPECT_THAT(r.err, HasSubstr("stage0 is split by dp rank 0, as rank 2"));
  EXPECT_THAT(r.out, HasSubstr("iteration time:"));
  EXPECT_THAT(r.out, HasSubstr("\n3  "));  // the real rank ran in its role
}

TEST_F(EmulateRolesTest, NoRuleFitsAndTheRunStopsUntilTheDifferingRanksAreListed) {
  RunResult r = run(kDependentJob, "0", {}, {kDependent, "--scatter"});
  EXPECT_EQ(r.exit_status, 1) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("error: job 'rank-dependent-8': role 'stage0' (a pipeline stage): "
                               "its ranks do not all run one program, as the layout's roles "
                               "assume, and no rule of the layout splits it as its captured ranks "
                               "0-2,5-7 run (tried: its first rank; its last rank; tp rank 0; dp "
                               "rank 0; the last dp rank; even and odd dp ranks): rank 1 (the "
                               "capture of rank 1) does not run rank 0's program"));
  EXPECT_THAT(r.err, HasSubstr("rank 0 has send of 64 bytes to rank 1 (tag 0), rank 1 has recv of "
                               "64 bytes from rank 0 (tag 0)"));
  EXPECT_THAT(r.err, HasSubstr("found here before any emulation. --capture-ranks LIST"));
  EXPECT_THAT(r.out, Not(HasSubstr("iteration time:")));  // nothing was emulated
  // Ranks 0 and 1 listed: each a role of its own, the others split by tp rank.
  r = run(kDependentJob, "0", {"--capture-ranks", "0,1"}, {kDependent, "--scatter"});
  ASSERT_EQ(r.exit_status, 0) << r.out << r.err;
  EXPECT_THAT(r.err,
              HasSubstr("rank-dependent-8: 8 ranks (tp 2, cp 1, dp 4, pp 1), 4 roles\n"
                        "  role              ranks  first  program\n"
                        "  stage0.rank0          1      0  captured rank 0; one rank; stage0's "
                        "listed rank 0\n"
                        "  stage0.rank1          1      1  captured rank 1; one rank; stage0's "
                        "listed rank 1\n"
                        "  stage0.tp0            3      2  captured rank 2; the same program as "
                        "captured ranks 4,6; ranks 2,4,6: stage0's ranks at tp rank 0\n"
                        "  stage0.tp-others      3      3  captured rank 3; the same program as "
                        "captured ranks 5,7; ranks 3,5,7: stage0's ranks at tp rank > 0\n"
                        "  stage0 is split by tp rank 0, and the listed ranks 0,1, as"));
  EXPECT_THAT(r.out, HasSubstr("iteration time:"));
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
