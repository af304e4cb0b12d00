#include "net/collective_sweep.h"

#include <cctype>
#include <charconv>

#include <fmt/format.h>

namespace prism {
namespace {

struct OpName {
  std::string_view name;
  SweepOp op;
};
constexpr OpName kOps[] = {
    {"all_reduce", {false, CollectiveKind::kAllReduce}},
    {"all_gather", {false, CollectiveKind::kAllGather}},
    {"reduce_scatter", {false, CollectiveKind::kReduceScatter}},
    {"broadcast", {false, CollectiveKind::kBroadcast}},
    {"reduce", {false, CollectiveKind::kReduce}},
    {"all_to_all", {false, CollectiveKind::kAllToAll}},
    {"send_recv", {true, CollectiveKind::kAllReduce}},
};

std::string squash(std::string_view s) {  // "All_Reduce" -> "allreduce"
  std::string out;
  for (char c : s)
    if (c != '_' && c != '-') out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Whether nccl-tests divides the size among ranks (count is per rank).
bool per_rank_count(SweepOp op) {
  return !op.send_recv && (op.collective == CollectiveKind::kAllGather ||
                           op.collective == CollectiveKind::kReduceScatter ||
                           op.collective == CollectiveKind::kAllToAll);
}

}  // namespace

Result<SweepOp> parse_sweep_op(std::string_view name) {
  for (const OpName& o : kOps)
    if (squash(o.name) == squash(name)) return o.op;
  std::vector<std::string_view> names;
  for (const OpName& o : kOps) names.push_back(o.name);
  return Status::invalid_argument(
      fmt::format("--op: unknown operation \"{}\" (operations: {})", name, fmt::join(names, ", ")));
}

std::string_view sweep_op_name(SweepOp op) {
  for (const OpName& o : kOps)
    if (o.op.send_recv == op.send_recv && (op.send_recv || o.op.collective == op.collective))
      return o.name;
  return "?";
}

Result<std::int64_t> parse_size(std::string_view flag, std::string_view text) {
  std::int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  std::string_view rest(ptr, static_cast<std::size_t>(text.data() + text.size() - ptr));
  int shift = 0;
  if (rest.size() == 1) {
    switch (std::toupper(static_cast<unsigned char>(rest.front()))) {
      case 'K':
        shift = 10;
        break;
      case 'M':
        shift = 20;
        break;
      case 'G':
        shift = 30;
        break;
      case 'T':
        shift = 40;
        break;
      default:
        shift = -1;
    }
    rest.remove_prefix(1);
  }
  if (ec != std::errc() || !rest.empty() || shift < 0 || v < 0)
    return Status::invalid_argument(
        fmt::format("{}: \"{}\" is not a size (e.g. 8, 64K, 8G)", flag, text));
  if (v > (kMaxBytes.count >> shift))
    return Status::invalid_argument(fmt::format("{}: {} is more than 1 PiB", flag, text));
  return v << shift;
}

Result<std::vector<SweepRow>> run_sweep(const NcclTuner& tuner, const SweepOptions& o) {
  if (o.min_bytes < 1)
    return Status::invalid_argument(fmt::format("--min-bytes must be >= 1 (got {})", o.min_bytes));
  if (o.max_bytes < o.min_bytes)
    return Status::invalid_argument(
        fmt::format("--max-bytes ({}) is below --min-bytes ({})", o.max_bytes, o.min_bytes));
  if (o.max_bytes > kMaxBytes.count)
    return Status::invalid_argument("--max-bytes is more than 1 PiB");
  if (o.step_factor < 2)
    return Status::invalid_argument(
        fmt::format("--step-factor must be >= 2 (got {})", o.step_factor));

  const ClusterSpec& c = tuner.cluster();
  const int n = c.num_gpus();
  const CommGeometry geometry{n, c.num_nodes, c.gpus_per_node};
  const std::int64_t elem = dtype_size(o.dtype);
  const std::int64_t unit = elem * (per_rank_count(o.op) ? n : 1);
  std::vector<SweepRow> rows;
  for (std::int64_t size = o.min_bytes;; size *= o.step_factor) {
    SweepRow r;
    r.count = size / unit;
    r.bytes = r.count * unit;
    if (r.count == 0) {
      if (size > o.max_bytes / o.step_factor) break;
      continue;
    }
    std::optional<CollectiveCost> cost;
    if (o.op.send_recv) {
      cost = tuner.point_to_point(Bytes{r.bytes}, c.num_nodes == 1);
    } else {
      cost = tuner.collective(o.op.collective, Bytes{r.bytes}, geometry);
      if (!cost)
        return Status::invalid_argument(fmt::format(
            "--algo/--proto leave {} no algorithm and protocol that NCCL could use here",
            sweep_op_name(o.op)));
    }
    r.time = cost->time();
    r.algo = cost->algo;
    r.proto = cost->proto;
    r.channels = cost->channels;
    if (r.time.ns > 0) {
      r.algbw_GBps = static_cast<double>(r.bytes) / static_cast<double>(r.time.ns);
      r.busbw_GBps = r.algbw_GBps * (o.op.send_recv ? 1.0 : nccl_bus_factor(o.op.collective, n));
    }
    rows.push_back(r);
    if (size > o.max_bytes / o.step_factor) break;
  }
  return rows;
}

}  // namespace prism
