#include "kineto/comm_args.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <optional>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "util/units.h"

namespace prism::kineto {
namespace {

// A call's kind: a collective, or a send / receive.
struct Kind {
  OpKind op = OpKind::kCollective;
  CollectiveKind collective = CollectiveKind::kAllReduce;
};

// c10d's collective names ("allreduce", "_allgather_base",
// "reduce_scatter_tensor_coalesced", "all_to_allv", ...) -> a kind. Variants
// (base, out-of-place, coalesced, into-tensor) move the same bytes.
std::optional<Kind> kind_from_name(std::string_view name) {
  std::string s;
  for (char c : name) s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  while (!s.empty() && s.front() == '_') s.erase(0, 1);
  for (bool changed = true; changed;) {
    changed = false;
    for (std::string_view suffix :
         {"_base", "_oop", "_coalesced", "_into_tensor", "_tensor", "_single"}) {
      if (s.size() > suffix.size() && s.ends_with(suffix)) {
        s.resize(s.size() - suffix.size());
        changed = true;
      }
    }
  }
  std::erase(s, '_');
  using CK = CollectiveKind;
  if (s == "allreduce") return Kind{OpKind::kCollective, CK::kAllReduce};
  if (s == "allgather") return Kind{OpKind::kCollective, CK::kAllGather};
  if (s == "reducescatter") return Kind{OpKind::kCollective, CK::kReduceScatter};
  if (s == "broadcast") return Kind{OpKind::kCollective, CK::kBroadcast};
  if (s == "reduce") return Kind{OpKind::kCollective, CK::kReduce};
  if (s == "alltoall" || s == "alltoallv") return Kind{OpKind::kCollective, CK::kAllToAll};
  if (s == "barrier") return Kind{OpKind::kCollective, CK::kBarrier};
  if (s == "send") return Kind{OpKind::kSend};
  if (s == "recv") return Kind{OpKind::kRecv};
  return std::nullopt;
}

// "ncclDevKernel_AllGather_RING_LL" -> all_gather. SendRecv and Generic
// kernels do not say which side or which collective they run.
std::optional<Kind> kind_from_kernel(std::string_view kernel) {
  const std::size_t us = kernel.find('_');
  if (us == std::string_view::npos) return std::nullopt;
  std::string_view word = kernel.substr(us + 1);
  word = word.substr(0, word.find('_'));
  using CK = CollectiveKind;
  if (word == "AllReduce") return Kind{OpKind::kCollective, CK::kAllReduce};
  if (word == "AllGather") return Kind{OpKind::kCollective, CK::kAllGather};
  if (word == "ReduceScatter") return Kind{OpKind::kCollective, CK::kReduceScatter};
  if (word == "Broadcast") return Kind{OpKind::kCollective, CK::kBroadcast};
  if (word == "Reduce") return Kind{OpKind::kCollective, CK::kReduce};
  return std::nullopt;
}

struct ElementType {
  std::string_view c10_name;
  DType dtype;
  int size;
};
// c10::toString(ScalarType) names. Types the graph has no name for keep their
// exact size and travel as the graph type of the same width (docs/kineto.md).
constexpr std::array<ElementType, 20> kElementTypes{{
    {"Float", DType::kFloat32, 4},
    {"Half", DType::kFloat16, 2},
    {"BFloat16", DType::kBFloat16, 2},
    {"Double", DType::kFloat64, 8},
    {"Char", DType::kInt8, 1},
    {"Byte", DType::kUint8, 1},
    {"Bool", DType::kUint8, 1},
    {"Int", DType::kInt32, 4},
    {"Long", DType::kInt64, 8},
    {"Short", DType::kFloat16, 2},
    {"UInt16", DType::kFloat16, 2},
    {"UInt32", DType::kInt32, 4},
    {"UInt64", DType::kInt64, 8},
    {"ComplexHalf", DType::kFloat32, 4},
    {"ComplexFloat", DType::kFloat64, 8},
    {"Float8_e4m3fn", DType::kFloat8E4M3, 1},
    {"Float8_e4m3fnuz", DType::kFloat8E4M3, 1},
    {"Float8_e5m2", DType::kFloat8E5M2, 1},
    {"Float8_e5m2fnuz", DType::kFloat8E5M2, 1},
    {"ComplexDouble", DType::kFloat64, 16},
}};

class Reader {
 public:
  Reader(const Json* args, const Json* host_args, const CommContext& ctx, const std::string& at)
      : args_(args), host_(host_args), ctx_(ctx), at_(at) {}

