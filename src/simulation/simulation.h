// The library's one entry point for "build the models, replay, summarize":
// `prism replay` replays a graph file, `prism simulate` a job's graph, and
// `prism emulate` predicts its real ranks' times with the same call, so
// every command takes the same options (cluster, NCCL selection, device
// memory, folding, traced ranks, roofline compute) with the same meaning.
// A job's summary (tokens/s, MFU, per-role breakdown and memory) is computed
// here and nowhere else.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "graph/graph.h"
#include "net/cluster_spec.h"
#include "net/collective_sweep.h"
#include "net/nccl_tuner.h"
#include "replay/result.h"
#include "report/simulate_report.h"
#include "simulation/cluster_models.h"
#include "simulation/job.h"
#include "simulation/what_if.h"
#include "util/status.h"

namespace prism {

struct SimulationOptions {
  ModelOptions models;
  bool fold = true;               // one representative per class of identical ranks
  std::vector<Rank> trace_ranks;  // ranks whose executed ops the result's trace holds
  // After an out-of-memory replay, simulate_graph replays again with
  // unlimited memory and keeps what it needed and how long it took in the
  // result's past_oom; simulate_job puts it in the summary's, in the job's
  // terms (the outcome stays out of memory).
  bool continue_past_oom = false;
  // Perturbations (--straggler, --jitter): the replay runs perturbed, and
  // unperturbed too for the comparison in the result's what_if (simulate_job:
  // the summary's).
  WhatIf what_if;
};

// Replays `g` on `cluster` with models built from `o` (a fresh set per call).
// A deadlock or an out-of-memory rank is a result, not an error.
Result<ReplayResult> simulate_graph(const ExecutionGraph& g, const ClusterSpec& cluster,
                                    const SimulationOptions& o);

// The cluster `g` runs on, sized to its nodes: `given` (a preset name or a
// YAML file: --cluster) when set, else the cluster the graph was built for
// (ExecutionGraph::cluster), else the default preset dgx-h100. A graph may
// use fewer GPUs per node than the nodes have (and their NICs). `source`
// names the graph in errors.
Result<ClusterSpec> graph_cluster(const ExecutionGraph& g, const std::optional<std::string>& given,
                                  std::string_view source);

struct JobSimulation {
  ReplayResult replay;  // its trace holds o.trace_ranks only
  SimulateSummary summary;
};

// Replays the job's graph on its cluster and summarizes it. Each role's
// first rank is traced too, for its breakdown. A deadlock of a built job is
// an error (a builder defect).
Result<JobSimulation> simulate_job(const PreparedJob& p, const SimulationOptions& o);

// `prism collective`'s nccl-tests-style rows, from the NCCL model of
// `cluster` restricted to `selection` (net/collective_sweep.h).
Result<std::vector<SweepRow>> sweep_collective(const ClusterSpec& cluster,
                                               const NcclSelection& selection,
                                               const SweepOptions& o);

}  // namespace prism
