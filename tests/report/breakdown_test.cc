#include "report/breakdown.h"

#include <gtest/gtest.h>

#include <vector>

namespace prism {
namespace {

// Ops of the one role, by index.
enum TestOp {
  kGemm,
  kOptimizer,
  kTp,
  kCp,
  kCpRing,
  kEp,
  kEtp,
  kPpSend,
  kPpRecv,
  kDp,
  kEdp,
  kEmbd,
  kAlloc,
};

// Two ranks of one role; a slot per category name the builder uses.
ExecutionGraph make_graph() {
  ExecutionGraph g;
  g.name = "breakdown";
  g.layout = Layout(2, {{"dp", 2}}, 2);
  for (const char* name :
       {"tp", "cp", "cp_next", "ep", "etp", "pp_next", "pp_prev", "dp_cp", "edp", "embd"}) {
    CommSlot s;
    s.name = name;
    s.dims = {0};
    g.slots.push_back(s);
  }
  Role role;
  role.name = "stage0";
  role.streams = {"compute", "comm"};
  role.names = {"fwd", "optimizer"};
  auto op = [](OpKind kind, int slot = kNone, int name = kNone) {
    Op o;
    o.kind = kind;
    o.ref = slot;
    o.name = name;
    return o;
  };
  role.ops = {
      op(OpKind::kCompute, kNone, 0),
      op(OpKind::kCompute, kNone, 1),
      op(OpKind::kCollective, 0),
      op(OpKind::kCollective, 1),
      op(OpKind::kSend, 2),
      op(OpKind::kCollective, 3),
      op(OpKind::kCollective, 4),
      op(OpKind::kSend, 5),
      op(OpKind::kRecv, 6),
      op(OpKind::kCollective, 7),
      op(OpKind::kCollective, 8),
      op(OpKind::kCollective, 9),
      op(OpKind::kAlloc),
  };
  g.roles = {role};
  g.role_of_rank = {0, 0};
  return g;
}

TraceRecord rec(int op, std::int64_t start, std::int64_t end, Rank rank = 0) {
  return TraceRecord{rank, 0, op, 0, SimTime{start}, SimTime{start}, SimTime{end}};
}

// Communication that arrived at `arrive` and moved data from `transfer`.
TraceRecord comm(int op, std::int64_t arrive, std::int64_t transfer, std::int64_t end,
                 Rank rank = 0) {
  return TraceRecord{rank, 0, op, 1, SimTime{arrive}, SimTime{transfer}, SimTime{end}};
}

Breakdown run(const std::vector<TraceRecord>& records, std::int64_t begin, std::int64_t end,
              Rank rank = 0) {
  static const ExecutionGraph g = make_graph();
  return rank_breakdown(g, records, rank, SimTime{begin}, SimTime{end});
}

SimTime total(const Breakdown& b) {
  SimTime t;
  for (const SimTime& x : b.time) t += x;
  return t;
}

TEST(Breakdown, SlotNamesMapToMegatronCategories) {
  EXPECT_EQ(comm_category("tp"), TimeCategory::kTp);
  EXPECT_EQ(comm_category("cp"), TimeCategory::kCp);
  EXPECT_EQ(comm_category("cp_next"), TimeCategory::kCp);
  EXPECT_EQ(comm_category("cp_prev"), TimeCategory::kCp);
  EXPECT_EQ(comm_category("ep"), TimeCategory::kEp);
  EXPECT_EQ(comm_category("etp"), TimeCategory::kEp);
  EXPECT_EQ(comm_category("pp_next"), TimeCategory::kPp);
  EXPECT_EQ(comm_category("pp_prev"), TimeCategory::kPp);
  EXPECT_EQ(comm_category("dp_cp"), TimeCategory::kDp);
  EXPECT_EQ(comm_category("dp"), TimeCategory::kDp);
  EXPECT_EQ(comm_category("edp"), TimeCategory::kDp);
  EXPECT_EQ(comm_category("embd"), TimeCategory::kDp);
  EXPECT_EQ(comm_category("world"), std::nullopt);
  EXPECT_EQ(to_string(TimeCategory::kBubble), "bubble");
  EXPECT_EQ(to_string(TimeCategory::kOptimizer), "optimizer");
}

TEST(Breakdown, EmptyTraceIsAllBubble) {
  const Breakdown b = run({}, 100, 600);
  EXPECT_EQ(b[TimeCategory::kBubble], SimTime{500});
  EXPECT_EQ(total(b), SimTime{500});
}

TEST(Breakdown, ComputeHidesOverlappedCommunication) {
  // Compute [0, 100); a TP collective [50, 150) moving data throughout; a DP
  // reduction [20, 80) entirely under the compute.
  const Breakdown b =
      run({rec(kGemm, 0, 100), comm(kTp, 50, 50, 150), comm(kDp, 20, 20, 80)}, 0, 200);
  EXPECT_EQ(b[TimeCategory::kCompute], SimTime{100});
  EXPECT_EQ(b[TimeCategory::kTp], SimTime{50});
  EXPECT_EQ(b[TimeCategory::kDp], SimTime{0});
  EXPECT_EQ(b[TimeCategory::kBubble], SimTime{50});
  EXPECT_EQ(total(b), SimTime{200});
}

TEST(Breakdown, OptimizerIsItsOwnComputeCategory) {
  const Breakdown b =
      run({rec(kGemm, 0, 30), rec(kOptimizer, 40, 100), comm(kDp, 90, 90, 120)}, 0, 120);
  EXPECT_EQ(b[TimeCategory::kCompute], SimTime{30});
  EXPECT_EQ(b[TimeCategory::kOptimizer], SimTime{60});
  EXPECT_EQ(b[TimeCategory::kDp], SimTime{20});
  EXPECT_EQ(b[TimeCategory::kBubble], SimTime{10});
}

// Overlapping communications: tp over cp over ep over pp over dp.
TEST(Breakdown, PriorityTpCpEpPpDp) {
  // Every kind moves data from 0; each ends 100 later than the previous one
  // in priority order, so each category is charged exactly 100.
  const Breakdown b = run({comm(kDp, 0, 0, 500), comm(kPpSend, 0, 0, 400), comm(kEp, 0, 0, 300),
                           comm(kCp, 0, 0, 200), comm(kTp, 0, 0, 100)},
                          0, 600);
  for (TimeCategory c : {TimeCategory::kTp, TimeCategory::kCp, TimeCategory::kEp, TimeCategory::kPp,
                         TimeCategory::kDp, TimeCategory::kBubble})
    EXPECT_EQ(b[c], SimTime{100}) << to_string(c);
  EXPECT_EQ(b[TimeCategory::kCompute], SimTime{0});

  // Reversed lengths: the top priority covers everything it overlaps.
  const Breakdown r = run({comm(kTp, 0, 0, 500), comm(kCp, 0, 0, 400), comm(kEp, 0, 0, 300),
                           comm(kPpSend, 0, 0, 200), comm(kDp, 0, 0, 100)},
                          0, 500);
  EXPECT_EQ(r[TimeCategory::kTp], SimTime{500});
  EXPECT_EQ(total(r), SimTime{500});
}

TEST(Breakdown, EverySlotOfACategoryCounts) {
  const Breakdown b =
      run({comm(kCpRing, 0, 0, 10), comm(kEtp, 10, 10, 30), comm(kPpRecv, 30, 30, 60),
           comm(kEdp, 60, 60, 100), comm(kEmbd, 100, 100, 150)},
          0, 150);
  EXPECT_EQ(b[TimeCategory::kCp], SimTime{10});
  EXPECT_EQ(b[TimeCategory::kEp], SimTime{20});
  EXPECT_EQ(b[TimeCategory::kPp], SimTime{30});
  EXPECT_EQ(b[TimeCategory::kDp], SimTime{90});
  EXPECT_EQ(b[TimeCategory::kBubble], SimTime{0});
}

// Until every member has arrived no data moves: that wait is the bubble.
TEST(Breakdown, WaitingForPeersIsBubble) {
  const Breakdown b = run({comm(kPpRecv, 100, 700, 900), rec(kGemm, 0, 100)}, 0, 1000);
  EXPECT_EQ(b[TimeCategory::kCompute], SimTime{100});
  EXPECT_EQ(b[TimeCategory::kPp], SimTime{200});
  EXPECT_EQ(b[TimeCategory::kBubble], SimTime{700});
  EXPECT_EQ(total(b), SimTime{1000});
}

TEST(Breakdown, ClipsToTheWindowAndSumsToIt) {
  const std::vector<TraceRecord> records = {rec(kGemm, 0, 300), comm(kTp, 250, 260, 450),
                                            rec(kGemm, 500, 800), comm(kDp, 700, 750, 1200),
                                            rec(kAlloc, 900, 900)};
  const Breakdown b = run(records, 200, 1000);
  EXPECT_EQ(b[TimeCategory::kCompute], SimTime{100 + 300});
  EXPECT_EQ(b[TimeCategory::kTp], SimTime{150});
  EXPECT_EQ(b[TimeCategory::kDp], SimTime{200});
  EXPECT_EQ(b[TimeCategory::kBubble], SimTime{50});
  EXPECT_EQ(total(b), SimTime{800});
  // A window before every record.
  EXPECT_EQ(run(records, 2000, 2100)[TimeCategory::kBubble], SimTime{100});
}

TEST(Breakdown, OtherRanksRecordsAreIgnored) {
  const std::vector<TraceRecord> records = {rec(kGemm, 0, 100, 1), comm(kTp, 0, 0, 50, 1),
                                            rec(kGemm, 50, 80, 0)};
  const Breakdown zero = run(records, 0, 100, 0);
  EXPECT_EQ(zero[TimeCategory::kCompute], SimTime{30});
  EXPECT_EQ(zero[TimeCategory::kTp], SimTime{0});
  EXPECT_EQ(zero[TimeCategory::kBubble], SimTime{70});
  const Breakdown one = run(records, 0, 100, 1);
  EXPECT_EQ(one[TimeCategory::kCompute], SimTime{100});
  EXPECT_EQ(total(one), SimTime{100});
}

}  // namespace
}  // namespace prism
