// replay(): runs an ExecutionGraph over the discrete-event core with the given
// network, compute and memory models, and returns per-role timings.
//
// Each simulated rank runs its role's streams in order; an op starts when the
// previous op of its stream and its dependencies are done. Collectives
// rendezvous per communicator group by sequence number; sends and receives
// match by (source, destination, tag, order); ops of one NCCL group start
// together. A replay that cannot progress returns Outcome::kDeadlock with
// every blocked rank and what it waits for.
//
// Memory: alloc ops allocate from the rank's memory model; a free whose op
// names record streams returns its block when each of those streams has
// finished the ops issued before the free (PyTorch's record_stream). An
// allocation that does not fit ends the replay with Outcome::kOutOfMemory.
//
// Folding (default): ranks are partitioned into classes that provably behave
// identically (same role, same overrides, and class-equal communicator peers,
// refined to a fixpoint; see replay/folding.h), and one representative per
// class is simulated. Per-rank results are the same as replaying every rank.
#pragma once

#include <cstdint>
#include <vector>

#include "compute/compute_model.h"
#include "graph/graph.h"
#include "mem/memory_model.h"
#include "net/network_model.h"
#include "replay/result.h"
#include "util/status.h"

namespace prism {

struct ReplayOptions {
  bool fold = true;
  std::vector<Rank> trace_ranks;  // ranks whose executed ops go to ReplayResult::trace
  // Live ranks (replay/live_replay.h): their ops come from outside. Only a
  // LiveReplay takes them.
  std::vector<Rank> live_ranks;
  // Jitter (simulation/what_if.h): each compute op of each rank takes up to
  // jitter_ppm parts per million longer, by a factor drawn from a hash of
  // (jitter_seed, rank, op index). With jitter every rank differs, so the
  // replay does not fold.
  std::int64_t jitter_ppm = 0;
  std::uint64_t jitter_seed = 0;
  // Per rank (or empty): a tag that folding must respect, as it does a
  // rank's overrides; ranks with different tags never share a class (a
  // degraded link's ranks, simulation/what_if.h).
  std::vector<std::int64_t> fold_tags;
  // A node failure (--fail-node, simulation/what_if.h): from `fail_at` on,
  // the ranks of `failed_ranks` (ascending) start no op and complete none,
  // and no transfer they take part in completes; whoever waits on them
  // blocks, and the replay ends as a deadlock. Folding must keep them apart
  // (fold_tags): every rank of a failed rank's class must fail.
  std::vector<Rank> failed_ranks;
  SimTime fail_at = SimTime::never();
  // SM contention (docs/replay.md): with sm_count > 0, the GPU's SMs, a
  // compute op a rank starts while its NCCL kernels hold H SMs (the channels
  // of its collectives and send/recvs moving data, NetworkModel::sms_held)
  // takes sm_count / (sm_count - H) as long. 0: no contention, for graphs
  // whose kernel times were taken in situ (they contain it already).
  int sm_count = 0;
};

class NcclMemory;  // replay/nccl_memory.h

struct ReplayModels {
  NetworkModel* network = nullptr;
  const ComputeModel* compute = nullptr;
  MemoryModel* memory = nullptr;
  // NCCL's buffers, added to each rank's memory as its communicators connect;
  // none when null.
  NcclMemory* nccl = nullptr;
};

// `g` must be finalized and valid (graph/validate.h). The models are reset and
// used by this call only. A deadlock is a result; an error means simulated
// time passed kTimeHorizon (util/units.h). When a folded replay deadlocks,
// the blocked ranks come from an unfolded replay, so that every blocked rank
// is named with the exact peers it waits for.
Result<ReplayResult> replay(const ExecutionGraph& g, const ReplayOptions& options,
                            const ReplayModels& models);

}  // namespace prism
