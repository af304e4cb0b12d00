#include "planning/search_report.h"

#include <iterator>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "report/html_page.h"

namespace prism {
namespace {

using Json = nlohmann::ordered_json;

double seconds(SimTime t) {
  return static_cast<double>(t.ns) * 1e-9;
}

// "8.677 s", "4.86 ms".
std::string duration(SimTime t) {
  if (t.ns >= 1'000'000'000) return fmt::format("{:.3f} s", seconds(t));
  return fmt::format("{:.2f} ms", static_cast<double>(t.ns) * 1e-6);
}

std::string_view on_off(bool b) {
  return b ? "on" : "off";
}

std::string overlap(const SearchConfig& c) {
  if (c.overlap_grad_reduce && c.overlap_param_gather) return "grad+param";
  if (c.overlap_grad_reduce) return "grad";
  if (c.overlap_param_gather) return "param";
  return "none";
}

// Percent of the iteration, rounded, as "compute/comm/bubble".
std::string shares(const SearchResult& r) {
  const double t = static_cast<double>(r.iteration_time.ns);
  auto pct = [t](SimTime x) { return t > 0 ? 100.0 * static_cast<double>(x.ns) / t : 0.0; };
  return fmt::format("{:.0f}/{:.0f}/{:.0f}", pct(r.compute), pct(r.comm), pct(r.bubble));
}

std::string stage_peaks(const SearchResult& r, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < r.stages.size(); ++i)
    fmt::format_to(std::back_inserter(out), "{}{:.2f}", i ? sep : "", r.stages[i].peak.gib());
  return out;
}

std::string count(std::int64_t n, std::string_view noun) {
  return fmt::format("{} {}{}", n, noun, n == 1 ? "" : "s");
}

// The search's header lines: job, searched, simulated.
std::vector<HtmlFact> header_facts(const PreparedJob& base, const SearchOutput& out) {
  const JobSpec& j = base.job;
  const SearchSpace& s = out.space;
  std::vector<HtmlFact> facts;
  facts.push_back({"job", fmt::format("{} ({} GPUs, {} nodes of {}; {} sequences of {} tokens per "
                                      "iteration, {})",
                                      j.name, j.num_gpus, j.cluster.num_nodes, base.gpu.name,
                                      j.training.global_batch_size, j.training.seq_length,
                                      to_string(j.training.precision))});
  facts.push_back({"searched", fmt::format("{}: {} valid, {} rejected by Megatron's rules",
                                           count(s.combinations, "configuration"), s.valid.size(),
                                           s.rejected.size())});
  const std::string fraction =
      out.memory_fraction > 0
          ? fmt::format(", the allocator limited to {:g}% of it", 100 * out.memory_fraction)
          : "";
  facts.push_back({"simulated", fmt::format("{} fit in memory, {} out of memory ({:.2f} GiB per "
                                            "GPU{})",
                                            out.fits, out.oom, out.capacity.gib(), fraction)});
  return facts;
}

std::string header(const PreparedJob& base, const SearchOutput& out) {
  std::string text;
  for (const HtmlFact& f : header_facts(base, out))
    fmt::format_to(std::back_inserter(text), "{:<12}{}\n", f.label + ":", f.value);
  return text;
}

}  // namespace

std::string format_search_text(const PreparedJob& base, const SearchOutput& out, int top) {
  std::string text = header(base, out);
  const int shown = static_cast<int>(std::min<std::int64_t>(top, out.fits));
  if (shown == 0) {
    text +=
        "\nno configuration fits in memory; the report (--report, --csv) gives what each "
        "needs\n";
    return text;
  }
  fmt::format_to(std::back_inserter(text),
                 "\nbest {} of {} by tokens/s per GPU (breakdown: the busiest stage's compute / "
                 "exposed communication / bubble, % of the iteration):\n",
                 shown, out.fits);
  fmt::format_to(std::back_inserter(text),
                 "{:>4} {:>3} {:>2} {:>3} {:>3} {:>3} {:>3} {:>4} {:>3} {:<9} {:<8} {:<10} "
                 "{:>12} {:>10} {:>6} {:>8}  {}\n",
                 "rank", "tp", "sp", "pp", "vpp", "cp", "ep", "dp", "mbs", "recompute", "dist-opt",
                 "overlap", "tokens/s/GPU", "iteration", "MFU", "peak GiB", "breakdown");
  for (int i = 0; i < shown; ++i) {
    const SearchResult& r = out.ranked[i];
    const SearchConfig& c = r.config;
    fmt::format_to(std::back_inserter(text),
                   "{:>4} {:>3} {:>2} {:>3} {:>3} {:>3} {:>3} {:>4} {:>3} {:<9} {:<8} {:<10} "
                   "{:>12.1f} {:>10} {:>5.1f}% {:>8.2f}  {}\n",
                   i + 1, c.tp, c.sequence_parallel ? "on" : "-", c.pp, c.vpp, c.cp, c.ep, r.dp,
                   c.mbs, to_string(c.recompute), on_off(c.distributed_optimizer), overlap(c),
                   r.tokens_per_s_per_gpu, duration(r.iteration_time), 100 * r.mfu, r.peak.gib(),
                   shares(r));
  }
  text += "\npeak memory per stage (GiB, stage 0 first):\n";
  for (int i = 0; i < shown; ++i)
    fmt::format_to(std::back_inserter(text), "{:>4}  {}\n", i + 1, stage_peaks(out.ranked[i], " "));
  return text;
}

std::string format_search_csv(const SearchOutput& out) {
  std::string text =
      "rank,tp,sequence_parallel,pp,vpp,cp,ep,dp,mbs,num_microbatches,recompute,"
      "distributed_optimizer,overlap_grad_reduce,overlap_param_gather,outcome,iteration_time_s,"
      "tokens_per_s_per_gpu,mfu,compute_s,exposed_comm_s,bubble_s,peak_gib,peak_per_stage_gib\n";
  for (std::size_t i = 0; i < out.ranked.size(); ++i) {
    const SearchResult& r = out.ranked[i];
    const SearchConfig& c = r.config;
    fmt::format_to(std::back_inserter(text), "{},{},{},{},{},{},{},{},{},{},{},{},{},{},", i + 1,
                   c.tp, on_off(c.sequence_parallel), c.pp, c.vpp, c.cp, c.ep, r.dp, c.mbs,
                   r.num_microbatches, to_string(c.recompute), on_off(c.distributed_optimizer),
                   on_off(c.overlap_grad_reduce), on_off(c.overlap_param_gather));
    if (r.oom) {
      text += "oom,,,,,,,";
    } else {
      fmt::format_to(std::back_inserter(text), "fits,{:.6f},{:.1f},{:.4f},{:.6f},{:.6f},{:.6f},",
                     seconds(r.iteration_time), r.tokens_per_s_per_gpu, r.mfu, seconds(r.compute),
                     seconds(r.comm), seconds(r.bubble));
    }
    fmt::format_to(std::back_inserter(text), "{:.2f},{}\n", r.peak.gib(), stage_peaks(r, ";"));
  }
  return text;
}

namespace {

Json config_json(const SearchConfig& c) {
  Json j;
  j["tp"] = c.tp;
  j["sequence_parallel"] = c.sequence_parallel;
  j["pp"] = c.pp;
  j["vpp"] = c.vpp;
  j["cp"] = c.cp;
  j["ep"] = c.ep;
  j["micro_batch_size"] = c.mbs;
  j["recompute"] = to_string(c.recompute);
  j["use_distributed_optimizer"] = c.distributed_optimizer;
  j["overlap_grad_reduce"] = c.overlap_grad_reduce;
  j["overlap_param_gather"] = c.overlap_param_gather;
  return j;
}

Json result_json(const SearchResult& r, std::size_t rank) {
  Json j;
  j["rank"] = rank;
  j["config"] = config_json(r.config);
  j["dp"] = r.dp;
  j["num_microbatches"] = r.num_microbatches;
  j["outcome"] = r.oom ? "out_of_memory" : "fits";
  if (!r.oom) {
    j["iteration_time_s"] = seconds(r.iteration_time);
    j["tokens_per_s_per_gpu"] = r.tokens_per_s_per_gpu;
    j["mfu"] = r.mfu;
    j["busiest_stage"] = {{"compute_s", seconds(r.compute)},
                          {"exposed_comm_s", seconds(r.comm)},
                          {"bubble_s", seconds(r.bubble)}};
    j["peak_bytes"] = r.peak.count;
  } else {
    j["out_of_memory_at"] = r.oom_at;
    j["required_bytes"] = r.peak.count;  // with unlimited memory
  }
  Json stages = Json::array();
  for (const StageResult& s : r.stages) {
    Json st;
    st["role"] = s.role;
    st[r.oom ? "required_bytes" : "peak_bytes"] = s.peak.count;
    if (!r.oom) {
      st["compute_s"] = seconds(s.compute);
      st["exposed_comm_s"] = seconds(s.comm);
      st["bubble_s"] = seconds(s.bubble);
    }
    stages.push_back(std::move(st));
  }
  j["stages"] = std::move(stages);
  return j;
}

}  // namespace

std::string format_search_json(const PreparedJob& base, const SearchOutput& out) {
  const JobSpec& job = base.job;
  Json j;
  j["version"] = kSearchReportVersion;
  j["job"] = job.name;
  j["num_gpus"] = job.num_gpus;
  j["gpu"] = base.gpu.name;
  j["capacity_bytes"] = out.capacity.count;
  if (out.memory_fraction > 0) j["memory_fraction"] = out.memory_fraction;
  j["global_batch_size"] = job.training.global_batch_size;
  j["seq_length"] = job.training.seq_length;
  j["combinations"] = out.space.combinations;
  j["valid"] = out.space.valid.size();
  j["rejected_count"] = out.space.rejected.size();
  j["fits"] = out.fits;
  j["out_of_memory"] = out.oom;
  Json results = Json::array();
  for (std::size_t i = 0; i < out.ranked.size(); ++i)
    results.push_back(result_json(out.ranked[i], i + 1));
  j["results"] = std::move(results);
  Json rejected = Json::array();
  for (const RejectedConfig& r : out.space.rejected)
    rejected.push_back({{"config", config_json(r.config)}, {"reason", r.reason}});
  j["rejected"] = std::move(rejected);
  return j.dump(2) + "\n";
}

std::string format_search_html(const PreparedJob& base, const SearchOutput& out, int top) {
  HtmlPage page;
  page.title = fmt::format("prism search: {}", base.job.name);
  page.facts = header_facts(base, out);
  page.text = format_search_text(base, out, top);
  // Device memory against the GPU's (--memory-fraction limits the
  // allocator's share of it, not the device).
  page.capacity = out.capacity;
  for (std::size_t i = 0; i < out.ranked.size(); ++i) {
    const SearchResult& r = out.ranked[i];
    HtmlPoint p;
    p.label = fmt::format("#{} {}", i + 1, to_string(r.config));
    p.tokens_per_s_per_gpu = r.tokens_per_s_per_gpu;
    p.peak = r.peak;
    p.oom = r.oom;
    p.detail = r.oom ? fmt::format("needs {:.2f} GiB; failed at {}", r.peak.gib(), r.oom_at)
                     : fmt::format("iteration {}, MFU {:.1f}%, compute/comm/bubble {}",
                                   duration(r.iteration_time), 100 * r.mfu, shares(r));
    page.points.push_back(std::move(p));
  }
  return format_html_page(page);
}

}  // namespace prism
