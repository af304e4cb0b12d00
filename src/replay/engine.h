// Engine: the replay's state machine (see replay.h for the semantics). One
// Engine runs one replay; it is internal to replay/ and exposed for tests.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "replay/folding.h"
#include "replay/live_replay.h"
#include "replay/rendezvous.h"
#include "replay/replay.h"
#include "sim/event_queue.h"
#include "util/status.h"

namespace prism {

class Engine {
 public:
  // With a listener, options.live_ranks are live (replay/live_replay.h).
  Engine(const ExecutionGraph& g, const ReplayOptions& options, const ReplayModels& models,
         LiveListener* listener = nullptr);
  // Fails only when simulated time passes kTimeHorizon.
  Result<ReplayResult> run();

  // Live mode, for LiveReplay: start() once, then step() whenever the
  // horizon moves, enter_live() for each op a live rank enters.
  void start();
  Result<SimTime> step();
  void enter_live(Rank rank, std::int32_t op, SimTime at);
  void mark_live(Rank rank, MarkerKind kind, SimTime at);
  SimTime now() const { return now_; }
  bool stopped() const { return stopped_; }
  ReplayResult finish_live(const std::vector<LiveRankTimes>& live);

 private:
  // Per-role tables derived once from the program.
  struct RoleTables {
    std::vector<std::vector<std::int32_t>> stream_ops;  // op indices per stream, issue order
    std::vector<std::int32_t> dep_index;  // per op: its index among dependency targets, or kNone
    std::int32_t num_dep_targets = 0;
    // Per op: a collective's number among the role's collectives on its slot,
    // a send/recv's index among the role's point-to-point ops; else kNone.
    // Both count in issue order, which is how NCCL matches operations.
    std::vector<std::int32_t> comm_index;
    std::int32_t num_p2p = 0;
    // Per free op with record streams: (stream, ops of that stream issued
    // before the free), the count the stream must complete. Op i's are
    // record_waits[record_wait_begin[i], record_wait_begin[i + 1]).
    std::vector<std::uint32_t> record_wait_begin;
    std::vector<std::pair<std::uint16_t, std::uint32_t>> record_waits;
  };
  struct StreamState {
    std::uint32_t pos = 0;        // next op, index into RoleTables::stream_ops[stream]
    std::uint32_t in_flight = 0;  // issued and not completed (>1 only for NCCL groups)
    std::uint32_t done = 0;       // ops completed
    SimTime issued_at;            // issue time of the compute op in flight
    bool waiting_dep = false;
    bool finished = false;
  };
  // A simulated rank: a real rank, or the representative of a fold class.
  struct SimRank {
    Rank rank = 0;
    std::int32_t role = 0;
    std::int64_t scale_ppm = 1'000'000;
    std::uint32_t first_stream = 0;  // into streams_
    std::uint32_t first_dep = 0;     // into dep_done_
    std::uint32_t first_slot = 0;    // into comm_of_slot_
    std::uint32_t first_p2p = 0;     // into p2p_seq_
    bool traced = false;
    bool live = false;
    bool failed = false;    // in ReplayOptions::failed_ranks
    int computing = 0;      // compute ops running
    int communicating = 0;  // communication ops with data moving
    int nccl_sms = 0;       // SMs its NCCL kernels moving data hold (ReplayOptions::sm_count)
    SimTime last_change;
    SimTime compute, exposed, idle, finish;
    IterationMarks iteration_marks;
  };
  struct Event {
    std::uint32_t srank;
    std::uint16_t stream;
    std::int32_t op;
  };
  // A record-stream free waiting for stream progress: when the stream has
  // completed `count` ops, one of the block's streams is done with it.
  struct ReleaseWait {
    std::uint32_t count;
    std::int32_t free_op;
  };
  struct InFlight {
    bool collective = true;
    std::int32_t comm = 0;
    std::int64_t seq = 0;
    P2PRendezvous::Match match;
    SimTime start;
    int sms = 0;       // each member's NCCL kernel holds this many SMs
    bool nccl = true;  // carried by NCCL (Op::transport)
  };

  void build_role_tables();
  void build_sim_ranks();
  void build_communicators();
  void build_p2p_sequences();

  // Live arrivals run after compute completions at the same time.
  static constexpr int kLiveArrival = 1;

