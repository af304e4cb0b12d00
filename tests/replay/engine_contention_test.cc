// SM contention (ReplayOptions::sm_count): a compute op a rank starts while
// its NCCL kernels move data runs on the SMs they leave it.
#include <gtest/gtest.h>

#include "net/alpha_beta.h"
#include "replay/replay.h"
#include "test_graphs.h"

namespace prism {
namespace {

using testing::group_slot;
using testing::make_graph;
using testing::unit_network;

// The unit network, its collectives holding `sms` SMs per member.
class HoldingNetwork final : public NetworkModel {
 public:
  explicit HoldingNetwork(int sms) : inner_(unit_network()), sms_(sms) {}
  TransferId start(const Transfer& t, SimTime now) override { return inner_.start(t, now); }
  SimTime next_completion() const override { return inner_.next_completion(); }
  void take_completed(SimTime t, std::vector<TransferId>* done) override {
    inner_.take_completed(t, done);
  }
  int sms_held(const Transfer&) const override { return sms_; }

 private:
  AlphaBetaModel inner_;
  int sms_;
};

// Two ranks: an all-reduce of 1000 B on "comm" (0 to 1000 ns), on "compute"
// a kernel of 100 ns, one of 100 ns while the all-reduce moves data, and one
// after it (depends on it).
ExecutionGraph overlapped(Transport transport = Transport::kNccl) {
  RoleBuilder b("r", {"compute", "comm"});
  const int ar = b.collective(1, 0, CollectiveKind::kAllReduce, Bytes{1000});
  b.set_transport(ar, transport);
  b.compute(0, SimTime{100}, "before");
  b.compute(0, SimTime{100}, "during");
  b.compute(0, SimTime{100}, "after", {ar});
  return make_graph({{"dp", 2}}, 8, {group_slot("dp", {0})}, {std::move(b).build()}, {0, 0});
}

ReplayResult run_with(int sm_count, int held, bool fold, Transport transport = Transport::kNccl) {
  HoldingNetwork network(held);
  RooflineModel compute;
  AllocatorMemoryModel memory(DeviceMemoryOptions{});
  ReplayOptions opts;
  opts.fold = fold;
  opts.trace_ranks = {0, 1};
  opts.sm_count = sm_count;
  Result<ReplayResult> r =
      replay(overlapped(transport), opts, ReplayModels{&network, &compute, &memory});
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return std::move(r).value();
}

SimTime end_of(const ReplayResult& r, Rank rank, int op) {
  for (const TraceRecord& t : r.trace)
    if (t.rank == rank && t.op == op) return t.end;
  ADD_FAILURE() << "op " << op << " of rank " << rank << " not traced";
  return SimTime{};
}

TEST(EngineContentionTest, AKernelBesideNcclRunsOnTheSmsLeft) {
  // 33 of 132 SMs held: the kernel issued at 100 ns takes 132/99 * 100.
  const ReplayResult r = run_with(132, 33, false);
  for (Rank rank : {0, 1}) {
    EXPECT_EQ(end_of(r, rank, 1).ns,
              100);  // the all-reduce starts at 0: "before" is issued with it
    EXPECT_EQ(end_of(r, rank, 2).ns, 100 + 133);
    EXPECT_EQ(end_of(r, rank, 3).ns, 1000 + 100);  // after the all-reduce: all SMs again
  }
}

TEST(EngineContentionTest, NoContentionWithoutAnSmCountOrHeldSms) {
  for (const auto& [sms, held] : {std::pair{0, 33}, std::pair{132, 0}}) {
    const ReplayResult r = run_with(sms, held, false);
    EXPECT_EQ(end_of(r, 0, 2).ns, 200) << sms << " " << held;
  }
}

// Transformer Engine's userbuffers are not NCCL: the graph carries their SMs.
TEST(EngineContentionTest, UserbuffersHoldNoSms) {
  const ReplayResult r = run_with(132, 33, false, Transport::kUserbuffers);
  EXPECT_EQ(end_of(r, 0, 2).ns, 200);
  EXPECT_EQ(end_of(r, 0, 3).ns, 1100);  // the transfer is timed as before
}

TEST(EngineContentionTest, FoldedEqualsUnfolded) {
  const ReplayResult folded = run_with(132, 33, true);
  const ReplayResult unfolded = run_with(132, 33, false);
  EXPECT_EQ(folded.iteration_time, unfolded.iteration_time);
  EXPECT_EQ(end_of(folded, 0, 2), end_of(unfolded, 0, 2));
}

TEST(EngineContentionTest, NcclHoldingEverySmLeavesTheKernelOne) {
  // Held >= sm_count: the kernel runs on one SM, never divides by zero.
  const ReplayResult r = run_with(4, 8, false);
  EXPECT_EQ(end_of(r, 0, 2).ns, 100 + 400);
}

}  // namespace
}  // namespace prism
