#include "slicing/capture_file.h"

#include <array>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "slicing/capture_objects.h"
#include "util/json_depth.h"
#include "util/text_error.h"

namespace prism {
namespace {

using nlohmann::json;

// `v` as the integer type T, or nullopt when it is not an integer in T's
// range. nlohmann's get<T>() converts without a check: a float out of T's
// range is undefined behaviour, an integer out of range wraps.
template <typename T>
std::optional<T> integer_of(const json& v) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (std::in_range<T>(u)) return static_cast<T>(u);
  } else if (v.is_number_integer()) {
    const auto i = v.get<std::int64_t>();
    if (std::in_range<T>(i)) return static_cast<T>(i);
  }
  return std::nullopt;
}

template <typename T>
inline constexpr bool kIsInteger = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// A list of integers, each checked as integer_of() does.
template <typename T>
struct IntegerList : std::false_type {};
template <typename U>
struct IntegerList<std::vector<U>> : std::bool_constant<kIsInteger<U>> {};

template <typename U>
std::optional<std::vector<U>> integers_of(const json& v) {
  if (!v.is_array()) return std::nullopt;
  std::vector<U> out;
  out.reserve(v.size());
  for (const json& item : v) {
    const std::optional<U> x = integer_of<U>(item);
    if (!x) return std::nullopt;
    out.push_back(*x);
  }
  return out;
}

constexpr std::array<const char*, 4> kMarkerNames = {"iteration_begin", "iteration_end",
                                                     "microbatch", "phase"};
