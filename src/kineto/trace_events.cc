#include "kineto/trace_events.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "util/json_depth.h"
#include "util/text_error.h"
#include "util/units.h"

namespace prism::kineto {
namespace {

// Relative traces start near 0; older builds wrote epoch microseconds
// (~1.7e15). Either fits; past this the nanoseconds would not.
constexpr double kMaxAbsTsUs = 4e15;

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim_spaces(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

// The whole of `s` as a decimal integer ("-" allowed, no "+" or blanks).
std::optional<std::int64_t> parse_integer(std::string_view s) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<EventClass> classify_complete(const Json& ev, std::string_view name,
                                            const Json* args) {
  const Json* cat = find_arg(&ev, "cat");
  if (cat == nullptr) return EventClass::kHostOp;  // the legacy profiler writes none
  if (!cat->is_string()) return std::nullopt;
  const std::string c = lower(cat->get_ref<const std::string&>());
  if (c == "kernel") return EventClass::kKernel;
  if (c == "gpu_memcpy" || c == "gpu_memset" || c == "memcpy" || c == "memset")
    return EventClass::kGpuCopy;
  if (c == "cpu_op" || c == "operator") return EventClass::kHostOp;
  if (c == "user_annotation" || c == "python_function") return EventClass::kAnnotation;
  if (c == "cuda_runtime" || c == "cuda_driver" || c == "runtime" || c == "driver")
    return EventClass::kRuntime;
  if (c == "cuda_sync") {
    const std::optional<std::string> kind = arg_string(find_arg(args, "cuda_sync_kind"));
    if (name == "Stream Wait Event" || kind == "Stream Wait Event") return EventClass::kStreamWait;
  }
  return std::nullopt;
}

// Microseconds (a JSON number) -> nanoseconds.
Result<std::int64_t> micros_to_ns(const Json* v, std::string_view field, const std::string& at,
                                  bool duration) {
  if (v == nullptr) return Status::invalid_argument(fmt::format("{}: no \"{}\"", at, field));
  if (!v->is_number()) {
    return Status::invalid_argument(
        fmt::format("{}: \"{}\" is not a number: {}", at, field, v->dump()));
  }
  const double us = v->get<double>();
  if (!std::isfinite(us) || std::fabs(us) > kMaxAbsTsUs) {
    return Status::invalid_argument(fmt::format("{}: \"{}\" {} is out of range", at, field, us));
  }
  const std::int64_t ns = std::llround(us * 1000.0);
  if (duration && ns < 0) {
    return Status::invalid_argument(fmt::format("{}: negative \"dur\" {} us", at, us));
  }
  if (duration && ns > kMaxOpDuration.ns) {
    return Status::invalid_argument(
        fmt::format("{}: \"dur\" {} us exceeds the limit of 2^50 ns", at, us));
  }
  return ns;
}

std::string thread_key(const Json& ev) {
  const Json* pid = find_arg(&ev, "pid");
  const Json* tid = find_arg(&ev, "tid");
  return (pid ? pid->dump() : std::string()) + "/" + (tid ? tid->dump() : std::string());
}

// args[key], else the event's own field `fallback` (pid / tid), as an integer.
Result<std::int64_t> device_field(const Json& ev, const Json* args, std::string_view key,
                                  std::string_view fallback, const std::string& at) {
  if (const Json* a = find_arg(args, key)) {
    if (std::optional<std::int64_t> v = arg_int(a)) return *v;
    return Status::invalid_argument(
        fmt::format("{}: args \"{}\" is not an integer: {}", at, key, a->dump()));
  }
  if (std::optional<std::int64_t> v = arg_int(find_arg(&ev, fallback))) return *v;
  return Status::invalid_argument(
      fmt::format("{}: no \"{}\" (neither in args nor as \"{}\")", at, key, fallback));
}

Status read_event(const Json& ev, std::size_t index, const std::string& source,
                  std::vector<TraceEvent>* out) {
  const std::string at = fmt::format("{}: event {}", source, index);
  if (!ev.is_object()) return Status::invalid_argument(at + ": not a JSON object");
  const Json* ph = find_arg(&ev, "ph");
  const Json* name = find_arg(&ev, "name");
  if (ph == nullptr || !ph->is_string() || name == nullptr || !name->is_string())
    return Status::ok();  // not an event the importer reads
  TraceEvent e;
  e.index = index;
  e.name = name->get_ref<const std::string&>();
  const std::string here = where(source, e);
  const Json* args = find_arg(&ev, "args");
  if (args != nullptr && !args->is_object()) {
    return Status::invalid_argument(fmt::format("{}: \"args\" is not an object", here));
  }
  e.args = args;
  const std::string& phase = ph->get_ref<const std::string&>();
  if (phase == "X") {
    const std::optional<EventClass> cls = classify_complete(ev, e.name, args);
    if (!cls) return Status::ok();
    e.cls = *cls;
    PRISM_ASSIGN_OR_RETURN(e.dur_ns, micros_to_ns(find_arg(&ev, "dur"), "dur", here, true));
  } else if ((phase == "i" || phase == "I") && e.name == "[memory]") {
    e.cls = EventClass::kMemory;
  } else {
    return Status::ok();
  }
  PRISM_ASSIGN_OR_RETURN(e.ts_ns, micros_to_ns(find_arg(&ev, "ts"), "ts", here, false));
  e.thread = thread_key(ev);
  if (e.cls == EventClass::kKernel || e.cls == EventClass::kGpuCopy ||
      e.cls == EventClass::kStreamWait) {
    PRISM_ASSIGN_OR_RETURN(e.device, device_field(ev, args, "device", "pid", here));
    PRISM_ASSIGN_OR_RETURN(e.stream, device_field(ev, args, "stream", "tid", here));
  }
  e.correlation = arg_int(find_arg(args, "correlation")).value_or(-1);
  e.external_id = arg_int(find_arg(args, "External id")).value_or(-1);
  out->push_back(e);
  return Status::ok();
}

Result<DistributedInfo> read_distributed_info(const Json& doc, const std::string& source) {
  DistributedInfo d;
  const Json* info = find_arg(&doc, "distributedInfo");
  if (info == nullptr) return d;
  const std::string at = source + ": distributedInfo";
  if (!info->is_object()) return Status::invalid_argument(at + ": not an object");
  const Json* world = find_arg(info, "world_size");
  const Json* rank = find_arg(info, "rank");
  if (world != nullptr) {
    const std::optional<std::int64_t> w = arg_int(world);
    if (!w || *w < 1 || *w > (std::int64_t{1} << 24)) {
      return Status::invalid_argument(
          fmt::format("{}: world_size {} is not an integer in [1, 2^24]", at, world->dump()));
    }
    d.world_size = static_cast<int>(*w);
  }
  if (rank != nullptr) {
    const std::optional<std::int64_t> r = arg_int(rank);
    if (!r || *r < 0 || *r >= d.world_size.value_or(1 << 24)) {
      return Status::invalid_argument(fmt::format("{}: rank {} is not an integer in [0, {})", at,
                                                  rank->dump(), d.world_size.value_or(1 << 24)));
    }
    d.rank = static_cast<Rank>(*r);
  }
  if (const Json* pgs = find_arg(info, "pg_config"); pgs != nullptr && pgs->is_array()) {
    for (const Json& pg : *pgs) {
      const Json* pg_name = pg.is_object() ? find_arg(&pg, "pg_name") : nullptr;
      const Json* ranks = pg.is_object() ? find_arg(&pg, "ranks") : nullptr;
      if (pg_name == nullptr || ranks == nullptr) continue;
      const std::optional<std::string> key =
          pg_name->is_string() ? arg_string(pg_name) : std::optional(pg_name->dump());
      std::optional<RankText> list = parse_ranks(*ranks);
      if (key && list && !list->truncated) d.pg_ranks[*key] = std::move(list->ranks);
    }
  }
  return d;
}

}  // namespace

std::string where(const std::string& source, const TraceEvent& e) {
  return fmt::format("{}: event {} ('{}')", source, e.index, e.name);
}

const Json* find_arg(const Json* args, std::string_view key) {
  if (args == nullptr || !args->is_object()) return nullptr;
  const auto it = args->find(key);
  return it == args->end() ? nullptr : &*it;
}

std::optional<std::int64_t> arg_int(const Json* v) {
  if (v == nullptr) return std::nullopt;
  if (v->is_number_integer()) return v->get<std::int64_t>();
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (std::isfinite(d) && std::fabs(d) < 9e15 && d == std::floor(d))
      return static_cast<std::int64_t>(d);
    return std::nullopt;
  }
  if (v->is_string()) {
    const std::string& s = v->get_ref<const std::string&>();
    if (s.size() > 18) return std::nullopt;
    return parse_integer(s);
  }
  return std::nullopt;
}

std::optional<std::string> arg_string(const Json* v) {
  if (v == nullptr || !v->is_string()) return std::nullopt;
  return v->get<std::string>();
}

std::optional<RankText> parse_ranks(const Json& value) {
  RankText out;
  const auto add = [&out](std::int64_t r) {
    if (r < 0 || r >= (std::int64_t{1} << 24)) return false;
    out.ranks.push_back(static_cast<Rank>(r));
    return true;
  };
  if (value.is_array()) {
    for (const Json& item : value) {
      const std::optional<std::int64_t> r =
          item.is_number_integer() ? arg_int(&item) : std::nullopt;
      if (!r || !add(*r)) return std::nullopt;
    }
    return out;
  }
  if (!value.is_string()) return std::nullopt;
  std::string_view s = trim_spaces(value.get_ref<const std::string&>());
  if (s.size() < 2 || s.front() != '[' || s.back() != ']') return std::nullopt;
  s = s.substr(1, s.size() - 2);
  while (!s.empty()) {
    const std::size_t comma = s.find(',');
    const std::string_view item = trim_spaces(s.substr(0, comma));
    s = comma == std::string_view::npos ? std::string_view() : s.substr(comma + 1);
    if (item == "...") {
      out.truncated = true;
      continue;
    }
    const std::optional<std::int64_t> r = item.size() > 9 ? std::nullopt : parse_integer(item);
    if (!r || !add(*r)) return std::nullopt;
    if (comma == std::string_view::npos) break;
  }
  return out;
}

Result<ParsedTrace> parse_trace(std::string_view text, const std::string& source) {
  ParsedTrace t;
  t.source = source;
  t.doc = std::make_unique<Json>();
  if (text.starts_with("\x1f\x8b")) {
    return Status::invalid_argument(
        source + ": gzip-compressed; decompress it first (gunzip), as torch writes .json.gz");
  }
  PRISM_RETURN_IF_ERROR(check_json_depth(text, source));
  try {
    *t.doc = Json::parse(text);
  } catch (const Json::parse_error& e) {
    return json_syntax_error(text, source, e.byte, e.what());
  } catch (const Json::exception& e) {
    return json_value_error(source, e.id, e.what());
  }
  const Json* events = t.doc.get();
  if (!t.doc->is_object() && !t.doc->is_array()) {
    return Status::invalid_argument(
        fmt::format("{}: a JSON {}, not a PyTorch profiler trace", source, t.doc->type_name()));
  }
  if (t.doc->is_object()) {
    events = find_arg(t.doc.get(), "traceEvents");
    if (events == nullptr) {
      return Status::invalid_argument(source +
                                      ": no \"traceEvents\" (not a PyTorch profiler trace)");
    }
    PRISM_ASSIGN_OR_RETURN(t.dist, read_distributed_info(*t.doc, source));
  }
  if (!events->is_array()) {
    return Status::invalid_argument(
        source + ": \"traceEvents\" is not an array (not a PyTorch profiler trace)");
  }
  for (std::size_t i = 0; i < events->size(); ++i)
    PRISM_RETURN_IF_ERROR(read_event((*events)[i], i, source, &t.events));
  return t;
}

}  // namespace prism::kineto
