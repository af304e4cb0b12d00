// What a replay produces. Plain data: report/ formats it, tests compare it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "graph/layout.h"
#include "graph/op.h"
#include "mem/memory_model.h"
#include "util/units.h"

namespace prism {

// Where one rank's time went over the whole replay. The three parts add up to
// the makespan: compute is the union of the rank's compute intervals (on any
// stream); exposed communication is time with data moving (a collective or
// send/recv whose members have all arrived) but no compute running; idle is
// everything else (waiting for peers, pipeline bubbles, the tail after the
// rank's last op).
struct RankTimes {
  SimTime compute;
  SimTime exposed_comm;
  SimTime idle;
  SimTime finish;        // completion of the rank's last op
  Bytes peak_allocated;  // the memory model's peaks (mem/memory_model.h)
  Bytes peak_reserved;
  Bytes peak_device;  // reserved + NCCL + CUDA context
  Bytes nccl;         // NCCL's buffers at the end (they only grow)
  // Reserved minus allocated when reserved peaked: what the caching
  // allocator held but had not handed out (cached blocks, split-off rests)
  // at the worst moment.
  Bytes fragmentation;
  Bytes inactive_split_peak;  // free bytes in split segments, at their peak
};

struct RoleSummary {
  std::string name;
  int num_ranks = 0;
  RankTimes mean;  // integer mean over the role's ranks (sum / count, truncated)
  RankTimes max;   // element-wise max over the role's ranks
};

// Compute a live rank measured and reported (hybrid emulation): not a graph
// op, so named by the rank. The coordinator reports them, the trace shows
// them beside the replayed ops.
struct MeasuredSlice {
  Rank rank = 0;
  std::uint16_t stream = 0;
  std::string name;
  SimTime start, end;
};

// One executed op of a traced rank.
struct TraceRecord {
  Rank rank = 0;
  std::int32_t role = 0;
  std::int32_t op = 0;  // index into Role::ops
  std::uint16_t stream = 0;
  SimTime start;           // the op began (compute) or arrived (communication)
  SimTime transfer_start;  // communication: every member present; == start otherwise
  SimTime end;
};

// A rank that could not progress when a replay deadlocked.
struct BlockedRank {
  Rank rank = 0;      // a representative; folded replays stand for `num_ranks`
  int num_ranks = 1;  // ranks in the same state (folding)
  std::int32_t role = 0;
  std::int32_t op = 0;  // the op it waits on
  std::uint16_t stream = 0;
  std::string waiting_for;  // e.g. "collective all_reduce #3 on dp: ranks 8, 16 not arrived"
  SimTime since{-1};        // when it arrived at the rendezvous it waits at; -1: a dependency
  bool failed = false;      // a rank of a failed node (ReplayOptions::failed_ranks)
};

// An allocation that did not fit: the replay stops there, as the training
// process would with torch.OutOfMemoryError (or an NCCL error when NCCL's own
// buffers did not fit).
struct OutOfMemory {
  Rank rank = 0;      // a representative; folded replays stand for `num_ranks`
  int num_ranks = 1;  // ranks in the same state (folding)
  std::int32_t role = 0;
  std::int32_t op = 0;  // the alloc op, or the communication op whose NCCL buffers failed
  std::uint16_t stream = 0;
  SimTime at;
  bool in_nccl = false;
  Bytes requested;
  OomInfo allocator;  // the allocator's view (alloc ops)
  MemoryUsage usage;  // the rank's memory at the failure
  Bytes capacity;     // the device's
};

// A traced rank's memory after an allocator or NCCL event (trace counters).
struct MemorySample {
  Rank rank = 0;
  SimTime at;
  Bytes allocated;
  Bytes reserved;
  Bytes device;
};

// A rank's iteration markers. An iteration runs from a begin marker to the
// next one; the last runs to the rank's last end marker when one follows it,
// else to the rank's finish. Begin markers after the last end marker begin
// no complete iteration and are dropped: a program that marks the end of
// every optimizer step does not count its shutdown as an iteration.
struct IterationMarks {
  std::vector<SimTime> begins;
  SimTime end{-1};                // the last end marker; -1: none
  std::size_t begins_at_end = 0;  // begin markers before it

