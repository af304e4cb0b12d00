// `prism search`: every valid configuration of a job's search space
// (planning/search_space.h) built and simulated folded, as `prism simulate`
// does, on a pool of threads, and ranked by tokens/s per GPU.
//
// Each configuration builds its own graph and its own set of models
// (simulate_job() makes a fresh set per call); the threads share only the
// read-only base job and kernel database, and each writes its own slot of
// the result, so the results do not depend on the thread count or on which
// thread ran what. A configuration that runs out of memory is simulated a
// second time with unlimited device memory, for the memory it would need.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "planning/search_space.h"
#include "simulation/job.h"
#include "simulation/simulation.h"
#include "util/status.h"
#include "util/units.h"

namespace prism {

struct SearchOptions {
  DeviceMemoryOptions device;  // each rank's GPU memory and allocator
  NcclSelection nccl;
  int jobs = 1;  // threads
  // Called after each configuration with (done, total), from the worker
  // that finished it, one call at a time.
  std::function<void(std::int64_t, std::int64_t)> on_progress;
};

// Where one stage's iteration went (its representative rank), seconds.
struct StageResult {
  std::string role;               // "stage0", ...
  Bytes peak;                     // device memory: allocated by PyTorch and NCCL, CUDA context
  SimTime compute, comm, bubble;  // compute includes the optimizer; comm is exposed only
};

struct SearchResult {
  SearchConfig config;
  int dp = 0, num_microbatches = 0;
  bool oom = false;
  // Fits: the iteration's figures; the breakdown is the busiest stage's
  // (the most compute), the stage that sets the pace.
  SimTime iteration_time;
  double tokens_per_s_per_gpu = 0, mfu = 0;
  SimTime compute, comm, bubble;
  // Peak device memory per stage; for an OOM configuration, what each
  // stage needs (the rerun with unlimited memory), and where it failed.
  std::vector<StageResult> stages;
  Bytes peak;          // max over the stages
  std::string oom_at;  // "rank 0 (stage0), op 41 ..." of the failing run
};

struct SearchOutput {
  SearchSpace space;
  Bytes capacity;              // per GPU, as PyTorch reports it
  double memory_fraction = 0;  // the allocator's share of it (0: not set)
  // Every simulated configuration, ranked: those that fit by tokens/s per
  // GPU (shorter iteration first; ties in enumeration order), then the OOM
  // ones by the memory they need (least first; ties in enumeration order).
  std::vector<SearchResult> ranked;
  std::int64_t fits = 0, oom = 0;
};

// Simulates every valid configuration of `space` over `base` (read by
// read_job(); nothing built). An error of one configuration (a builder
// defect) is the search's error, naming the configuration.
Result<SearchOutput> run_search(const PreparedJob& base, SearchSpace space, const SearchOptions& o);

// `prism search`'s one call: the axes of `text` over the job (search_axes),
// their valid configurations (enumerate_space), each simulated (run_search).
Result<SearchOutput> search_job(const PreparedJob& base, const SearchAxesText& text,
                                const SearchOptions& o);

}  // namespace prism
