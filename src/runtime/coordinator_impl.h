// Coordinator::Impl: the replay policy of a live session
// (runtime/live_session.h), the state behind runtime/coordinator.h, shared
// by coordinator.cc (messages, synchronization) and coordinator_report.cc
// (silence, failure messages, the final reports).
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "runtime/coordinator.h"
#include "runtime/live_session.h"
#include "runtime/op_matcher.h"

namespace prism::runtime {

// A live rank's wait (wire::Wait) and when it ends, once known.
struct WaitState {
  bool active = false;
  bool woken = false;
  std::uint32_t wait_id = 0;
  std::uint32_t op_id = wire::kAnyOp;
  SimTime at;
  SimTime until = SimTime::never();
  SimTime wake;
};

using Interval = std::pair<SimTime, SimTime>;

// A live rank as the replay sees it (its connection is the LiveSession's).
struct LiveRank {
  LiveRank(const ExecutionGraph& g, Rank r) : rank(r), matcher(g, r) {}

  Rank rank;
  bool done = false;  // said goodbye
  int exit_code = 0;
  std::int64_t pid = 0;
  std::string program;
  SimTime last_at;  // the latest time on its messages
  SimTime finish;
  WaitState wait;
  OpMatcher matcher;
  std::unordered_map<std::int32_t, std::uint32_t> op_id_of;  // graph op -> the rank's op_id
  std::unordered_map<std::uint32_t, SimTime> answered;       // op_id -> completion sent
  std::unordered_map<std::uint32_t, std::int32_t> entered;   // op_id -> graph op
  std::vector<SimTime> answers;                              // completions, in sending order
  std::int32_t last_op = kNone;
  SimTime last_op_at;
  // Measurements for the report.
  IterationMarks marks;
  std::vector<LiveCompute> computed;  // compute the rank reported
  std::vector<Interval> held;         // waits that ended at a completion
  std::int64_t ops = 0, waits = 0;
  std::int64_t bytes = 0;  // of the ops entered
  std::map<std::uint64_t, std::int64_t> allocations;
  std::int64_t allocated = 0, peak_allocated = 0;
  std::unordered_map<std::int32_t, std::int64_t> nccl_pending;  // graph op -> NCCL bytes to send
  std::int64_t nccl_bytes = 0;                                  // NCCL bytes sent
  RankCapture capture;
  bool mismatched = false;  // its last op was not the graph's
};

class Coordinator::Impl : public LivePolicy, public LiveListener {
 public:
  Impl(const ExecutionGraph& g, const ReplayModels& models, CoordinatorOptions options);

  Result<wire::Address> listen(const wire::Address& a) { return live_.listen(a); }
  Result<CoordinatorResult> run(const std::function<Status()>& tick);
  bool connected(Rank rank) const { return live_.connected(rank); }

  // LivePolicy
  std::string not_expected(Rank r) const override;
  void hello(Rank r, const wire::Hello& h) override;
  Status handle(Rank r, const wire::Message& m) override;
  wire::ErrorCode error_code(Rank r) const override;
  Status closed(Rank r, const Status& why) override;
  Status check(SteadyClock::time_point now) override;
  void finishing() override;
  // LiveListener
  void completed(Rank rank, std::int32_t op, SimTime at) override;
  void nccl_allocated(Rank rank, std::int32_t op, std::int64_t bytes) override;
  SimTime horizon() const override;

 private:
  SimTime bound(const LiveRank& s) const;
  // The virtual time before which none of `s`'s ops can complete while it
  // sends nothing (wire::Horizon::quiet_until).
  SimTime quiet_until(const LiveRank& s) const;
  LiveRank& live_rank(Rank r) { return ranks_[index_of_.at(r)]; }
  const LiveRank& live_rank(Rank r) const { return ranks_[index_of_.at(r)]; }
  Status dispatch(LiveRank& s, const wire::Message& m);
  wire::CommInit with_members(const LiveRank& s, const wire::CommInit& c) const;
  Status check_time(const LiveRank& s, SimTime at, std::string_view what) const;
  Status enter(LiveRank& s, const wire::Op& op);
  Status start_wait(LiveRank& s, const wire::Wait& w);
  Status split(LiveRank& s, const wire::CommSplit& m);
  void move_to(LiveRank& s, SimTime at);
  Status step_to(LiveRank& s, SimTime at, std::string_view what);  // check_time, then move_to
  void wake(LiveRank& s, SimTime at, bool answer);
  void memory(LiveRank& s, const wire::Memory& m);
  void send(LiveRank& s, const wire::Message& m);
  void progress();
  void finish_if_done();
  void end_hung(ReplayResult r);

  // coordinator_report.cc
  std::string last_op_text(const LiveRank& s) const;
  std::string waiting_text(const LiveRank& s) const;
  struct Measured {
    SimTime finish, span, compute;
  };
  Measured measure(const LiveRank& s) const;
  std::vector<LiveRankTimes> live_times() const;
  LiveRankReport report_of(const LiveRank& s) const;
  Status deadlock_error(const ReplayResult& r) const;
  std::string hang_text(const LiveRank& s, const NodeFailureReplay& f) const;

  const ExecutionGraph& g_;
  CoordinatorOptions options_;
  LiveSession live_;
  LiveReplay replay_;
  std::vector<LiveRank> ranks_;  // options_.live_ranks order
  std::map<Rank, std::size_t> index_of_;
  SimTime next_event_ = SimTime::zero();
  std::optional<ReplayResult> hung_;  // the replay a node failure hung (end_hung)
  // Live ranks' splits, to keep them consistent with one another: (the
  // parent's members, the split's number on it, color) -> (the rank, the
  // group it was given).
  std::map<std::tuple<std::vector<Rank>, int, std::int32_t>, std::pair<Rank, std::vector<Rank>>>
      splits_;
};

}  // namespace prism::runtime
