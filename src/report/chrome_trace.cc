#include "report/chrome_trace.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "report/op_label.h"

namespace prism {
namespace {

using Json = nlohmann::ordered_json;

// Events one per line, so traces diff well.
class EventWriter {
 public:
  void add(const Json& event) {
    if (!first_) out_.append(",\n");
    first_ = false;
    out_.append(event.dump(-1, ' ', false, Json::error_handler_t::replace));
  }
  std::string finish() && {
    if (!first_) out_.push_back('\n');
    return "{\"traceEvents\":[\n" + out_ + "],\n\"displayTimeUnit\":\"ns\"}\n";
  }

 private:
  bool first_ = true;
  std::string out_;
};

Json metadata(const char* what, Rank pid, int tid, Json args) {
  return Json{{"name", what}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", std::move(args)}};
}

// Process and thread names of every traced rank, by rank then stream.
void append_metadata(const ExecutionGraph& g, const std::vector<Rank>& ranks, EventWriter* out) {
  for (Rank rank : ranks) {
    const Role& role = g.roles[g.role_of_rank[rank]];
    const std::string name = fmt::format("rank {} ({})", rank, role.name);
    out->add(metadata("process_name", rank, 0, Json{{"name", name}}));
    out->add(metadata("process_sort_index", rank, 0, Json{{"sort_index", rank}}));
    for (std::size_t s = 0; s < role.streams.size(); ++s) {
      const int tid = static_cast<int>(s);
      out->add(metadata("thread_name", rank, tid, Json{{"name", role.streams[s]}}));
      out->add(metadata("thread_sort_index", rank, tid, Json{{"sort_index", tid}}));
    }
  }
}

// Communicator, peers, size and the wait for peers of a collective or send/recv.
void add_comm_args(const ExecutionGraph& g, const TraceRecord& rec, const Op& op, Json* args) {
  const SlotResolver res = g.resolver();
  (*args)["communicator"] = g.slots[op.ref].name;
  if (op.kind == OpKind::kCollective) {
    std::vector<Rank> members;
    res.members(op.ref, rec.rank, &members);
    (*args)["collective"] = to_string(op.collective);
    (*args)["group"] = res.group_id(op.ref, rec.rank);
    if (op.collective == CollectiveKind::kBroadcast || op.collective == CollectiveKind::kReduce)
      (*args)["root"] = members.at(static_cast<std::size_t>(op.arg));
    (*args)["peers"] = members;
  } else {
    (*args)["peer"] = res.peer(op.ref, rec.rank);
    (*args)["tag"] = op.arg;
  }
  (*args)["bytes"] = op.bytes.count;
  (*args)["dtype"] = to_string(op.dtype);
  if (op.group != 0) (*args)["nccl_group"] = op.group;
  (*args)["wait_us"] = to_micros(rec.transfer_start - rec.start);
}

Json op_args(const ExecutionGraph& g, const Role& role, const TraceRecord& rec) {
  const Op& op = role.ops[rec.op];
  Json args{{"op", rec.op}};
  switch (op.kind) {
    case OpKind::kCollective:
    case OpKind::kSend:
    case OpKind::kRecv:
      add_comm_args(g, rec, op, &args);
      break;
    case OpKind::kCompute:
      if (op.cost != kNone) {
        const KernelCost& cost = role.costs[op.cost];
        args["kernel_class"] = to_string(cost.kernel_class);
        args["flops"] = cost.flops;
        args["bytes_accessed"] = cost.bytes_accessed.count;
      }
      break;
    case OpKind::kAlloc:
      args["bytes"] = op.bytes.count;
      break;
    case OpKind::kFree:
      args["alloc_op"] = op.ref;
      args["bytes"] = op.bytes.count;
      break;
    case OpKind::kEventRecord:
    case OpKind::kEventWait:
      args["event"] = role.events[op.ref];
      break;
    case OpKind::kMarker:
      args["marker"] = to_string(op.marker);
      args["index"] = op.arg;
      break;
  }
  return args;
}

Json trace_event(const ExecutionGraph& g, const TraceRecord& rec) {
  const Role& role = g.roles[rec.role];
  const Op& op = role.ops[rec.op];
  std::string name(op_label(role, op));
  if (op.kind == OpKind::kMarker && op.name == kNone)
    name = fmt::format("{} {}", to_string(op.marker), op.arg);
  Json e{{"name", std::move(name)}, {"cat", to_string(op.kind)}};
  if (op.kind == OpKind::kMarker) {
    e["ph"] = "i";
    e["s"] = "t";  // scoped to the stream's thread
    e["ts"] = to_micros(rec.start);
  } else {
    e["ph"] = "X";
    e["ts"] = to_micros(rec.start);
    e["dur"] = to_micros(rec.end - rec.start);
  }
  e["pid"] = rec.rank;
  e["tid"] = rec.stream;
  e["args"] = op_args(g, role, rec);
  return e;
}

}  // namespace

std::string format_chrome_trace(const ExecutionGraph& g, const ReplayResult& r,
                                const std::vector<MeasuredSlice>& measured) {
  std::vector<Rank> ranks;
  for (const TraceRecord& rec : r.trace) ranks.push_back(rec.rank);
  for (const MeasuredSlice& m : measured) ranks.push_back(m.rank);
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());

  EventWriter out;
  append_metadata(g, ranks, &out);
  for (const TraceRecord& rec : r.trace) out.add(trace_event(g, rec));
  for (const MeasuredSlice& m : measured) {
    out.add(Json{{"name", m.name},
                 {"cat", "compute"},
                 {"ph", "X"},
                 {"ts", to_micros(m.start)},
                 {"dur", to_micros(m.end - m.start)},
                 {"pid", m.rank},
                 {"tid", m.stream},
                 {"args", Json{{"measured", true}}}});
  }
  // Memory counters of the same ranks: one track per rank, bytes.
  for (const MemorySample& m : r.memory_trace) {
    if (!std::binary_search(ranks.begin(), ranks.end(), m.rank)) continue;
    out.add(Json{{"name", "memory"},
                 {"ph", "C"},
                 {"ts", to_micros(m.at)},
                 {"pid", m.rank},
                 {"args", Json{{"allocated", m.allocated.count},
                               {"reserved", m.reserved.count},
                               {"device", m.device.count}}}});
  }
  return std::move(out).finish();
}

}  // namespace prism
