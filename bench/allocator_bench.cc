// prism_bench_allocator: the caching allocator model's speed
// (docs/memory_allocator_notes.md). Target: >= 10 million alloc/free events
// per second on one core.
//
// Each workload is a pre-built op list (malloc, free, free_deferred,
// complete_free) replayed --passes times into a fresh CachingAllocator on
// an 80 GiB SimulatedDevice; a run is timed whole, first pass (segment
// creation) included. Events are the four calls above; the rates are their
// count over the median wall time and over the median CPU time of
// --repeats runs. The target is judged on CPU time (one core), which other
// processes on a shared machine disturb less.
//   training: a transformer-like step (16 layers, 4 micro-batches):
//     persistent parameters, per layer and micro-batch saved activations
//     (16-128 MiB) and small tensors (4-64 KiB), short-lived temporaries
//     (8 B - 128 MiB), backward in reverse, 25 MiB gradient buckets freed
//     with record_stream and completed 12 ops later, an optimizer pass on a
//     second stream; about 480 live blocks at the peak.
//   random: sizes log-uniform in 512 B - 256 MiB on three streams, about 300
//     live blocks, 10% of frees deferred and completed at random later.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include "mem/alloc_config.h"
#include "mem/caching_allocator.h"

namespace prism {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::int64_t kKiB = 1024;
constexpr std::int64_t kMiB = 1024 * kKiB;
constexpr std::int64_t kGiB = 1024 * kMiB;

struct Op {
  enum Kind : std::uint8_t { kMalloc, kFree, kFreeDeferred, kComplete };
  Kind kind = kMalloc;
  StreamId stream = 0;
  std::int32_t slot = 0;  // handle (and ticket) table index
  std::int64_t size = 0;
};

// Builds an op list over a table of handle slots, reusing freed slots.
class TraceBuilder {
 public:
  std::int32_t malloc(std::int64_t size, StreamId stream) {
    std::int32_t slot;
    if (!free_slots_.empty()) {
      slot = free_slots_.back();
      free_slots_.pop_back();
    } else {
      slot = num_slots_++;
    }
    ops_.push_back({Op::kMalloc, stream, slot, size});
    ++live_;
    max_live_ = std::max(max_live_, live_);
    return slot;
  }
  void free(std::int32_t slot) {
    ops_.push_back({Op::kFree, 0, slot, 0});
    release(slot);
  }
  // Frees now, completes after `delay` more ops (or at the end).
  void free_deferred(std::int32_t slot, int delay) {
    ops_.push_back({Op::kFreeDeferred, 0, slot, 0});
    pending_.push_back({static_cast<std::int64_t>(ops_.size()) + delay, slot});
    --live_;
  }
  // Completes every deferred free that is due.
  void tick() {
    while (!pending_.empty() && pending_.front().due <= static_cast<std::int64_t>(ops_.size())) {
      ops_.push_back({Op::kComplete, 0, pending_.front().slot, 0});
      free_slots_.push_back(pending_.front().slot);
      pending_.pop_front();
    }
  }
  std::vector<Op> finish() {
    for (const Pending& p : pending_) ops_.push_back({Op::kComplete, 0, p.slot, 0});
    pending_.clear();
    return std::move(ops_);
  }
  std::int32_t num_slots() const { return num_slots_; }
  int max_live() const { return max_live_; }
  int live() const { return live_; }

