// prism_bench_replay: the replay engine at scale (docs/benchmarks.md).
//
// Builds the synthetic Megatron-shaped step (workload/synthetic.h), by default
// TP8 x PP16 x DP64 = 8,192 ranks with over 10,000 ops per rank, then replays
// it folded and unfolded, each run in a forked child so that wall time, CPU
// time and peak RSS are the child's own (wait4's rusage). The replay is
// single-threaded: one core. Prints one table row per mode (medians over the
// repeats) and the targets with pass/fail.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "compute/compute_model.h"
#include "graph/graph_json.h"
#include "mem/memory_model.h"
#include "net/alpha_beta.h"
#include "replay/replay.h"
#include "workload/synthetic.h"

namespace prism {
namespace {

constexpr double kTargetEventsPerSecond = 5e6;
constexpr double kTargetPeakGiB = 2.0;
constexpr double kTargetFoldedSeconds = 1.0;

// What a child reports through its pipe (plain bytes).
struct RunRecord {
  int completed = 0;
  int simulated_ranks = 0;
  std::uint64_t op_events = 0;
  std::int64_t wall_ns = 0;
  std::int64_t makespan_ns = 0;
};

struct Run {
  RunRecord record;
  double cpu_s = 0;
  double peak_rss_gib = 0;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Resident set of this process from /proc/self/status (VmRSS or VmHWM), GiB.
double proc_status_gib(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) {
      return std::strtod(line.c_str() + key.size() + 1, nullptr) / (1 << 20);
    }
  }
  return 0;
}

RunRecord replay_once(const ExecutionGraph& g, bool fold) {
  AlphaBetaModel net;
  RooflineModel compute;
  AllocatorMemoryModel memory(DeviceMemoryOptions{});
  ReplayOptions options;
  options.fold = fold;
  const auto t0 = std::chrono::steady_clock::now();
  const ReplayResult r = replay(g, options, ReplayModels{&net, &compute, &memory}).value();
  RunRecord rec;
  rec.wall_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  rec.completed = r.outcome == ReplayResult::Outcome::kCompleted;
  rec.simulated_ranks = r.simulated_ranks;
  rec.op_events = r.op_events;
  rec.makespan_ns = r.makespan.ns;
  return rec;
}

// Runs one replay in a child process; false if the child failed.
bool run_in_child(const ExecutionGraph& g, bool fold, Run* out) {
  int fds[2];
  if (pipe(fds) != 0) {
    return false;
  }
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    return false;
  }
  if (pid == 0) {
    close(fds[0]);
    const RunRecord rec = replay_once(g, fold);
    const bool ok = write(fds[1], &rec, sizeof rec) == static_cast<ssize_t>(sizeof rec);
    _exit(ok ? 0 : 1);
  }
  close(fds[1]);
  const bool got =
      read(fds[0], &out->record, sizeof out->record) == static_cast<ssize_t>(sizeof out->record);
  close(fds[0]);
  int status = 0;
  rusage ru{};
  if (wait4(pid, &status, 0, &ru) != pid) {
    return false;
  }
  out->cpu_s = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
               static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
  out->peak_rss_gib = static_cast<double>(ru.ru_maxrss) / (1 << 20);  // ru_maxrss is KiB
  return got && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

template <typename T>
T median(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct ModeStats {
  std::string mode;
  int simulated_ranks = 0;
  std::uint64_t op_events = 0;
  double wall_med = 0, wall_min = 0, wall_max = 0;
  double events_per_s = 0;      // per wall second
  double events_per_cpu_s = 0;  // per CPU second: what a loaded machine does not change
  double cpu_med = 0;
  double peak_rss_gib = 0;
  std::int64_t makespan_ns = 0;
};

ModeStats summarize(const std::string& mode, const std::vector<Run>& runs) {
  ModeStats s;
  s.mode = mode;
  s.simulated_ranks = runs.front().record.simulated_ranks;
  s.op_events = runs.front().record.op_events;
  s.makespan_ns = runs.front().record.makespan_ns;
  std::vector<double> wall, cpu;
  for (const Run& r : runs) {
    wall.push_back(static_cast<double>(r.record.wall_ns) * 1e-9);
    cpu.push_back(r.cpu_s);
    s.peak_rss_gib = std::max(s.peak_rss_gib, r.peak_rss_gib);
  }
  s.wall_med = median(wall);
  s.wall_min = *std::min_element(wall.begin(), wall.end());
  s.wall_max = *std::max_element(wall.begin(), wall.end());
  s.cpu_med = median(cpu);
  s.events_per_s = static_cast<double>(s.op_events) / s.wall_med;
  s.events_per_cpu_s = static_cast<double>(s.op_events) / s.cpu_med;
  return s;
}

void print_table(const std::vector<ModeStats>& rows) {
  fmt::print("\n{:<9} {:>9} {:>13} {:>9} {:>9} {:>9} {:>9} {:>12} {:>12} {:>9} {:>11}\n", "mode",
             "ranks_sim", "op_events", "wall_med", "wall_min", "wall_max", "cpu_med",
             "events/s_med", "events/cpu_s", "peak_rss", "sim_time");
  for (const ModeStats& s : rows) {
    fmt::print(
        "{:<9} {:>9} {:>13} {:>8.3f}s {:>8.3f}s {:>8.3f}s {:>8.3f}s {:>12.3g} {:>12.3g} "
        "{:>6.3f}GiB "
        "{:>10.4f}s\n",
        s.mode, s.simulated_ranks, s.op_events, s.wall_med, s.wall_min, s.wall_max, s.cpu_med,
        s.events_per_s, s.events_per_cpu_s, s.peak_rss_gib,
        static_cast<double>(s.makespan_ns) * 1e-9);
  }
}

void print_targets(const std::vector<ModeStats>& rows) {
  fmt::print("\ntargets:\n");
  for (const ModeStats& s : rows) {
    const auto verdict = [](bool ok) { return ok ? "PASS" : "FAIL"; };
    if (s.mode == "unfolded") {
      fmt::print("  unfolded op events/s >= {:.0e}: {:.3g}  {}\n", kTargetEventsPerSecond,
                 s.events_per_s, verdict(s.events_per_s >= kTargetEventsPerSecond));
      fmt::print("  unfolded peak RSS <= {:.0f} GiB: {:.3f} GiB  {}\n", kTargetPeakGiB,
                 s.peak_rss_gib, verdict(s.peak_rss_gib <= kTargetPeakGiB));
    } else {
      fmt::print("  folded wall time <= {:.0f} s: {:.3f} s  {}\n", kTargetFoldedSeconds, s.wall_med,
                 verdict(s.wall_med <= kTargetFoldedSeconds));
    }
  }
}

// Folding must not change the answer: both modes simulate the same step.
void print_agreement(const std::vector<ModeStats>& rows) {
  if (rows.size() != 2) {
    return;
  }
  const bool same = rows[0].makespan_ns == rows[1].makespan_ns;
  fmt::print("  folded and unfolded simulated step time agree: {}\n", same ? "yes" : "NO");
}

struct Flags {
  Synthetic3DOptions workload;
  int repeats = 3;
  std::string mode = "both";
  std::string save;
};

int run_bench(const Flags& f) {
  const auto t0 = std::chrono::steady_clock::now();
  Result<ExecutionGraph> g = make_synthetic_3d(f.workload);
  const double build_s = seconds_since(t0);
  if (!g.is_ok()) {
    fmt::print(stderr, "error: {}\n", g.status().message());
    return 1;
  }
  std::size_t min_ops = SIZE_MAX, max_ops = 0;
  for (const Role& role : g->roles) {
    min_ops = std::min(min_ops, role.ops.size());
    max_ops = std::max(max_ops, role.ops.size());
  }
  fmt::print("graph {}: {} ranks, {} roles, {}..{} ops per rank, {} ops stored\n", g->name,
             g->world_size(), g->roles.size(), min_ops, max_ops, g->total_ops());
  fmt::print("build (generate + finalize + validate): {:.3f} s, RSS after build {:.3f} GiB\n",
             build_s, proc_status_gib("VmRSS"));
  if (!f.save.empty()) {
    const Status st = save_graph(*g, f.save);
    if (!st.is_ok()) {
      fmt::print(stderr, "error: {}\n", st.message());
      return 1;
    }
    fmt::print("saved {}\n", f.save);
  }
  std::vector<ModeStats> rows;
  for (const bool fold : {true, false}) {
    const std::string mode = fold ? "folded" : "unfolded";
    if (f.mode != "both" && f.mode != mode) {
      continue;
    }
    std::vector<Run> runs(f.repeats);
    for (Run& r : runs) {
      if (!run_in_child(*g, fold, &r) || !r.record.completed) {
        fmt::print(stderr, "error: {} replay failed or did not complete\n", mode);
        return 1;
      }
    }
    rows.push_back(summarize(mode, runs));
  }
  print_table(rows);
  print_targets(rows);
  print_agreement(rows);
  return 0;
}

int bench_main(int argc, char** argv) {
  Flags f;
  CLI::App app{"Replay benchmark on the synthetic TP x PP x DP training step"};
  app.add_option("--tp", f.workload.tp, "tensor-parallel size")->capture_default_str();
  app.add_option("--pp", f.workload.pp, "pipeline stages")->capture_default_str();
  app.add_option("--dp", f.workload.dp, "data-parallel size")->capture_default_str();
  app.add_option("--microbatches", f.workload.microbatches)->capture_default_str();
  app.add_option("--layers", f.workload.layers_per_stage, "layers per stage")
      ->capture_default_str();
  app.add_option("--repeats", f.repeats, "runs per mode")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--mode", f.mode)
      ->check(CLI::IsMember({"folded", "unfolded", "both"}))
      ->capture_default_str();
  app.add_option("--save", f.save, "write the graph as JSON (graph/graph_json.h)");
  CLI11_PARSE(app, argc, argv);
  return run_bench(f);
}

}  // namespace
}  // namespace prism

int main(int argc, char** argv) {
  try {
    return prism::bench_main(argc, argv);
  } catch (const std::exception& e) {  // the boundary: one error line, non-zero exit
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
