#include "planning/search.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "compute/kernel_model.h"
#include "workload/megatron.h"

namespace prism {
namespace {

SimTime sum(const Breakdown& b, std::initializer_list<TimeCategory> cats) {
  SimTime t = SimTime::zero();
  for (TimeCategory c : cats) t = t + b[c];
  return t;
}

std::vector<StageResult> stages_of(const SimulateSummary& s) {
  std::vector<StageResult> out;
  for (const SimulateRole& r : s.roles) {
    StageResult st;
    st.role = r.name;
    st.peak = r.peak_device;
    const Breakdown& b = r.breakdown;
    st.compute = sum(b, {TimeCategory::kCompute, TimeCategory::kOptimizer});
    st.comm = sum(b, {TimeCategory::kTp, TimeCategory::kCp, TimeCategory::kEp, TimeCategory::kPp,
                      TimeCategory::kDp});
    st.bubble = b[TimeCategory::kBubble];
    out.push_back(st);
  }
  return out;
}

Bytes max_peak(const std::vector<StageResult>& stages) {
  Bytes m;
  for (const StageResult& s : stages) m = std::max(m, s.peak);
  return m;
}

std::string oom_place(const nlohmann::ordered_json& oom) {
  const double gib = static_cast<double>(oom.value("requested_bytes", std::int64_t{0})) /
                     static_cast<double>(std::int64_t{1} << 30);
  return fmt::format("rank {} ({}), op '{}'{}: {:.2f} GiB requested", oom.value("rank", 0),
                     oom.value("role", std::string()), oom.value("op_name", std::string()),
                     oom.value("in_nccl", false) ? " (NCCL buffers)" : "", gib);
}

// One configuration built and simulated; an OOM one again without a limit.
Result<SearchResult> simulate_config(const PreparedJob& base, const KernelModel& kernels,
                                     const SearchConfig& c, const SearchOptions& o) {
  PreparedJob p;
  p.path = base.path;
  p.job = apply_config(base.job, c);
  p.gpu = base.gpu;
  p.db_paths = base.db_paths;
  Result<BuiltJob> built = build_megatron(p.job, kernels);
  if (!built.is_ok()) return built.status().with_context(to_string(c));
  p.built = std::move(built).value();
  SimulationOptions so;
  so.models.nccl = o.nccl;
  so.models.device = o.device;
  so.continue_past_oom = true;  // an OOM configuration: what each stage needs
  Result<JobSimulation> sim = simulate_job(p, so);
  if (!sim.is_ok()) return sim.status().with_context(to_string(c));
  const SimulateSummary& s = sim.value().summary;

  SearchResult r;
  r.config = c;
  r.dp = s.dp;
  r.num_microbatches = s.num_microbatches;
  r.oom = !s.oom_text.empty();
  if (!r.oom) {
    r.iteration_time = s.iteration_time;
    r.tokens_per_s_per_gpu = s.tokens_per_s_per_gpu;
    r.mfu = s.mfu;
    r.stages = stages_of(s);
    // The busiest stage's breakdown: the most compute, the first on a tie.
    const auto busiest = std::max_element(
        r.stages.begin(), r.stages.end(),
        [](const StageResult& a, const StageResult& b) { return a.compute < b.compute; });
    r.compute = busiest->compute;
    r.comm = busiest->comm;
    r.bubble = busiest->bubble;
  } else {
    r.oom_at = oom_place(s.oom);
    if (s.past_oom) {
      for (const PastOom::Role& role : s.past_oom->roles) {
        StageResult st;
        st.role = role.name;
        st.peak = role.needed;
        r.stages.push_back(st);
      }
    }
  }
  r.peak = max_peak(r.stages);
  return r;
}

// Fits first, fastest first; then OOM, least memory first; ties keep the
// enumeration order (stable sort).
void rank_results(std::vector<SearchResult>* results) {
  std::stable_sort(results->begin(), results->end(),
                   [](const SearchResult& a, const SearchResult& b) {
                     if (a.oom != b.oom) return !a.oom;
                     if (!a.oom) return a.iteration_time < b.iteration_time;
                     return a.peak < b.peak;
                   });
}

}  // namespace

Result<SearchOutput> run_search(const PreparedJob& base, SearchSpace space,
                                const SearchOptions& o) {
  const KernelModel kernels(base.gpu, &base.db);
  const std::vector<SearchConfig>& configs = space.valid;
  const std::int64_t total = static_cast<std::int64_t>(configs.size());
  std::vector<std::optional<Result<SearchResult>>> slots(configs.size());
  std::atomic<std::int64_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex progress_mu;
  std::int64_t done = 0;

  auto work = [&] {
    while (!failed.load()) {
      const std::int64_t i = next.fetch_add(1);
      if (i >= total) return;
      Result<SearchResult> r = simulate_config(base, kernels, configs[i], o);
      if (!r.is_ok()) failed.store(true);
      slots[i].emplace(std::move(r));
      std::lock_guard<std::mutex> lock(progress_mu);
      ++done;
      if (o.on_progress) o.on_progress(done, total);
    }
  };
  const int threads =
      static_cast<int>(std::clamp<std::int64_t>(o.jobs, 1, std::max<std::int64_t>(total, 1)));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();

  SearchOutput out;
  out.capacity = o.device.capacity;
  out.memory_fraction = o.device.allocator.memory_fraction;
  for (std::optional<Result<SearchResult>>& slot : slots) {
    if (!slot) continue;  // not run: another configuration failed
    if (!slot->is_ok()) return slot->status();
    out.ranked.push_back(std::move(*slot).value());
  }
  for (const SearchResult& r : out.ranked) ++(r.oom ? out.oom : out.fits);
  rank_results(&out.ranked);
  out.space = std::move(space);
  return out;
}

Result<SearchOutput> search_job(const PreparedJob& base, const SearchAxesText& text,
                                const SearchOptions& o) {
  PRISM_ASSIGN_OR_RETURN(const SearchAxes axes, search_axes(text, base.job));
  PRISM_ASSIGN_OR_RETURN(SearchSpace space, enumerate_space(axes, base.job));
  return run_search(base, std::move(space), o);
}

}  // namespace prism
