#include "cli/replay_options.h"

#include <CLI/CLI.hpp>

#include "report/replay_html.h"

namespace prism {

void OutputOptions::add_to(CLI::App* app, const std::string& trace_help,
                           const std::string& trace_ranks_help) {
  app->add_option("--report", report_path, "Write the JSON report to FILE")->type_name("FILE");
  CLI::Option* trace = app->add_option("--trace", trace_path, trace_help);
  trace->type_name("FILE");
  app->add_option("--trace-ranks", trace_ranks, trace_ranks_help)->type_name("LIST")->needs(trace);
  app->add_option("--trace-level", trace_level,
                  "Trace detail: ops (every op), phases (each stream's ops between two markers as "
                  "one slice) or iterations (iteration spans and memory only)")
      ->type_name("LEVEL")
      ->capture_default_str()
      ->needs(trace);
  app->add_option("--html", html_path,
                  "Write the HTML report to FILE: one self-contained page with each stage's "
                  "timeline of the iteration, the breakdown, memory over time and the "
                  "collectives")
      ->type_name("FILE");
}

std::vector<Rank> OutputOptions::traced(const ExecutionGraph& g,
                                        std::vector<Rank> trace_ranks) const {
  return html_path.empty() ? trace_ranks : with_html_ranks(g, std::move(trace_ranks));
}

void FoldOption::add_to(CLI::App* app, const std::string& help) {
  app->add_flag("--no-fold", no_fold, help);
}

void NcclOptions::add_to(CLI::App* app) {
  app->add_option("--nccl-algo", algo, "Allowed algorithms, NCCL_ALGO syntax")->type_name("LIST");
  app->add_option("--nccl-proto", proto, "Allowed protocols, NCCL_PROTO syntax")->type_name("LIST");
}

void WhatIfOptions::add_to(CLI::App* app) {
  app->add_option("--straggler", stragglers,
                  "What if RANKS compute FACTOR times as long, e.g. 5:1.5 or 0,4-7:2 "
                  "(repeatable); the summary compares with the unperturbed run")
      ->type_name("RANKS:FACTOR")
      ->allow_extra_args(false);
  jitter_option =
      app->add_option(
             "--jitter", jitter,
             "What if each compute kernel took up to PCT% longer, by a factor drawn from "
             "(SEED, rank, op) (default seed 1); the summary compares with the unperturbed "
             "run")
          ->type_name("PCT[:SEED]");
  app->add_option("--link-degrade", links,
                  "What if a part of the network had its bandwidth divided by FACTOR (>= 1): "
                  "node:N (node N's NICs), rail:R (NIC R of every node), leaf:L (leaf switch L's "
                  "uplinks), nvlink:N (node N's NVLink domain), e.g. node:1:2 (repeatable); the "
                  "summary compares with the unperturbed run")
      ->type_name("WHAT:FACTOR")
      ->allow_extra_args(false);
  fail_node_option =
      app->add_option(
             "--fail-node", fail_node,
             "What if node N failed at TIME (e.g. 1@1.5s, 0@200ms; a bare number is ns): its "
             "ranks stop, collectives with them never complete; the summary names what "
             "blocks, who waits, the hang and when the NCCL watchdog ends the job (exit "
             "status 6)")
          ->type_name("N@TIME");
  nccl_timeout_option =
      app->add_option("--nccl-timeout", nccl_timeout,
                      "With --fail-node: torch's ProcessGroupNCCL watchdog timeout (e.g. 30s, "
                      "10min) [default: 10min, torch's default_pg_nccl_timeout]")
          ->type_name("DURATION");
}

Result<WhatIf> WhatIfOptions::what_if(int world_size) const {
  WhatIf w;
  for (const std::string& s : stragglers) {
    PRISM_ASSIGN_OR_RETURN(Straggler st, parse_straggler(s, world_size));
    w.stragglers.push_back(std::move(st));
  }
  if (jitter_option != nullptr && jitter_option->count() > 0) {
    PRISM_ASSIGN_OR_RETURN(Jitter j, parse_jitter(jitter));
    w.jitter = j;
  }
  for (const std::string& s : links) {
    PRISM_ASSIGN_OR_RETURN(LinkDegradation d, parse_link_degrade(s));
    w.links.push_back(d);
  }
  if (fail_node_option != nullptr && fail_node_option->count() > 0) {
    PRISM_ASSIGN_OR_RETURN(NodeFailure f, parse_fail_node(fail_node));
    w.failure = f;
  }
  if (nccl_timeout_option != nullptr && nccl_timeout_option->count() > 0) {
    if (!w.failure)
      return Status::invalid_argument(
          "--nccl-timeout: only a --fail-node failure can make a collective time out");
    PRISM_ASSIGN_OR_RETURN(w.nccl_timeout, parse_nccl_timeout(nccl_timeout));
  }
  return w;
}

}  // namespace prism
