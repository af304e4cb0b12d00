// Coordinator::Impl: the state behind runtime/coordinator.h, shared by
// coordinator.cc (messages, synchronization) and coordinator_report.cc
// (timeouts, failure messages, the final reports).
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "runtime/coordinator.h"
#include "runtime/op_matcher.h"
#include "wire/server.h"

namespace prism::runtime {

using SteadyClock = std::chrono::steady_clock;

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

struct Session {
  Session(const ExecutionGraph& g, Rank r) : rank(r), matcher(g, r) {}

  Rank rank;
  std::optional<wire::PeerId> peer;
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
  SteadyClock::time_point last_heard;
  // Measurements for the report.
  IterationMarks marks;
  std::vector<LiveCompute> computed;  // compute the rank reported
  std::vector<Interval> held;         // waits that ended at a completion
  std::int64_t ops = 0, waits = 0;
  std::int64_t bytes = 0;  // of the ops entered
  std::map<std::uint64_t, std::int64_t> allocations;
  std::int64_t allocated = 0, peak_allocated = 0;
  RankCapture capture;
  bool mismatched = false;  // its last op was not the graph's
};

class Coordinator::Impl : public wire::ServerHandler, public LiveListener {
 public:
  Impl(const ExecutionGraph& g, const ReplayModels& models, CoordinatorOptions options);

  Result<wire::Address> listen(const wire::Address& a) { return server_.listen(a); }
  Result<CoordinatorResult> run(const std::function<Status()>& tick);
  bool connected(Rank rank) const;

  void on_message(wire::PeerId peer, wire::Message m) override;
  void on_close(wire::PeerId peer, const Status& why) override;
  void completed(Rank rank, std::int32_t op, SimTime at) override;
  SimTime horizon() const override;

 private:
  SimTime bound(const Session& s) const;
  Session* session_of(wire::PeerId peer);
  void hello(wire::PeerId peer, const wire::Hello& h);
  Status handle(Session& s, const wire::Message& m);
  Status check_time(const Session& s, SimTime at, std::string_view what) const;
  Status enter(Session& s, const wire::Op& op);
  Status start_wait(Session& s, const wire::Wait& w);
  Status split(Session& s, const wire::CommSplit& m);
  void move_to(Session& s, SimTime at);
  Status step_to(Session& s, SimTime at, std::string_view what);  // check_time, then move_to
  void wake(Session& s, SimTime at, bool answer);
  void memory(Session& s, const wire::Memory& m);
  void send(Session& s, const wire::Message& m);
  void progress();
  void finish_if_done();

  // coordinator_report.cc
  // Ends the emulation: every connected rank gets an `aborted` error, the
  // culprit (if any) `code`.
  void fail(Status why, const Session* culprit = nullptr,
            wire::ErrorCode code = wire::ErrorCode::kAborted);
  std::string last_op_text(const Session& s) const;
  std::string waiting_text(const Session& s) const;
  Status check_timeouts(SteadyClock::time_point now);
  struct Measured {
    SimTime finish, span, compute;
  };
  Measured measure(const Session& s) const;
  std::vector<LiveRankTimes> live_times() const;
  LiveRankReport report_of(const Session& s) const;
  Status deadlock_error(const ReplayResult& r) const;

  const ExecutionGraph& g_;
  CoordinatorOptions options_;
  wire::Server server_;
  LiveReplay replay_;
  std::vector<Session> sessions_;  // options_.live_ranks order
  std::map<Rank, std::size_t> session_of_rank_;
  std::map<wire::PeerId, std::size_t> session_of_peer_;
  SteadyClock::time_point started_;
  Status failed_;
  bool finished_ = false;
  SimTime next_event_ = SimTime::zero();
  // Live ranks' splits, to keep them consistent with one another: (the
  // parent's members, the split's number on it, color) -> (the rank, the
  // group it was given).
  std::map<std::tuple<std::vector<Rank>, int, std::int32_t>, std::pair<Rank, std::vector<Rank>>>
      splits_;
};

}  // namespace prism::runtime
