#include "cli/emulate_command.h"

#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/cluster_models.h"
#include "cli/emulate_program.h"
#include "cli/replay_command.h"
#include "compute/compute_model.h"
#include "graph/graph_json.h"
#include "graph/rank_list.h"
#include "mem/memory_model.h"
#include "net/flow_network.h"
#include "replay/nccl_memory.h"
#include "replay/replay.h"
#include "report/chrome_trace.h"
#include "report/memory_report.h"
#include "runtime/coordinator.h"
#include "runtime/emulate_report.h"
#include "runtime/launcher.h"
#include "util/file.h"

namespace prism {
namespace {

// A directory only this user can open, for the graph and the socket; removed
// when the emulation ends.
class PrivateDir {
 public:
  static Result<PrivateDir> make() {
    const std::string pattern = (std::filesystem::temp_directory_path() / "prism-XXXXXX").string();
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr)
      return Status::io_error(fmt::format("cannot make a directory like {}", pattern));
    return PrivateDir(buf.data());
  }
  PrivateDir(PrivateDir&& o) noexcept : path_(std::move(o.path_)) { o.path_.clear(); }
  ~PrivateDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  explicit PrivateDir(std::string p) : path_(std::move(p)) {}
  std::string path_;
};

// The pure replay's iteration time for each of `ranks`, from their timelines.
std::vector<SimTime> predicted_times(const ReplayResult& r, const std::vector<Rank>& ranks) {
  std::vector<SimTime> out;
  for (Rank rank : ranks) {
    const auto it = std::find_if(r.timelines.begin(), r.timelines.end(),
                                 [&](const RankTimeline& t) { return t.rank == rank; });
    PRISM_CHECK(it != r.timelines.end(), "a real rank without its timeline");
    out.push_back(mean_iteration(it->iteration_marks, it->finish));
  }
  return out;
}

// What the launcher knows of the real ranks' processes, for an error.
std::string exits_text(runtime::Launcher& launcher) {
  std::string s;
  for (const runtime::RankExit& e : launcher.wait_all(std::chrono::milliseconds(2000))) {
    if (e.running() || (e.how == runtime::RankExit::How::kExited && e.code == 0)) continue;
    s += fmt::format("; rank {} (pid {}) {}", e.rank, e.pid, e.describe());
  }
  return s;
}

}  // namespace

