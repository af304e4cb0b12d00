#include "report/simulate_report.h"

#include "report/failure_report.h"

#include <iterator>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace prism {
namespace {

using Json = nlohmann::ordered_json;

constexpr int kReportVersion = 1;

std::string parallel_shape(const SimulateSummary& s) {
  std::string out = fmt::format("TP{}", s.tp);
  if (s.sequence_parallel) out += "+SP";
  if (s.cp > 1) out += fmt::format(" CP{}", s.cp);
  out += fmt::format(" PP{}", s.pp);
  if (s.vpp > 1) out += fmt::format(" VPP{}", s.vpp);
  out += fmt::format(" DP{}", s.dp);
  if (s.ep > 1) out += fmt::format(" EP{}", s.ep);
  if (s.etp != s.tp) out += fmt::format(" ETP{}", s.etp);
  return out;
}

double seconds(SimTime t) {
  return static_cast<double>(t.ns) * 1e-9;
}
double gib(Bytes b) {
  return b.gib();
}

}  // namespace

std::string what_if_text(const WhatIfComparison& w) {
  const auto ms = [](const std::optional<SimTime>& t) {
    return t ? fmt::format("{:.3f} ms", t->seconds() * 1e3) : std::string("did not complete");
  };
  std::string out =
      fmt::format("{}: iteration {} vs {}", w.options, ms(w.perturbed),
                  w.unperturbed ? ms(w.unperturbed) + " unperturbed"
                                : std::string("an unperturbed run that did not complete"));
  if (w.perturbed && w.unperturbed && w.unperturbed->ns > 0)
    out += fmt::format(" ({:+.2f}%)", 100.0 *
                                          static_cast<double>(w.perturbed->ns - w.unperturbed->ns) /
                                          static_cast<double>(w.unperturbed->ns));
  return out;
}

nlohmann::ordered_json what_if_json(const WhatIfComparison& w) {
  using Json = nlohmann::ordered_json;
  // Divided, not multiplied by 1e-9: the double nearest the decimal value.
  const auto s = [](const std::optional<SimTime>& t) {
    return t ? Json(static_cast<double>(t->ns) / 1e9) : Json();
  };
  Json j{{"options", w.options},
         {"iteration_time_s", s(w.perturbed)},
         {"unperturbed_iteration_time_s", s(w.unperturbed)},
         {"delta_s", nullptr},
         {"delta_pct", nullptr}};
  if (w.perturbed && w.unperturbed) {
    j["delta_s"] = static_cast<double>(w.perturbed->ns - w.unperturbed->ns) / 1e9;
    if (w.unperturbed->ns > 0)
      j["delta_pct"] = 100.0 * static_cast<double>(w.perturbed->ns - w.unperturbed->ns) /
                       static_cast<double>(w.unperturbed->ns);
  }
  return j;
}

