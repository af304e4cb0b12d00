#include "mem/snapshot.h"

#include <algorithm>
#include <array>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/file.h"
#include "util/json_depth.h"
#include "util/text_error.h"
#include "util/units.h"

namespace prism {
namespace {

using Json = nlohmann::json;
using Action = AllocatorEvent::Action;

constexpr std::int64_t kMaxInt = std::numeric_limits<std::int64_t>::max();

constexpr std::array<std::pair<std::string_view, Action>, 8> kActions = {{
    {"alloc", Action::kAlloc},
    {"free_requested", Action::kFreeRequested},
    {"free_completed", Action::kFreeCompleted},
    {"segment_alloc", Action::kSegmentAlloc},
    {"segment_free", Action::kSegmentFree},
    {"segment_map", Action::kSegmentMap},
    {"segment_unmap", Action::kSegmentUnmap},
    {"oom", Action::kOom},
}};

// Entries torch records that are not allocator actions: the snapshot marker
// and torch.cuda.memory._record_memory_history annotations.
constexpr std::array<std::string_view, 2> kIgnoredActions = {"snapshot", "user_defined"};

Status error(std::string_view where, std::string_view msg) {
  return Status::invalid_argument(fmt::format("{}: {}", where, msg));
}

std::string_view type_name(const Json& j) {
  if (j.is_number_float()) return "a float";
  if (j.is_number()) return "an integer";
  if (j.is_string()) return "a string";
  if (j.is_array()) return "an array";
  if (j.is_object()) return "an object";
  if (j.is_boolean()) return "a boolean";
  return "null";
}

Result<std::int64_t> as_int(const Json& j, std::string_view where, std::int64_t lo,
                            std::int64_t hi) {
  if (!j.is_number_integer())
    return error(where, fmt::format("expected an integer, got {}", type_name(j)));
  if (j.is_number_unsigned() && j.get<std::uint64_t>() > static_cast<std::uint64_t>(kMaxInt))
    return error(where, fmt::format("{} is out of range", j.get<std::uint64_t>()));
  const auto v = j.get<std::int64_t>();
  if (v < lo || v > hi) return error(where, fmt::format("{} is out of range [{}, {}]", v, lo, hi));
  return v;
}

// Addresses are pointers in torch; device addresses stay far below 2^60,
// which leaves room for address + size.
Result<std::uint64_t> as_addr(const Json& j, std::string_view where) {
  constexpr std::uint64_t kMaxAddress = std::uint64_t{1} << 60;
  if (!j.is_number_integer() ||
      (j.is_number_integer() && !j.is_number_unsigned() && j.get<std::int64_t>() < 0))
    return error(where, fmt::format("expected an address (an integer >= 0), got {}",
                                    j.is_number_integer() ? "a negative integer" : type_name(j)));
  if (j.get<std::uint64_t>() > kMaxAddress)
    return error(where,
                 fmt::format("{:#x} is beyond 2^60, not a device address", j.get<std::uint64_t>()));
  return j.get<std::uint64_t>();
}

const Json* find(const Json& obj, std::string_view key) {
  const auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

Result<const Json*> require(const Json& obj, std::string_view key, std::string_view where) {
  const Json* v = find(obj, key);
  if (v == nullptr) return error(where, fmt::format("missing field \"{}\"", key));
  return v;
}

Status check_keys(const Json& obj, std::string_view where,
                  std::initializer_list<std::string_view> allowed) {
  for (const auto& [key, value] : obj.items())
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
      return error(where, fmt::format("unknown field \"{}\"", key));
  return Status::ok();
}

// 'allocator_settings' as the converter writes it: torch's values, with
// roundup_power2_divisions as a list over the 1 MiB, 2 MiB, ... intervals.
Status read_settings(const Json& s, MemoryTrace* t) {
  constexpr std::string_view kWhere = "allocator_settings";
  if (!s.is_object()) return error(kWhere, fmt::format("expected an object, got {}", type_name(s)));
  t->has_settings = true;
  AllocatorConfig& c = t->settings;
  if (const Json* v = find(s, "PYTORCH_CUDA_ALLOC_CONF")) {
    if (!v->is_string())
      return error("allocator_settings/PYTORCH_CUDA_ALLOC_CONF", "expected a string");
    t->settings_text = v->get<std::string>();
  }
  if (const Json* v = find(s, "max_split_size")) {
    // torch writes SIZE_MAX, cast to int64 (-1), when there is no limit.
    PRISM_ASSIGN_OR_RETURN(const std::int64_t mss,
                           as_int(*v, "allocator_settings/max_split_size", -1, kMaxInt));
    c.max_split_size = mss < 0 ? AllocatorConfig::kNoLimit : mss;
  }
  if (const Json* v = find(s, "expandable_segments")) {
    if (!v->is_boolean())
      return error("allocator_settings/expandable_segments", "expected a boolean");
    c.expandable_segments = v->get<bool>();
  }
  if (const Json* v = find(s, "garbage_collection_threshold")) {
    if (!v->is_number() || v->get<double>() < 0 || v->get<double>() >= 1)
      return error("allocator_settings/garbage_collection_threshold",
                   "expected a number in [0, 1)");
    c.garbage_collection_threshold = v->get<double>();
  }
  if (const Json* v = find(s, "roundup_power2_divisions")) {
    constexpr std::string_view kRoundup = "allocator_settings/roundup_power2_divisions";
    if (!v->is_array() || v->size() > AllocatorConfig::kRoundupIntervals)
      return error(kRoundup, fmt::format("expected a list of at most {} integers",
                                         AllocatorConfig::kRoundupIntervals));
    for (std::size_t i = 0; i < v->size(); ++i) {
      PRISM_ASSIGN_OR_RETURN(const std::int64_t d, as_int((*v)[i], kRoundup, 0, 1 << 20));
      c.roundup_power2_divisions[i] = static_cast<int>(d);
    }
  }
  return Status::ok();
}

Status read_trace(const Json& trace, MemoryTrace* t) {
  if (!trace.is_array())
    return error("trace", fmt::format("expected an array, got {}", type_name(trace)));
  t->num_entries = trace.size();
  t->events.reserve(trace.size());
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const std::string where = fmt::format("trace entry {}", i);
    const Json& e = trace[i];
    if (!e.is_array() || e.size() != 4 || !e[0].is_string())
      return error(where, "expected [action, addr, size, stream]");
    const std::string name = e[0].get<std::string>();
    if (std::find(kIgnoredActions.begin(), kIgnoredActions.end(), name) != kIgnoredActions.end()) {
      ++t->num_ignored;
      continue;
    }
    const auto* known = std::find_if(kActions.begin(), kActions.end(),
                                     [&](const auto& a) { return a.first == name; });
    if (known == kActions.end()) return error(where, fmt::format("unknown action '{}'", name));
    RecordedEvent r;
    r.entry = i;
    r.event.action = known->second;
    PRISM_ASSIGN_OR_RETURN(r.event.addr, as_addr(e[1], where + " addr"));
    PRISM_ASSIGN_OR_RETURN(r.event.size, as_int(e[2], where + " size", 0, kMaxBytes.count));
    PRISM_ASSIGN_OR_RETURN(
        r.event.stream,
        as_int(e[3], where + " stream", std::numeric_limits<std::int64_t>::min(), kMaxInt));
    t->events.push_back(r);
  }
  return Status::ok();
}

Result<SegmentInfo::Block::State> block_state(const Json& j, std::string_view where) {
  using State = SegmentInfo::Block::State;
  if (j.is_string()) {
    const std::string s = j.get<std::string>();
    if (s == "active_allocated") return State::kAllocated;
    // "active_awaiting_free" is the name torch's documentation uses.
    if (s == "active_pending_free" || s == "active_awaiting_free") return State::kPendingFree;
    if (s == "inactive") return State::kFree;
    return error(where, fmt::format("unknown block state '{}' (valid: active_allocated, "
                                    "active_pending_free, inactive)",
                                    s));
  }
  return error(where, fmt::format("expected a block state, got {}", type_name(j)));
}

Result<SegmentInfo> read_segment(const Json& s, const std::string& where) {
  if (!s.is_object()) return error(where, fmt::format("expected an object, got {}", type_name(s)));
  SegmentInfo seg;
  PRISM_ASSIGN_OR_RETURN(const Json* addr, require(s, "address", where));
  PRISM_ASSIGN_OR_RETURN(seg.addr, as_addr(*addr, where + " address"));
  PRISM_ASSIGN_OR_RETURN(const Json* total, require(s, "total_size", where));
  PRISM_ASSIGN_OR_RETURN(seg.size, as_int(*total, where + " total_size", 0, kMaxBytes.count));
  PRISM_ASSIGN_OR_RETURN(const Json* stream, require(s, "stream", where));
  PRISM_ASSIGN_OR_RETURN(seg.stream, as_int(*stream, where + " stream",
                                            std::numeric_limits<std::int64_t>::min(), kMaxInt));
  PRISM_ASSIGN_OR_RETURN(const Json* type, require(s, "segment_type", where));
  if (!type->is_string() || (*type != "small" && *type != "large"))
    return error(where + " segment_type", "expected \"small\" or \"large\"");
  seg.small_pool = *type == "small";
  if (const Json* e = find(s, "is_expandable")) {
    if (!e->is_boolean()) return error(where + " is_expandable", "expected a boolean");
    seg.expandable = e->get<bool>();
  }
  PRISM_ASSIGN_OR_RETURN(const Json* blocks, require(s, "blocks", where));
  if (!blocks->is_array()) return error(where + " blocks", "expected an array");
  std::uint64_t next = seg.addr;
  for (std::size_t b = 0; b < blocks->size(); ++b) {
    const std::string at = fmt::format("{} block {}", where, b);
    const Json& bj = (*blocks)[b];
    if (!bj.is_object()) return error(at, "expected an object");
    SegmentInfo::Block block;
    PRISM_ASSIGN_OR_RETURN(const Json* baddr, require(bj, "address", at));
    PRISM_ASSIGN_OR_RETURN(block.addr, as_addr(*baddr, at + " address"));
    PRISM_ASSIGN_OR_RETURN(const Json* size, require(bj, "size", at));
    PRISM_ASSIGN_OR_RETURN(block.size, as_int(*size, at + " size", 1, kMaxBytes.count));
    if (const Json* req = find(bj, "requested_size")) {
      PRISM_ASSIGN_OR_RETURN(block.requested,
                             as_int(*req, at + " requested_size", 0, kMaxBytes.count));
    }
    PRISM_ASSIGN_OR_RETURN(const Json* state, require(bj, "state", at));
    PRISM_ASSIGN_OR_RETURN(block.state, block_state(*state, at + " state"));
    if (block.addr != next)
      return error(at, fmt::format("address {:#x} does not follow the previous block (expected "
                                   "{:#x})",
                                   block.addr, next));
    next += static_cast<std::uint64_t>(block.size);
    seg.blocks.push_back(block);
  }
  if (next - seg.addr != static_cast<std::uint64_t>(seg.size))
    return error(where, fmt::format("blocks add up to {} bytes, total_size is {}", next - seg.addr,
                                    seg.size));
  return seg;
}

Status read_final_segments(const Json& segs, MemoryTrace* t) {
  if (!segs.is_array())
    return error("final_segments", fmt::format("expected an array, got {}", type_name(segs)));
  t->has_final_segments = true;
  for (std::size_t i = 0; i < segs.size(); ++i) {
    PRISM_ASSIGN_OR_RETURN(SegmentInfo seg,
                           read_segment(segs[i], fmt::format("final segment {}", i)));
    t->final_segments.push_back(std::move(seg));
  }
  std::sort(t->final_segments.begin(), t->final_segments.end(),
            [](const SegmentInfo& a, const SegmentInfo& b) { return a.addr < b.addr; });
  return Status::ok();
}

Status read_document(const Json& doc, MemoryTrace* t) {
  if (!doc.is_object())
    return error("/", fmt::format("expected an object, got {}", type_name(doc)));
  const Json* format = find(doc, "format");
  if (format == nullptr) {
    if (find(doc, "device_traces") != nullptr || find(doc, "segments") != nullptr)
      return Status::invalid_argument(
          "a raw torch memory snapshot, not a prism memory trace: convert it with "
          "scripts/memory_snapshot_to_json.py");
    return error("/", "missing field \"format\" (not a prism memory trace)");
  }
  if (!format->is_string() || *format != kMemoryTraceFormat)
    return error("format",
                 fmt::format("expected \"{}\", got {}", kMemoryTraceFormat, format->dump()));
  PRISM_RETURN_IF_ERROR(check_keys(doc, "/",
                                   {"format", "version", "source", "device", "device_total_memory",
                                    "allocator_settings", "trace", "final_segments"}));
  PRISM_ASSIGN_OR_RETURN(const Json* version, require(doc, "version", "/"));
  PRISM_ASSIGN_OR_RETURN(const std::int64_t v, as_int(*version, "version", 0, kMaxInt));
  if (v != kMemoryTraceVersion)
    return error("version", fmt::format("version {} is not supported (this prism reads version {})",
                                        v, kMemoryTraceVersion));
  if (const Json* device = find(doc, "device")) {
    PRISM_ASSIGN_OR_RETURN(const std::int64_t d, as_int(*device, "device", 0, 1 << 16));
    t->device = static_cast<int>(d);
  }
  if (const Json* m = find(doc, "device_total_memory"); m != nullptr && !m->is_null()) {
    PRISM_ASSIGN_OR_RETURN(t->device_total_memory,
                           as_int(*m, "device_total_memory", 1, kMaxBytes.count));
  }
  if (const Json* s = find(doc, "allocator_settings"); s != nullptr && !s->is_null())
    PRISM_RETURN_IF_ERROR(read_settings(*s, t));
  PRISM_ASSIGN_OR_RETURN(const Json* trace, require(doc, "trace", "/"));
  PRISM_RETURN_IF_ERROR(read_trace(*trace, t));
  if (const Json* segs = find(doc, "final_segments"); segs != nullptr && !segs->is_null())
    PRISM_RETURN_IF_ERROR(read_final_segments(*segs, t));
  return Status::ok();
}

}  // namespace

std::string_view action_name(AllocatorEvent::Action action) {
  for (const auto& [name, a] : kActions)
    if (a == action) return name;
  return "?";
}

Result<MemoryTrace> parse_memory_trace(std::string_view text, std::string_view source) {
  const std::string src = source.empty() ? "memory trace" : std::string(source);
  // A pickle (protocol 2 and later) starts with the PROTO opcode 0x80.
  if (!text.empty() && static_cast<unsigned char>(text.front()) == 0x80)
    return Status::invalid_argument(src +
                                    ": a pickle, not a prism memory trace: convert it with "
                                    "scripts/memory_snapshot_to_json.py");
  PRISM_RETURN_IF_ERROR(check_json_depth(text, src));
  MemoryTrace t;
  try {
    const Json doc = Json::parse(text);
    PRISM_RETURN_IF_ERROR(read_document(doc, &t).with_context(src));
  } catch (const Json::parse_error& e) {
    return json_syntax_error(text, src, e.byte, e.what());
  } catch (const Json::exception& e) {
    return json_value_error(src, e.id, e.what());
  }
  return t;
}

Result<MemoryTrace> load_memory_trace(const std::string& path) {
  PRISM_ASSIGN_OR_RETURN(std::string text, read_file(path));
  return parse_memory_trace(text, path);
}

}  // namespace prism
