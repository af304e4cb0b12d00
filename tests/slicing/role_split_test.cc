// Splitting a role whose captured ranks differ: the candidate rules of the
// layout, the probes that tell them apart, the coarsest rule that fits every
// capture, ranks the user listed set apart, and no rule fitting.
#include "slicing/role_split.h"

#include <map>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace prism {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<Rank> iota(Rank from, Rank to) {  // [from, to)
  std::vector<Rank> out;
  for (Rank r = from; r < to; ++r) out.push_back(r);
  return out;
}

std::vector<std::string> rules(const std::vector<RoleSplitRule>& c) {
  std::vector<std::string> out;
  for (const RoleSplitRule& r : c) out.push_back(r.rule);
  return out;
}

// A program that runs one of a few behaviours per rank: ranks of one
// behaviour run one program. `calls` counts the comparisons made.
struct Behaviours {
  std::map<Rank, int> of;  // rank -> behaviour; absent: 0
  int calls = 0;
  SameProgram same() {
    return [this](Rank a, Rank b) {
      ++calls;
      const int x = of.count(a) ? of.at(a) : 0;
      const int y = of.count(b) ? of.at(b) : 0;
      if (x == y) return Status::ok();
      return Status::invalid_argument("rank " + std::to_string(b) + " differs from rank " +
                                      std::to_string(a));
    };
  }
};

// Decides the role of `ranks` as the split is driven for real: capture what
// is asked for until the answer is known. *asked: every rank captured.
RoleSplit drive(const Layout& l, const std::vector<Rank>& ranks, std::vector<Rank> captured,
                const std::vector<Rank>& real, const std::vector<Rank>& listed, Behaviours& b,
                std::vector<Rank>* asked = nullptr) {
  for (int round = 0; round < 8; ++round) {
    RoleSplit s = split_role(l, /*fixed_dim=*/3, ranks, captured, real, listed, b.same());
    if (s.kind != RoleSplit::Kind::kCapture) {
      if (asked != nullptr) {
        *asked = captured;
        std::sort(asked->begin(), asked->end());
      }
      return s;
    }
    EXPECT_FALSE(s.capture.empty());
    for (Rank r : s.capture) {
      EXPECT_EQ(std::count(captured.begin(), captured.end(), r), 0) << "rank " << r << " again";
      captured.push_back(r);
    }
  }
  ADD_FAILURE() << "no answer after 8 rounds of captures";
  return {};
}

const Layout kDp8(8, {{"tp", 1}, {"cp", 1}, {"dp", 8}, {"pp", 1}}, 8);
const Layout kTp2Dp4(8, {{"tp", 2}, {"cp", 1}, {"dp", 4}, {"pp", 1}}, 8);

TEST(RoleSplitTest, CandidatesComeFromTheLayoutAndCountOnceEach) {
  // One dimension: dp rank 0 is the first rank, the last dp rank the last,
  // even dp ranks the even ranks: each counts once, named as first listed.
  EXPECT_THAT(rules(split_candidates(kDp8, 3, iota(0, 8))),
              ElementsAre("its first rank", "its last rank", "even and odd dp ranks"));
  // tp 2: tp rank 0, the last tp rank and even tp ranks are one partition.
  const std::vector<RoleSplitRule> c = split_candidates(kTp2Dp4, 3, iota(0, 8));
  EXPECT_THAT(rules(c), ElementsAre("its first rank", "its last rank", "tp rank 0", "dp rank 0",
                                    "the last dp rank", "even and odd dp ranks"));
  EXPECT_EQ(c[3].classes, (std::vector<std::vector<Rank>>{{0, 1}, {2, 3, 4, 5, 6, 7}}));
  EXPECT_EQ(c[3].names, (std::vector<std::string>{"dp0", "dp-others"}));
  // Classes come in order of their lowest rank, whichever side the rule names.
  EXPECT_EQ(c[1].classes, (std::vector<std::vector<Rank>>{{0, 1, 2, 3, 4, 5, 6}, {7}}));
  EXPECT_EQ(c[1].names, (std::vector<std::string>{"others", "last"}));
  // A pipeline stage of a 3-D job: the stage's own dimension is no rule.
  const Layout pipe(16, {{"tp", 2}, {"cp", 1}, {"dp", 2}, {"pp", 4}}, 8);
  EXPECT_THAT(rules(split_candidates(pipe, 3, iota(4, 8))),
              ElementsAre("its first rank", "its last rank", "tp rank 0", "dp rank 0"));
  EXPECT_TRUE(split_candidates(pipe, 3, {5}).empty());
}

TEST(RoleSplitTest, OneProgramNeedsNoSplit) {
  Behaviours b;
  const RoleSplit s = split_role(kDp8, 3, iota(0, 8), {0, 7}, {}, {}, b.same());
  EXPECT_EQ(s.kind, RoleSplit::Kind::kOne);
}