std::string format_simulate_text(const SimulateSummary& s) {
  std::string out;
  auto line = [&](std::string_view label, const std::string& value) {
    fmt::format_to(std::back_inserter(out), "{:<20}{}\n", label, value);
  };
  line("job:", fmt::format("{} ({} GPUs: {})", s.job, s.num_gpus, parallel_shape(s)));
  line("cluster:", fmt::format("{} ({} nodes of {})", s.cluster, s.num_nodes, s.gpu));
  line("model:", fmt::format("{:.2f} B parameters ({:.2f} B active), {:.4g} FLOPs per iteration",
                             s.parameters / 1e9, s.active_parameters / 1e9, s.model_flops));
  line("batch:", fmt::format("{} sequences of {} tokens, {} micro-batches of {} per DP rank, {}, "
                             "recompute {}",
                             s.global_batch_size, s.seq_length, s.num_microbatches,
                             s.micro_batch_size, s.precision, s.recompute));
  line("kernels:", fmt::format("{} distinct, {} measured{}", s.kernels, s.kernels_measured,
                               s.kernel_db.empty() ? "" : fmt::format(" ({})", s.kernel_db)));
  if (s.clock_cov > 0)
    line("slowest GPU:",
         fmt::format("GEMMs and attention x{:.4f}: the slowest of {} GPUs at a chip-to-chip "
                     "clock CoV of {:.1f}%",
                     s.slowest_gpu_slowdown, s.num_gpus, 100 * s.clock_cov));
  out += "\n";
  if (!s.oom_text.empty()) {
    line("outcome:", "out of memory (the iteration did not complete)");
    out += s.oom_text;
    if (s.past_oom) {
      const PastOom& p = *s.past_oom;
      line("past the OOM:",
           fmt::format("with unlimited memory the iteration takes {:.3f} s "
                       "({:.1f} tokens/s per GPU, MFU {:.1f}%)",
                       seconds(p.iteration_time), p.tokens_per_s_per_gpu, 100 * p.mfu));
      out += fmt::format(
          "memory it needs per role (GiB; device peak with unlimited memory, and by how much it "
          "passes the {:.2f} GiB per GPU):\n",
          gib(p.capacity));
      fmt::format_to(std::back_inserter(out), "{:<10}{:>9}{:>9}\n", "role", "needs", "over");
      for (const PastOom::Role& r : p.roles) {
        const Bytes over{r.needed.count - p.capacity.count};
        const std::string over_text = over.count > 0 ? fmt::format("{:.2f}", gib(over)) : "-";
        fmt::format_to(std::back_inserter(out), "{:<10}{:>9.2f}{:>9}\n", r.name, gib(r.needed),
                       over_text);
      }
      out += "\n";
    }
  } else if (!s.completed()) {
    line("outcome:",
         fmt::format("hung: node {} failed (the iteration did not complete)", s.failure->node));
  } else {
    line("iteration time:", fmt::format("{:.3f} s", seconds(s.iteration_time)));
    line("tokens/s per GPU:", fmt::format("{:.1f}", s.tokens_per_s_per_gpu));
    line("TFLOP/s per GPU:", fmt::format("{:.1f} (model FLOPs)", s.model_tflops_per_gpu));
    line("MFU:", fmt::format("{:.1f}% of {:.1f} TFLOP/s (dense bf16 peak)", 100 * s.mfu,
                             s.peak_flops / 1e12));
    if (s.fp8_peak_flops > 0)
      line("", fmt::format("{:.1f}% of {:.1f} TFLOP/s (dense fp8 peak)", 100 * s.mfu_fp8,
                           s.fp8_peak_flops / 1e12));
  }
  if (s.what_if) line("what-if:", what_if_text(*s.what_if));
  if (s.failure) out += node_failure_text(*s.failure, 20);
  line("peak memory:", fmt::format("{:.2f} GiB of {:.2f} GiB per GPU (max over ranks)",
                                   gib(s.peak_device), gib(s.capacity)));
  line("", fmt::format("{:.2f} GiB allocated, {:.2f} GiB reserved by PyTorch, {:.2f} GiB NCCL, "
                       "{:.2f} GiB CUDA context",
                       gib(s.peak_allocated), gib(s.peak_reserved), gib(s.nccl), gib(s.context)));
  line("fragmentation:",
       fmt::format("{:.2f} GiB reserved but not allocated at the reserved peak (max over ranks)",
                   gib(s.fragmentation)));
  line("allocator:", s.alloc_conf.empty() ? std::string("PyTorch defaults")
                                          : "PYTORCH_CUDA_ALLOC_CONF=" + s.alloc_conf);
  if (s.completed()) {
    out += "\nwhere the iteration goes, per role (one representative rank; seconds):\n";
    fmt::format_to(std::back_inserter(out), "{:<10}{:>7}", "role", "ranks");
    for (int c = 0; c < kNumTimeCategories; ++c)
      fmt::format_to(std::back_inserter(out), "{:>10}", to_string(static_cast<TimeCategory>(c)));
    out += "\n";
    for (const SimulateRole& r : s.roles) {
      fmt::format_to(std::back_inserter(out), "{:<10}{:>7}", r.name, r.num_ranks);
      for (SimTime t : r.breakdown.time)
        fmt::format_to(std::back_inserter(out), "{:>10.3f}", seconds(t));
      out += "\n";
    }
  }
  out += "\nmemory per role (GiB; peaks, max over the role's ranks):\n";
  fmt::format_to(std::back_inserter(out), "{:<10}{:>13}{:>11}{:>10}{:>7}{:>8}{:>9}\n", "role",
                 "model state", "allocated", "reserved", "frag", "NCCL", "device");
  for (const SimulateRole& r : s.roles) {
    fmt::format_to(std::back_inserter(out),
                   "{:<10}{:>13.2f}{:>11.2f}{:>10.2f}{:>7.2f}{:>8.2f}{:>9.2f}\n", r.name,
                   gib(r.model_state_bytes), gib(r.peak_allocated), gib(r.peak_reserved),
                   gib(r.fragmentation), gib(r.nccl), gib(r.peak_device));
  }
  out += fmt::format("\nreplay: {} of {} ranks simulated{}, {} op events\n", s.simulated_ranks,
                     s.num_gpus, s.folded ? " (folded)" : "", s.op_events);
  return out;
}

