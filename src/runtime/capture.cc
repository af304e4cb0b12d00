#include "runtime/capture.h"

#include <nlohmann/json.hpp>

namespace prism::runtime {
namespace {

using nlohmann::json;

json event(const wire::Message& m, std::int32_t graph_op) {
  json e = {{"type", wire::to_string(wire::type_of(m))}};
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, wire::CommInit>) {
          e.update({{"comm", v.comm},
                    {"nranks", v.nranks},
                    {"rank_in_comm", v.rank_in_comm},
                    {"id_hash", v.id_hash},
                    {"members", v.members}});
        } else if constexpr (std::is_same_v<T, wire::CommSplit>) {
          e.update({{"parent", v.parent}, {"comm", v.comm}, {"color", v.color}, {"key", v.key}});
        } else if constexpr (std::is_same_v<T, wire::CommInfo>) {
          e.update({{"comm", v.comm},
                    {"nranks", v.members.size()},
                    {"rank_in_comm", v.rank_in_comm},
                    {"members", v.members}});
        } else if constexpr (std::is_same_v<T, wire::Op>) {
          e.update({{"at", v.at},
                    {"op_id", v.op_id},
                    {"code", wire::to_string(v.code)},
                    {"comm", v.comm},
                    {"stream", v.stream},
                    {"dtype", to_string(v.dtype)},
                    {"bytes", v.bytes},
                    {"peer", v.peer},
                    {"tag", v.tag},
                    {"group", v.group},
                    {"graph_op", graph_op}});
        } else if constexpr (std::is_same_v<T, wire::Wait>) {
          e.update({{"at", v.at}, {"wait_id", v.wait_id}, {"answers_seen", v.answers_seen}});
          if (v.op_id != wire::kAnyOp) e["op_id"] = v.op_id;
          if (v.until != wire::kNoLimit) e["until"] = v.until;
        } else if constexpr (std::is_same_v<T, wire::Memory>) {
          e.update({{"at", v.at},
                    {"action", v.action == wire::MemoryAction::kAlloc ? "alloc" : "free"},
                    {"id", v.id},
                    {"bytes", v.bytes},
                    {"stream", v.stream}});
        } else if constexpr (std::is_same_v<T, wire::Marker>) {
          static constexpr const char* kNames[] = {"iteration_begin", "iteration_end", "microbatch",
                                                   "phase"};
          e.update(
              {{"at", v.at}, {"marker", kNames[static_cast<int>(v.code)]}, {"value", v.value}});
        } else if constexpr (std::is_same_v<T, wire::Compute>) {
          e.update(
              {{"at", v.at}, {"duration", v.duration}, {"stream", v.stream}, {"name", v.name}});
        } else if constexpr (std::is_same_v<T, wire::Bye>) {
          e.update({{"at", v.at}, {"exit_code", v.exit_code}});
        } else if constexpr (std::is_same_v<T, wire::Complete>) {
          e.update({{"at", v.at}, {"op_id", v.op_id}});
        } else if constexpr (std::is_same_v<T, wire::Horizon>) {
          e.update({{"at", v.at}, {"wait_id", v.wait_id}});
        } else if constexpr (std::is_same_v<T, wire::Hello>) {
          e.update({{"rank", v.rank}, {"world_size", v.world_size}, {"pid", v.pid}});
        } else if constexpr (std::is_same_v<T, wire::Welcome>) {
          e.update({{"at", v.start_at}});
        } else if constexpr (std::is_same_v<T, wire::Error>) {
          e.update({{"message", v.message}});
        }
      },
      m);
  return e;
}

}  // namespace

std::string format_capture_json(const RankCapture& c) {
  const json head = {{"format", "prism-capture"},
                     {"version", 1},
                     {"rank", c.rank},
                     {"world_size", c.world_size},
                     {"pid", c.pid},
                     {"program", c.program},
                     {"job", c.job},
                     {"time_unit", "ns"}};
  std::string out = head.dump();
  out.pop_back();  // the closing brace: the events follow
  out += ",\"events\":[\n";
  for (std::size_t i = 0; i < c.entries.size(); ++i) {
    out += event(c.entries[i].message, c.entries[i].graph_op).dump();
    out += i + 1 < c.entries.size() ? ",\n" : "\n";
  }
  out += "]}\n";
  return out;
}

}  // namespace prism::runtime
