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
//
// A degraded link (--link-degrade WHAT:FACTOR) divides the bandwidth of a
// part of the network (net/link_degradation.h) by FACTOR in the flow
// network. Folding stays exact: every rank on a degraded part gets a fold
// tag naming how it is slowed, so it and, transitively, its partners split
// from their classes; a degraded leaf's uplinks are shared by many nodes,
// so it unfolds the replay (FlowNetwork::folding_exact).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "graph/graph.h"
#include "net/cluster_spec.h"
#include "net/link_degradation.h"
#include "util/status.h"
#include "util/units.h"

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

// A node that fails (--fail-node N@TIME): at TIME its ranks stop.
struct NodeFailure {
  int node = 0;
  SimTime at;
};

// torch's ProcessGroupNCCL watchdog timeout when init_process_group is given
// none: torch.distributed.constants.default_pg_nccl_timeout, 10 minutes.
// NCCL itself never times a collective out.
inline constexpr SimTime kDefaultNcclTimeout{600'000'000'000};

struct WhatIf {
  std::vector<Straggler> stragglers;  // a rank in two multiplies both factors
  std::optional<Jitter> jitter;
  std::vector<LinkDegradation> links;  // a part given twice multiplies both factors
  std::optional<NodeFailure> failure;
  SimTime nccl_timeout = kDefaultNcclTimeout;  // --nccl-timeout: the watchdog after a failure
  bool empty() const { return stragglers.empty() && !jitter && links.empty() && !failure; }
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

// "WHAT:FACTOR": WHAT one of node:N, rail:R, leaf:L, nvlink:N (an index
// >= 0), FACTOR a finite number in [1, 1000]: the part's bandwidth divided
// by it. Which indices exist depends on the cluster: check_link_degradations.
Result<LinkDegradation> parse_link_degrade(std::string_view text);
// The option as written: "--link-degrade node:1:2".
std::string describe(const LinkDegradation& d);
// Each degraded part exists in `c`; the error names the option and the
// valid range ("--link-degrade node:9:2: node 9 does not exist: the cluster
// has nodes 0-1").
Status check_link_degradations(const std::vector<LinkDegradation>& links, const ClusterSpec& c);
// Per rank of a world of `world_size` on `c`: 0 when no part it uses is
// degraded, else a number per distinct slowdown (ReplayOptions::fold_tags).
std::vector<std::int64_t> link_fold_tags(const ClusterSpec& c, int world_size,
                                         const std::vector<LinkDegradation>& links);

// A duration: a number with a unit (ns, us, ms, s, min), or a bare integer
// of nanoseconds; "1.5s", "200ms", "10min", "250000". Errors say what was
// expected, without naming an option (the caller adds it).
Result<SimTime> parse_duration(std::string_view text);
// "N@TIME": N a node index >= 0 (checked against the graph by
// simulate_graph), TIME a duration >= 0. Errors name the option.
Result<NodeFailure> parse_fail_node(std::string_view text);
// "--nccl-timeout DURATION": > 0.
Result<SimTime> parse_nccl_timeout(std::string_view text);
std::string describe(const NodeFailure& f);
// `t` in the largest unit that keeps it whole: "10min", "1500ms", "7ns".
std::string format_duration(SimTime t);

// Jitter in the replay's units (replay/replay.h ReplayOptions): PCT in parts
// per million of the duration.
std::int64_t jitter_ppm(const Jitter& j);

}  // namespace prism