TEST(RoleSplitTest, EvenAndOddRanksSplitByParity) {
  Behaviours b;
  for (Rank r : {1, 3, 5, 7}) b.of[r] = 1;
  std::vector<Rank> asked;
  const RoleSplit s = drive(kDp8, iota(0, 8), {2, 7}, {2}, {}, b, &asked);
  ASSERT_EQ(s.kind, RoleSplit::Kind::kSplit);
  EXPECT_EQ(s.rule.rule, "even and odd dp ranks");
  EXPECT_EQ(s.rule.classes, (std::vector<std::vector<Rank>>{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  // The probes: each live rule's classes' first and last ranks, and the real
  // rank 2; "its last rank" keeps 0 and 6 together, which parity alone does
  // not tell from "its first rank".
  EXPECT_EQ(asked, (std::vector<Rank>{0, 1, 2, 6, 7}));
  EXPECT_THAT(s.why.message(), HasSubstr("differs"));
}

TEST(RoleSplitTest, TheFirstRankGathersAndTheOthersSendToIt) {
  Behaviours b;
  b.of[0] = 1;
  const RoleSplit s = drive(kDp8, iota(0, 8), {0, 7}, {}, {}, b);
  ASSERT_EQ(s.kind, RoleSplit::Kind::kSplit);
  EXPECT_EQ(s.rule.rule, "its first rank");
  EXPECT_EQ(s.rule.names, (std::vector<std::string>{"first", "others"}));
  EXPECT_EQ(s.differ, (std::vector<Rank>{0, 1}));
}

TEST(RoleSplitTest, RankZeroOfEachDataParallelGroupIsItsOwnRole) {
  Behaviours b;
  b.of[0] = b.of[1] = 1;  // dp rank 0 of tp 0 and tp 1
  // Ranks 3 and 7 alone run one program; rank 0, the peer they name alike
  // (find_roles captures it), does not.
  EXPECT_EQ(split_role(kTp2Dp4, 3, iota(0, 8), {3, 7}, {3}, {}, b.same()).kind,
            RoleSplit::Kind::kOne);
  const RoleSplit s = drive(kTp2Dp4, iota(0, 8), {3, 7, 0}, {3}, {}, b);
  ASSERT_EQ(s.kind, RoleSplit::Kind::kSplit);
  EXPECT_EQ(s.rule.rule, "dp rank 0");
  EXPECT_EQ(s.rule.classes, (std::vector<std::vector<Rank>>{{0, 1}, {2, 3, 4, 5, 6, 7}}));
}

TEST(RoleSplitTest, NoRuleFitsAndListedRanksAreSetApart) {
  // Rank 0 sends to every rank; rank 1 differs from the other odd ranks.
  Behaviours b;
  b.of[0] = 1;
  b.of[1] = 2;
  for (Rank r : {3, 5, 7}) b.of[r] = 3;
  RoleSplit s = drive(kTp2Dp4, iota(0, 8), {0, 7}, {0}, {}, b);
  ASSERT_EQ(s.kind, RoleSplit::Kind::kNone);
  EXPECT_THAT(s.tried, ElementsAre("its first rank", "its last rank", "tp rank 0", "dp rank 0",
                                   "the last dp rank", "even and odd dp ranks"));
  EXPECT_THAT(s.why.message(), HasSubstr("differs from rank 0"));
  // Listing rank 0 alone is not enough (rank 1 differs from 3, 5 and 7) ...
  s = drive(kTp2Dp4, iota(0, 8), {0, 7}, {0}, {0}, b);
  EXPECT_EQ(s.kind, RoleSplit::Kind::kNone);
  // ... listing ranks 0 and 1 is: each is a role of its own, the others
  // split by tp rank.
  s = drive(kTp2Dp4, iota(0, 8), {0, 1, 7}, {0}, {0, 1}, b);
  ASSERT_EQ(s.kind, RoleSplit::Kind::kSplit);
  EXPECT_EQ(s.rule.rule, "tp rank 0, and the listed ranks 0,1");
  EXPECT_EQ(s.rule.classes, (std::vector<std::vector<Rank>>{{0}, {1}, {2, 4, 6}, {3, 5, 7}}));
  EXPECT_EQ(s.rule.names, (std::vector<std::string>{"rank0", "rank1", "tp0", "tp-others"}));
}

TEST(RoleSplitTest, ListedRanksStayInTheirClassWhenARuleFits) {
  Behaviours b;
  b.of[0] = 1;
  const RoleSplit s = drive(kDp8, iota(0, 8), {0, 4, 7}, {}, {4}, b);
  ASSERT_EQ(s.kind, RoleSplit::Kind::kSplit);
  EXPECT_EQ(s.rule.rule, "its first rank");
}

TEST(RoleSplitTest, CompactRanksWritesRunsAsRanges) {
  EXPECT_EQ(compact_ranks({0, 1, 2, 3}), "0-3");
  EXPECT_EQ(compact_ranks({1, 3, 5, 7}), "1,3,5,7");
  EXPECT_EQ(compact_ranks({0, 2, 3, 4, 5, 9, 10}), "0,2-5,9,10");
  EXPECT_EQ(compact_ranks({4}), "4");
  EXPECT_EQ(compact_ranks({}), "");
}

}  // namespace
}  // namespace prism
