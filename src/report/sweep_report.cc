#include "report/sweep_report.h"

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

}  // namespace

std::string format_sweep_table(const ClusterSpec& c, const SweepOptions& o,
                               const std::vector<SweepRow>& rows) {
  std::string out = header_line(c, o);
  out += "#\n";
  out +=
      fmt::format("# {:>12} {:>12} {:>9} {:>10} {:>8} {:>8}  {:<9} {:<8} {:>8}\n", "size", "count",
                  "type", "time", "algbw", "busbw", "algorithm", "protocol", "channels");
  out += fmt::format("# {:>12} {:>12} {:>9} {:>10} {:>8} {:>8}\n", "(B)", "(elements)", "", "(us)",
                     "(GB/s)", "(GB/s)");
  for (const SweepRow& r : rows) {
    out += fmt::format("  {:>12} {:>12} {:>9} {:>10.2f} {:>8.2f} {:>8.2f}  {:<9} {:<8} {:>8}\n",
                       r.bytes, r.count, to_string(o.dtype), r.time.micros(), r.algbw_GBps,
                       r.busbw_GBps, to_string(r.algo), to_string(r.proto), r.channels);
  }
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
