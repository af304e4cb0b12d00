#include "cli/emulate_program.h"

#include <stdlib.h>

#include <filesystem>

#include <fmt/format.h>

#include "runtime/program_capture.h"
#include "util/file.h"
#include "workload/capture_graph.h"

namespace prism {

std::string python_dir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  const std::filesystem::path dir = exe.parent_path().parent_path() / "python";
  return std::filesystem::exists(dir / "sitecustomize.py", ec) ? dir.string() : "";
}

runtime::Env rank_env(const RankEnvironment& e, Rank rank) {
  const int per_node = e.gpus_per_node;
  runtime::Env env{{"RANK", std::to_string(rank)},
                   {"WORLD_SIZE", std::to_string(e.world_size)},
                   {"LOCAL_RANK", std::to_string(rank % per_node)},
                   {"LOCAL_WORLD_SIZE", std::to_string(per_node)},
                   {"GROUP_RANK", std::to_string(rank / per_node)},
                   {"NODE_RANK", std::to_string(rank / per_node)},
                   {"MASTER_ADDR", "127.0.0.1"},
                   {"MASTER_PORT", std::to_string(e.master_port)},
                   {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                   {"TORCHELASTIC_RESTART_COUNT", "0"},  // read with the agent's store
                   {"PRISM_COORDINATOR", e.coordinator},
                   {"PRISM_TIMEOUT_MS", std::to_string(e.timeout().count())}};
  if (!e.graph.empty()) env.emplace_back("PRISM_GRAPH", e.graph);
  if (const std::string py = python_dir(); !py.empty()) {
    const char* old = ::getenv("PYTHONPATH");
    env.emplace_back("PYTHONPATH", old != nullptr && *old != '\0' ? py + ":" + old : py);
  }
  return env;
}

Result<std::unique_ptr<runtime::RendezvousStore>> start_store(const RankEnvironment& e,
                                                              const std::vector<Rank>& real) {
  runtime::StoreOptions o;
  o.world_size = e.world_size;
  o.real_ranks = real;
  Result<std::unique_ptr<runtime::RendezvousStore>> store =
      runtime::RendezvousStore::start("127.0.0.1", static_cast<std::uint16_t>(e.master_port), o);
  if (!store.is_ok())
    return store.status().with_context(fmt::format(
        "the rendezvous store at 127.0.0.1:{} (MASTER_PORT; --master-port 0 picks a free one)",
        e.master_port));
  return store;
}

Status early_end(const runtime::RendezvousStore& store, runtime::Launcher& launcher,
                 const std::function<bool(Rank)>& connected, std::string_view who) {
  const std::vector<std::string> errors = store.errors();
  if (!errors.empty())
    return Status::invalid_argument(fmt::format("the rendezvous store: {}", errors.front()));
  for (const runtime::RankExit& e : launcher.poll_exits()) {
    if (!connected(e.rank))
      return Status::invalid_argument(
          fmt::format("{} rank {} (pid {}) {} before it connected to the coordinator", who, e.rank,
                      e.pid, e.describe()));
  }
  return Status::ok();
}

Result<ExecutionGraph> capture_program(const PreparedJob& p, const ProgramCaptureRun& run) {
  runtime::ProgramCapture capture(
      runtime::ProgramCaptureOptions{run.rank, p.job.num_gpus, p.job.name, run.env.timeout()});
  PRISM_ASSIGN_OR_RETURN(const wire::Address where, wire::parse_address(run.env.coordinator));
  PRISM_ASSIGN_OR_RETURN(const wire::Address bound, capture.listen(where));
  RankEnvironment env = run.env;
  env.coordinator = bound.to_string();
  PRISM_ASSIGN_OR_RETURN(const std::unique_ptr<runtime::RendezvousStore> store,
                         start_store(env, {run.rank}));
  env.master_port = store->port();

  fmt::print(stderr,
             "prism emulate: capturing rank {} of {}: every rank of a data-parallel program runs "
             "its program, so one run of it is the graph of all\n",
             run.rank, p.job.num_gpus);
  runtime::Launcher launcher(runtime::stdio_sink(stdout, stderr));
  PRISM_RETURN_IF_ERROR(launcher.start(run.rank, run.program, rank_env(env, run.rank)).status());
  Result<runtime::RankCapture> done = capture.run([&] {
    return early_end(
        *store, launcher, [&](Rank) { return capture.connected(); }, "captured");
  });
  if (!done.is_ok()) {
    launcher.terminate_all(std::chrono::milliseconds(2000));
    return done.status().with_context("capture");
  }
  for (const runtime::RankExit& e : launcher.wait_all(run.env.timeout())) {
    if (e.how == runtime::RankExit::How::kExited && e.code == 0) continue;
    launcher.terminate_all(std::chrono::milliseconds(2000));
    return Status::invalid_argument(
        fmt::format("capture: rank {} (pid {}) {} after its goodbye: the capture is not trusted",
                    e.rank, e.pid, e.describe()));
  }
  const std::string json = runtime::format_capture_json(done.value());
  if (!run.capture_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(run.capture_dir, ec);
    if (ec) return Status::io_error(fmt::format("--capture {}: {}", run.capture_dir, ec.message()));
    PRISM_RETURN_IF_ERROR(
        write_file_atomic(fmt::format("{}/program-rank{}.json", run.capture_dir, run.rank), json));
  }
  PRISM_ASSIGN_OR_RETURN(
      ExecutionGraph g,
      graph_from_capture(p.job, json, fmt::format("the capture of rank {}", run.rank)));
  std::size_t comm = 0;
  for (const Op& op : g.roles.front().ops) comm += is_communication(op.kind) ? 1 : 0;
  fmt::print(stderr,
             "prism emulate: captured rank {}: {} communication ops, {} ops in all; the graph "
             "of {} ranks is built from it\n",
             run.rank, comm, g.roles.front().ops.size(), g.world_size());
  return g;
}

}  // namespace prism
