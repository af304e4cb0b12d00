// The events of a Kineto trace that the importer uses, read and checked once
// (internal to src/kineto). A trace is either Kineto's JSON object
// ({"traceEvents": [...], "distributedInfo": {...}, ...}) or the bare event
// array of the legacy profiler (torch builds without Kineto). Times become
// integer nanoseconds here (microsecond floats rounded to the nearest ns), so
// nothing downstream sees a float. Each event keeps its index in traceEvents
// for messages.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "graph/layout.h"
#include "util/status.h"

namespace prism::kineto {

using Json = nlohmann::json;

enum class EventClass : std::uint8_t {
  kKernel,      // cat "kernel": a GPU kernel
  kGpuCopy,     // cat "gpu_memcpy" / "gpu_memset"
  kHostOp,      // cat "cpu_op" / "operator", or none (legacy): a host operator
  kAnnotation,  // cat "user_annotation" / "python_function": a label around host ops
  kRuntime,     // cat "cuda_runtime" / "cuda_driver": a host API call with a correlation id
  kStreamWait,  // cat "cuda_sync", "Stream Wait Event": a cross-stream dependency
  kMemory,      // the instant event "[memory]"
};

struct TraceEvent {
  std::size_t index = 0;  // in traceEvents
  EventClass cls = EventClass::kHostOp;
  std::string_view name;  // points into the document
  std::int64_t ts_ns = 0;
  std::int64_t dur_ns = 0;        // 0 for instant events
  std::string thread;             // host events: "<pid>/<tid>" as written
  std::int64_t device = -1;       // GPU events: args "device", else pid
  std::int64_t stream = -1;       // GPU events and stream waits: args "stream", else tid
  std::int64_t correlation = -1;  // args "correlation": launch <-> GPU activity
  std::int64_t external_id = -1;  // args "External id": GPU activity -> host operator
  const Json* args = nullptr;     // the event's "args" object, or null

  std::int64_t end_ns() const { return ts_ns + dur_ns; }
};

struct DistributedInfo {
  std::optional<Rank> rank;
  std::optional<int> world_size;
  // distributedInfo.pg_config: process group name -> its full rank list,
  // which resolves "Process Group Ranks" that the profiler truncated.
  std::map<std::string, std::vector<Rank>> pg_ranks;
};

struct ParsedTrace {
  std::string source;
  std::unique_ptr<Json> doc;       // owns what the events point into
  std::vector<TraceEvent> events;  // the used events, in file order
  DistributedInfo dist;
};

Result<ParsedTrace> parse_trace(std::string_view text, const std::string& source);

// "<source>: event <index> ('<name>')", the place every message names.
std::string where(const std::string& source, const TraceEvent& e);

// Argument readers over an "args" object (null: absent). An integer may be
// written as a JSON integer, an integral float, or a string of digits (the
// profiler has written all three over its versions).
const Json* find_arg(const Json* args, std::string_view key);
std::optional<std::int64_t> arg_int(const Json* value);
std::optional<std::string> arg_string(const Json* value);

// A rank list as the profiler writes it: a JSON array of integers, or the
// string "[0, 1, 2]"; "..." marks a list cut short ("[0, 1, ..., 63]" keeps
// the first 29 and the last, older builds "[0, 1, ...]" the first 30).
struct RankText {
  std::vector<Rank> ranks;  // the listed ones
  bool truncated = false;
};
std::optional<RankText> parse_ranks(const Json& value);

}  // namespace prism::kineto
