// The HTML report of a replay (`--html FILE` of prism simulate, replay and
// emulate; report/html_page.h draws it): per stage, the timeline of one
// iteration, its breakdown, memory over time, and the collectives with what
// NCCL's tuner picks for them.
//
// A stage is a role, shown by its first rank (html_ranks); an emulation's
// real ranks are shown too. The replay must have traced them
// (SimulationOptions::trace_ranks): their trace records, memory samples and
// timelines are what the page is drawn from. The iteration shown is the
// last complete one: from the earliest start of the shown ranks' last
// iteration to the latest end (the whole run when no rank has markers).
#pragma once

#include <string>
#include <vector>

#include "graph/graph.h"
#include "net/cluster_spec.h"
#include "net/nccl_tuner.h"
#include "replay/result.h"
#include "report/html_page.h"
#include "report/simulate_report.h"

namespace prism {

struct ReplayHtmlOptions {
  std::string title;  // "prism replay: gpt_tp2_pp2_dp2"
  std::vector<HtmlFact> facts;
  std::vector<std::string> notes;
  std::string text;  // the command's printed summary
  // The cluster and NCCL selection the replay ran with: the tuner's choice
  // of algorithm, protocol and channels for each collective.
  ClusterSpec cluster;
  NcclSelection nccl;
  Bytes capacity;                       // a GPU's memory
  std::vector<Rank> real_ranks;         // an emulation's, ascending
  std::vector<MeasuredSlice> measured;  // their reported compute
};

// The ranks a page shows besides real ranks: the first rank of each role,
// ascending. The replay must trace them.
std::vector<Rank> html_ranks(const ExecutionGraph& g);
// `traced` (ascending) and html_ranks(g): what a replay traces for a page.
std::vector<Rank> with_html_ranks(const ExecutionGraph& g, std::vector<Rank> traced);

// The page of `r`, a replay of `g`.
HtmlPage replay_html_page(const ExecutionGraph& g, const ReplayResult& r,
                          const ReplayHtmlOptions& o);
// format_html_page(replay_html_page(g, r, o)).
std::string format_replay_html(const ExecutionGraph& g, const ReplayResult& r,
                               const ReplayHtmlOptions& o);

// The facts every replay page begins with: outcome, iteration time and
// folding (a summary adds its own above).
std::vector<HtmlFact> replay_facts(const ExecutionGraph& g, const ReplayResult& r);
// prism simulate's headline: job, cluster, throughput, peak memory.
std::vector<HtmlFact> simulate_facts(const SimulateSummary& s);

}  // namespace prism
