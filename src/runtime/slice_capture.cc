#include "runtime/slice_capture.h"

#include <atomic>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <system_error>
#include <thread>

#include <fmt/format.h>

#include "runtime/program_capture.h"
#include "runtime/split_color.h"
#include "slicing/capture_graph.h"
#include "util/check.h"
#include "util/file.h"
#include "util/interrupt.h"

namespace prism::runtime {

namespace {

// One capture: the program runs as `rank`; what it did, or why not.
// `stop` ends it early (a capture beside it failed); `stopped` then says so.
// `objects` answers the objects of virtual ranks (run.objects, by the
// layout's roles).
Result<RankCapture> capture_rank(const PreparedJob& p, const SliceCaptureRun& run,
                                 const Layout& layout, const StoreOptions& objects, Rank rank,
                                 const std::atomic<bool>& stop, bool& stopped) {
  auto comm_ids = std::make_shared<CommIds>();
  ProgramCapture capture(ProgramCaptureOptions{rank, p.job.num_gpus, p.job.name, run.env.timeout(),
                                               grid_groups_of(layout, rank), run.env.secret,
                                               comm_ids});
  PRISM_ASSIGN_OR_RETURN(
      const wire::Address bound,
      capture.listen(wire::Address{wire::Address::Kind::kUnix,
                                   fmt::format("{}/capture{}.sock", run.socket_dir, rank), "", 0}));
  RankEnvironment env = run.env;
  env.coordinator = bound.to_string();
  env.graph.clear();
  if (run.jobs > 1) env.master_port = 0;  // side by side, each capture's store on its own port
  StoreOptions hooks = objects;
  hooks.on_comm_id = [comm_ids](std::uint64_t id, const std::vector<std::int32_t>& members) {
    comm_ids->record(id, members);
  };
  PRISM_ASSIGN_OR_RETURN(const std::unique_ptr<RendezvousStore> store,
                         start_store(env, {rank}, hooks));
  env.master_port = store->port();
  Launcher launcher(stdio_sink(stdout, stderr));
  PRISM_RETURN_IF_ERROR(launcher.start(rank, run.program, rank_env(env, rank)).status());
  Result<RankCapture> done = capture.run([&] {
    if (stop.load()) {
      stopped = true;
      return Status::aborted("stopped: a capture beside it failed");
    }
    return early_end(
        *store, launcher, [&](Rank) { return capture.connected(); }, "captured");
  });
  // A store error (an object of a virtual rank not known) ended the
  // program, whatever the capture saw of it next: it is the cause.
  if (const std::vector<std::string> errors = store->errors(); !errors.empty()) {
    launcher.terminate_all(std::chrono::milliseconds(2000));
    return Status::invalid_argument(
        fmt::format("the capture of rank {}: the rendezvous store: {}", rank, errors.front()));
  }
  if (!done.is_ok()) {
    // How the rank's process ended, as the emulation says it.
    const Status why =
        stopped || caught_signal() != 0
            ? done.status()
            : done.status().with_detail(exits_text(launcher, done.status().message()));
    launcher.terminate_all(std::chrono::milliseconds(2000));
    return why.with_context(fmt::format("the capture of rank {}", rank));
  }
  for (const RankExit& e :
       launcher.wait_all(run.env.timeout(), [] { return caught_signal() != 0; })) {
    if (e.how == RankExit::How::kExited && e.code == 0) continue;
    launcher.terminate_all(std::chrono::milliseconds(2000));
    return Status::invalid_argument(
        fmt::format("the capture of rank {}: its process (pid {}) {} after its goodbye: the "
                    "capture is not trusted",
                    rank, e.pid, e.describe()));
  }
  return std::move(done).value();
}

// Why a rank is captured.
enum class Purpose {
  kRepresent,  // its role's representative
  kCheck,      // a second rank of its role (run.verify) or one the user listed
  kSplit,      // its role's ranks differ: a probe of the rules that could split it
};

// Captures role `ri` as `rank`, writes it to --slices, and reads its program
// from the captured messages.
Result<RankProgram> capture_role(const PreparedJob& p, const SliceCaptureRun& run,
                                 const SliceRoles& roles, const StoreOptions& objects,
                                 std::size_t ri, Rank rank, Purpose purpose,
                                 const std::atomic<bool>& stop, bool& stopped) {
  if (purpose == Purpose::kSplit) {
    fmt::print(stderr,
               "prism emulate: splitting role {} of {} ({}): its ranks differ; rank {} runs too, "
               "to tell apart the rules of the layout that could split it\n",
               ri + 1, roles.names.size(), roles.names[ri], rank);
  } else if (purpose == Purpose::kCheck) {
    fmt::print(stderr,
               "prism emulate: checking role {} of {} ({}): rank {} runs too, to be compared op "
               "by op with the role's representative\n",
               ri + 1, roles.names.size(), roles.names[ri], rank);
  } else {
    fmt::print(stderr,
               "prism emulate: capturing role {} of {} ({}, {} ranks): rank {} runs with virtual "
               "peers that answer at once\n",
               ri + 1, roles.names.size(), roles.names[ri], roles.ranks[ri].size(), rank);
  }
  if (run.objects) run.objects->started(rank);
  Result<RankCapture> done = capture_rank(p, run, roles.layout, objects, rank, stop, stopped);
  if (run.objects) run.objects->finished(rank);
  PRISM_ASSIGN_OR_RETURN(RankCapture captured, std::move(done));
  if (run.objects) captured.objects = run.objects->sent_by(rank);
  if (!run.slices_dir.empty())
    PRISM_RETURN_IF_ERROR(write_file_atomic(
        fmt::format("{}/slice-rank{}.json", run.slices_dir, rank), format_capture_json(captured)));
  PRISM_ASSIGN_OR_RETURN(
      RankProgram program,
      program_from_capture(captured, fmt::format("the capture of rank {}", rank), p.job.num_gpus));
  std::size_t comm = 0;
  for (const Op& op : program.role.ops) comm += is_communication(op.kind) ? 1 : 0;
  fmt::print(stderr, "prism emulate: captured rank {}: {} communication ops, {} ops in all\n", rank,
             comm, program.role.ops.size());
  return program;
}

// The rank each role is captured as: its lowest real rank, else its lowest.
std::vector<Rank> captured_ranks(const SliceRoles& roles, const std::vector<Rank>& real) {
  std::vector<Rank> rank_of(roles.names.size());
  for (std::size_t ri = 0; ri < rank_of.size(); ++ri) {
    rank_of[ri] = roles.ranks[ri].front();
    for (Rank r : real) {
      if (roles.role_of_rank[static_cast<std::size_t>(r)] == static_cast<std::int32_t>(ri)) {
        rank_of[ri] = r;
        break;
      }
    }
  }
  return rank_of;
}

// What is captured, in order: each role's representative, then (run.verify)
// a second rank of each role of more than one, then run.also's ranks not
// captured already, each with its role.
std::vector<std::pair<std::size_t, Rank>> capture_tasks(const SliceRoles& roles,
                                                        const std::vector<Rank>& rank_of,
                                                        const SliceCaptureRun& run) {
  std::vector<std::pair<std::size_t, Rank>> tasks;
  std::set<Rank> taken;
  const auto add = [&](std::size_t ri, Rank r) {
    if (taken.insert(r).second) tasks.emplace_back(ri, r);
  };
  for (std::size_t ri = 0; ri < rank_of.size(); ++ri) add(ri, rank_of[ri]);
  if (run.verify) {
    for (std::size_t ri = 0; ri < rank_of.size(); ++ri) {
      const std::vector<Rank>& ranks = roles.ranks[ri];
      if (ranks.size() > 1) add(ri, ranks.back() != rank_of[ri] ? ranks.back() : ranks.front());
    }
  }
  for (Rank r : run.also)
    add(static_cast<std::size_t>(roles.role_of_rank[static_cast<std::size_t>(r)]), r);
  return tasks;
}

// Captures `tasks` (role, rank), up to run.jobs at a time, and appends
// their programs to `out` in task order.
Status capture_all(const PreparedJob& p, const SliceCaptureRun& run, const SliceRoles& roles,
                   const StoreOptions& objects,
                   const std::vector<std::pair<std::size_t, Rank>>& tasks,
                   const std::vector<Purpose>& purposes, std::vector<RankProgram>& out) {
  const std::size_t n = tasks.size();
  // Up to run.jobs workers take the roles in order; the first failure stops
  // the captures under way and starts no more.
  struct Slot {
    std::optional<Result<RankProgram>> result;  // unset: never started
    bool stopped = false;                       // failed only because another did
  };
  std::vector<Slot> slots(n);
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  const auto work = [&] {
    for (std::size_t ri; !failed.load() && (ri = next.fetch_add(1)) < n;) {
      Slot& s = slots[ri];
      const auto [role, rank] = tasks[ri];
      s.result = capture_role(p, run, roles, objects, role, rank, purposes[ri], failed, s.stopped);
      if (!s.result->is_ok()) failed = true;
    }
  };
  std::vector<std::thread> workers;
  for (std::size_t i = 1; i < std::min<std::size_t>(static_cast<std::size_t>(run.jobs), n); ++i) {
    try {
      workers.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // no more threads: fewer captures at once
    }
  }
  work();
  for (std::thread& t : workers) t.join();
  for (const Slot& s : slots) {
    if (s.result && !s.result->is_ok() && !s.stopped) return s.result->status();
  }
  for (Slot& s : slots) {
    PRISM_CHECK(s.result && s.result->is_ok(), "a role neither captured nor failed");
    out.push_back(std::move(*s.result).value());
  }
  return Status::ok();
}

}  // namespace

Result<SlicedGraph> capture_slices(const PreparedJob& p, const SliceCaptureRun& run) {
  PRISM_RETURN_IF_ERROR(check_capturable(p.job));
  PRISM_ASSIGN_OR_RETURN(const SliceRoles roles, slice_roles(p.job, nullptr));
  if (!run.slices_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(run.slices_dir, ec);
    if (ec) return Status::io_error(fmt::format("--slices {}: {}", run.slices_dir, ec.message()));
  }
  const std::vector<Rank> rank_of = captured_ranks(roles, run.real);
  std::vector<std::pair<std::size_t, Rank>> tasks = capture_tasks(roles, rank_of, run);
  std::vector<Purpose> purposes;
  for (const auto& [role, rank] : tasks)
    purposes.push_back(rank == rank_of[role] ? Purpose::kRepresent : Purpose::kCheck);
  // Capture, find the roles; where a role's ranks differ, capture the ranks
  // that tell the rules that could split it apart, and find them again.
  const RoleHints hints{run.real, run.also};
  // Virtual ranks' objects come from their layout role's representative.
  StoreOptions objects;
  if (run.objects) {
    auto placed = std::make_shared<ObjectRoles>(
        ObjectRoles{roles.layout, roles.names, roles.role_of_rank, rank_of, ""});
    objects.on_object = [to = run.objects](const std::string& key,
                                           const std::vector<std::uint8_t>& bytes) {
      to->record(key, bytes);
    };
    objects.object_answer = [from = run.objects, placed](const std::string& key) {
      return from->answer(key, *placed);
    };
  }
  std::vector<RankProgram> captured;
  for (;;) {
    PRISM_RETURN_IF_ERROR(capture_all(p, run, roles, objects, tasks, purposes, captured));
    Result<FoundRoles> found = find_roles(p.job, captured, hints);
    if (!found.is_ok()) {  // say what it means before anyone emulates
      return found.status().with_detail(
          "; found here before any emulation. --capture-ranks LIST captures the listed ranks "
          "too, and makes each listed rank of such a role a role of its own (list the ranks "
          "that run programs of their own); --no-verify-roles skips the check, and the "
          "emulation then fails where the ranks differ");
    }
    if (found.value().capture.empty()) break;
    tasks.clear();
    purposes.clear();
    for (Rank r : found.value().capture) {
      tasks.emplace_back(static_cast<std::size_t>(roles.role_of_rank[static_cast<std::size_t>(r)]),
                         r);
      purposes.push_back(Purpose::kSplit);
    }
  }
  const std::size_t n = captured.size();
  PRISM_ASSIGN_OR_RETURN(SlicedGraph sliced,
                         graph_from_slices(p.job, nullptr, std::move(captured), hints));
  fmt::print(stderr, "prism emulate: the graph of {} ranks, built from {} captured {}:\n{}",
             sliced.graph.world_size(), n, n == 1 ? "rank" : "ranks", format_slice_report(sliced));
  return sliced;
}

}  // namespace prism::runtime