  const Json* get(std::string_view key) const {
    if (const Json* v = find_arg(args_, key)) return v;
    return find_arg(host_, key);
  }
  Rank rank() const { return ctx_.rank; }
  int world_size() const { return ctx_.world_size; }
  Status error(const std::string& what) const {
    return Status::invalid_argument(fmt::format("{}: {}", at_, what));
  }
  Result<std::optional<std::int64_t>> optional_int(std::string_view key, std::int64_t lo,
                                                   std::int64_t hi) const {
    const Json* v = get(key);
    if (v == nullptr) return std::optional<std::int64_t>();
    const std::optional<std::int64_t> i = arg_int(v);
    if (!i || *i < lo || *i > hi) {
      return error(fmt::format("args \"{}\" is {}; expected an integer in [{}, {}]", key, v->dump(),
                               lo, hi));
    }
    return i;
  }
  std::string text(std::string_view key) const {
    const std::optional<std::string> s = arg_string(get(key));
    return s.value_or("");
  }

  // The process group's global ranks, checked against "Group size" and the
  // world.
  Result<std::vector<Rank>> group_members(std::optional<std::int64_t> group_size) const;

 private:
  Result<std::vector<Rank>> listed_members(std::optional<std::int64_t> group_size) const;
  Status check_members(const std::vector<Rank>& members,
                       std::optional<std::int64_t> group_size) const;

  const Json* args_;
  const Json* host_;
  const CommContext& ctx_;
  const std::string& at_;
};

// "Process Group Ranks", completed from distributedInfo.pg_config or the
// global start/stride when the profiler cut it short.
Result<std::vector<Rank>> Reader::listed_members(std::optional<std::int64_t> group_size) const {
  const Json* v = get("Process Group Ranks");
  if (v == nullptr) return error("no \"Process Group Ranks\" in the collective's args");
  const std::optional<RankText> listed = parse_ranks(*v);
  if (!listed)
    return error(fmt::format("\"Process Group Ranks\" {} is not a rank list", v->dump()));
  if (!listed->truncated && !listed->ranks.empty()) return listed->ranks;
  const std::string name = text("Process Group Name");
  if (ctx_.dist != nullptr) {
    if (auto it = ctx_.dist->pg_ranks.find(name); !name.empty() && it != ctx_.dist->pg_ranks.end())
      return it->second;
  }
  PRISM_ASSIGN_OR_RETURN(const std::optional<std::int64_t> start,
                         optional_int("Global rank start", -1, ctx_.world_size));
  PRISM_ASSIGN_OR_RETURN(const std::optional<std::int64_t> stride,
                         optional_int("Global rank stride", -1, ctx_.world_size));
  if (group_size && start && stride && *start >= 0 && *stride > 0) {
    std::vector<Rank> ranks;
    for (std::int64_t i = 0; i < *group_size; ++i)
      ranks.push_back(static_cast<Rank>(*start + i * *stride));
    // What the cut list still shows must be in the reconstruction.
    const bool agrees = std::all_of(listed->ranks.begin(), listed->ranks.end(), [&](Rank x) {
      return std::find(ranks.begin(), ranks.end(), x) != ranks.end();
    });
    if (agrees) return ranks;
  }
  if (!listed->truncated && group_size == ctx_.world_size) {  // "[]": the default group
    std::vector<Rank> ranks(static_cast<std::size_t>(ctx_.world_size));
    for (Rank r = 0; r < ctx_.world_size; ++r) ranks[static_cast<std::size_t>(r)] = r;
    return ranks;
  }
  return error(fmt::format(
      "\"Process Group Ranks\" {} does not list the group, and neither "
      "distributedInfo.pg_config (process group '{}') nor \"Global rank start\"/\"stride\" does",
      v->dump(), name));
}

Result<std::vector<Rank>> Reader::group_members(std::optional<std::int64_t> group_size) const {
  PRISM_ASSIGN_OR_RETURN(std::vector<Rank> members, listed_members(group_size));
  PRISM_RETURN_IF_ERROR(check_members(members, group_size));
  return members;
}

Status Reader::check_members(const std::vector<Rank>& members,
                             std::optional<std::int64_t> group_size) const {
  if (group_size && static_cast<std::size_t>(*group_size) != members.size()) {
    return error(fmt::format("\"Group size\" {} but the process group has {} ranks", *group_size,
                             members.size()));
  }
  std::vector<Rank> sorted = members;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i] < 0 || sorted[i] >= ctx_.world_size) {
      return error(
          fmt::format("process group rank {} is outside the world of {} ranks "
                      "(give the world size if distributedInfo is missing)",
                      sorted[i], ctx_.world_size));
    }
    if (i > 0 && sorted[i] == sorted[i - 1])
      return error(fmt::format("process group lists rank {} twice", sorted[i]));
  }
  return Status::ok();
}