constexpr std::array<const char*, 2> kMemoryActions = {"alloc", "free"};

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
                    {"action", kMemoryActions[static_cast<std::size_t>(v.action)]},
                    {"id", v.id},
                    {"bytes", v.bytes},
                    {"stream", v.stream}});
        } else if constexpr (std::is_same_v<T, wire::Marker>) {
          e.update({{"at", v.at},
                    {"marker", kMarkerNames[static_cast<std::size_t>(v.code)]},
                    {"value", v.value}});
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

// One event's fields, read back; errors name the event.
class EventReader {
 public:
  EventReader(const json& e, std::string where) : e_(e), where_(std::move(where)) {}

  Status fail(const std::string& why) const {
    return Status::invalid_argument(fmt::format("{}: {}", where_, why));
  }
  template <typename T>
  Result<T> get(const char* name) const {
    if (!e_.contains(name)) return fail(fmt::format("no \"{}\"", name));
    return convert<T>(name);
  }
  template <typename T>
  Result<T> get_or(const char* name, T fallback) const {
    if (!e_.contains(name)) return fallback;
    return convert<T>(name);
  }
  // A client's stream id (16 bits on the wire).
  Result<std::uint16_t> stream(Result<std::int64_t> s) const {
    if (!s.is_ok()) return s.status();
    if (s.value() < 0 || s.value() > 0xffff)
      return fail(fmt::format("stream {} outside 0..65535", s.value()));
    return static_cast<std::uint16_t>(s.value());
  }

 private:
  template <typename T>
  Result<T> convert(const char* name) const {
    if constexpr (kIsInteger<T>) {
      if (const std::optional<T> v = integer_of<T>(e_.at(name))) return *v;
      return fail(fmt::format("\"{}\" is {}, not the expected type", name, e_.at(name).dump()));
    } else if constexpr (IntegerList<T>::value) {
      if (std::optional<T> v = integers_of<typename T::value_type>(e_.at(name)))
        return std::move(*v);
      return fail(fmt::format("\"{}\" is {}, not the expected type", name, e_.at(name).dump()));
    }
    try {
      return e_.at(name).get<T>();
    } catch (const json::exception&) {
      return fail(fmt::format("\"{}\" is {}, not the expected type", name, e_.at(name).dump()));
    }
  }

  const json& e_;
  std::string where_;
};

template <typename E, std::size_t N>
std::optional<E> index_of(const std::array<const char*, N>& names, const std::string& s) {
  for (std::size_t i = 0; i < N; ++i)
    if (s == names[i]) return static_cast<E>(i);
  return std::nullopt;
}

std::optional<wire::MessageType> parse_message_type(const std::string& s) {
  static constexpr wire::MessageType kTypes[] = {
      wire::MessageType::kHello,   wire::MessageType::kCommInit, wire::MessageType::kOp,
      wire::MessageType::kMemory,  wire::MessageType::kMarker,   wire::MessageType::kCompute,
      wire::MessageType::kBye,     wire::MessageType::kWait,     wire::MessageType::kCommSplit,
      wire::MessageType::kWelcome, wire::MessageType::kComplete, wire::MessageType::kError,
      wire::MessageType::kHorizon, wire::MessageType::kCommInfo};
  for (wire::MessageType t : kTypes)
    if (wire::to_string(t) == s) return t;
  return std::nullopt;
}

std::optional<wire::OpCode> parse_op_code(const std::string& s) {
  for (int i = 0; i < wire::kNumOpCodes; ++i)
    if (wire::to_string(static_cast<wire::OpCode>(i)) == s) return static_cast<wire::OpCode>(i);
  return std::nullopt;
}

Result<wire::Message> read_comm(const EventReader& r, bool info) {
  PRISM_ASSIGN_OR_RETURN(const std::uint32_t comm, r.get<std::uint32_t>("comm"));
  PRISM_ASSIGN_OR_RETURN(const std::int32_t nranks, r.get<std::int32_t>("nranks"));
  PRISM_ASSIGN_OR_RETURN(const std::int32_t position, r.get<std::int32_t>("rank_in_comm"));
  PRISM_ASSIGN_OR_RETURN(std::vector<std::int32_t> members,
                         r.get_or<std::vector<std::int32_t>>("members", {}));
  if (info) {
    // A split's answer always lists its members.
    if (std::ssize(members) != nranks)
      return r.fail(fmt::format("communicator {}: {} ranks, {} members listed", comm, nranks,
                                members.size()));
    return wire::Message(wire::CommInfo{comm, position, std::move(members)});
  }
  PRISM_ASSIGN_OR_RETURN(const std::uint64_t id_hash, r.get_or<std::uint64_t>("id_hash", 0));
  return wire::Message(wire::CommInit{comm, nranks, position, id_hash, std::move(members)});
}

// `graph_op`: the op's matched graph op, when the file says.
Result<wire::Message> read_op(const EventReader& r, std::int32_t* graph_op) {
  wire::Op o;
  PRISM_ASSIGN_OR_RETURN(o.at, r.get<std::int64_t>("at"));
  PRISM_ASSIGN_OR_RETURN(o.op_id, r.get<std::uint32_t>("op_id"));
  PRISM_ASSIGN_OR_RETURN(const std::string code, r.get<std::string>("code"));
  PRISM_ASSIGN_OR_RETURN(o.comm, r.get<std::uint32_t>("comm"));
  PRISM_ASSIGN_OR_RETURN(o.stream, r.stream(r.get<std::int64_t>("stream")));
  PRISM_ASSIGN_OR_RETURN(const std::string dtype, r.get<std::string>("dtype"));
  PRISM_ASSIGN_OR_RETURN(o.bytes, r.get<std::int64_t>("bytes"));
  PRISM_ASSIGN_OR_RETURN(o.peer, r.get<std::int32_t>("peer"));
  PRISM_ASSIGN_OR_RETURN(o.tag, r.get_or<std::int32_t>("tag", 0));
  PRISM_ASSIGN_OR_RETURN(o.group, r.get_or<std::uint32_t>("group", 0));
  PRISM_ASSIGN_OR_RETURN(*graph_op, r.get_or<std::int32_t>("graph_op", kNone));
  const std::optional<DType> d = parse_dtype(dtype);
  if (!d) return r.fail(fmt::format("unknown dtype '{}'", dtype));
  o.dtype = *d;
  const std::optional<wire::OpCode> c = parse_op_code(code);
  if (!c) return r.fail(fmt::format("unknown op code '{}'", code));
  o.code = *c;
  return wire::Message(o);
}

Result<wire::Message> read_wait(const EventReader& r) {
  wire::Wait w;
  PRISM_ASSIGN_OR_RETURN(w.at, r.get<std::int64_t>("at"));
  PRISM_ASSIGN_OR_RETURN(w.wait_id, r.get_or<std::uint32_t>("wait_id", 0));
  PRISM_ASSIGN_OR_RETURN(w.answers_seen, r.get_or<std::uint32_t>("answers_seen", 0));
  PRISM_ASSIGN_OR_RETURN(w.op_id, r.get_or<std::uint32_t>("op_id", wire::kAnyOp));
  PRISM_ASSIGN_OR_RETURN(w.until, r.get_or<std::int64_t>("until", wire::kNoLimit));
  return wire::Message(w);
}

Result<wire::Message> read_memory(const EventReader& r) {
  wire::Memory m;
  PRISM_ASSIGN_OR_RETURN(m.at, r.get<std::int64_t>("at"));
  PRISM_ASSIGN_OR_RETURN(const std::string action, r.get<std::string>("action"));
  PRISM_ASSIGN_OR_RETURN(m.id, r.get<std::uint64_t>("id"));
  const std::optional<wire::MemoryAction> a = index_of<wire::MemoryAction>(kMemoryActions, action);
  if (!a) return r.fail(fmt::format("unknown memory action '{}'", action));
  m.action = *a;
  if (m.action == wire::MemoryAction::kAlloc) {
    PRISM_ASSIGN_OR_RETURN(m.bytes, r.get<std::int64_t>("bytes"));
  } else {
    PRISM_ASSIGN_OR_RETURN(m.bytes, r.get_or<std::int64_t>("bytes", 0));
  }
  PRISM_ASSIGN_OR_RETURN(m.stream, r.stream(r.get_or<std::int64_t>("stream", 0)));
  return wire::Message(m);
}

Result<wire::Message> read_marker(const EventReader& r) {
  wire::Marker m;
  PRISM_ASSIGN_OR_RETURN(m.at, r.get<std::int64_t>("at"));
  PRISM_ASSIGN_OR_RETURN(const std::string kind, r.get<std::string>("marker"));
  PRISM_ASSIGN_OR_RETURN(m.value, r.get_or<std::int32_t>("value", 0));
  const std::optional<wire::MarkerCode> c = index_of<wire::MarkerCode>(kMarkerNames, kind);
  if (!c) return r.fail(fmt::format("unknown marker '{}'", kind));
  m.code = *c;
  return wire::Message(m);
}

Result<wire::Message> read_compute(const EventReader& r) {
  wire::Compute c;
  PRISM_ASSIGN_OR_RETURN(c.at, r.get<std::int64_t>("at"));
  PRISM_ASSIGN_OR_RETURN(c.duration, r.get<std::int64_t>("duration"));
  PRISM_ASSIGN_OR_RETURN(c.stream, r.stream(r.get<std::int64_t>("stream")));
  PRISM_ASSIGN_OR_RETURN(c.name, r.get_or<std::string>("name", "kernels"));
  return wire::Message(std::move(c));
}

// The coordinator's answers and a split: what slicing does not build from,
// read as far as the file has them.
Result<wire::Message> read_answer(const EventReader& r, wire::MessageType t) {
  switch (t) {
    case wire::MessageType::kWelcome: {
      wire::Welcome w;
      PRISM_ASSIGN_OR_RETURN(w.start_at, r.get_or<std::int64_t>("at", 0));
      return wire::Message(w);
    }
    case wire::MessageType::kComplete: {
      wire::Complete c;
      PRISM_ASSIGN_OR_RETURN(c.op_id, r.get_or<std::uint32_t>("op_id", 0));
      PRISM_ASSIGN_OR_RETURN(c.at, r.get_or<std::int64_t>("at", 0));
      return wire::Message(c);
    }
    case wire::MessageType::kHorizon: {
      wire::Horizon h;
      PRISM_ASSIGN_OR_RETURN(h.wait_id, r.get_or<std::uint32_t>("wait_id", 0));
      PRISM_ASSIGN_OR_RETURN(h.at, r.get_or<std::int64_t>("at", 0));
      return wire::Message(h);
    }
    case wire::MessageType::kError: {
      wire::Error e;
      PRISM_ASSIGN_OR_RETURN(e.message, r.get_or<std::string>("message", ""));
      return wire::Message(std::move(e));
    }
    default: {
      wire::CommSplit s;
      PRISM_ASSIGN_OR_RETURN(s.parent, r.get_or<std::uint32_t>("parent", 0));
      PRISM_ASSIGN_OR_RETURN(s.comm, r.get_or<std::uint32_t>("comm", 0));
      PRISM_ASSIGN_OR_RETURN(s.color, r.get_or<std::int32_t>("color", 0));
      PRISM_ASSIGN_OR_RETURN(s.key, r.get_or<std::int32_t>("key", 0));
      return wire::Message(s);
    }
  }
}

Result<CaptureEntry> read_event(const json& e, std::string where) {
  const EventReader r(e, std::move(where));
  if (!e.is_object()) return r.fail("not an object");
  PRISM_ASSIGN_OR_RETURN(const std::string type, r.get<std::string>("type"));
  const std::optional<wire::MessageType> t = parse_message_type(type);
  if (!t) return r.fail(fmt::format("unknown event type '{}'", type));
  CaptureEntry entry;
  Result<wire::Message> m = Status::invalid_argument("unread");
  switch (*t) {
    case wire::MessageType::kHello: {
      wire::Hello h;
      PRISM_ASSIGN_OR_RETURN(h.rank, r.get<std::int32_t>("rank"));
      PRISM_ASSIGN_OR_RETURN(h.world_size, r.get<std::int32_t>("world_size"));
      PRISM_ASSIGN_OR_RETURN(h.pid, r.get_or<std::int64_t>("pid", 0));
      m = wire::Message(std::move(h));
      break;
    }
    case wire::MessageType::kCommInit:
    case wire::MessageType::kCommInfo:
      m = read_comm(r, *t == wire::MessageType::kCommInfo);
      break;
    case wire::MessageType::kOp:
      m = read_op(r, &entry.graph_op);
      break;
    case wire::MessageType::kWait:
      m = read_wait(r);
      break;
    case wire::MessageType::kMemory:
      m = read_memory(r);
      break;
    case wire::MessageType::kMarker:
      m = read_marker(r);
      break;
    case wire::MessageType::kCompute:
      m = read_compute(r);
      break;
    case wire::MessageType::kBye: {
      wire::Bye b;
      PRISM_ASSIGN_OR_RETURN(b.at, r.get<std::int64_t>("at"));
      PRISM_ASSIGN_OR_RETURN(b.exit_code, r.get_or<std::int32_t>("exit_code", 0));
      m = wire::Message(b);
      break;
    }
    default:
      m = read_answer(r, *t);
      break;
  }
  if (!m.is_ok()) return m.status();
  entry.message = std::move(m).value();
  return entry;
}

// A head field slicing does not need: its value when the file has one of the
// right type.
template <typename T>
T head_value(const json& doc, const char* name, T fallback) {
  const auto it = doc.find(name);
  if (it == doc.end()) return fallback;
  if constexpr (kIsInteger<T>) return integer_of<T>(*it).value_or(fallback);
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    return fallback;
  }
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
  out += "]";
  if (!c.objects.empty()) {
    out += ",\"objects\":[\n";
    for (std::size_t i = 0; i < c.objects.size(); ++i) {
      out += capture_objects::to_json(c.objects[i]).dump();
      out += i + 1 < c.objects.size() ? ",\n" : "\n";
    }
    out += "]";
  }
  out += "}\n";
  return out;
}

