#include "graph/role_json.h"

#include <algorithm>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "graph/validate.h"

namespace prism::graph_json {
namespace {

constexpr std::int64_t kMaxI32 = std::numeric_limits<std::int32_t>::max();
constexpr std::int64_t kMaxU32 = std::numeric_limits<std::uint32_t>::max();
constexpr std::int64_t kMaxI64 = std::numeric_limits<std::int64_t>::max();

// Every field any op may carry; a field from this list on the wrong kind of
// op gets a more helpful message than "unknown field".
constexpr std::string_view kOpFields[] = {
    "kind",  "stream", "name",  "deps",           "duration_ns", "cost", "collective",
    "slot",  "bytes",  "dtype", "root",           "group",       "tag",  "alloc",
    "event", "marker", "index", "record_streams", "transport"};

bool field_applies(OpKind kind, std::string_view f) {
  if (f == "kind" || f == "stream" || f == "name" || f == "deps") return true;
  switch (kind) {
    case OpKind::kCompute:
      return f == "duration_ns" || f == "cost";
    case OpKind::kCollective:
      return f == "collective" || f == "slot" || f == "bytes" || f == "dtype" || f == "root" ||
             f == "group" || f == "transport";
    case OpKind::kSend:
    case OpKind::kRecv:
      return f == "slot" || f == "bytes" || f == "dtype" || f == "tag" || f == "group" ||
             f == "transport";
    case OpKind::kAlloc:
      return f == "bytes";
    case OpKind::kFree:
      return f == "alloc" || f == "record_streams";
    case OpKind::kEventRecord:
    case OpKind::kEventWait:
      return f == "event";
    case OpKind::kMarker:
      return f == "marker" || f == "index";
  }
  return false;
}

Status check_op_fields(const Json& j, const JsonPath& path, OpKind kind) {
  for (const auto& [key, value] : j.items()) {
    if (field_applies(kind, key)) continue;
    bool known = false;
    for (std::string_view f : kOpFields) known = known || f == key;
    if (known) {
      return path.error(
          fmt::format("field \"{}\" does not apply to a {} op", key, to_string(kind)));
    }
    return path.error(fmt::format("unknown field \"{}\"", key));
  }
  return Status::ok();
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// Index of the name held by member `key` in `names`; `what` words the error.
Result<std::int32_t> lookup(const Json& obj, std::string_view key, const JsonPath& path,
                            const std::vector<std::string>& names, std::string_view what) {
  PRISM_ASSIGN_OR_RETURN(std::string name, get_string(obj, key, path));
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<std::int32_t>(i);
  return path.field(key).error(fmt::format("unknown {} \"{}\" (defined: {})", what, name,
                                           names.empty() ? "none" : join(names)));
}

// Reads `value` as an integer in [0, limit]; past the limit the message says
// which limit (`what`) it is.
Result<std::int64_t> as_limited(const Json& value, const JsonPath& path, std::int64_t limit,
                                std::string_view what) {
  PRISM_ASSIGN_OR_RETURN(std::int64_t v, as_int(value, path, 0, kMaxI64));
  if (v > limit) return path.error(fmt::format("{} exceeds the limit of {} ({})", v, limit, what));
  return v;
}

constexpr std::string_view kBytesLimit = "2^50, 1 PiB";

// The required member "bytes" of an op, at most kMaxBytes.
Result<std::int64_t> get_bytes(const Json& obj, const JsonPath& path) {
  PRISM_ASSIGN_OR_RETURN(const Json* v, require_field(obj, "bytes", path));
  return as_limited(*v, path.field("bytes"), kMaxBytes.count, kBytesLimit);
}

struct RoleReader {
  const std::vector<CommSlot>& slots;
  Role& role;
  std::vector<std::string> slot_names;
  std::unordered_map<std::string, std::int32_t> name_index;
  std::map<std::tuple<KernelClass, double, std::int64_t>, std::int32_t> cost_index;
};

Status read_cost(RoleReader& rr, const Json& j, const JsonPath& path, Op* op) {
  PRISM_RETURN_IF_ERROR(check_fields(j, path, {"class", "flops", "bytes"}));
  KernelCost cost;
  PRISM_ASSIGN_OR_RETURN(cost.kernel_class, get_enum<KernelClass>(j, "class", path, "kernel class",
                                                                  parse_kernel_class));
  if (const Json* f = find_field(j, "flops")) {
    const JsonPath at = path.field("flops");
    PRISM_ASSIGN_OR_RETURN(cost.flops, as_number(*f, at));
    if (!(cost.flops >= 0 && cost.flops <= kMaxCostFlops))
      return at.error(fmt::format("must be a finite number >= 0 and <= {}", kMaxCostFlops));
  }
  if (const Json* b = find_field(j, "bytes")) {
    PRISM_ASSIGN_OR_RETURN(cost.bytes_accessed.count,
                           as_limited(*b, path.field("bytes"), kMaxBytes.count, kBytesLimit));
  }
  auto key = std::make_tuple(cost.kernel_class, cost.flops, cost.bytes_accessed.count);
  auto [it, inserted] = rr.cost_index.emplace(key, static_cast<std::int32_t>(rr.role.costs.size()));
  if (inserted) rr.role.costs.push_back(cost);
  op->cost = it->second;
  return Status::ok();
}

Status read_compute(RoleReader& rr, const Json& j, const JsonPath& path, Op* op) {
  const Json* duration = find_field(j, "duration_ns");
  const Json* cost = find_field(j, "cost");
  if ((duration == nullptr) == (cost == nullptr))
    return path.error("a compute op needs exactly one of \"duration_ns\" and \"cost\"");
  if (cost != nullptr) return read_cost(rr, *cost, path.field("cost"), op);
  PRISM_ASSIGN_OR_RETURN(op->duration.ns, as_limited(*duration, path.field("duration_ns"),
                                                     kMaxOpDuration.ns, "2^50 ns, about 13 days"));
  return Status::ok();
}

// Collective, send and recv: slot, bytes, dtype, group.
Status read_comm(RoleReader& rr, const Json& j, const JsonPath& path, Op* op) {
  PRISM_ASSIGN_OR_RETURN(op->ref, lookup(j, "slot", path, rr.slot_names, "slot"));
  const bool wants_group = op->kind == OpKind::kCollective;
  if ((rr.slots[op->ref].kind == CommSlot::Kind::kGroup) != wants_group) {
    return path.field("slot").error(fmt::format(
        "\"{}\" is a {} slot; a {} op needs a {} slot", rr.slots[op->ref].name,
        wants_group ? "peer" : "group", to_string(op->kind), wants_group ? "group" : "peer"));
  }
  PRISM_ASSIGN_OR_RETURN(op->bytes.count, get_bytes(j, path));
  PRISM_ASSIGN_OR_RETURN(op->dtype,
                         get_enum<DType>(j, "dtype", path, "dtype", parse_dtype, DType::kBFloat16));
  PRISM_ASSIGN_OR_RETURN(std::int64_t group, get_int_or(j, "group", path, 0, kMaxU32, 0));
  op->group = static_cast<std::uint32_t>(group);
  PRISM_ASSIGN_OR_RETURN(op->transport, get_enum<Transport>(j, "transport", path, "transport",
                                                            parse_transport, Transport::kNccl));
  if (op->kind == OpKind::kCollective) {
    PRISM_ASSIGN_OR_RETURN(
        op->collective,
        get_enum<CollectiveKind>(j, "collective", path, "collective", parse_collective_kind));
    PRISM_ASSIGN_OR_RETURN(std::int64_t root, get_int_or(j, "root", path, 0, kMaxI32, 0));
    op->arg = static_cast<std::int32_t>(root);
  } else {
    PRISM_ASSIGN_OR_RETURN(std::int64_t tag, get_int_or(j, "tag", path, 0, kMaxI32, 0));
    op->arg = static_cast<std::int32_t>(tag);
  }
  return Status::ok();
}

// kFree's optional "record_streams": names of the role's streams, at most
// stream index kMaxRecordStream (the mask in Op::arg).
Status read_record_streams(RoleReader& rr, const Json& j, const JsonPath& path, Op* op) {
  const auto it = j.find("record_streams");
  if (it == j.end()) return Status::ok();
  const JsonPath list = path.field("record_streams");
  PRISM_RETURN_IF_ERROR(expect_array(*it, list));
  for (std::size_t k = 0; k < it->size(); ++k) {
    const JsonPath item = list.item(k);
    if (!(*it)[k].is_string()) return item.error("expected a stream name");
    const std::string& name = (*it)[k].get_ref<const std::string&>();
    const auto& streams = rr.role.streams;
    const auto found = std::find(streams.begin(), streams.end(), name);
    if (found == streams.end())
      return item.error(fmt::format("unknown stream \"{}\" (defined: {})", name, join(streams)));
    const auto st = static_cast<int>(found - streams.begin());
    if (st > kMaxRecordStream) {
      return item.error(
          fmt::format("stream \"{}\" is stream {}; record_streams holds streams 0..{}", name, st,
                      kMaxRecordStream));
    }
    op->arg |= 1 << st;
  }
  return Status::ok();
}

Status read_kind_fields(RoleReader& rr, const Json& j, const JsonPath& path, Op* op) {
  switch (op->kind) {
    case OpKind::kCompute:
      return read_compute(rr, j, path, op);
    case OpKind::kCollective:
    case OpKind::kSend:
    case OpKind::kRecv:
      return read_comm(rr, j, path, op);
    case OpKind::kAlloc: {
      PRISM_ASSIGN_OR_RETURN(op->bytes.count, get_bytes(j, path));
      return Status::ok();
    }
    case OpKind::kFree: {
      PRISM_ASSIGN_OR_RETURN(std::int64_t alloc, get_int(j, "alloc", path, 0, kMaxI32));
      op->ref = static_cast<std::int32_t>(alloc);
      return read_record_streams(rr, j, path, op);
    }
    case OpKind::kEventRecord:
    case OpKind::kEventWait: {
      PRISM_ASSIGN_OR_RETURN(op->ref, lookup(j, "event", path, rr.role.events, "event"));
      return Status::ok();
    }
    case OpKind::kMarker: {
      PRISM_ASSIGN_OR_RETURN(op->marker,
                             get_enum<MarkerKind>(j, "marker", path, "marker", parse_marker_kind));
      PRISM_ASSIGN_OR_RETURN(std::int64_t index, get_int_or(j, "index", path, 0, kMaxI32, 0));
      op->arg = static_cast<std::int32_t>(index);
      return Status::ok();
    }
  }
  return path.error("unhandled op kind");
}

Status read_deps(RoleReader& rr, const Json& deps, const JsonPath& path, std::size_t self,
                 std::size_t num_ops, Op* op) {
  PRISM_RETURN_IF_ERROR(expect_array(deps, path));
  op->deps_begin = static_cast<std::uint32_t>(rr.role.deps.size());
  for (std::size_t i = 0; i < deps.size(); ++i) {
    const JsonPath at = path.item(i);
    PRISM_ASSIGN_OR_RETURN(std::int64_t d, as_int(deps[i], at, 0, kMaxI32));
    if (static_cast<std::size_t>(d) >= num_ops)
      return at.error(fmt::format("op {} does not exist (the role has {} ops)", d, num_ops));
    if (static_cast<std::size_t>(d) == self) return at.error("an op cannot depend on itself");
    rr.role.deps.push_back(static_cast<std::int32_t>(d));
  }
  op->deps_end = static_cast<std::uint32_t>(rr.role.deps.size());
  return Status::ok();
}

Status read_op(RoleReader& rr, const Json& j, const JsonPath& path, std::size_t index,
               std::size_t num_ops) {
  PRISM_RETURN_IF_ERROR(expect_object(j, path));
  Op op;
  PRISM_ASSIGN_OR_RETURN(op.kind, get_enum<OpKind>(j, "kind", path, "op kind", parse_op_kind));
  PRISM_RETURN_IF_ERROR(check_op_fields(j, path, op.kind));
  PRISM_ASSIGN_OR_RETURN(std::int32_t stream, lookup(j, "stream", path, rr.role.streams, "stream"));
  op.stream = static_cast<std::uint16_t>(stream);
  if (const Json* name = find_field(j, "name")) {
    PRISM_ASSIGN_OR_RETURN(std::string n, as_string(*name, path.field("name")));
    auto [it, inserted] =
        rr.name_index.emplace(std::move(n), static_cast<std::int32_t>(rr.role.names.size()));
    if (inserted) rr.role.names.push_back(it->first);
    op.name = it->second;
  }
  PRISM_RETURN_IF_ERROR(read_kind_fields(rr, j, path, &op));
  op.deps_begin = op.deps_end = static_cast<std::uint32_t>(rr.role.deps.size());
  if (const Json* deps = find_field(j, "deps"))
    PRISM_RETURN_IF_ERROR(read_deps(rr, *deps, path.field("deps"), index, num_ops, &op));
  rr.role.ops.push_back(op);
  return Status::ok();
}

Result<std::vector<std::string>> read_names(const Json& obj, std::string_view key,
                                            const JsonPath& path) {
  std::vector<std::string> out;
  const Json* arr = find_field(obj, key);
  if (arr == nullptr) return out;
  const JsonPath at = path.field(key);
  PRISM_RETURN_IF_ERROR(expect_array(*arr, at));
  for (std::size_t i = 0; i < arr->size(); ++i) {
    PRISM_ASSIGN_OR_RETURN(std::string s, as_string((*arr)[i], at.item(i)));
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

Status read_role(const Json& j, const JsonPath& path, const std::vector<CommSlot>& slots,
                 Role* role) {
  PRISM_RETURN_IF_ERROR(check_fields(j, path, {"name", "streams", "events", "ops"}));
  PRISM_ASSIGN_OR_RETURN(role->name, get_string(j, "name", path));
  PRISM_RETURN_IF_ERROR(require_field(j, "streams", path).status());
  PRISM_ASSIGN_OR_RETURN(role->streams, read_names(j, "streams", path));
  if (role->streams.size() > std::numeric_limits<std::uint16_t>::max())
    return path.field("streams").error("more than 65535 streams");
  PRISM_ASSIGN_OR_RETURN(role->events, read_names(j, "events", path));
  PRISM_ASSIGN_OR_RETURN(const Json* ops, require_field(j, "ops", path));
  const JsonPath ops_path = path.field("ops");
  PRISM_RETURN_IF_ERROR(expect_array(*ops, ops_path));
  RoleReader rr{slots, *role, {}, {}, {}};
  for (const CommSlot& s : slots) rr.slot_names.push_back(s.name);
  role->ops.reserve(ops->size());
  for (std::size_t i = 0; i < ops->size(); ++i) {
    const JsonPath op_path = ops_path.item(i);
    PRISM_RETURN_IF_ERROR(read_op(rr, (*ops)[i], op_path, i, ops->size()));
  }
  return Status::ok();
}

Json op_to_json(const Role& role, std::size_t index, const std::vector<CommSlot>& slots,
                std::int32_t skip_dep) {
  const Op& op = role.ops[index];
  Json j;
  j["kind"] = to_string(op.kind);
  j["stream"] = element(role.streams, op.stream);
  if (op.name != kNone) j["name"] = element(role.names, op.name);
  switch (op.kind) {
    case OpKind::kCompute:
      if (op.cost == kNone) {
        j["duration_ns"] = op.duration.ns;
      } else {
        const KernelCost& c = element(role.costs, op.cost);
        j["cost"] = Json{{"class", to_string(c.kernel_class)},
                         {"flops", c.flops},
                         {"bytes", c.bytes_accessed.count}};
      }
      break;
    case OpKind::kCollective:
    case OpKind::kSend:
    case OpKind::kRecv:
      if (op.kind == OpKind::kCollective) j["collective"] = to_string(op.collective);
      j["slot"] = element(slots, op.ref).name;
      j["bytes"] = op.bytes.count;
      if (op.dtype != DType::kBFloat16) j["dtype"] = to_string(op.dtype);
      if (op.arg != 0) j[op.kind == OpKind::kCollective ? "root" : "tag"] = op.arg;
      if (op.group != 0) j["group"] = op.group;
      if (op.transport != Transport::kNccl) j["transport"] = to_string(op.transport);
      break;
    case OpKind::kAlloc:
      j["bytes"] = op.bytes.count;
      break;
    case OpKind::kFree:
      j["alloc"] = op.ref;
      if (op.arg != 0) {
        Json names = Json::array();
        for (int st = 0; st <= kMaxRecordStream; ++st)
          if (op.arg & (1 << st)) names.push_back(element(role.streams, st));
        j["record_streams"] = std::move(names);
      }
      break;
    case OpKind::kEventRecord:
    case OpKind::kEventWait:
      j["event"] = element(role.events, op.ref);
      break;
    case OpKind::kMarker:
      j["marker"] = to_string(op.marker);
      if (op.arg != 0 || op.marker != MarkerKind::kPhase) j["index"] = op.arg;
      break;
  }
  std::uint32_t end = op.deps_end;
  if (skip_dep != kNone && end > op.deps_begin && role.deps[end - 1] == skip_dep) --end;
  if (end > op.deps_begin) {
    Json deps = Json::array();
    for (std::uint32_t d = op.deps_begin; d < end; ++d) deps.push_back(role.deps[d]);
    j["deps"] = std::move(deps);
  }
  return j;
}

}  // namespace prism::graph_json