 private:
  void release(std::int32_t slot) {
    free_slots_.push_back(slot);
    --live_;
  }
  struct Pending {
    std::int64_t due;
    std::int32_t slot;
  };
  std::vector<Op> ops_;
  std::vector<std::int32_t> free_slots_;
  std::deque<Pending> pending_;
  std::int32_t num_slots_ = 0;
  int live_ = 0;
  int max_live_ = 0;
};

struct Workload {
  std::string name;
  std::vector<Op> ops;
  std::int32_t slots = 0;
  int max_live = 0;
};

Workload training(int steps, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  TraceBuilder t;
  constexpr int kLayers = 16, kMicroBatches = 4, kParamsPerLayer = 6;
  std::vector<std::int32_t> params;
  for (int l = 0; l < kLayers; ++l)
    for (int p = 0; p < kParamsPerLayer; ++p)
      params.push_back(t.malloc(p < 2 ? 32 * kMiB : (p < 4 ? 8 * kKiB : 64 * kMiB), 0));
  const std::int64_t act[] = {32 * kMiB, 128 * kMiB, 32 * kMiB, 16 * kMiB};
  const std::int64_t small[] = {4 * kKiB, 64 * kKiB};
  for (int step = 0; step < steps; ++step) {
    std::vector<std::vector<std::int32_t>> saved(kMicroBatches * kLayers);
    for (int mb = 0; mb < kMicroBatches; ++mb) {  // forward
      for (int l = 0; l < kLayers; ++l) {
        auto& s = saved[mb * kLayers + l];
        for (std::int64_t a : act) s.push_back(t.malloc(a, 0));
        for (std::int64_t a : small)
          s.push_back(t.malloc(a + static_cast<std::int64_t>(rng() % 64), 0));
        const std::int32_t tmp = t.malloc(64 * kMiB, 0);
        const std::int32_t scalar = t.malloc(8, 0);
        t.free(scalar);
        t.free(tmp);
        t.tick();
      }
    }
    for (int mb = kMicroBatches - 1; mb >= 0; --mb) {  // backward
      for (int l = kLayers - 1; l >= 0; --l) {
        const std::int32_t g1 = t.malloc(128 * kMiB, 0);
        const std::int32_t g2 = t.malloc(32 * kMiB, 0);
        const std::int32_t g3 = t.malloc(2 * kKiB, 0);
        t.free(g3);
        t.free(g1);
        for (std::int32_t s : saved[mb * kLayers + l]) t.free(s);
        t.free(g2);
        if (mb == 0 && l % 2 == 0) {  // a gradient bucket reduced on the comm stream
          const std::int32_t bucket = t.malloc(25 * kMiB, 0);
          t.free_deferred(bucket, 12);
        }
        t.tick();
      }
    }
    for (std::int32_t p : params) {  // optimizer
      const std::int32_t tmp = t.malloc(4 * kKiB + static_cast<std::int64_t>(rng() % 4096), 1);
      t.free(tmp);
      t.tick();
      (void)p;
    }
  }
  for (std::int32_t p : params) t.free(p);
  Workload w{"training", {}, 0, t.max_live()};
  w.ops = t.finish();
  w.slots = t.num_slots();
  return w;
}

Workload random_mix(int events, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  TraceBuilder t;
  std::vector<std::int32_t> live;
  std::uniform_real_distribution<double> log2size(9.0, 28.0);
  for (int i = 0; i < events; ++i) {
    const bool grow = live.size() < 300 ? rng() % 100 < 60 : rng() % 100 < 40;
    if (grow || live.empty()) {
      const auto size = static_cast<std::int64_t>(std::exp2(log2size(rng)));
      live.push_back(t.malloc(size, static_cast<StreamId>(rng() % 3)));
    } else {
      const std::size_t i = rng() % live.size();
      if (rng() % 10 == 0)
        t.free_deferred(live[i], static_cast<int>(rng() % 64));
      else
        t.free(live[i]);
      live[i] = live.back();
      live.pop_back();
    }
    t.tick();
  }
  for (std::int32_t s : live) t.free(s);
  Workload w{"random", {}, 0, t.max_live()};
  w.ops = t.finish();
  w.slots = t.num_slots();
  return w;
}

struct RunStats {
  double wall_s = 0;
  double cpu_s = 0;
  std::int64_t ooms = 0;
  std::int64_t reserved_peak = 0;
  std::int64_t observed = 0;  // sum of event sizes, so the observer does work
};

RunStats replay(const Workload& w, const AllocatorConfig& config, int passes, bool observe) {
  SimulatedDevice dev(80 * kGiB);
  CachingAllocator a(config, &dev);
  std::int64_t observed = 0;
  if (observe) a.set_observer([&](const AllocatorEvent& e) { observed += e.size; });
  std::vector<BlockId> handles(static_cast<std::size_t>(w.slots), kOutOfMemory);
  std::vector<std::uint64_t> tickets(static_cast<std::size_t>(w.slots), 0);
  const std::clock_t c0 = std::clock();
  const auto t0 = Clock::now();
  for (int pass = 0; pass < passes; ++pass) {
    for (const Op& op : w.ops) {
      switch (op.kind) {
        case Op::kMalloc:
          handles[op.slot] = a.malloc(op.size, op.stream);
          break;
        case Op::kFree:
          if (handles[op.slot] != kOutOfMemory) a.free(handles[op.slot]);
          break;
        case Op::kFreeDeferred:
          tickets[op.slot] =
              handles[op.slot] != kOutOfMemory ? a.free_deferred(handles[op.slot]) : 0;
          break;
        case Op::kComplete:
          a.complete_free(tickets[op.slot]);
          break;
      }
    }
  }
  RunStats r;
  r.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  r.cpu_s = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
  r.ooms = a.stats().num_ooms;
  r.reserved_peak = a.stats().reserved_peak;
  r.observed = observed;
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace
}  // namespace prism

int main(int argc, char** argv) {
  CLI::App app("prism_bench_allocator: caching allocator model speed");
  int steps = 200;
  int random_events = 1'000'000;
  int passes = 2;
  int repeats = 7;
  std::string only;
  app.add_option("--steps", steps, "Training steps in the training workload")
      ->capture_default_str();
  app.add_option("--random-events", random_events, "Ops in the random workload")
      ->capture_default_str();
  app.add_option("--passes", passes, "Replays of a workload per run")->capture_default_str();
  app.add_option("--repeats", repeats, "Runs per workload (medians)")->capture_default_str();
  app.add_option("--only", only, "Run only this workload (training or random)");
  CLI11_PARSE(app, argc, argv);

  struct Row {
    const prism::Workload* w;
    const char* config_name;
    prism::AllocatorConfig config;
    bool observe;
  };
  const prism::Workload train = prism::training(steps, 1);
  const prism::Workload rnd = prism::random_mix(random_events, 2);
  prism::AllocatorConfig expandable;
  expandable.expandable_segments = true;
  prism::AllocatorConfig tuned = *prism::parse_alloc_conf(
      "max_split_size_mb:256,roundup_power2_divisions:[256:1,>:4],garbage_collection_threshold:0."
      "8");
  tuned.memory_fraction = 0.95;
  const Row rows[] = {
      {&train, "default", {}, false},
      {&train, "default+observer", {}, true},
      {&train, "expandable", expandable, false},
      {&train, "max_split+div+gc", tuned, false},
      {&rnd, "default", {}, false},
      {&rnd, "expandable", expandable, false},
      {&rnd, "max_split+div+gc", tuned, false},
  };
  bool pass = true;
  for (const Row& row : rows) {
    if (!only.empty() && row.w->name != only) continue;
    std::vector<double> wall, cpu;
    prism::RunStats last;
    for (int r = 0; r < repeats; ++r) {
      last = prism::replay(*row.w, row.config, passes, row.observe);
      wall.push_back(last.wall_s);
      cpu.push_back(last.cpu_s);
    }
    const double events = static_cast<double>(row.w->ops.size()) * passes;
    const double rate = events / prism::median(wall);
    const double cpu_rate = events / prism::median(cpu);
    if (!row.observe) pass = pass && cpu_rate >= 10e6;
    fmt::print(
        "{:<9} {:<17} {:>9.0f} events x{}  max live {:>4}  median {:7.4f} s  {:6.2f} M events/s"
        "  ({:6.2f} M/cpu_s)  peak reserved {:.2f} GiB  ooms {}\n",
        row.w->name, row.config_name, events / passes, passes, row.w->max_live, prism::median(wall),
        rate / 1e6, events / prism::median(cpu) / 1e6,
        static_cast<double>(last.reserved_peak) / static_cast<double>(prism::kGiB), last.ooms);
  }
  fmt::print("target >= 10 M events per CPU second (one core; without observer): {}\n",
             pass ? "pass" : "FAIL");
  return 0;
}
