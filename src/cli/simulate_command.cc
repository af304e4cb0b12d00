#include "cli/simulate_command.h"

#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/replay_command.h"
#include "graph/graph_json.h"
#include "graph/rank_list.h"
#include "report/chrome_trace.h"
#include "report/replay_html.h"
#include "report/simulate_report.h"
#include "simulation/simulation.h"
#include "slicing/slices.h"
#include "util/file.h"

namespace prism {
namespace {

std::string kernels_csv(const PreparedJob& p) {
  // `model_us`, not `us`: a kernel list is not a measurement, and
  // --kernel-db refuses it.
  std::string out = "gpu,signature,model_us,source,count\n";
  for (const KernelUse& k : p.built.kernels) {
    out += fmt::format("{},{},{:.3f},{},{}\n", p.gpu.name, k.signature, k.time.ns / 1e3,
                       to_string(k.source), k.count);
  }
  return out;
}

}  // namespace

SimulateCommand::SimulateCommand(CLI::App& parent)
    : app_(parent.add_subcommand(
          "simulate", "Simulate one training iteration of a job spec: time, MFU, breakdown")) {
  app_->footer(
      "Exit status: 0 simulated, 1 error, 4 a rank ran out of memory, 6 a --fail-node failure hung "
      "the job (summary and report still written).");
  job_.add_to(app_);
  output_.add_to(app_);
  app_->add_option("--kernels", kernels_path_,
                   "Write the job's distinct kernels with their times to FILE (CSV, the "
                   "measured-kernel database's format; input of scripts/measure_kernels.py)")
      ->type_name("FILE");
  fold_.add_to(app_);
  nccl_.add_to(app_);
  memory_.add_to(app_);
  what_if_.add_to(app_);
  app_->add_flag("--continue-past-oom", continue_past_oom_,
                 "After an out-of-memory iteration, replay it with unlimited memory and report "
                 "what each role needs and the iteration time as if it fitted (exit status stays "
                 "4)");
}

bool SimulateCommand::selected() const {
  return app_->parsed();
}

Result<int> SimulateCommand::run() const {
  SimulationOptions options;
  PRISM_ASSIGN_OR_RETURN(options.models.nccl, nccl_.selection());
  PRISM_RETURN_IF_ERROR(check_output_files(*app_, {"--report", "--trace", "--kernels", "--html"},
                                           job_.job_path, "job spec"));
  TraceOptions trace;
  PRISM_ASSIGN_OR_RETURN(trace.level, output_.level());
  PRISM_ASSIGN_OR_RETURN(const PreparedJob p, prepare_job(job_));
  const ExecutionGraph& g = p.built.graph;
  PRISM_ASSIGN_OR_RETURN(options.models.device, memory_.device(p.gpu.name));
  options.fold = fold_.fold();
  options.continue_past_oom = continue_past_oom_;
  PRISM_ASSIGN_OR_RETURN(options.what_if, what_if_.what_if(g.world_size()));
  if (!output_.trace_path.empty()) {
    const bool given = app_->get_option("--trace-ranks")->count() > 0;
    Result<std::vector<Rank>> ranks =
        parse_rank_list(given ? output_.trace_ranks : "0", g.world_size());
    if (!ranks.is_ok()) return ranks.status().with_context("--trace-ranks");
    options.trace_ranks = ranks.value();
  }
  // --html traces each role's first rank too; the trace keeps the asked ones.
  if (!output_.html_path.empty()) trace.ranks = options.trace_ranks;
  options.trace_ranks = output_.traced(g, options.trace_ranks);

  progress(fmt::format("replaying {} ranks...", g.world_size()));
  PRISM_ASSIGN_OR_RETURN(const JobSimulation sim, simulate_job(p, options));
  const std::string text = format_simulate_text(sim.summary);
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
  std::vector<std::pair<std::string, std::string>> outputs;  // all or none
  if (!output_.report_path.empty())
    outputs.emplace_back(output_.report_path, format_simulate_json(sim.summary));
  if (!output_.trace_path.empty())
    outputs.emplace_back(output_.trace_path, format_chrome_trace(g, sim.replay, {}, trace));
  if (!kernels_path_.empty()) outputs.emplace_back(kernels_path_, kernels_csv(p));
  if (!output_.html_path.empty()) {
    ReplayHtmlOptions html;
    html.title = fmt::format("prism simulate: {}", p.job.name);
    html.facts = simulate_facts(sim.summary);
    html.text = text;
    html.cluster = p.job.cluster;
    html.nccl = options.models.nccl;
    html.capacity = options.models.device.capacity;
    for (HtmlFact& f : replay_facts(g, sim.replay)) html.facts.push_back(std::move(f));
    outputs.emplace_back(output_.html_path, format_replay_html(g, sim.replay, html));
  }
  PRISM_RETURN_IF_ERROR(write_files_atomic(outputs));
  if (sim.replay.outcome == ReplayResult::Outcome::kOutOfMemory) return kExitOutOfMemory;
  return sim.summary.completed() ? 0 : kExitNodeFailure;
}

BuildCommand::BuildCommand(CLI::App& parent)
    : app_(parent.add_subcommand("build", "Build the execution graph of a job spec")) {
  job_.add_to(app_);
  app_->add_option("-o,--output", output_path_, "Write the graph to FILE (docs/graph-format.md)")
      ->required()
      ->type_name("FILE");
  app_->add_option("--from-slices", slices_dir_,
                   "Build from the captures in DIR, one rank per role (prism emulate --slices); "
                   "roles without one run the model")
      ->type_name("DIR");
}

bool BuildCommand::selected() const {
  return app_->parsed();
}

Result<int> BuildCommand::run() const {
  PRISM_RETURN_IF_ERROR(check_output_files(*app_, {"--output"}, job_.job_path, "job spec"));
  PRISM_ASSIGN_OR_RETURN(const PreparedJob p,
                         prepare_job(job_, /*program_ok=*/!slices_dir_.empty()));
  ExecutionGraph sliced;
  std::vector<ExtraSection> objects;  // what the captured ranks sent, as --save-graph keeps it
  if (!slices_dir_.empty()) {
    progress(fmt::format("reading the captures in {}...", slices_dir_));
    std::map<Rank, std::vector<CapturedObject>> sent;
    Result<std::vector<RankProgram>> captures = read_slices(slices_dir_, p.job.num_gpus, &sent);
    if (!captures.is_ok()) return captures.status().with_context("--from-slices");
    Result<SlicedGraph> s = graph_from_slices(p.job, p.job.has_model ? &p.built.graph : nullptr,
                                              std::move(captures).value());
    if (!s.is_ok()) return s.status().with_context("--from-slices");
    std::fputs(format_slice_report(s.value()).c_str(), stdout);
    objects = slice_object_sections(s.value(), sent);
    sliced = std::move(s.value().graph);
  }
  const ExecutionGraph& g = slices_dir_.empty() ? p.built.graph : sliced;
  progress(fmt::format("writing {}...", output_path_));
  PRISM_RETURN_IF_ERROR(save_graph(g, output_path_, objects));
  fmt::print("{}: {} ranks, {} roles, {} ops\n", output_path_, g.world_size(), g.roles.size(),
             g.total_ops());
  return 0;
}

}  // namespace prism
