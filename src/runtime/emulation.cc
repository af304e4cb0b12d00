#include "runtime/emulation.h"

#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <memory>
#include <set>
#include <system_error>
#include <utility>

#include <fmt/format.h>

#include "graph/graph_json.h"
#include "graph/rank_list.h"
#include "replay/replay.h"
#include "report/chrome_trace.h"
#include "report/memory_report.h"
#include "report/replay_html.h"
#include "report/summary.h"
#include "runtime/launcher.h"
#include "runtime/private_dir.h"
#include "runtime/slice_capture.h"
#include "simulation/node_failure.h"
#include "simulation/simulation.h"
#include "slicing/graph_objects.h"
#include "util/file.h"
#include "util/interrupt.h"
#include "util/progress.h"
#include "wire/address.h"

namespace prism::runtime {
namespace {

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

// Who starts the real ranks: this run (PROGRAM), or a launcher elsewhere
// (--external-ranks, which needs a TCP --listen, --rank-env and a graph that
// is not captured here, since capturing starts the program).
Status check_launch(const EmulationOptions& o, const PreparedJob& job) {
  if (!o.external_ranks) {
    if (o.program.empty())
      return Status::invalid_argument(
          "no PROGRAM to run for the real ranks (after --), and no --external-ranks");
    if (!o.external_env_path.empty())
      return Status::invalid_argument("--rank-env is for --external-ranks");
    return Status::ok();
  }
  if (!o.program.empty())
    return Status::invalid_argument(
        "--external-ranks starts no real rank here: drop the PROGRAM after -- and start it with "
        "your own launcher, with the environment of --rank-env");
  const Result<wire::Address> listen = wire::parse_address(o.listen);
  if (!listen.is_ok() || listen.value().kind != wire::Address::Kind::kTcp)
    return Status::invalid_argument(
        "--external-ranks needs --listen tcp:HOST:PORT, an address of this host that the real "
        "ranks' hosts reach (the rendezvous store listens on HOST too)");
  if (o.external_env_path.empty())
    return Status::invalid_argument(
        "--external-ranks needs --rank-env FILE: where the environment the real ranks need "
        "(the coordinator, the store, the run's secret) is written");
  if (!job.job.has_model && o.graph_path.empty())
    return Status::invalid_argument(fmt::format(
        "--external-ranks: job '{}' describes a program, whose graph comes from capturing it "
        "here; give --graph FILE (an earlier run's --save-graph)",
        job.job.name));
  return Status::ok();
}

// An option that only a capture uses, as given ("--slices DIR"), or empty.
std::string capture_only_option(const EmulationOptions& o) {
  if (!o.slices_dir.empty()) return "--slices " + o.slices_dir;
  if (o.capture_jobs) return fmt::format("--capture-jobs {}", *o.capture_jobs);
  if (!o.capture_ranks.empty()) return "--capture-ranks " + o.capture_ranks;
  if (!o.verify_roles) return "--no-verify-roles";
  return "";
}

}  // namespace

Emulation::Emulation(EmulationOptions options) : options_(std::move(options)) {}

Emulation::~Emulation() {
  std::error_code ignored;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
}

Result<EmulationResult> Emulation::run() {
  PRISM_RETURN_IF_ERROR(prepare());
  PRISM_RETURN_IF_ERROR(choose_graph());
  PRISM_RETURN_IF_ERROR(prepare_failure());
  PRISM_RETURN_IF_ERROR(interruption());
  const ExecutionGraph& g = *graph_;
  if (!options_.save_graph_path.empty())
    PRISM_RETURN_IF_ERROR(save_graph(g, options_.save_graph_path, saved_objects()));
  PRISM_ASSIGN_OR_RETURN(const ReplayResult pure, predict());
  PRISM_RETURN_IF_ERROR(interruption());
  const std::string graph_path = dir_ + "/graph.json";
  progress(fmt::format("writing {}...", graph_path));
  PRISM_RETURN_IF_ERROR(save_graph(g, graph_path));
  env_.graph = graph_path;
  // Ranks on other hosts cannot read the private directory: --graph's file
  // (on a file system they share) is theirs.
  if (options_.external_ranks && !options_.graph_path.empty())
    env_.graph = std::filesystem::absolute(options_.graph_path).string();

  EmulationResult out;
  PRISM_ASSIGN_OR_RETURN(out.summary.emulated, emulate());
  // Every real rank said goodbye; their processes end now (emulate() waited).
  EmulateSummary& s = out.summary;
  s.job = job_.job.name;
  s.world_size = g.world_size();
  for (const std::string& a : options_.program) s.program += (s.program.empty() ? "" : " ") + a;
  if (options_.external_ranks) s.program = "started elsewhere (--external-ranks)";
  s.external = options_.external_ranks;
  s.predicted_iteration_time = pure.iteration_time;
  s.predicted_completed = pure.outcome == ReplayResult::Outcome::kCompleted;
  s.predicted = predicted_times(pure, real_);
  if (pure.what_if) s.what_if = what_if_comparison(pure);
  s.host_cores = host_cores();
  const ReplayResult& emulated = s.emulated.replay;
  if (emulated.outcome == ReplayResult::Outcome::kOutOfMemory)
    s.out_of_memory = format_oom_text(g, emulated.oom.front());
  out.real_rank_failed = real_rank_failed_;
  return out;
}

// The job, its models' options, the ranks, the private directory and the
// real ranks' environment.
Status Emulation::prepare() {
  const EmulationOptions& o = options_;
  if (!o.graph_path.empty() && o.graph_path == o.save_graph_path)
    return Status::invalid_argument(
        fmt::format("--save-graph {} is the --graph it would overwrite", o.save_graph_path));
  PRISM_ASSIGN_OR_RETURN(job_, prepare_job(o.job, /*program_ok=*/true));
  PRISM_RETURN_IF_ERROR(check_launch(o, job_));
  PRISM_ASSIGN_OR_RETURN(models_.device, o.memory.device(job_.gpu.name));
  models_.nccl = o.nccl;
  const int world = job_.job.num_gpus;
  Result<std::vector<Rank>> real = parse_rank_list(o.real_ranks, world);
  if (!real.is_ok()) return real.status().with_context("--real-ranks");
  real_ = std::move(real).value();
  if (!o.trace_ranks.empty()) {
    Result<std::vector<Rank>> t = parse_rank_list(o.trace_ranks, world);
    if (!t.is_ok()) return t.status().with_context("--trace-ranks");
    traced_ = std::move(t).value();
  }
  PRISM_RETURN_IF_ERROR(prepare_what_if());
  // Only this user can open it (the graph, the socket); stale ones of killed
  // runs go first (runtime/private_dir.h).
  PRISM_ASSIGN_OR_RETURN(dir_, make_private_dir(std::filesystem::temp_directory_path().string()));
  env_ = RankEnvironment{
      world, job_.job.cluster.gpus_per_node, "", "", o.master_port, o.timeout_s, make_run_secret()};
  if (o.external_ranks) env_.store_host = wire::parse_address(o.listen).value().host;
  return Status::ok();
}

// The what-if options, parsed against the job's world, checked against its
// cluster and its real ranks, before any graph is built or captured.
Status Emulation::prepare_what_if() {
  if (!options_.what_if) return Status::ok();
  PRISM_ASSIGN_OR_RETURN(what_if_, options_.what_if(job_.job.num_gpus));
  for (const Straggler& st : what_if_.stragglers) {
    for (Rank r : st.ranks) {
      if (!std::binary_search(real_.begin(), real_.end(), r)) continue;
      return Status::invalid_argument(fmt::format(
          "--straggler {}:{}: rank {} is a real rank (--real-ranks {}): its compute is its own "
          "program's, measured as it runs; a straggler slows virtual ranks only",
          format_rank_list(st.ranks), st.factor, r, options_.real_ranks));
    }
  }
  if (what_if_.failure) {
    const int per_node = job_.job.cluster.gpus_per_node;
    PRISM_RETURN_IF_ERROR(refuse_failed_real_rank([&](Rank r) { return r / per_node; }));
  }
  return check_link_degradations(what_if_.links, job_.job.cluster);
}

// A real rank's node cannot fail: its process is the user's, on this host,
// and runs on whatever the emulator does.
Status Emulation::refuse_failed_real_rank(const std::function<int(Rank)>& node_of) const {
  for (Rank r : real_) {
    if (node_of(r) != what_if_.failure->node) continue;
    return Status::invalid_argument(fmt::format(
        "{}: node {} holds real rank {} (--real-ranks {}): a real rank's node cannot be failed "
        "by the emulator; fail a node of virtual ranks only",
        describe(*what_if_.failure), what_if_.failure->node, r, options_.real_ranks));
  }
  return Status::ok();
}

// The failed node's ranks in the graph emulated against, none of them real
// (a --graph may place ranks otherwise than the job's cluster).
Status Emulation::prepare_failure() {
  if (!what_if_.failure) return Status::ok();
  const ExecutionGraph& g = *graph_;
  PRISM_RETURN_IF_ERROR(refuse_failed_real_rank([&](Rank r) { return g.layout.node_of(r); }));
  PRISM_ASSIGN_OR_RETURN(failed_, node_failure_ranks(g, *what_if_.failure));
  return Status::ok();
}

// The graph: one given with --graph, the model's, or, for a program's job,
// one built from captures of the program (one rank per role).
Status Emulation::choose_graph() {
  const EmulationOptions& o = options_;
  graph_ = &owned_;
  if (!o.graph_path.empty()) {
    Result<GraphWithObjects> loaded = load_graph_with_objects(o.graph_path);
    if (!loaded.is_ok()) return loaded.status().with_context("--graph");
    owned_ = std::move(loaded.value().graph);
    if (owned_.world_size() != job_.job.num_gpus)
      return Status::invalid_argument(
          fmt::format("--graph {}: a graph of {} ranks; job '{}' has {}", o.graph_path,
                      owned_.world_size(), job_.job.name, job_.job.num_gpus));
    if (const std::optional<GraphObjects>& saved = loaded.value().objects) {
      place_objects(saved->captured);
      for (const CapturedObject& object : saved->objects)
        objects_->record(object.key, object.bytes);
      for (Rank r : saved->captured) {
        if (r != kNone) objects_->finished(r);  // its capture recorded all it sent
      }
    } else {
      object_roles_->unknown = fmt::format(
          "the graph comes from --graph {}, which holds no objects (an earlier --save-graph of a "
          "captured program holds them); run without --graph, so that the program is captured "
          "and the objects its ranks send are recorded",
          o.graph_path);
    }
  } else if (job_.job.has_model) {
    if (const std::string capturing = capture_only_option(o); !capturing.empty())
      return Status::invalid_argument(fmt::format(
          "{}: job '{}' has a model section, so its graph is the model's and no rank is captured",
          capturing, job_.job.name));
    graph_ = &job_.built.graph;
    object_roles_->unknown = fmt::format(
        "job '{}' has a model section, so its virtual ranks run the model's graph and send no "
        "objects; describe the program with a job without a model section, so that it is "
        "captured and the objects its ranks send are recorded",
        job_.job.name);
  } else {
    SliceCaptureRun run{real_, o.program, env_, dir_, o.slices_dir, o.capture_jobs.value_or(1)};
    run.verify = o.verify_roles;
    if (!o.capture_ranks.empty()) {
      Result<std::vector<Rank>> also = parse_rank_list(o.capture_ranks, job_.job.num_gpus);
      if (!also.is_ok()) return also.status().with_context("--capture-ranks");
      run.also = std::move(also).value();
    }
    run.objects = objects_;
    PRISM_ASSIGN_OR_RETURN(SlicedGraph sliced, capture_slices(job_, run));
    owned_ = std::move(sliced.graph);
    std::vector<Rank> captured;
    for (const Role& role : owned_.roles) {
      captured.push_back(kNone);
      for (const RoleSource& source : sliced.roles) {
        if (source.role == role.name) captured.back() = source.captured;
      }
    }
    place_objects(std::move(captured));
  }
  return Status::ok();
}

// Virtual ranks' objects answered from the capture of each one's role in
// owned_: `captured`, the captured rank of each role.
void Emulation::place_objects(std::vector<Rank> captured) {
  ObjectRoles& placed = *object_roles_;
  placed.layout = owned_.layout;
  placed.role_of_rank = owned_.role_of_rank;
  for (const Role& role : owned_.roles) placed.names.push_back(role.name);
  placed.captured = std::move(captured);
}

// What --save-graph keeps besides the graph: each role's captured rank and
// what those ranks sent, when the objects are known (captured here, or
// from --graph).
std::vector<ExtraSection> Emulation::saved_objects() const {
  const ObjectRoles& roles = *object_roles_;
  if (!roles.unknown.empty()) return {};
  GraphObjects saved{roles.captured, {}};
  for (Rank r : std::set<Rank>(roles.captured.begin(), roles.captured.end())) {
    if (r == kNone) continue;
    for (CapturedObject& object : objects_->sent_by(r)) saved.objects.push_back(std::move(object));
  }
  return graph_object_sections(owned_, saved);
}

StoreOptions Emulation::store_hooks() const {
  StoreOptions o;
  o.object_answer = [objects = objects_, roles = object_roles_](const std::string& key) {
    return objects->answer(key, *roles);
  };
  o.on_object = [real = real_objects_](const std::string& key,
                                       const std::vector<std::uint8_t>& bytes) {
    real->record(key, bytes);
  };
  o.on_comm_id = [ids = comm_ids_](std::uint64_t id, const std::vector<std::int32_t>& members) {
    ids->record(id, members);
  };
  return o;
}

// The prediction: the same job replayed with no real rank; with what-if
// options, perturbed and unperturbed (the result's what_if).
Result<ReplayResult> Emulation::predict() const {
  progress(fmt::format("replaying {} ranks without real ranks...", graph_->world_size()));
  SimulationOptions pure;
  pure.models = models_;
  pure.fold = options_.fold;
  pure.trace_ranks = real_;
  pure.what_if = what_if_;
  return simulate_graph(*graph_, job_.job.cluster, pure);
}

// The coordinator, listening where the real ranks reach it, and the run.
Result<CoordinatorResult> Emulation::emulate() {
  CoordinatorOptions co;
  co.live_ranks = real_;
  co.job = job_.job.name;
  co.fold = options_.fold;
  // The HTML report shows each role's first rank: traced too.
  co.trace_ranks = options_.html_path.empty() ? traced_ : with_html_ranks(*graph_, traced_);
  co.timeout = env_.timeout();
  co.capture = !options_.capture_dir.empty();
  co.secret = env_.secret;
  co.comm_ids = comm_ids_;
  // The what-if perturbs the virtual ranks as simulate_graph does the
  // replay's: stragglers as rank overrides, jitter and degraded links in
  // the replay's options and the network.
  ModelOptions models_options = models_;
  ExecutionGraph perturbed;
  if (!what_if_.stragglers.empty()) {
    PRISM_ASSIGN_OR_RETURN(perturbed, apply_stragglers(*graph_, what_if_.stragglers));
  }
  if (what_if_.jitter) {
    co.jitter_ppm = jitter_ppm(*what_if_.jitter);
    co.jitter_seed = what_if_.jitter->seed;
  }
  if (!what_if_.links.empty()) {
    models_options.degraded_links = what_if_.links;
    co.fold_tags = link_fold_tags(job_.job.cluster, graph_->world_size(), what_if_.links);
  }
  co.failure = what_if_.failure;
  co.failed_ranks = failed_;
  co.nccl_timeout = what_if_.nccl_timeout;
  ClusterModels models(job_.job.cluster, models_options);
  Coordinator coordinator(what_if_.stragglers.empty() ? *graph_ : perturbed, models.view(), co);
  wire::Address where{wire::Address::Kind::kUnix, dir_ + "/coordinator.sock", "", 0};
  if (!options_.listen.empty()) {
    Result<wire::Address> a = wire::parse_address(options_.listen);
    if (!a.is_ok()) return a.status().with_context("--listen");
    where = a.value();
    if (!wire::is_loopback(where))
      fmt::print(stderr,
                 "prism emulate: warning: --listen {}: the coordinator is reachable from other "
                 "hosts (a rank must show the run's secret, but anyone can reach the port); "
                 "listen on 127.0.0.1 or a Unix socket unless real ranks run on other hosts\n",
                 where.to_string());
  }
  PRISM_ASSIGN_OR_RETURN(const wire::Address bound, coordinator.listen(where));
  if (options_.external_ranks) return run_external_ranks(coordinator, bound);
  return run_real_ranks(coordinator, bound.to_string());
}

Status Emulation::write_outputs(const EmulationResult& r) const {
  const EmulateSummary& s = r.summary;
  std::vector<std::pair<std::string, std::string>> outputs;  // all or none
  if (!options_.report_path.empty())
    outputs.emplace_back(options_.report_path, format_emulate_json(s));
  if (!options_.trace_path.empty()) {
    // The real ranks labelled real, with their host threads filled; not
    // the ranks traced for the HTML report only.
    TraceOptions trace{options_.trace_level, real_, {}};
    if (!options_.html_path.empty()) {
      std::merge(real_.begin(), real_.end(), traced_.begin(), traced_.end(),
                 std::back_inserter(trace.ranks));
      trace.ranks.erase(std::unique(trace.ranks.begin(), trace.ranks.end()), trace.ranks.end());
    }
    outputs.emplace_back(options_.trace_path, format_chrome_trace(*graph_, s.emulated.replay,
                                                                  s.emulated.computed, trace));
  }
  if (!options_.html_path.empty()) {
    ReplayHtmlOptions html;
    html.title = fmt::format("prism emulate: {}", s.job);
    html.facts = emulate_facts(s);
    html.text = format_emulate_text(s);
    html.cluster = job_.job.cluster;
    html.nccl = models_.nccl;
    html.capacity = models_.device.capacity;
    html.real_ranks = real_;
    html.measured = s.emulated.computed;
    for (HtmlFact& f : replay_facts(*graph_, s.emulated.replay)) html.facts.push_back(std::move(f));
    outputs.emplace_back(options_.html_path, format_replay_html(*graph_, s.emulated.replay, html));
  }
  PRISM_RETURN_IF_ERROR(write_files_atomic(outputs));
  if (!options_.capture_dir.empty()) {
    const std::string& dir = options_.capture_dir;
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return Status::io_error(fmt::format("--capture {}: {}", dir, ec.message()));
    for (RankCapture c : s.emulated.captures) {
      c.objects = real_objects_->sent_by(c.rank);
      PRISM_RETURN_IF_ERROR(
          write_file_atomic(fmt::format("{}/rank{}.json", dir, c.rank), format_capture_json(c)));
    }
  }
  return Status::ok();
}

}  // namespace prism::runtime
