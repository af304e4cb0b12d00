// Helpers for the Kineto importer's tests: the fixtures' paths, small traces
// written in code (Kineto's format, as PyTorch 2.x writes it), and a one-line
// description of each op of a program, so expectations read as a listing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "kineto/kineto.h"

namespace prism::kineto_test {

using Json = nlohmann::json;

inline std::string fixture(const std::string& name) {
  return std::string(PRISM_SOURCE_DIR) + "/tests/data/kineto/" + name;
}

// A trace built event by event; `events` may be edited directly.
struct TraceJson {
  Json doc = Json::object();
  Json& events() { return doc["traceEvents"]; }

  TraceJson() { doc["traceEvents"] = Json::array(); }
  TraceJson& dist(int rank, int world) {
    doc["distributedInfo"] = {{"backend", "nccl"}, {"rank", rank}, {"world_size", world}};
    return *this;
  }
  TraceJson& add(const std::string& cat, const std::string& name, double ts, double dur,
                 Json args = Json::object(), Json pid = 1, Json tid = 1) {
    if (args.is_null()) args = Json::object();  // a `{}` argument
    events().push_back({{"ph", "X"},
                        {"cat", cat},
                        {"name", name},
                        {"pid", pid},
                        {"tid", tid},
                        {"ts", ts},
                        {"dur", dur},
                        {"args", args}});
    return *this;
  }
  TraceJson& kernel(const std::string& name, double ts, double dur, int stream,
                    Json args = Json::object(), int device = 0) {
    args["stream"] = stream;
    args["device"] = device;
    return add("kernel", name, ts, dur, args, device, stream);
  }
  std::string text() const { return doc.dump(); }
};

// Collective metadata as record_param_comms records it.
inline Json comm_args(const std::string& name, std::int64_t nelems, const std::string& dtype,
                      const std::string& ranks, const std::string& desc = "default_pg",
                      const std::string& pg_name = "0") {
  return {{"Collective name", name},       {"In msg nelems", nelems},
          {"Out msg nelems", nelems},      {"dtype", dtype},
          {"Process Group Name", pg_name}, {"Process Group Description", desc},
          {"Process Group Ranks", ranks}};
}

inline std::string describe(const Role& role, const Op& op, const RankProgram& p) {
  const std::string stream = role.streams[op.stream];
  const std::string name = op.name == kNone ? "" : role.names[static_cast<std::size_t>(op.name)];
  switch (op.kind) {
    case OpKind::kCompute:
      return fmt::format("compute {} {} {}", stream, name, op.duration.ns);
    case OpKind::kCollective:
      return fmt::format("{} {} {} [{}] {} {} root={}", to_string(op.collective), stream,
                         p.comms[op.ref].key, fmt::join(p.comms[op.ref].members, ","),
                         op.bytes.count, to_string(op.dtype), op.arg);
    case OpKind::kSend:
    case OpKind::kRecv:
      return fmt::format("{} {} peer={} {} {}", to_string(op.kind), stream, p.peers[op.ref],
                         op.bytes.count, to_string(op.dtype));
    case OpKind::kAlloc:
      return fmt::format("alloc {} {}", stream, op.bytes.count);
    case OpKind::kFree:
      return fmt::format("free {} op{}", stream, op.ref);
    case OpKind::kEventRecord:
    case OpKind::kEventWait:
      return fmt::format("{} {} {}", to_string(op.kind), stream, role.events[op.ref]);
    case OpKind::kMarker:
      return fmt::format("{} {} {}", to_string(op.marker), stream, op.arg);
  }
  return "?";
}

inline std::vector<std::string> describe(const RankProgram& p) {
  std::vector<std::string> out;
  for (const Op& op : p.role.ops) out.push_back(describe(p.role, op, p));
  return out;
}

}  // namespace prism::kineto_test
