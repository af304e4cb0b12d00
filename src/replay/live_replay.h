// LiveReplay: the replay engine in live mode, the core of hybrid emulation.
//
// Live ranks are not replayed from the graph: their communication ops come
// from real processes, entered one by one with the virtual time at which the
// process reached them. Every other rank is replayed as usual, and meets the
// live ranks at collectives and point-to-point channels.
//
// Time moves forward conservatively. The owner (the coordinator) knows, for
// each live rank, the earliest virtual time at which that rank can still
// enter something (its bound); the minimum over live ranks is the horizon.
// advance() runs every event before the horizon and stops there, so an op
// entered later, at or after the horizon, never lands in the simulated past.
// When a live rank's op completes, the listener hears it at once; that may
// lower the horizon (the rank was waiting and will go on from there), which
// advance() asks for after every event.
//
// Live ranks are classes of their own for folding (replay/folding.h), so
// folding stays exact around them.
#pragma once

#include <memory>
#include <vector>

#include "replay/replay.h"

namespace prism {

class Engine;

class LiveListener {
 public:
  virtual ~LiveListener() = default;
  // Op `op` (an index into the rank's role) of live rank `rank` completed at `at`.
  virtual void completed(Rank rank, std::int32_t op, SimTime at) = 0;
  // NCCL allocated `bytes` of device memory on live rank `rank` as op `op`
  // started (its communicator's init, buffers it connected first;
  // replay/nccl_memory.h). Heard before that op's completion.
  virtual void nccl_allocated(Rank /*rank*/, std::int32_t /*op*/, std::int64_t /*bytes*/) {}
  // Events at or after this time wait for the live ranks (SimTime::never():
  // nothing to wait for).
  virtual SimTime horizon() const = 0;
};

// What the owner measured of a live rank, for its role summary: time the
// rank computed and time it waited for communication.
struct LiveRankTimes {
  SimTime compute;
  SimTime wait;
  SimTime finish;  // the rank's end (its goodbye)
};

class LiveReplay {
 public:
  // options.live_ranks name the live ranks; the models are used by this
  // replay only. The listener must outlive the replay.
  LiveReplay(const ExecutionGraph& g, const ReplayOptions& options, const ReplayModels& models,
             LiveListener* listener);
  ~LiveReplay();
  LiveReplay(const LiveReplay&) = delete;
  LiveReplay& operator=(const LiveReplay&) = delete;

  // Live rank `rank` enters communication op `op` of its role at `at`, which
  // must not be before the last horizon advance() stopped at.
  void enter(Rank rank, std::int32_t op, SimTime at);
  // Live rank `rank` passed a marker of kind `kind` at `at` (iterations:
  // IterationMarks, replay/result.h).
  void mark(Rank rank, MarkerKind kind, SimTime at);

  // Runs every event before the listener's horizon. Returns the time of the
  // next event left (SimTime::never() when none), or an error when simulated
  // time passed kTimeHorizon.
  Result<SimTime> advance();
  // The time of the last event run.
  SimTime now() const;
  // Whether the replay stopped early (a rank ran out of memory).
  bool stopped() const;

  // Ends the replay. Virtual ranks still blocked (e.g. on a live rank that
  // left early) make the outcome kDeadlock. `live` has one entry per live
  // rank, in options.live_ranks order.
  ReplayResult finish(const std::vector<LiveRankTimes>& live);

 private:
  ReplayOptions options_;  // the engine keeps a reference
  std::unique_ptr<Engine> engine_;
};

}  // namespace prism