// The communicator's rank-independent name: its description when PyTorch
// has one ("default_pg", "TENSOR_MODEL_PARALLEL_GROUP"), else the process
// group's name (the same on every member), else its members.
std::string comm_key(const std::string& desc, const std::string& name,
                     const std::vector<Rank>& members) {
  if (!desc.empty() && desc != "undefined") return desc;
  if (!name.empty()) return "pg" + name;
  return fmt::format("ranks:{}", fmt::join(members, ","));
}

// Bytes as the graph format counts them (docs/graph-format.md): the size
// NCCL is called with; the gathered output of an all-gather, the reduced
// input of a reduce-scatter.
Status read_size(const Reader& r, std::optional<std::int64_t> group_size, CommCall* call) {
  constexpr std::int64_t kMaxElems = std::int64_t{1} << 50;
  PRISM_ASSIGN_OR_RETURN(const std::optional<std::int64_t> in,
                         r.optional_int("In msg nelems", 0, kMaxElems));
  PRISM_ASSIGN_OR_RETURN(const std::optional<std::int64_t> out,
                         r.optional_int("Out msg nelems", 0, kMaxElems));
  if (!in && !out) return r.error("no \"In msg nelems\" or \"Out msg nelems\" in the args");
  const std::string dtype = r.text("dtype");
  const auto et = std::find_if(kElementTypes.begin(), kElementTypes.end(),
                               [&](const ElementType& t) { return t.c10_name == dtype; });
  if (et == kElementTypes.end()) {
    return r.error(dtype.empty() ? std::string("no \"dtype\" in the args")
                                 : fmt::format("unknown dtype '{}'", dtype));
  }
  call->dtype = et->dtype;
  const std::int64_t n_in = in.value_or(0), n_out = out.value_or(0);
  const std::int64_t g = group_size.value_or(1);
  std::int64_t elems = n_in > 0 ? n_in : n_out;  // all_reduce, broadcast, reduce, a2a, p2p
  if (call->kind == OpKind::kCollective && call->collective == CollectiveKind::kAllGather)
    elems = n_out > 0 ? n_out : n_in * g;
  if (call->kind == OpKind::kCollective && call->collective == CollectiveKind::kReduceScatter)
    elems = n_in > 0 ? n_in : n_out * g;
  const Int128 bytes = static_cast<Int128>(elems) * et->size;
  if (bytes > kMaxBytes.count)
    return r.error(fmt::format("{} elements of {} exceed the limit of 2^50 bytes", elems, dtype));
  call->bytes = Bytes{static_cast<std::int64_t>(bytes)};
  return Status::ok();
}