bool is_capture_document(const json& doc) {
  if (!doc.is_object()) return false;
  const auto it = doc.find("format");
  return it != doc.end() && *it == "prism-capture";
}

Result<RankCapture> parse_capture_json(std::string_view text, const std::string& source) {
  PRISM_RETURN_IF_ERROR(check_json_depth(text, source));
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    return json_syntax_error(text, source, e.byte, e.what());
  } catch (const json::exception& e) {  // a number too large for a double (1e400)
    return json_value_error(source, e.id, e.what());
  }
  return capture_from_json(doc, source);
}

Result<RankCapture> capture_from_json(const json& doc, const std::string& source) {
  const auto fail = [&](const std::string& why) {
    return Status::invalid_argument(fmt::format("{}: {}", source, why));
  };
  if (!is_capture_document(doc))
    return fail("not a prism-capture document (\"format\": \"prism-capture\")");
  const json version = doc.contains("version") ? doc["version"] : json();
  if (version != 1)
    return fail(fmt::format("version {} (this build reads version 1)", version.dump()));
  if (!doc.contains("events") || !doc["events"].is_array()) return fail("no \"events\" list");
  RankCapture c;
  c.rank = head_value<Rank>(doc, "rank", 0);
  c.world_size = head_value<int>(doc, "world_size", 0);
  c.pid = head_value<std::int64_t>(doc, "pid", 0);
  c.program = head_value<std::string>(doc, "program", "");
  c.job = head_value<std::string>(doc, "job", "");
  const json& events = doc["events"];
  c.entries.reserve(events.size());
  for (std::size_t i = 0; i < events.size(); ++i) {
    PRISM_ASSIGN_OR_RETURN(CaptureEntry e,
                           read_event(events[i], fmt::format("{}: event {}", source, i)));
    c.entries.push_back(std::move(e));
  }
  PRISM_ASSIGN_OR_RETURN(c.objects, capture_objects::read(doc, source));
  return c;
}

}  // namespace prism