  // A marker of kind `k` passed at `at`; kinds other than the two iteration
  // markers are no iteration boundary.
  void record(MarkerKind k, SimTime at) {
    if (k == MarkerKind::kIteration) begins.push_back(at);
    if (k == MarkerKind::kIterationEnd) {
      end = at;
      begins_at_end = begins.size();
    }
  }
  bool has_end() const { return end.ns >= 0; }
  // Begin times of the complete iterations.
  std::vector<SimTime> complete() const;
  // When the last complete iteration ends, for a rank that finished at `finish`.
  SimTime last_end(SimTime finish) const { return has_end() ? end : finish; }
  // Complete iterations, at least 1 (without markers: from 0 to the finish).
  int count() const;
};

// A traced rank's own timeline: when it passed its iteration markers and
// when it finished.
struct RankTimeline {
  Rank rank = 0;
  IterationMarks iteration_marks;
  SimTime finish;
};

// The lengths of a rank's iterations (IterationMarks), in order; without
// markers, one: from 0 to `finish`.
std::vector<SimTime> iteration_lengths(const IterationMarks& marks, SimTime finish);
// The integer mean of iteration_lengths (at least one).
SimTime mean_length(const std::vector<SimTime>& lengths);
// mean_length(iteration_lengths(marks, finish)).
SimTime mean_iteration(const IterationMarks& marks, SimTime finish);

// The same replay with unlimited memory after an out-of-memory one
// (simulate_graph with continue_past_oom): its iteration time and what each
// role's ranks needed at most (device peak); `capacity` is what the rank
// may use: the GPU's, or its --memory-fraction share.
struct PastOomReplay {
  SimTime iteration_time;
  std::vector<Bytes> role_needed;  // index = role index
  Bytes capacity;
};

// What a what-if replay (simulation/what_if.h) is compared with: the same
// replay unperturbed. `options` names the perturbation as written on the
// command line ("--straggler 5:1.5").
struct WhatIfReplay {
  std::string options;
  bool unperturbed_completed = true;  // false: it deadlocked or ran out of memory
  SimTime unperturbed;                // its iteration time
};

// A node failure (--fail-node, simulation/what_if.h) and what it did to the
// replay, built by simulate_graph from the blocked ranks: which
// communication ops never complete and who waits in them, when progress
// stopped, and when torch's NCCL watchdog would end the job.
struct NodeFailureReplay {
  int node = 0;
  std::vector<Rank> ranks;  // the node's ranks, ascending
  SimTime at;               // when they stopped
  SimTime timeout;          // the watchdog's (--nccl-timeout)
  // Whether the job did not complete: a rank of the node still had work at
  // `at` (false: it had finished, and the others completed without it).
  bool hung = false;
  SimTime hang_at;  // the last op completion: nothing progresses after it
  struct Blocked {
    std::string what;           // "collective all_reduce #0 on 'dp': rank 4 not arrived"
    std::vector<Rank> waiting;  // the surviving ranks waiting in it, ascending
    SimTime since;              // when the first of them arrived
  };
  std::vector<Blocked> blocked;   // by since, then what
  int other_blocked_streams = 0;  // surviving streams stuck behind their own ops
  // The first watchdog to fire: the earliest waiting rank's arrival + the
  // timeout; torch's ProcessGroupNCCL then aborts that process and the job
  // errors. None when no surviving rank waits in a collective.
  std::optional<SimTime> watchdog_at;
  Rank watchdog_rank = -1;
  std::string watchdog_what;
};

struct ReplayResult {
  enum class Outcome { kCompleted, kDeadlock, kOutOfMemory };
  Outcome outcome = Outcome::kCompleted;

  int world_size = 0;
  bool folded = false;
  int simulated_ranks = 0;      // ranks actually simulated (classes when folded)
  std::uint64_t op_events = 0;  // ops executed by simulated ranks

  SimTime makespan;                      // last completion over all ranks
  std::vector<SimTime> iteration_times;  // one per iteration marker span, or {makespan}
  SimTime iteration_time;                // mean of iteration_times (integer)

  std::vector<RoleSummary> roles;    // index = role index
  std::vector<BlockedRank> blocked;  // non-empty iff kDeadlock
  std::vector<OutOfMemory> oom;      // one entry iff kOutOfMemory
  std::vector<TraceRecord> trace;    // for ReplayOptions::trace_ranks, sorted by (rank, start, op)
  std::vector<MemorySample> memory_trace;  // trace ranks, sorted by (rank, time); same-time merged
  std::vector<RankTimeline> timelines;     // trace ranks, ascending
  std::optional<PastOomReplay> past_oom;   // set by simulate_graph with continue_past_oom
  std::optional<WhatIfReplay> what_if;     // set by simulate_graph with a what-if
  std::optional<NodeFailureReplay> failure;  // set by simulate_graph with --fail-node
};

}  // namespace prism