// A collective's communicator (key and members) and root.
Status read_group(const Reader& r, std::optional<std::int64_t> group_size, CommCall* call) {
  PRISM_ASSIGN_OR_RETURN(std::vector<Rank> members, r.group_members(group_size));
  if (std::find(members.begin(), members.end(), r.rank()) == members.end()) {
    return r.error(fmt::format("rank {} (this trace's) is not in its process group {}", r.rank(),
                               r.get("Process Group Ranks")->dump()));
  }
  if (call->collective == CollectiveKind::kBroadcast ||
      call->collective == CollectiveKind::kReduce) {  // "Rank" is the root's group rank
    PRISM_ASSIGN_OR_RETURN(const std::optional<std::int64_t> root,
                           r.optional_int("Rank", 0, std::ssize(members) - 1));
    call->root = static_cast<std::int32_t>(root.value_or(0));
  }
  call->comm.key =
      comm_key(r.text("Process Group Description"), r.text("Process Group Name"), members);
  call->comm.members = std::move(members);
  return Status::ok();
}

// A send's or receive's global peer: "Dst Rank" / "Src Rank", else "Rank"
// (the peer's group rank) through the group.
Status read_peer(const Reader& r, std::optional<std::int64_t> group_size, CommCall* call) {
  const char* global_key = call->kind == OpKind::kSend ? "Dst Rank" : "Src Rank";
  PRISM_ASSIGN_OR_RETURN(const std::optional<std::int64_t> global,
                         r.optional_int(global_key, 0, r.world_size() - 1));
  if (global) {
    call->peer = static_cast<Rank>(*global);
  } else if (r.get("Rank") != nullptr) {
    PRISM_ASSIGN_OR_RETURN(const std::vector<Rank> members, r.group_members(group_size));
    PRISM_ASSIGN_OR_RETURN(const std::optional<std::int64_t> local,
                           r.optional_int("Rank", 0, std::ssize(members) - 1));
    call->peer = members[static_cast<std::size_t>(*local)];
  } else {
    return r.error(fmt::format("a {} without its peer: no \"{}\" and no \"Rank\"",
                               to_string(call->kind), global_key));
  }
  if (call->peer == r.rank())
    return r.error(fmt::format("a {} with rank {} itself", to_string(call->kind), r.rank()));
  return Status::ok();
}

}  // namespace

bool is_nccl_kernel(std::string_view name) {
  return name.starts_with("ncclKernel") || name.starts_with("ncclDevKernel");
}

bool has_comm_metadata(const Json* args) {
  return find_arg(args, "Collective name") != nullptr;
}

Result<CommCall> read_comm_call(const Json* args, const Json* host_args, std::string_view kernel,
                                const CommContext& ctx, const std::string& at) {
  const Reader r(args, host_args, ctx, at);
  const std::string coll_name = r.text("Collective name");
  std::optional<Kind> kind = kind_from_name(coll_name);
  if (!kind && !kernel.empty()) kind = kind_from_kernel(kernel);
  if (!kind) {
    if (coll_name.empty()) return r.error("no \"Collective name\" in the args");
    return r.error(fmt::format("unsupported collective '{}'", coll_name));
  }
  CommCall call;
  call.kind = kind->op;
  call.collective = kind->collective;
  PRISM_ASSIGN_OR_RETURN(const std::optional<std::int64_t> group_size,
                         r.optional_int("Group size", 1, std::int64_t{1} << 24));
  if (call.kind != OpKind::kCollective || call.collective != CollectiveKind::kBarrier)
    PRISM_RETURN_IF_ERROR(read_size(r, group_size, &call));
  if (call.kind == OpKind::kCollective) {
    PRISM_RETURN_IF_ERROR(read_group(r, group_size, &call));
  } else {
    PRISM_RETURN_IF_ERROR(read_peer(r, group_size, &call));
  }
  return call;
}

}  // namespace prism::kineto