  std::uint32_t live_srank(Rank rank) const;
  void arrive_live(std::uint32_t s, std::int32_t oi);
  void complete_live(const Arrival& a, SimTime transfer_start);
  void drain_wakes();
  void try_advance(std::uint32_t s, std::uint16_t st);
  bool deps_done(const SimRank& sr, const Op& op) const;
  bool issue_group(std::uint32_t s, std::uint16_t st);
  bool start_op(std::uint32_t s, std::uint16_t st, std::int32_t oi);  // true if asynchronous
  SimTime compute_duration(const SimRank& sr, std::int32_t oi, const Op& op) const;
  void arrive_collective(std::uint32_t s, std::uint16_t st, std::int32_t oi, const Op& op);
  void post_p2p(std::uint32_t s, std::uint16_t st, std::int32_t oi, const Op& op);
  std::int32_t p2p_route(Rank sender, Rank receiver) const;
  P2PRendezvous::Key p2p_channel(std::uint32_t s, const Op& op, Rank* peer) const;
  void start_transfer(const Transfer& t, InFlight rec, const std::vector<Arrival>& arrivals);
  void finish_transfer(TransferId id);
  void complete(const Arrival& a, SimTime transfer_start);
  void record_completion(const Arrival& a, SimTime transfer_start);
  void account(SimRank& sr, int d_compute, int d_comm);
  bool alloc_op(std::uint32_t s, std::uint16_t st, std::int32_t oi, const Op& op);
  void free_op(std::uint32_t s, std::int32_t oi, const Op& op);
  void stream_progress(std::uint32_t s, std::uint16_t st);
  void add_nccl(const Arrival& a, std::int64_t bytes);
  void out_of_memory(std::uint32_t s, std::uint16_t st, std::int32_t oi, bool in_nccl, Bytes bytes);
  void sample_memory(std::uint32_t s);

  ReplayResult collect();
  std::string describe_dep_wait(const SimRank& sr, std::uint16_t st) const;
  // Whether simulated rank `s` has failed by now (ReplayOptions::fail_at).
  bool dead(std::uint32_t s) const { return sranks_[s].failed && now_ >= options_.fail_at; }
  bool drop_failed_transfer(const InFlight& rec);
  void collect_failed_transfers(const std::function<void(const Arrival&, std::string)>& wait) const;
  void collect_iterations(ReplayResult* r) const;
  void collect_roles(ReplayResult* r) const;
  void collect_blocked(ReplayResult* r) const;
  void collect_memory_trace(ReplayResult* r) const;
  void collect_timelines(ReplayResult* r) const;

  const ExecutionGraph& g_;
  const ReplayOptions& options_;
  ReplayModels models_;
  LiveListener* listener_;
  std::vector<LiveRankTimes> live_times_;  // per options_.live_ranks, set by finish_live
  SlotResolver resolver_;
  SlotUse used_;  // before fold_, which is computed from it
  FoldPlan fold_;

  std::vector<RoleTables> tables_;
  std::vector<SimRank> sranks_;
  std::vector<StreamState> streams_;
  std::vector<SimTime> dep_done_;           // SimTime::never() until done
  std::vector<std::int32_t> comm_of_slot_;  // per (srank, slot): communicator, or kNone
  // Per (srank, point-to-point op): its number within its channel, counted
  // in issue order. Peers and channels are resolved again when posting, which
  // is cheaper than storing them for every op of every rank.
  std::vector<std::int32_t> p2p_seq_;
  std::vector<CollectiveRendezvous> comms_;
  P2PRendezvous p2p_;
  absl::flat_hash_map<TransferId, InFlight> in_flight_;

  EventQueue<Event> queue_;
  SimTime now_;
  std::vector<std::pair<std::uint32_t, std::uint16_t>> wakes_;  // FIFO of streams to advance
  std::vector<TransferId> done_;  // transfers the network model completed, reused
  std::uint64_t op_events_ = 0;
  std::vector<TraceRecord> trace_;  // records of traced simulated ranks
  // Memory: record-stream waits per simulated stream (index as streams_),
  // the number of streams each pending free still waits for (key: srank <<
  // 32 | free op), the out-of-memory that stopped the replay, samples of
  // traced ranks.
  std::vector<std::vector<ReleaseWait>> release_waits_;
  absl::flat_hash_map<std::uint64_t, int> pending_release_;
  bool stopped_ = false;
  Status error_;  // what stopped the replay, when it is an error (NetworkModel::admit)
  std::vector<OutOfMemory> oom_;
  std::vector<MemorySample> memory_trace_;
  // Transfers that never completed because a member's node failed.
  std::vector<InFlight> failed_transfers_;
};

}  // namespace prism
