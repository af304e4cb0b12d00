#include "runtime/emulate_report.h"

#include <sched.h>

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "report/failure_report.h"

namespace prism::runtime {
namespace {

double secs(SimTime t) {
  return static_cast<double>(t.ns) / 1e9;
}

// The emulated time's error against the prediction, in percent.
double error_pct(SimTime got, SimTime want) {
  return want.ns == 0 ? 0 : (static_cast<double>(got.ns) / static_cast<double>(want.ns) - 1) * 100;
}

// The what-if line's value: the options, the perturbed prediction against
// the unperturbed one, and the emulated iteration against the latter.
std::string what_if_text(const EmulateSummary& s) {
  const WhatIfComparison& w = *s.what_if;
  const auto sec = [](const std::optional<SimTime>& t) {
    return t ? fmt::format("{:.6f} s", secs(*t)) : std::string("did not complete");
  };
  const std::string unperturbed = w.unperturbed
                                      ? sec(w.unperturbed) + " unperturbed"
                                      : std::string("an unperturbed replay that did not complete");
  std::string out = w.perturbed
                        ? fmt::format("{}: the replay without real ranks predicts {} vs {}",
                                      w.options, sec(w.perturbed), unperturbed)
                        : fmt::format("{}: the replay without real ranks does not complete, vs {}",
                                      w.options, unperturbed);
  if (!w.unperturbed || w.unperturbed->ns == 0) return out;
  if (w.perturbed) out += fmt::format(" ({:+.2f}%)", error_pct(*w.perturbed, *w.unperturbed));
  if (s.out_of_memory.empty() && !s.hung())
    out += fmt::format("; emulated {:.6f} s ({:+.2f}% vs unperturbed)", secs(s.iteration_time()),
                       error_pct(s.iteration_time(), *w.unperturbed));
  return out;
}

nlohmann::ordered_json what_if_json(const EmulateSummary& s) {
  using Json = nlohmann::ordered_json;
  const WhatIfComparison& w = *s.what_if;
  const auto sec = [](const std::optional<SimTime>& t) { return t ? Json(secs(*t)) : Json(); };
  Json j{{"options", w.options},
         {"predicted_iteration_time_s", sec(w.perturbed)},
         {"unperturbed_iteration_time_s", sec(w.unperturbed)},
         {"delta_pct", nullptr},
         {"emulated_delta_pct", nullptr}};
  if (!w.unperturbed || w.unperturbed->ns == 0) return j;
  if (w.perturbed) j["delta_pct"] = error_pct(*w.perturbed, *w.unperturbed);
  if (s.out_of_memory.empty() && !s.hung())
    j["emulated_delta_pct"] = error_pct(s.iteration_time(), *w.unperturbed);
  return j;
}

// After a hang, each real rank as it was stopped: the ops it entered (of
// its role's) and where its clock stood.
std::string hung_ranks_text(const EmulateSummary& s) {
  std::string out =
      "real ranks (the job hung; aborted: told so, as its NCCL watchdog would end it, and "
      "stopped; bye: it had finished):\n";
  out += fmt::format("{:<8}{:>8}{:>10}{:>13}{:>9}{:>6}\n", "rank", "ops", "of graph", "last at",
                     "ended", "exit");
  for (const LiveRankReport& r : s.emulated.live)
    out += fmt::format("{:<8}{:>8}{:>10}{:>11.6f} s{:>9}{:>6}\n", r.rank, r.ops, r.graph_ops,
                       secs(r.finish), r.said_bye ? "bye" : "aborted", r.exit_code);
  return out;
}

// Each real rank's emulated iteration beside the prediction.
std::string ranks_text(const EmulateSummary& s) {
  std::string out =
      "real ranks (seconds per iteration; predicted: the replay without real ranks):\n";
  out += fmt::format("{:<8}{:>12}{:>12}{:>12}{:>12}{:>9}{:>8}{:>7}{:>6}\n", "rank", "iteration",
                     "compute", "wait", "predicted", "error", "ops", "iters", "exit");
  for (std::size_t i = 0; i < s.emulated.live.size(); ++i) {
    const LiveRankReport& r = s.emulated.live[i];
    out +=
        fmt::format("{:<8}{:>12.6f}{:>12.6f}{:>12.6f}{:>12.6f}{:>8.2f}%{:>8}{:>7}{:>6}\n", r.rank,
                    secs(r.iteration_time), secs(r.compute), secs(r.wait), secs(s.predicted[i]),
                    error_pct(r.iteration_time, s.predicted[i]), r.ops, r.iterations, r.exit_code);
  }
  return out;
}

std::string outcome_name(const EmulateSummary& s) {
  if (!s.out_of_memory.empty()) return "out_of_memory";
  return s.hung() ? "node_failure" : "completed";
}

}  // namespace

int host_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
  return CPU_COUNT(&set);
}

SimTime EmulateSummary::iteration_time() const {
  SimTime t = emulated.replay.iteration_time;
  for (const LiveRankReport& r : emulated.live) t = std::max(t, r.iteration_time);
  return t;
}

