#include "report/memory_report.h"

#include <fmt/format.h>

#include "report/op_label.h"

namespace prism {
namespace {

std::string gib(Bytes b) {
  return fmt::format("{:.2f} GiB", b.gib());
}

}  // namespace

std::string format_oom_text(const ExecutionGraph& g, const OutOfMemory& o) {
  const Role& role = g.roles[o.role];
  const int more = o.num_ranks - 1;
  const std::string others =
      more > 0 ? fmt::format(", and {} more rank{} in the same state", more, more > 1 ? "s" : "")
               : "";
  std::string out =
      fmt::format("out of memory on rank {} (role {}{}) at {:.3f} ms, op {} '{}' on stream '{}':\n",
                  o.rank, role.name, others, o.at.ns / 1e6, o.op, op_label(role, role.ops[o.op]),
                  role.streams[o.stream]);
  const std::int64_t in_use = o.usage.device().count;
  const std::int64_t free = o.capacity.count > in_use ? o.capacity.count - in_use : 0;
  if (o.in_nccl) {
    out += fmt::format("  NCCL tried to allocate {} for its buffers ({} bytes).\n",
                       gib(o.requested), o.requested.count);
  } else {
    out += fmt::format(
        "  Tried to allocate {} ({} bytes; {} bytes in the allocator's {} MiB "
        "segment).\n",
        gib(o.requested), o.requested.count, o.allocator.rounded, o.allocator.alloc_size >> 20);
  }
  const Bytes nccl = o.in_nccl ? o.usage.external - o.requested : o.usage.external;
  out += fmt::format(
      "  The GPU has a total capacity of {} of which {} is free. In use: {} reserved by PyTorch "
      "({} allocated), {} NCCL, {} CUDA context.\n",
      gib(o.capacity), gib(Bytes{free}), gib(o.usage.reserved), gib(o.usage.allocated), gib(nccl),
      gib(o.usage.context));
  return out;
}

nlohmann::ordered_json oom_json(const ExecutionGraph& g, const OutOfMemory& o) {
  const Role& role = g.roles[o.role];
  nlohmann::ordered_json j;
  j["rank"] = o.rank;
  j["num_ranks"] = o.num_ranks;
  j["role"] = role.name;
  j["op"] = o.op;
  j["op_name"] = op_label(role, role.ops[o.op]);
  j["stream"] = role.streams[o.stream];
  j["time_s"] = static_cast<double>(o.at.ns) * 1e-9;
  j["in_nccl"] = o.in_nccl;
  j["requested_bytes"] = o.requested.count;
  if (!o.in_nccl) {
    j["rounded_bytes"] = o.allocator.rounded;
    j["segment_bytes"] = o.allocator.alloc_size;
  }
  j["capacity_bytes"] = o.capacity.count;
  j["allocated_bytes"] = o.usage.allocated.count;
  j["reserved_bytes"] = o.usage.reserved.count;
  j["nccl_bytes"] = o.usage.external.count;
  j["context_bytes"] = o.usage.context.count;
  return j;
}

}  // namespace prism
