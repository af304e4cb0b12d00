// Coordinator: the hybrid emulation's centre. It listens for the live ranks
// (a LiveSession, runtime/live_session.h, with the replay as its policy),
// replays every other rank of the graph (LiveReplay), and answers each op a
// live rank enters with its completion in virtual time.
//
// Synchronization is conservative (docs/protocol.md, "Waiting"). Each live
// rank has a bound: the earliest virtual time its next message can carry.
// A running rank's bound is its last message's time; a waiting rank's is the
// time it will wake (an answer, or the wait's deadline), unknown, and so
// unlimited, until the replay finds it. The replay runs every event before
// the smallest bound. The coordinator is single-threaded: every message is
// handled, and the replay advanced, on the thread that calls run().
//
// Failures end the emulation with every live rank told (an `aborted` error)
// and one message naming the rank and what it was doing: a rank that hangs
// up without a goodbye, stays silent past the timeout, never connects,
// sends a malformed message, or does something the graph does not have.
// A simulated node failure (CoordinatorOptions::failure) that hangs the job
// is a result, not an error: the live ranks are told and the run ends.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "replay/live_replay.h"
#include "runtime/comm_ids.h"
#include "simulation/what_if.h"
#include "slicing/capture_file.h"
#include "util/status.h"
#include "wire/address.h"

namespace prism::runtime {

struct CoordinatorOptions {
  std::vector<Rank> live_ranks;  // ascending, unique
  std::string job;               // the job's name, for the welcome
  bool fold = true;
  std::vector<Rank> trace_ranks;  // virtual ranks to trace besides the live ones
  // A live rank silent this long while the emulation waits for it, or not
  // connected this long after the start, ends the emulation.
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
  bool capture = false;  // keep each live rank's capture (slicing/capture_file.h)
  std::string secret;    // the run's: hellos without it are refused
  // What-if perturbations of the virtual ranks (simulation/what_if.h), as
  // ReplayOptions takes them: jitter of their compute, and the fold tags
  // that keep folding exact around degraded links.
  std::int64_t jitter_ppm = 0;
  std::uint64_t jitter_seed = 0;
  std::vector<std::int64_t> fold_tags;
  // A node failure (--fail-node; simulation/node_failure.h): the ranks of
  // `failed_ranks` (ascending, none of them live) stop at failure->at. When
  // the live ranks that have not said goodbye all wait for ops that never
  // complete, and the replay has nothing left to run, the run ends as a
  // hang instead of an error: each of those ranks is told (`aborted`, with
  // the op it waits in and when its NCCL watchdog would fire, after
  // `nccl_timeout`) and closed, and the result's replay carries the failure.
  std::optional<NodeFailure> failure;
  std::vector<Rank> failed_ranks;
  SimTime nccl_timeout = kDefaultNcclTimeout;
  // The members of communicators a live rank declares by size, position and
  // id alone (the NCCL drop-in's ncclCommInitRank), as the run's rendezvous
  // store learns them; null: placed by size and position.
  std::shared_ptr<CommIds> comm_ids;
};

// One live rank's emulated time, per iteration (means over its iterations).
struct LiveRankReport {
  Rank rank = 0;
  std::int64_t pid = 0;
  int exit_code = 0;                     // from its goodbye
  bool said_bye = false;                 // false: the run ended without it (a hang)
  int iterations = 1;                    // iteration markers seen (at least 1)
  SimTime iteration_time;                // mean over its iterations
  std::vector<SimTime> iteration_times;  // each iteration's, in order
  SimTime compute;                       // per iteration: real compute
  SimTime wait;                          // per iteration: iteration_time - compute
  SimTime finish;                        // its goodbye
  std::int64_t ops = 0;                  // communication ops entered
  std::int64_t bytes = 0;                // their bytes (as the graph counts them)
  // The rank's role in the graph: its communication ops and their bytes,
  // which a rank that ran to its goodbye has all entered.
  std::int64_t graph_ops = 0;
  std::int64_t graph_bytes = 0;
  std::int64_t waits = 0;  // waits sent
  Bytes peak_allocated;    // from its memory events
  // The device memory NCCL allocates on it at full scale (the NCCL memory
  // model; sent with the completions for the NCCL drop-in to allocate).
  Bytes nccl;
};

// A compute interval a live rank reported (wire::Compute): the trace's type.
using LiveCompute = MeasuredSlice;  // replay/result.h

struct CoordinatorResult {
  // Live ranks included, as real ones. With options.failure: its failure
  // (node_failure_replay), hung when the failure stopped the job.
  ReplayResult replay;
  std::vector<LiveRankReport> live;   // options.live_ranks order
  std::vector<RankCapture> captures;  // when options.capture
  std::vector<LiveCompute> computed;  // every live rank's reported compute, by rank then time
};

class Coordinator {
 public:
  // The models are used by this coordinator only; `g` must be valid.
  Coordinator(const ExecutionGraph& g, const ReplayModels& models, CoordinatorOptions options);
  ~Coordinator();
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  // Listens on `a`; returns the bound address (TCP port 0 resolved).
  Result<wire::Address> listen(const wire::Address& a);

  // Runs until every live rank said goodbye and the replay finished, or the
  // emulation failed. `tick` runs every few milliseconds on this thread; an
  // error from it (a live rank's process died) ends the emulation with that
  // error. The error names the rank and its last op.
  Result<CoordinatorResult> run(const std::function<Status()>& tick);

  // Whether live rank `rank` has connected (for a launcher's messages).
  bool connected(Rank rank) const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace prism::runtime