std::string format_simulate_json(const SimulateSummary& s) {
  Json j;
  j["format_version"] = kReportVersion;
  j["job"] = s.job;
  j["num_gpus"] = s.num_gpus;
  j["parallelism"] = Json{{"tp", s.tp},   {"sequence_parallel", s.sequence_parallel},
                          {"cp", s.cp},   {"pp", s.pp},
                          {"vpp", s.vpp}, {"dp", s.dp},
                          {"ep", s.ep},   {"etp", s.etp}};
  j["training"] = Json{{"seq_length", s.seq_length},
                       {"micro_batch_size", s.micro_batch_size},
                       {"global_batch_size", s.global_batch_size},
                       {"num_microbatches", s.num_microbatches},
                       {"precision", s.precision},
                       {"recompute", s.recompute}};
  j["cluster"] = s.cluster;
  j["gpu"] = s.gpu;
  j["parameters"] = s.parameters;
  j["active_parameters"] = s.active_parameters;
  j["model_flops_per_iteration"] = s.model_flops;
  j["outcome"] = !s.oom_text.empty() ? "out_of_memory"
                 : s.completed()     ? "completed"
                                     : "node_failure";
  if (!s.oom_text.empty()) j["out_of_memory"] = s.oom;
  if (s.past_oom) {
    Json roles = Json::array();
    for (const PastOom::Role& r : s.past_oom->roles) {
      roles.push_back(Json{
          {"name", r.name},
          {"needed_bytes", r.needed.count},
          {"over_bytes", std::max<std::int64_t>(0, r.needed.count - s.past_oom->capacity.count)}});
    }
    j["past_oom"] = Json{{"iteration_time_s", seconds(s.past_oom->iteration_time)},
                         {"tokens_per_s_per_gpu", s.past_oom->tokens_per_s_per_gpu},
                         {"mfu", s.past_oom->mfu},
                         {"roles", std::move(roles)}};
  }
  if (s.completed()) {
    j["iteration_time_s"] = seconds(s.iteration_time);
    j["tokens_per_s_per_gpu"] = s.tokens_per_s_per_gpu;
    j["model_tflops_per_gpu"] = s.model_tflops_per_gpu;
    j["mfu"] = s.mfu;
    if (s.fp8_peak_flops > 0) j["mfu_fp8"] = s.mfu_fp8;
  } else {  // the iteration did not complete: no times to report
    for (const char* k :
         {"iteration_time_s", "tokens_per_s_per_gpu", "model_tflops_per_gpu", "mfu"})
      j[k] = nullptr;
  }
  if (s.what_if) j["what_if"] = what_if_json(*s.what_if);
  if (s.failure) j["node_failure"] = node_failure_json(*s.failure);
  j["peak_flops_per_gpu"] = s.peak_flops;
  if (s.fp8_peak_flops > 0) j["fp8_peak_flops_per_gpu"] = s.fp8_peak_flops;
  j["memory"] = Json{{"capacity_bytes", s.capacity.count},
                     {"context_bytes", s.context.count},
                     {"alloc_conf", s.alloc_conf},
                     {"peak_allocated_bytes", s.peak_allocated.count},
                     {"peak_reserved_bytes", s.peak_reserved.count},
                     {"peak_device_bytes", s.peak_device.count},
                     {"nccl_bytes", s.nccl.count},
                     {"fragmentation_bytes", s.fragmentation.count}};
  j["kernels"] = Json{{"distinct", s.kernels},
                      {"measured", s.kernels_measured},
                      {"database", s.kernel_db},
                      {"slowest_gpu_slowdown", s.slowest_gpu_slowdown},
                      {"clock_cov", s.clock_cov}};
  Json roles = Json::array();
  for (const SimulateRole& r : s.roles) {
    Json jr;
    jr["name"] = r.name;
    jr["num_ranks"] = r.num_ranks;
    jr["representative_rank"] = r.representative;
    jr["num_layers"] = r.num_layers;
    jr["parameters"] = r.parameters;
    jr["activation_bytes_per_layer"] = r.activation_bytes_per_layer.count;
    jr["model_state_bytes"] = r.model_state_bytes.count;
    jr["peak_allocated_bytes"] = r.peak_allocated.count;
    jr["peak_reserved_bytes"] = r.peak_reserved.count;
    jr["nccl_bytes"] = r.nccl.count;
    jr["peak_device_bytes"] = r.peak_device.count;
    jr["fragmentation_bytes"] = r.fragmentation.count;
    jr["inactive_split_peak_bytes"] = r.inactive_split_peak.count;
    Json b;
    for (int c = 0; c < kNumTimeCategories; ++c)
      b[std::string(to_string(static_cast<TimeCategory>(c))) + "_s"] = seconds(r.breakdown.time[c]);
    jr["breakdown"] = s.completed() ? std::move(b) : Json(nullptr);
    roles.push_back(std::move(jr));
  }
  j["roles"] = std::move(roles);
  j["replay"] = Json{
      {"folded", s.folded}, {"simulated_ranks", s.simulated_ranks}, {"op_events", s.op_events}};
  return j.dump(2) + "\n";
}

}  // namespace prism