EmulateCommand::EmulateCommand(CLI::App& parent)
    : app_(parent.add_subcommand(
          "emulate", "Run real ranks of a job against a full-scale emulation of the others")) {
  app_->footer(
      "Example: prism emulate job.yaml --real-ranks 0,63 -- build/bin/rank_player\n"
      "Exit status: 0 every real rank finished, 1 error (a rank crashed, hung, or did what the "
      "graph does not), 4 a rank ran out of memory.");
  job_.add_to(app_);
  app_->add_option("--real-ranks", real_ranks_, "Ranks to run for real, e.g. 0,4095 or 0-3")
      ->required()
      ->type_name("LIST");
  app_->add_option("--report", report_path_, "Write the JSON report to FILE")->type_name("FILE");
  CLI::Option* trace = app_->add_option(
      "--trace", trace_path_, "Write a Chrome/Perfetto trace of real and traced ranks to FILE");
  trace->type_name("FILE");
  app_->add_option("--trace-ranks", trace_ranks_, "Virtual ranks to trace besides the real ones")
      ->type_name("LIST")
      ->needs(trace);
  app_->add_option("--capture", capture_dir_,
                   "Write what each real rank did to DIR/rank<N>.json (docs/emulate.md)")
      ->type_name("DIR");
  app_->add_option("--listen", listen_,
                   "Where real ranks reach the coordinator: tcp:HOST:PORT for ranks on other "
                   "hosts (default: a private Unix socket)")
      ->type_name("ADDRESS");
  app_->add_option("--timeout", timeout_s_,
                   "Seconds a real rank may take to connect, or stay silent while the emulation "
                   "waits for it")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app_->add_option("--master-port", master_port_,
                   "Port of the rendezvous store PrismLLM hosts on 127.0.0.1 (MASTER_PORT for "
                   "the real ranks; 0: any free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  app_->add_flag("--no-fold", no_fold_, "Simulate every virtual rank instead of one per class");
  CLI::Option* graph =
      app_->add_option("--graph", graph_path_,
                       "Emulate against this graph (prism build; or --save-graph of an earlier "
                       "run) instead of building or capturing one")
          ->type_name("FILE");
  app_->add_option("--slices", slices_dir_,
                   "Write the program's captures, one rank per role, to DIR/slice-rank<N>.json "
                   "(for prism build --from-slices)")
      ->type_name("DIR")
      ->excludes(graph);
  app_->add_option("--capture-jobs", capture_jobs_,
                   "Capture up to N roles at once, each beside the others as the job's ranks run "
                   "(1: one after another)")
      ->type_name("N")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str()
      ->excludes(graph);
  app_->add_option("--save-graph", save_graph_path_,
                   "Write the job's graph (built, or captured from the program) to FILE")
      ->type_name("FILE");
  memory_.add_to(app_);
  app_->add_option("PROGRAM", program_, "The program to run for each real rank, after --")
      ->required()
      ->type_name("PROGRAM ARGS...");
}

bool EmulateCommand::selected() const {
  return app_->parsed();
}

Result<int> EmulateCommand::run() const {
  PRISM_RETURN_IF_ERROR(check_output_files(*app_, {"--report", "--trace", "--save-graph"},
                                           job_.job_path, "job spec"));
  if (!graph_path_.empty() && graph_path_ == save_graph_path_)
    return Status::invalid_argument(
        fmt::format("--save-graph {} is the --graph it would overwrite", save_graph_path_));
  PRISM_ASSIGN_OR_RETURN(const PreparedJob p, prepare_job(job_, /*program_ok=*/true));
  PRISM_ASSIGN_OR_RETURN(const DeviceMemoryOptions device, memory_.device(p.gpu.name));
  const int world = p.job.num_gpus;
  Result<std::vector<Rank>> real = parse_rank_list(real_ranks_, world);
  if (!real.is_ok()) return real.status().with_context("--real-ranks");
  std::vector<Rank> traced;
  if (!trace_ranks_.empty()) {
    Result<std::vector<Rank>> t = parse_rank_list(trace_ranks_, world);
    if (!t.is_ok()) return t.status().with_context("--trace-ranks");
    traced = t.value();
  }
  PRISM_ASSIGN_OR_RETURN(PrivateDir dir, PrivateDir::make());
  RankEnvironment env{world, p.job.cluster.gpus_per_node, "", "", master_port_, timeout_s_};

  // The graph: one given with --graph, the model's, or, for a program's
  // job, one built from captures of the program (one rank per role).
  ExecutionGraph owned;
  const ExecutionGraph* graph = &owned;
  if (!graph_path_.empty()) {
    Result<ExecutionGraph> loaded = load_graph(graph_path_);
    if (!loaded.is_ok()) return loaded.status().with_context("--graph");
    owned = std::move(loaded).value();
    if (owned.world_size() != world)
      return Status::invalid_argument(
          fmt::format("--graph {}: a graph of {} ranks; job '{}' has {}", graph_path_,
                      owned.world_size(), p.job.name, world));
  } else if (p.job.has_model) {
    std::string capturing;  // an option that only a capture uses
    if (!slices_dir_.empty())
      capturing = "--slices " + slices_dir_;
    else if (app_->count("--capture-jobs") > 0)
      capturing = fmt::format("--capture-jobs {}", capture_jobs_);
    if (!capturing.empty())
      return Status::invalid_argument(fmt::format(
          "{}: job '{}' has a model section, so its graph is the model's and no rank is captured",
          capturing, p.job.name));
    graph = &p.built.graph;
  } else {
    SliceCaptureRun run{real.value(), program_, env, dir.path(), slices_dir_, capture_jobs_};
    PRISM_ASSIGN_OR_RETURN(SlicedGraph sliced, capture_slices(p, run));
    owned = std::move(sliced.graph);
  }
  const ExecutionGraph& g = *graph;
  if (!save_graph_path_.empty()) PRISM_RETURN_IF_ERROR(save_graph(g, save_graph_path_));

  // The prediction: the same job replayed with no real rank.
  progress(fmt::format("replaying {} ranks without real ranks...", g.world_size()));
  ReplayOptions pure_options;
  pure_options.fold = !no_fold_;
  pure_options.trace_ranks = real.value();
  ClusterModels pure_models(p.job.cluster, NcclSelection{}, device);
  PRISM_ASSIGN_OR_RETURN(const ReplayResult pure, replay(g, pure_options, pure_models.view()));

  const std::string graph_path = dir.path() + "/graph.json";
  progress(fmt::format("writing {}...", graph_path));
  PRISM_RETURN_IF_ERROR(save_graph(g, graph_path));

  runtime::CoordinatorOptions co;
  co.live_ranks = real.value();
  co.job = p.job.name;
  co.fold = !no_fold_;
  co.trace_ranks = traced;
  co.timeout = env.timeout();
  co.capture = !capture_dir_.empty();
  ClusterModels models(p.job.cluster, NcclSelection{}, device);
  runtime::Coordinator coordinator(g, models.view(), co);
  wire::Address where{wire::Address::Kind::kUnix, dir.path() + "/coordinator.sock", "", 0};
  if (!listen_.empty()) {
    Result<wire::Address> a = wire::parse_address(listen_);
    if (!a.is_ok()) return a.status().with_context("--listen");
    where = a.value();
  }
  PRISM_ASSIGN_OR_RETURN(const wire::Address bound, coordinator.listen(where));

  runtime::Launcher launcher(runtime::stdio_sink(stdout, stderr));
  progress(fmt::format("starting {} real ranks of {}; the coordinator is at {}",
                       real.value().size(), g.world_size(), bound.to_string()));
  env.coordinator = bound.to_string();
  env.graph = graph_path;
  PRISM_ASSIGN_OR_RETURN(const std::unique_ptr<runtime::RendezvousStore> store,
                         start_store(env, real.value()));
  env.master_port = store->port();
  for (Rank r : real.value()) {
    Result<pid_t> pid = launcher.start(r, program_, rank_env(env, r));
    if (!pid.is_ok()) return pid.status();
  }
  Result<runtime::CoordinatorResult> done = coordinator.run([&] {
    return early_end(
        *store, launcher, [&](Rank r) { return coordinator.connected(r); }, "real");
  });
  if (!done.is_ok()) {
    const std::string why = done.status().message() + exits_text(launcher);
    launcher.terminate_all(std::chrono::milliseconds(2000));
    return Status::invalid_argument(why);
  }
  // Every real rank said goodbye; their processes end now.
  int exit_status = 0;
  for (const runtime::RankExit& e : launcher.wait_all(env.timeout())) {
    if (e.how == runtime::RankExit::How::kExited && e.code == 0) continue;
    fmt::print(stderr, "prism emulate: real rank {} (pid {}) {}\n", e.rank, e.pid, e.describe());
    exit_status = 1;
  }
  launcher.terminate_all(std::chrono::milliseconds(2000));

  runtime::CoordinatorResult& out = done.value();
  runtime::EmulateSummary s;
  s.job = p.job.name;
  s.world_size = g.world_size();
  for (const std::string& a : program_) s.program += (s.program.empty() ? "" : " ") + a;
  s.iteration_time = out.replay.iteration_time;
  s.predicted_iteration_time = pure.iteration_time;
  s.real = out.live;
  s.predicted = predicted_times(pure, real.value());
  s.folded = out.replay.folded;
  s.simulated_ranks = out.replay.simulated_ranks;
  s.op_events = out.replay.op_events;
  if (out.replay.outcome == ReplayResult::Outcome::kOutOfMemory)
    s.out_of_memory = format_oom_text(g, out.replay.oom.front());
  std::fputs(runtime::format_emulate_text(s).c_str(), stdout);
  std::fflush(stdout);
  if (!report_path_.empty())
    PRISM_RETURN_IF_ERROR(write_file_atomic(report_path_, runtime::format_emulate_json(s)));
  if (!trace_path_.empty()) {
    std::vector<MeasuredSlice> measured;
    for (const runtime::LiveCompute& c : out.computed)
      measured.push_back(MeasuredSlice{c.rank, c.stream, c.name, c.start, c.end});
    PRISM_RETURN_IF_ERROR(
        write_file_atomic(trace_path_, format_chrome_trace(g, out.replay, measured)));
  }
  if (!capture_dir_.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(capture_dir_, ec);
    if (ec) return Status::io_error(fmt::format("--capture {}: {}", capture_dir_, ec.message()));
    for (const RankCapture& c : out.captures) {
      PRISM_RETURN_IF_ERROR(write_file_atomic(fmt::format("{}/rank{}.json", capture_dir_, c.rank),
                                              format_capture_json(c)));
    }
  }
  if (!s.out_of_memory.empty()) return kExitOutOfMemory;
  return exit_status;
}

}  // namespace prism
