#include "cli/replay_command.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/job_setup.h"
#include "compute/compute_model.h"
#include "graph/graph_json.h"
#include "graph/rank_list.h"
#include "net/cluster_yaml.h"
#include "report/chrome_trace.h"
#include "report/replay_html.h"
#include "report/report_json.h"
#include "report/summary.h"
#include "simulation/simulation.h"
#include "util/file.h"

namespace prism {
namespace {

// `value` (in the option's unit) times `scale` as a positive integer of the
// model's unit (bytes/s, ns), which must be at least 1.
Result<std::int64_t> to_model_units(std::string_view flag, double value, double scale) {
  if (!std::isfinite(value) || value <= 0)
    return Status::invalid_argument(fmt::format("{} must be > 0 (got {})", flag, value));
  const double units = value * scale;
  if (units > 1e18)
    return Status::invalid_argument(fmt::format("{} is too large (got {})", flag, value));
  const auto n = static_cast<std::int64_t>(std::llround(units));
  if (n < 1)
    return Status::invalid_argument(
        fmt::format("{} is below the model's resolution (got {})", flag, value));
  return n;
}

// --trace-ranks against the graph: "0,17" or "0-3,17" -> ascending ranks. A
// negative rank, or one past the world (named with the world size), is
// rejected before the list is parsed and its ranges expanded.
Result<std::vector<Rank>> parse_trace_ranks(std::string_view text, int world_size) {
  bool item_start = true;
  for (std::string_view rest = text; !rest.empty();) {
    if (item_start && rest.front() == '-')
      return Status::invalid_argument(
          fmt::format("--trace-ranks: \"{}\" is negative", rest.substr(0, rest.find(','))));
    const std::size_t end = std::min(rest.find_first_of(",-"), rest.size());
    std::int64_t v = 0;
    const auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + end, v);
    if (ec == std::errc() && ptr == rest.data() + end && v >= world_size)
      return Status::invalid_argument(
          fmt::format("--trace-ranks: rank {} is out of range: the graph has {} ranks (0-{})", v,
                      world_size, world_size - 1));
    item_start = end < rest.size() && rest[end] == ',';
    rest.remove_prefix(std::min(end + 1, rest.size()));
  }
  Result<std::vector<Rank>> ranks = parse_rank_list(text, world_size);
  if (!ranks.is_ok()) return ranks.status().with_context("--trace-ranks");
  return ranks;
}

}  // namespace

ReplayCommand::ReplayCommand(CLI::App& parent)
    : app_(
          parent.add_subcommand("replay", "Replay an execution graph and report where time goes")) {
  const RooflineParams compute;
  gpu_tflops_ = compute.peak_flops / 1e12;
  hbm_bw_gbps_ = static_cast<double>(compute.hbm_bw.bytes_per_s) / 1e9;

  app_->footer(
      "Exit status: 0 replay completed, 1 error, 3 replay deadlocked, 4 a rank ran out of memory, "
      "6 a --fail-node failure hung the job (summary and report still written).");
  app_->add_option("GRAPH", graph_path_, "Execution graph file (docs/graph-format.md)")
      ->required()
      ->type_name("FILE");
  output_.add_to(app_);
  fold_.add_to(app_);
  app_->add_option("--cluster", cluster_,
                   "Cluster preset (dgx-a100, dgx-h100, hgx-h200, dgx-b200) or YAML file "
                   "(default: the cluster the graph was built for, else dgx-h100)")
      ->type_name("NAME|FILE");
  nccl_.add_to(app_);
  app_->add_option("--gpu-tflops", gpu_tflops_, "GPU peak dense throughput, TFLOP/s")
      ->capture_default_str();
  app_->add_option("--hbm-bw", hbm_bw_gbps_, "GPU memory bandwidth, GB/s")->capture_default_str();
  memory_.add_to(app_);
  what_if_.add_to(app_);
  app_->add_flag("--continue-past-oom", continue_past_oom_,
                 "After an out-of-memory replay, replay again with unlimited memory and report "
                 "what each role needs and the iteration time as if it fitted (exit status stays "
                 "4)");
}

bool ReplayCommand::selected() const {
  return app_->parsed();
}

Result<int> ReplayCommand::run() const {
  SimulationOptions options;
  RooflineParams& compute = options.models.compute;
  PRISM_ASSIGN_OR_RETURN(std::int64_t flops, to_model_units("--gpu-tflops", gpu_tflops_, 1e12));
  compute.peak_flops = static_cast<double>(flops);
  PRISM_ASSIGN_OR_RETURN(compute.hbm_bw.bytes_per_s, to_model_units("--hbm-bw", hbm_bw_gbps_, 1e9));
  PRISM_ASSIGN_OR_RETURN(options.models.nccl, nccl_.selection());

  PRISM_RETURN_IF_ERROR(
      check_output_files(*app_, {"--report", "--trace", "--html"}, graph_path_, "graph"));
  TraceOptions trace;
  PRISM_ASSIGN_OR_RETURN(trace.level, output_.level());

  progress(fmt::format("loading {}...", graph_path_));
  PRISM_ASSIGN_OR_RETURN(ExecutionGraph g, load_graph(graph_path_));
  options.fold = fold_.fold();
  options.continue_past_oom = continue_past_oom_;
  PRISM_ASSIGN_OR_RETURN(options.what_if, what_if_.what_if(g.world_size()));
  if (!output_.trace_path.empty()) {
    const bool given = app_->get_option("--trace-ranks")->count() > 0;
    PRISM_ASSIGN_OR_RETURN(options.trace_ranks,
                           parse_trace_ranks(given ? output_.trace_ranks : "0", g.world_size()));
  }
  // --html traces each role's first rank too; the trace keeps the asked ones.
  if (!output_.html_path.empty()) trace.ranks = options.trace_ranks;
  options.trace_ranks = output_.traced(g, options.trace_ranks);

  std::optional<std::string> given;
  if (app_->count("--cluster") > 0) given = cluster_;
  PRISM_ASSIGN_OR_RETURN(const ClusterSpec cluster, graph_cluster(g, given, graph_path_));
  PRISM_ASSIGN_OR_RETURN(options.models.device, memory_.device(cluster.gpu_model));
  progress(fmt::format("replaying {} ranks...", g.world_size()));
  PRISM_ASSIGN_OR_RETURN(const ReplayResult result, simulate_graph(g, cluster, options));

  const std::string text = format_summary(g, result);
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
  std::vector<std::pair<std::string, std::string>> outputs;  // all or none
  if (!output_.report_path.empty())
    outputs.emplace_back(output_.report_path, format_report_json(g, result));
  if (!output_.trace_path.empty())
    outputs.emplace_back(output_.trace_path, format_chrome_trace(g, result, {}, trace));
  if (!output_.html_path.empty()) {
    ReplayHtmlOptions html;
    html.title = fmt::format("prism replay: {}", g.name);
    html.facts = replay_facts(g, result);
    html.text = text;
    html.cluster = cluster;
    html.nccl = options.models.nccl;
    html.capacity = options.models.device.capacity;
    outputs.emplace_back(output_.html_path, format_replay_html(g, result, html));
  }
  PRISM_RETURN_IF_ERROR(write_files_atomic(outputs));
  switch (result.outcome) {
    case ReplayResult::Outcome::kDeadlock:
      return result.failure ? kExitNodeFailure : kExitDeadlock;
    case ReplayResult::Outcome::kOutOfMemory:
      return kExitOutOfMemory;
    case ReplayResult::Outcome::kCompleted:
      break;
  }
  return 0;
}

}  // namespace prism
