// Emulation's real ranks as processes: started here, or by a launcher on
// other hosts (--external-ranks), and stopped when the job hangs.
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "runtime/emulation.h"
#include "runtime/launcher.h"
#include "runtime/slice_capture.h"
#include "util/file.h"
#include "util/interrupt.h"
#include "util/progress.h"
#include "wire/address.h"

namespace prism::runtime {

// --external-ranks: no rank is started here. The store listens on the
// coordinator's host, the ranks' environment goes to --rank-env, and the
// coordinator waits for the listed ranks (--timeout names the missing).
Result<CoordinatorResult> Emulation::run_external_ranks(Coordinator& coordinator,
                                                        const wire::Address& address) {
  env_.coordinator = address.to_string();
  PRISM_ASSIGN_OR_RETURN(const std::unique_ptr<RendezvousStore> store,
                         start_store(env_, real_, store_hooks()));
  env_.master_port = store->port();
  const std::string& path = options_.external_env_path;
  PRISM_RETURN_IF_ERROR(write_file_atomic(path, external_env_text(env_)));
  std::error_code ec;  // it holds the run's secret: the user's alone
  std::filesystem::permissions(
      path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write, ec);
  if (ec) return Status::io_error(fmt::format("--rank-env {}: {}", path, ec.message()));
  progress(fmt::format(
      "waiting for {} external real ranks ({}) of {} to connect to {} within {:g} s; each needs "
      "the environment in {} and its own RANK and LOCAL_RANK",
      real_.size(), options_.real_ranks, graph_->world_size(), env_.coordinator, options_.timeout_s,
      path));
  Result<CoordinatorResult> done = coordinator.run([] { return interruption(); });
  PRISM_RETURN_IF_ERROR(interruption());
  return done;
}

// Starts the store and the real ranks, runs the coordinator until every
// real rank said goodbye, and waits for their processes.
Result<CoordinatorResult> Emulation::run_real_ranks(Coordinator& coordinator,
                                                    const std::string& address) {
  Launcher launcher(stdio_sink(stdout, stderr));
  if (const int cores = host_cores(); cores > 0 && static_cast<int>(real_.size()) + 1 > cores) {
    fmt::print(stderr,
               "prism emulate: warning: {} real ranks and the coordinator share {} cores: their "
               "compute slows each other, so the real ranks' times are upper bounds (the report "
               "says so)\n",
               real_.size(), cores);
  }
  progress(fmt::format("starting {} real ranks of {}; the coordinator is at {}", real_.size(),
                       graph_->world_size(), address));
  env_.coordinator = address;
  PRISM_ASSIGN_OR_RETURN(const std::unique_ptr<RendezvousStore> store,
                         start_store(env_, real_, store_hooks()));
  env_.master_port = store->port();
  for (Rank r : real_) {
    Result<pid_t> pid = launcher.start(r, options_.program, rank_env(env_, r));
    if (!pid.is_ok()) return pid.status();
  }
  Result<CoordinatorResult> done = coordinator.run([&] {
    return early_end(
        *store, launcher, [&](Rank r) { return coordinator.connected(r); }, "real");
  });
  // A store error (an object of a virtual rank not known) ended a program,
  // whatever the coordinator saw of it next (a goodbye with ops left, the
  // exit code): it is the cause.
  if (const std::vector<std::string> errors = store->errors();
      !errors.empty() && caught_signal() == 0) {
    launcher.terminate_all(std::chrono::milliseconds(2000));
    return Status::invalid_argument(fmt::format("the rendezvous store: {}", errors.front()));
  }
  if (done.is_ok() && done.value().replay.failure && done.value().replay.failure->hung) {
    stop_hung_ranks(launcher, done.value());
    PRISM_RETURN_IF_ERROR(interruption());
    return done;
  }
  if (!done.is_ok()) {
    // Interrupted, the ranks are stopped at once, not waited for.
    const Status why =
        caught_signal() != 0
            ? done.status()
            : done.status().with_detail(exits_text(launcher, done.status().message()));
    launcher.terminate_all(std::chrono::milliseconds(2000));
    return why;
  }
  for (const RankExit& e : launcher.wait_all(env_.timeout(), [] { return caught_signal() != 0; })) {
    if (e.how == RankExit::How::kExited && e.code == 0) continue;
    fmt::print(stderr, "prism emulate: real rank {} (pid {}) {}\n", e.rank, e.pid, e.describe());
    real_rank_failed_ = true;
    // The report's exit is the process's, not the one its goodbye announced.
    for (LiveRankReport& r : done.value().live) {
      if (r.rank != e.rank) continue;
      r.exit_code = e.how == RankExit::How::kSignaled ? 128 + e.code
                    : e.how == RankExit::How::kExited ? e.code
                                                      : -1;
    }
  }
  launcher.terminate_all(std::chrono::milliseconds(2000));
  PRISM_RETURN_IF_ERROR(interruption());
  return done;
}

// The node failure hung the job, and the coordinator told each real rank
// still in it why (`aborted`), as its NCCL watchdog would have ended it:
// they get a moment to end on their own (a program prints the error), then
// whatever still runs is stopped. Their exits go to the report; none is a
// failure of the run.
void Emulation::stop_hung_ranks(Launcher& launcher, CoordinatorResult& result) {
  launcher.wait_all(Launcher::kShutdownGrace, [] { return caught_signal() != 0; });
  for (const RankExit& e : launcher.terminate_all(Launcher::kShutdownGrace)) {
    for (LiveRankReport& r : result.live) {
      if (r.rank != e.rank) continue;
      if (!r.said_bye)
        fmt::print(stderr, "prism emulate: real rank {} (pid {}), told that the job hangs, {}\n",
                   e.rank, e.pid, e.describe());
      else if (e.how != RankExit::How::kExited || e.code != 0)
        fmt::print(stderr, "prism emulate: real rank {} (pid {}) {}\n", e.rank, e.pid,
                   e.describe());
      r.exit_code = e.how == RankExit::How::kSignaled ? 128 + e.code
                    : e.how == RankExit::How::kExited ? e.code
                                                      : -1;
    }
  }
}

}  // namespace prism::runtime
