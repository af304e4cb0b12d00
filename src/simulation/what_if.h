// What-if perturbations of a replay (issue 25 item 3): what would the
// iteration take if some ranks computed slower (--straggler RANKS:FACTOR) or
// every compute kernel's time varied (--jitter PCT[:SEED])? simulate_graph
// replays the perturbed graph and, to show the effect, the unperturbed one
// too (ReplayResult::what_if).
//
// A straggler becomes a rank override of the graph (graph.h RankOverride:
// its compute scale times FACTOR), which folding already keeps exact: the
// rank and every rank its timeline can touch split into their own classes.
// Jitter multiplies each compute op's duration by a factor in
// [1, 1 + PCT/100] (only slower: a perturbation never speeds a kernel up),
// drawn from a hash of (seed, rank, op index) rather than from a random
// sequence, so it is the same whatever order ranks are simulated in. Every
// rank then differs, so a jittered replay does not fold.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "graph/graph.h"
#include "util/status.h"

namespace prism {

struct Straggler {
  std::vector<Rank> ranks;  // ascending, distinct
  double factor = 1;        // > 0; 1.5 = compute takes 50% longer
};

struct Jitter {
  double pct = 0;  // in [0, 100): each compute op is up to PCT% slower
  std::uint64_t seed = kDefaultSeed;
  static constexpr std::uint64_t kDefaultSeed = 1;
};

struct WhatIf {
  std::vector<Straggler> stragglers;  // a rank in two multiplies both factors
  std::optional<Jitter> jitter;
  bool empty() const { return stragglers.empty() && !jitter; }
  // The options as one would write them: "--straggler 5:1.5 --jitter 2:1".
  std::string describe() const;
};

// "RANKS:FACTOR": RANKS a rank list ("0,5-7", graph/rank_list.h) within
// [0, world_size), FACTOR a finite number > 0 (at most 1000). Errors name
// the option: "--straggler 9:2: rank 9 is out of range ...".
Result<Straggler> parse_straggler(std::string_view text, int world_size);
// "PCT[:SEED]": PCT a number in [0, 100), SEED a decimal integer in
// [0, 2^64). Errors name the option.
Result<Jitter> parse_jitter(std::string_view text);

// `g` with every straggler's compute scale applied to its rank overrides
// (multiplied into an existing override). Fails when a rank's scale would
// pass kMaxComputeScalePpm.
Result<ExecutionGraph> apply_stragglers(const ExecutionGraph& g,
                                        const std::vector<Straggler>& stragglers);

// Jitter in the replay's units (replay/replay.h ReplayOptions): PCT in parts
// per million of the duration.
std::int64_t jitter_ppm(const Jitter& j);

}  // namespace prism
