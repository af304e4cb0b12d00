#include "report/sweep_report.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace prism {
namespace {

using Json = nlohmann::ordered_json;

double round2(double v) {
  return std::round(v * 100.0) / 100.0;
}

std::string header_line(const ClusterSpec& c, const SweepOptions& o) {
  return fmt::format(
      "# prism collective: {} of {} on {}, {} GPUs ({} node{} x {} GPUs), NCCL 2.26 tuning model\n",
      sweep_op_name(o.op), to_string(o.dtype), c.name, c.num_gpus(), c.num_nodes,
      c.num_nodes == 1 ? "" : "s", c.gpus_per_node);
}

std::string rstrip(std::string s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

// nccl-tests' run line; the model's times do not depend on the iterations.
std::string run_line(const ClusterSpec& c, const SweepOptions& o) {
  return fmt::format(
      "# nThread {} nGpus {} minBytes {} maxBytes {} step: {}(factor) warmup iters: {} iters: {} "
      "validation: 0 (modelled: no data moves, and the iterations change nothing)\n",
      o.threads, c.num_gpus() / std::max(o.threads, 1), o.min_bytes, o.max_bytes, o.step_factor,
      o.warmup_iters, o.iters);
}

// nccl-tests' redop and root columns: the reduction of the operations that
// reduce, "none" elsewhere; the root of broadcast and reduce, -1 elsewhere.
std::string_view redop_column(const SweepOptions& o) {
  if (o.op.send_recv) return "none";
  switch (o.op.collective) {
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kReduce:
    case CollectiveKind::kReduceScatter:
      return to_string(o.redop);
    default:
      return "none";
  }
}
int root_column(const SweepOptions& o) {
  const bool rooted = !o.op.send_recv && (o.op.collective == CollectiveKind::kBroadcast ||
                                          o.op.collective == CollectiveKind::kReduce);
  return rooted ? o.root : -1;
}

}  // namespace

// nccl-tests' table: out-of-place and in-place (the same in the model),
// #wrong N/A (no data), then the model's algorithm, protocol and channels;
// the footer's average bus bandwidth is over the rows, as nccl-tests'.
std::string format_sweep_table(const ClusterSpec& c, const SweepOptions& o,
                               const std::vector<SweepRow>& rows) {
  std::string out = header_line(c, o);
  out += run_line(c, o);
  out += "#\n";
  out += rstrip(fmt::format("# {:>12}  {:>12}  {:>8}  {:>6}  {:>6}  {:^30}  {:^30}", "", "", "", "",
                            "", "out-of-place", "in-place")) +
         "\n";
  const std::string block =
      fmt::format("{:>8} {:>7} {:>7} {:>6}", "time", "algbw", "busbw", "#wrong");
  out += fmt::format("# {:>12}  {:>12}  {:>8}  {:>6}  {:>6}  {}  {}  {:<9} {:<8} {:>8}\n", "size",
                     "count", "type", "redop", "root", block, block, "algorithm", "protocol",
                     "channels");
  const std::string units = fmt::format("{:>8} {:>7} {:>7} {:>6}", "(us)", "(GB/s)", "(GB/s)", "");
  out += rstrip(fmt::format("# {:>12}  {:>12}  {:>8}  {:>6}  {:>6}  {}  {}", "(B)", "(elements)",
                            "", "", "", units, units)) +
         "\n";
  double busbw = 0;
  for (const SweepRow& r : rows) {
    const std::string measure = fmt::format("{:>8.2f} {:>7.2f} {:>7.2f} {:>6}", r.time.micros(),
                                            r.algbw_GBps, r.busbw_GBps, "N/A");
    out += fmt::format("  {:>12}  {:>12}  {:>8}  {:>6}  {:>6}  {}  {}  {:<9} {:<8} {:>8}\n",
                       r.bytes, r.count, test_dtype_name(o.dtype), redop_column(o), root_column(o),
                       measure, measure, to_string(r.algo), to_string(r.proto), r.channels);
    busbw += r.busbw_GBps;
  }
  out += "# Out of bounds values : N/A (modelled: no data moves)\n";
  out += fmt::format("# Avg bus bandwidth    : {:.4f}\n",
                     rows.empty() ? 0.0 : busbw / static_cast<double>(rows.size()));
  out += "#\n";
  return out;
}

std::string format_sweep_json(const ClusterSpec& c, const SweepOptions& o,
                              const std::vector<SweepRow>& rows) {
  Json j;
  j["format_version"] = kSweepReportFormatVersion;
  j["model"] = "NCCL 2.26 tuning model";
  j["cluster"] = c.name;
  j["num_gpus"] = c.num_gpus();
  j["num_nodes"] = c.num_nodes;
  j["gpus_per_node"] = c.gpus_per_node;
  j["op"] = sweep_op_name(o.op);
  j["dtype"] = to_string(o.dtype);
  j["redop"] = std::string(redop_column(o));
  j["root"] = root_column(o);
  Json arr = Json::array();
  for (const SweepRow& r : rows) {
    Json row;
    row["bytes"] = r.bytes;
    row["count"] = r.count;
    row["time_us"] = round2(r.time.micros());
    row["algbw_GBps"] = round2(r.algbw_GBps);
    row["busbw_GBps"] = round2(r.busbw_GBps);
    row["algorithm"] = to_string(r.algo);
    row["protocol"] = to_string(r.proto);
    row["channels"] = r.channels;
    arr.push_back(std::move(row));
  }
  j["rows"] = std::move(arr);
  return j.dump(2) + "\n";
}

}  // namespace prism