std::vector<HtmlFact> emulate_facts(const EmulateSummary& s) {
  std::string real;
  for (const LiveRankReport& r : s.emulated.live)
    real += fmt::format("{}{}", real.empty() ? "" : ",", r.rank);
  std::vector<HtmlFact> facts = {{"job", fmt::format("{} ({} ranks)", s.job, s.world_size)},
                                 {"real ranks", fmt::format("{}: {}", real, s.program)}};
  if (s.hung()) {
    facts.push_back({"outcome", fmt::format("hung: node {} failed (the iteration did not complete)",
                                            s.emulated.replay.failure->node)});
  } else {
    facts.push_back(
        {"emulated iteration",
         fmt::format("{:.6f} s; the replay without real ranks predicts {:.6f} s ({:+.2f}%)",
                     secs(s.iteration_time()), secs(s.predicted_iteration_time),
                     error_pct(s.iteration_time(), s.predicted_iteration_time))});
  }
  return facts;
}

std::string format_emulate_text(const EmulateSummary& s) {
  std::string out = fmt::format("job:                {} ({} ranks), {} real: {}\n", s.job,
                                s.world_size, s.emulated.live.size(), s.program);
  if (!s.out_of_memory.empty()) out += fmt::format("out of memory:      {}\n", s.out_of_memory);
  const std::optional<NodeFailureReplay>& failure = s.emulated.replay.failure;
  if (s.hung()) {
    out +=
        fmt::format("outcome:            hung: node {} failed (the iteration did not complete)\n",
                    failure->node);
  } else {
    out += fmt::format(
        "iteration time:     {:.6f} s emulated; the replay without real ranks predicts {:.6f} s "
        "({:+.2f}%)\n",
        secs(s.iteration_time()), secs(s.predicted_iteration_time),
        error_pct(s.iteration_time(), s.predicted_iteration_time));
  }
  if (s.what_if) out += fmt::format("what-if:            {}\n", what_if_text(s));
  if (failure) out += node_failure_text(*failure, 20);
  if (s.oversubscribed())
    out += fmt::format(
        "host:               {} real ranks and the coordinator on {} cores: oversubscribed, the "
        "real ranks' times are upper bounds\n",
        s.emulated.live.size(), s.host_cores);
  out += "\n";
  out += s.hung() ? hung_ranks_text(s) : ranks_text(s);
  out += fmt::format("\nreplay: {} of {} ranks simulated ({}), {} op events\n",
                     s.emulated.replay.simulated_ranks, s.world_size,
                     s.emulated.replay.folded ? "folded" : "unfolded", s.emulated.replay.op_events);
  return out;
}

std::string format_emulate_json(const EmulateSummary& s) {
  nlohmann::ordered_json j;
  j["format_version"] = 1;
  j["job"] = s.job;
  j["world_size"] = s.world_size;
  j["program"] = s.program;
  j["outcome"] = outcome_name(s);
  using Json = nlohmann::ordered_json;
  j["iteration_time_s"] = s.hung() ? Json() : Json(secs(s.iteration_time()));
  j["predicted_iteration_time_s"] =
      s.predicted_completed ? Json(secs(s.predicted_iteration_time)) : Json();
  if (!s.out_of_memory.empty()) j["out_of_memory"] = s.out_of_memory;
  if (s.what_if) j["what_if"] = what_if_json(s);
  if (s.emulated.replay.failure) j["node_failure"] = node_failure_json(*s.emulated.replay.failure);
  j["real_ranks"] = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < s.emulated.live.size(); ++i) {
    const LiveRankReport& r = s.emulated.live[i];
    nlohmann::ordered_json e;
    e["rank"] = r.rank;
    e["iteration_time_s"] = secs(r.iteration_time);
    e["iteration_times_s"] = nlohmann::ordered_json::array();
    for (SimTime t : r.iteration_times) e["iteration_times_s"].push_back(secs(t));
    e["compute_s"] = secs(r.compute);
    e["wait_s"] = secs(r.wait);
    e["predicted_iteration_time_s"] = secs(s.predicted[i]);
    e["error"] = error_pct(r.iteration_time, s.predicted[i]) / 100;
    e["iterations"] = r.iterations;
    e["ops"] = r.ops;
    e["bytes"] = r.bytes;
    e["graph_ops"] = r.graph_ops;
    e["graph_bytes"] = r.graph_bytes;
    e["waits"] = r.waits;
    e["peak_allocated_bytes"] = r.peak_allocated.count;
    e["nccl_device_bytes"] = r.nccl.count;
    e["pid"] = r.pid;
    e["exit_code"] = r.exit_code;
    if (s.hung()) e["aborted"] = !r.said_bye;  // told that the job hangs, then stopped
    j["real_ranks"].push_back(std::move(e));
  }
  j["folded"] = s.emulated.replay.folded;
  j["simulated_ranks"] = s.emulated.replay.simulated_ranks;
  j["op_events"] = s.emulated.replay.op_events;
  j["host"] = {{"cores", s.host_cores}, {"oversubscribed", s.oversubscribed()}};
  if (s.external) j["host"]["external_ranks"] = true;
  return j.dump(2) + "\n";
}

}  // namespace prism::runtime
