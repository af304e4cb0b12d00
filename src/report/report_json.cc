#include "report/report_json.h"

#include <nlohmann/json.hpp>

#include "report/failure_report.h"
#include "report/memory_report.h"
#include "report/op_label.h"
#include "report/summary.h"

namespace prism {
namespace {

using Json = nlohmann::ordered_json;

std::string_view outcome_name(ReplayResult::Outcome o) {
  switch (o) {
    case ReplayResult::Outcome::kDeadlock:
      return "deadlock";
    case ReplayResult::Outcome::kOutOfMemory:
      return "out_of_memory";
    case ReplayResult::Outcome::kCompleted:
      break;
  }
  return "completed";
}

Json mean_max_bytes(Bytes mean, Bytes max) {
  return Json{{"mean", mean.count}, {"max", max.count}};
}

Json mean_max_seconds(SimTime mean, SimTime max) {
  return Json{{"mean", to_seconds(mean)}, {"max", to_seconds(max)}};
}

Json role_json(const RoleSummary& s) {
  Json j;
  j["name"] = s.name;
  j["num_ranks"] = s.num_ranks;
  j["compute_s"] = mean_max_seconds(s.mean.compute, s.max.compute);
  j["exposed_comm_s"] = mean_max_seconds(s.mean.exposed_comm, s.max.exposed_comm);
  j["idle_s"] = mean_max_seconds(s.mean.idle, s.max.idle);
  j["finish_s"] = mean_max_seconds(s.mean.finish, s.max.finish);
  j["peak_allocated_bytes"] = mean_max_bytes(s.mean.peak_allocated, s.max.peak_allocated);
  j["peak_reserved_bytes"] = mean_max_bytes(s.mean.peak_reserved, s.max.peak_reserved);
  j["peak_device_bytes"] = mean_max_bytes(s.mean.peak_device, s.max.peak_device);
  j["nccl_bytes"] = mean_max_bytes(s.mean.nccl, s.max.nccl);
  j["fragmentation_bytes"] = mean_max_bytes(s.mean.fragmentation, s.max.fragmentation);
  j["inactive_split_peak_bytes"] =
      mean_max_bytes(s.mean.inactive_split_peak, s.max.inactive_split_peak);
  return j;
}

Json blocked_json(const ExecutionGraph& g, const BlockedRank& b) {
  const Role& role = g.roles[b.role];
  Json j;
  j["rank"] = b.rank;
  j["num_ranks"] = b.num_ranks;
  j["role"] = role.name;
  j["op"] = b.op;
  j["op_name"] = op_label(role, role.ops[b.op]);
  j["stream"] = role.streams[b.stream];
  j["waiting_for"] = b.waiting_for;
  return j;
}

}  // namespace

std::string format_report_json(const ExecutionGraph& g, const ReplayResult& r) {
  Json j;
  j["format_version"] = kReportFormatVersion;
  j["graph"] = g.name;
  j["world_size"] = r.world_size;
  j["outcome"] = r.failure && r.failure->hung ? "node_failure" : outcome_name(r.outcome);
  j["folded"] = r.folded;
  j["simulated_ranks"] = r.simulated_ranks;
  j["op_events"] = r.op_events;
  j["makespan_s"] = to_seconds(r.makespan);
  j["iteration_time_s"] = to_seconds(r.iteration_time);
  Json iterations = Json::array();
  for (SimTime t : r.iteration_times) iterations.push_back(to_seconds(t));
  j["iteration_times_s"] = std::move(iterations);
  Json roles = Json::array();
  for (const RoleSummary& s : r.roles) roles.push_back(role_json(s));
  j["roles"] = std::move(roles);
  Json blocked = Json::array();
  for (const BlockedRank& b : r.blocked) blocked.push_back(blocked_json(g, b));
  j["blocked"] = std::move(blocked);
  Json oom = Json::array();
  for (const OutOfMemory& o : r.oom) oom.push_back(oom_json(g, o));
  j["out_of_memory"] = std::move(oom);
  if (r.past_oom) {  // --continue-past-oom
    Json needs = Json::array();
    for (std::size_t i = 0; i < r.past_oom->role_needed.size() && i < g.roles.size(); ++i) {
      const Bytes need = r.past_oom->role_needed[i];
      needs.push_back(
          Json{{"name", g.roles[i].name},
               {"needed_bytes", need.count},
               {"over_bytes", std::max<std::int64_t>(0, need.count - r.past_oom->capacity.count)}});
    }
    j["past_oom"] = Json{{"iteration_time_s", to_seconds(r.past_oom->iteration_time)},
                         {"roles", std::move(needs)}};
  }
  if (r.what_if) j["what_if"] = what_if_json(what_if_comparison(r));  // --straggler, --jitter
  if (r.failure) j["node_failure"] = node_failure_json(*r.failure);   // --fail-node
  return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace prism
