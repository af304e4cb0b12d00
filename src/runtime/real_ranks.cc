#include "runtime/real_ranks.h"

#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <random>
#include <system_error>

#include <fmt/format.h>

#include "util/interrupt.h"

namespace prism::runtime {
namespace {
constexpr int kNamedDrops = 10;  // dropped store clients named on stderr
}  // namespace

std::string python_dir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  const std::filesystem::path dir = exe.parent_path().parent_path() / "python";
  return std::filesystem::exists(dir / "sitecustomize.py", ec) ? dir.string() : "";
}

Env rank_env(const RankEnvironment& e, Rank rank) {
  const int per_node = e.gpus_per_node;
  Env env{{"RANK", std::to_string(rank)},
          {"WORLD_SIZE", std::to_string(e.world_size)},
          {"LOCAL_RANK", std::to_string(rank % per_node)},
          {"LOCAL_WORLD_SIZE", std::to_string(per_node)},
          {"GROUP_RANK", std::to_string(rank / per_node)},
          {"NODE_RANK", std::to_string(rank / per_node)},
          {"MASTER_ADDR", e.store_host},
          {"MASTER_PORT", std::to_string(e.master_port)},
          {"TORCHELASTIC_USE_AGENT_STORE", "True"},
          {"TORCHELASTIC_RESTART_COUNT", "0"},  // read with the agent's store
          {"PRISM_COORDINATOR", e.coordinator},
          {"PRISM_TIMEOUT_MS", std::to_string(e.timeout().count())},
          {"PRISM_SECRET", e.secret}};
  if (!e.graph.empty()) env.emplace_back("PRISM_GRAPH", e.graph);
  // As torchrun does: one OpenMP thread per rank unless the user chose. The
  // real ranks share the host's cores; torch's default of one thread per
  // core beside the backend's progress thread slowed FSDP2's steps 60-fold
  // on 2 cores (750 ms instead of 13).
  if (const char* omp = ::getenv("OMP_NUM_THREADS"); omp == nullptr || *omp == '\0')
    env.emplace_back("OMP_NUM_THREADS", "1");
  if (const std::string py = python_dir(); !py.empty()) {
    const char* old = ::getenv("PYTHONPATH");
    env.emplace_back("PYTHONPATH", old != nullptr && *old != '\0' ? py + ":" + old : py);
  }
  return env;
}

std::string external_env_text(const RankEnvironment& e) {
  std::string s;
  for (const auto& [k, v] : rank_env(e, 0)) {
    // Per rank (the launcher's), or this host's own Python path.
    if (k == "RANK" || k == "LOCAL_RANK" || k == "GROUP_RANK" || k == "NODE_RANK" ||
        k == "PYTHONPATH")
      continue;
    s += fmt::format("{}={}\n", k, v);
  }
  return s;
}

std::string make_run_secret() {
  std::random_device rd;
  std::string s;
  for (int i = 0; i < 4; ++i) s += fmt::format("{:08x}", static_cast<std::uint32_t>(rd()));
  return s;
}

Result<std::unique_ptr<RendezvousStore>> start_store(const RankEnvironment& e,
                                                     const std::vector<Rank>& real,
                                                     const StoreOptions& objects) {
  StoreOptions o;
  o.on_object = objects.on_object;
  o.object_answer = objects.object_answer;
  o.on_comm_id = objects.on_comm_id;
  o.world_size = e.world_size;
  o.real_ranks = real;
  // A client that does not speak TCPStore (anyone on the host can connect)
  // is dropped and named once; the run goes on.
  auto named = std::make_shared<std::atomic<int>>(0);
  o.on_drop = [named](const std::string& what) {
    const int n = (*named)++;
    if (n < kNamedDrops)
      fmt::print(stderr, "prism emulate: warning: {}; the run goes on without that client\n", what);
    if (n == kNamedDrops)
      fmt::print(stderr,
                 "prism emulate: warning: the rendezvous store dropped more clients that did not "
                 "speak its protocol; they are not named\n");
  };
  if (const char* t = std::getenv("PRISM_STORE_TRACE");
      t != nullptr && std::string_view(t) == "1") {
    o.on_trace = [](const std::string& line) { fmt::print(stderr, "prism emulate: {}\n", line); };
  }
  Result<std::unique_ptr<RendezvousStore>> store =
      RendezvousStore::start(e.store_host, static_cast<std::uint16_t>(e.master_port), o);
  if (!store.is_ok())
    return store.status().with_context(
        fmt::format("the rendezvous store at {}:{} (MASTER_PORT; --master-port 0 picks a free one)",
                    e.store_host, e.master_port));
  return store;
}

Status early_end(const RendezvousStore& store, Launcher& launcher,
                 const std::function<bool(Rank)>& connected, std::string_view who) {
  PRISM_RETURN_IF_ERROR(interruption());
  const std::vector<std::string> errors = store.errors();
  if (!errors.empty())
    return Status::invalid_argument(fmt::format("the rendezvous store: {}", errors.front()));
  for (const RankExit& e : launcher.poll_exits()) {
    if (!connected(e.rank))
      return Status::unavailable(
          fmt::format("{} rank {} (pid {}) {} before it connected to the coordinator", who, e.rank,
                      e.pid, e.describe()));
  }
  return Status::ok();
}

std::string exits_text(Launcher& launcher, std::string_view said) {
  std::string s;
  for (const RankExit& e : launcher.wait_all(std::chrono::milliseconds(2000))) {
    if (e.running() || (e.how == RankExit::How::kExited && e.code == 0)) continue;
    const std::string exit = fmt::format("rank {} (pid {}) {}", e.rank, e.pid, e.describe());
    if (said.find(exit) == std::string_view::npos) s += "; " + exit;
  }
  return s;
}

}  // namespace prism::runtime
