#include "chakra/program_builder.h"

#include <algorithm>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "graph/validate.h"

namespace prism::chakra {
namespace {

using ChakraProtoMsg::Node;

std::string type_name(int type) {
  return ChakraProtoMsg::NodeType_IsValid(type)
             ? ChakraProtoMsg::NodeType_Name(static_cast<ChakraProtoMsg::NodeType>(type))
             : fmt::format("{} (not a Chakra node type)", type);
}

Status fail(const Place& where, const std::string& why) {
  return Status::invalid_argument(fmt::format("{}: {}", where.str(), why));
}

// The op's transport from prism_transport, when the node has one.
Status read_transport(const Attrs& a, const Place& where, Op* op) {
  PRISM_ASSIGN_OR_RETURN(const auto transport, string_attr(a, kPrismTransport, where));
  if (!transport) return Status::ok();
  const auto t = parse_transport(*transport);
  if (!t) return fail(where, fmt::format("unknown {} '{}'", kPrismTransport, *transport));
  op->transport = *t;
  return Status::ok();
}

// The op's dtype from prism_dtype, when the node has one.
Status read_dtype(const Attrs& a, const Place& where, Op* op) {
  PRISM_ASSIGN_OR_RETURN(const auto dtype, string_attr(a, kPrismDtype, where));
  if (!dtype) return Status::ok();
  const auto d = parse_dtype(*dtype);
  if (!d) return fail(where, fmt::format("unknown dtype '{}'", *dtype));
  op->dtype = *d;
  return Status::ok();
}

}  // namespace

Result<bool> is_op_node(const Node& n, const Place& where) {
  switch (n.type()) {
    case ChakraProtoMsg::COMP_NODE:
    case ChakraProtoMsg::COMM_COLL_NODE:
    case ChakraProtoMsg::COMM_SEND_NODE:
    case ChakraProtoMsg::COMM_RECV_NODE:
      return true;
    case ChakraProtoMsg::INVALID_NODE:
      return false;
    case ChakraProtoMsg::METADATA_NODE:
      return find_attr(n.attr(), kPrismOp) != nullptr;
    default:
      return fail(where, fmt::format("node type {} is not supported (only compute, "
                                     "communication, metadata and invalid nodes are)",
                                     type_name(n.type())));
  }
}

ProgramBuilder::ProgramBuilder(Rank rank, const ImportContext& ctx, const std::string& source)
    : rank_(rank), ctx_(ctx), source_(source), role_("", {}) {
  program_.rank = rank;
  program_.source = source;
}

Status ProgramBuilder::start(const ChakraProtoMsg::GlobalMetadata& meta) {
  PRISM_ASSIGN_OR_RETURN(
      const auto streams,
      string_list_attr(meta.attr(), kPrismStreams, fmt::format("{}: the GlobalMetadata", source_)));
  if (streams) named_streams_ = *streams;
  for (const std::string& s : named_streams_) stream_named(s);
  return Status::ok();
}

Result<int> ProgramBuilder::stream_at(std::int64_t k, const Place& where) {
  if (k < 0) return fail(where, fmt::format("stream {} is negative", k));
  const auto i = static_cast<std::size_t>(k);
  return stream_named(i < named_streams_.size() ? named_streams_[i] : fmt::format("stream{}", i));
}

Result<int> ProgramBuilder::stream_of(const Node& n, const Place& where) {
  PRISM_ASSIGN_OR_RETURN(const auto attr, int_attr(n.attr(), kStream, where));
  if (attr) return stream_at(*attr, where);
  switch (n.type()) {
    case ChakraProtoMsg::COMP_NODE: {
      PRISM_ASSIGN_OR_RETURN(const auto cpu, int_attr(n.attr(), kIsCpuOp, where));
      return stream_named(cpu.value_or(0) != 0 ? "cpu" : "compute");
    }
    case ChakraProtoMsg::COMM_COLL_NODE:
      return stream_named("comm");
    case ChakraProtoMsg::COMM_SEND_NODE:
      return stream_named("send");
    case ChakraProtoMsg::COMM_RECV_NODE:
      return stream_named("recv");
    default:
      return stream_named("compute");
  }
}

Status ProgramBuilder::add(const Node& n, const std::vector<std::int32_t>& deps) {
  const Place at = where(n);
  Op op;
  PRISM_ASSIGN_OR_RETURN(const int stream, stream_of(n, at));
  if (stream > std::numeric_limits<std::uint16_t>::max())
    return fail(at, "more than 65,536 streams");
  op.stream = static_cast<std::uint16_t>(stream);
  PRISM_ASSIGN_OR_RETURN(const auto group, int_attr(n.attr(), kPrismGroup, at));
  if (group && (*group < 0 || *group > std::numeric_limits<std::uint32_t>::max()))
    return fail(at, fmt::format("{} {} is out of range", kPrismGroup, *group));
  op.group = static_cast<std::uint32_t>(group.value_or(0));
  switch (n.type()) {
    case ChakraProtoMsg::COMP_NODE:
      PRISM_RETURN_IF_ERROR(compute(n, at, &op));
      break;
    case ChakraProtoMsg::COMM_COLL_NODE:
      PRISM_RETURN_IF_ERROR(collective(n, at, &op));
      break;
    case ChakraProtoMsg::COMM_SEND_NODE:
    case ChakraProtoMsg::COMM_RECV_NODE:
      PRISM_RETURN_IF_ERROR(p2p(n, at, &op));
      break;
    default:
      PRISM_RETURN_IF_ERROR(untimed(n, at, &op));
      break;
  }
  const int i = role_.add(op, n.name());
  // Stream order already covers earlier ops of the op's own stream.
  for (std::int32_t d : deps)
    if (role_.op(d).stream != op.stream) role_.add_dep(d);
  if (op.kind == OpKind::kAlloc) alloc_of_node_[n.id()] = i;
  return Status::ok();
}

Result<Bytes> ProgramBuilder::bytes_attr(const Attrs& a, std::string_view name, const Place& where,
                                         bool required) {
  PRISM_ASSIGN_OR_RETURN(const auto v, int_attr(a, name, where));
  if (!v) {
    if (required) return fail(where, fmt::format("no '{}' attribute", name));
    return Bytes{0};
  }
  if (*v < 0 || *v > kMaxBytes.count)
    return fail(where, fmt::format("{} {} is outside 0..2^50 bytes", name, *v));
  return Bytes{*v};
}

// Duration: PrismLLM's exact nanoseconds, else duration_micros; a node with
// no duration but a roofline cost (num_ops, tensor_size) keeps the cost.
Status ProgramBuilder::compute(const Node& n, const Place& where, Op* op) {
  op->kind = OpKind::kCompute;
  const Attrs& a = n.attr();
  PRISM_ASSIGN_OR_RETURN(const auto kernel_class, string_attr(a, kPrismKernelClass, where));
  PRISM_ASSIGN_OR_RETURN(const auto exact_ns, int_attr(a, kPrismDurationNs, where));
  PRISM_ASSIGN_OR_RETURN(const auto num_ops, double_attr(a, kNumOps, where));
  PRISM_ASSIGN_OR_RETURN(const auto flops, double_attr(a, kPrismFlops, where));
  if (kernel_class || (!exact_ns && n.duration_micros() == 0 && num_ops)) {
    KernelCost cost;
    if (kernel_class) {
      const auto k = parse_kernel_class(*kernel_class);
      if (!k) return fail(where, fmt::format("unknown kernel class '{}'", *kernel_class));
      cost.kernel_class = *k;
    }
    cost.flops = flops.value_or(num_ops.value_or(0));
    if (!(cost.flops >= 0 && cost.flops <= kMaxCostFlops))
      return fail(where, fmt::format("num_ops {} is outside 0..1e30", cost.flops));
    PRISM_ASSIGN_OR_RETURN(cost.bytes_accessed, bytes_attr(a, kTensorSize, where, false));
    op->cost = role_.add_cost(cost);
    return Status::ok();
  }
  const std::int64_t max_us = kMaxOpDuration.ns / 1000;
  if (exact_ns && (*exact_ns < 0 || *exact_ns > kMaxOpDuration.ns))
    return fail(where, fmt::format("{} {} is outside 0..2^50", kPrismDurationNs, *exact_ns));
  if (!exact_ns && n.duration_micros() > static_cast<std::uint64_t>(max_us))
    return fail(where, fmt::format("duration_micros {} is past 2^50 ns", n.duration_micros()));
  op->duration = SimTime{exact_ns.value_or(static_cast<std::int64_t>(n.duration_micros()) * 1000)};
  return Status::ok();
}

Status ProgramBuilder::collective(const Node& n, const Place& where, Op* op) {
  op->kind = OpKind::kCollective;
  const Attrs& a = n.attr();
  PRISM_ASSIGN_OR_RETURN(const auto type, int_attr(a, kCommType, where));
  if (!type) return fail(where, "a collective with no 'comm_type' attribute");
  const std::optional<CollectiveKind> kind = collective_of(*type);
  if (!kind) {
    const bool known = ChakraProtoMsg::CollectiveCommType_IsValid(static_cast<int>(*type));
    return fail(where,
                known ? fmt::format("comm_type {} is not supported",
                                    ChakraProtoMsg::CollectiveCommType_Name(
                                        static_cast<ChakraProtoMsg::CollectiveCommType>(*type)))
                      : fmt::format("unknown comm_type {}", *type));
  }
  op->collective = *kind;
  PRISM_ASSIGN_OR_RETURN(op->bytes, bytes_attr(a, kCommSize, where, true));
  PRISM_RETURN_IF_ERROR(read_dtype(a, where, op));
  PRISM_RETURN_IF_ERROR(read_transport(a, where, op));
  PRISM_ASSIGN_OR_RETURN(const auto root, int_attr(a, kPrismRoot, where));
  if (root && (*root < 0 || *root > std::numeric_limits<std::int32_t>::max()))
    return fail(where, fmt::format("root {} is out of range", *root));
  op->arg = static_cast<std::int32_t>(root.value_or(0));
  PRISM_ASSIGN_OR_RETURN(auto pg, string_attr(a, kPgName, where));
  const std::string name = !pg || pg->empty() ? kWorldPg : *pg;
  if (!comm_index_.contains(name)) {
    ProgramComm comm{name, {}};
    if (name == kWorldPg) {
      for (Rank r = 0; r < ctx_.world_size; ++r) comm.members.push_back(r);
    } else if (ctx_.groups == nullptr) {
      return fail(where, fmt::format("pg_name '{}' needs a communicator-group file, and there "
                                     "is none",
                                     name));
    } else {
      const auto it = ctx_.groups->find(name);
      if (it == ctx_.groups->end())
        return fail(where, fmt::format("pg_name '{}' is not in {}", name, ctx_.groups_source));
      comm.members = it->second;
    }
    if (std::find(comm.members.begin(), comm.members.end(), rank_) == comm.members.end()) {
      return fail(where,
                  fmt::format("pg_name '{}' is a group that does not hold rank {}", name, rank_));
    }
    comm_index_[name] = static_cast<std::int32_t>(program_.comms.size());
    program_.comms.push_back(std::move(comm));
  }
  op->ref = comm_index_[name];
  return Status::ok();
}

Status ProgramBuilder::p2p(const Node& n, const Place& where, Op* op) {
  const bool send = n.type() == ChakraProtoMsg::COMM_SEND_NODE;
  op->kind = send ? OpKind::kSend : OpKind::kRecv;
  const Attrs& a = n.attr();
  PRISM_ASSIGN_OR_RETURN(const auto src, int_attr(a, kCommSrc, where));
  PRISM_ASSIGN_OR_RETURN(const auto dst, int_attr(a, kCommDst, where));
  const auto& peer = send ? dst : src;
  const auto& self = send ? src : dst;
  const std::string_view peer_attr = send ? kCommDst : kCommSrc;
  if (!peer)
    return fail(where, fmt::format("a {} with no '{}'", send ? "send" : "receive", peer_attr));
  if (*peer < 0 || *peer >= ctx_.world_size || *peer == rank_) {
    return fail(where,
                fmt::format("{} {} is {}", peer_attr, *peer,
                            *peer == rank_ ? "the rank itself" : "not a rank of the traces"));
  }
  if (self && *self != rank_) {
    return fail(where, fmt::format("{} {} in the trace of rank {}", send ? kCommSrc : kCommDst,
                                   *self, rank_));
  }
  PRISM_ASSIGN_OR_RETURN(const auto tag, int_attr(a, kCommTag, where));
  if (tag && (*tag < 0 || *tag > std::numeric_limits<std::int32_t>::max()))
    return fail(where, fmt::format("comm_tag {} is outside 0..2^31-1", *tag));
  op->arg = static_cast<std::int32_t>(tag.value_or(0));
  PRISM_ASSIGN_OR_RETURN(op->bytes, bytes_attr(a, kCommSize, where, true));
  PRISM_RETURN_IF_ERROR(read_dtype(a, where, op));
  PRISM_RETURN_IF_ERROR(read_transport(a, where, op));
  const auto p = static_cast<Rank>(*peer);
  const auto [it, added] =
      peer_index_.try_emplace(p, static_cast<std::int32_t>(program_.peers.size()));
  if (added) program_.peers.push_back(p);
  op->ref = it->second;
  return Status::ok();
}

// A PrismLLM op kept in a METADATA node (export's untimed ops).
Status ProgramBuilder::untimed(const Node& n, const Place& where, Op* op) {
  const Attrs& a = n.attr();
  PRISM_ASSIGN_OR_RETURN(const auto kind_name, string_attr(a, kPrismOp, where));
  const std::optional<OpKind> kind = parse_op_kind(kind_name.value_or(""));
  if (!kind || is_communication(*kind) || *kind == OpKind::kCompute)
    return fail(where, fmt::format("unknown {} '{}'", kPrismOp, kind_name.value_or("")));
  op->kind = *kind;
  switch (*kind) {
    case OpKind::kAlloc: {
      PRISM_ASSIGN_OR_RETURN(op->bytes, bytes_attr(a, kPrismBytes, where, true));
      return Status::ok();
    }
    case OpKind::kFree:
      return free_op(n, where, op);
    case OpKind::kMarker: {
      PRISM_ASSIGN_OR_RETURN(const auto marker, string_attr(a, kPrismMarker, where));
      const std::optional<MarkerKind> m = parse_marker_kind(marker.value_or(""));
      if (!m) return fail(where, fmt::format("unknown marker '{}'", marker.value_or("")));
      PRISM_ASSIGN_OR_RETURN(const auto index, int_attr(a, kPrismIndex, where));
      if (index && (*index < 0 || *index > std::numeric_limits<std::int32_t>::max()))
        return fail(where, fmt::format("marker index {} is out of range", *index));
      op->marker = *m;
      op->arg = static_cast<std::int32_t>(index.value_or(0));
      return Status::ok();
    }
    default: {  // event record / wait
      PRISM_ASSIGN_OR_RETURN(const auto event, string_attr(a, kPrismEvent, where));
      if (!event || event->empty()) return fail(where, "an event op with no event name");
      op->ref = role_.event(*event);
      return Status::ok();
    }
  }
}

Status ProgramBuilder::free_op(const Node& n, const Place& where, Op* op) {
  const Attrs& a = n.attr();
  PRISM_ASSIGN_OR_RETURN(const auto alloc, int_attr(a, kPrismAlloc, where));
  if (!alloc) return fail(where, "a free with no 'prism_alloc'");
  const auto it = alloc_of_node_.find(static_cast<std::uint64_t>(*alloc));
  if (*alloc < 0 || it == alloc_of_node_.end()) {
    return fail(where, fmt::format("frees node {}, which is no alloc issued before it", *alloc));
  }
  op->ref = it->second;
  PRISM_ASSIGN_OR_RETURN(const auto streams, int_list_attr(a, kPrismRecordStreams, where));
  for (std::int64_t s : streams.value_or(std::vector<std::int64_t>{})) {
    PRISM_ASSIGN_OR_RETURN(const int role_stream, stream_at(s, where));
    if (role_stream > kMaxRecordStream) {
      return fail(where, fmt::format("records stream {}, past the first {} streams", s,
                                     kMaxRecordStream + 1));
    }
    op->arg |= std::int32_t{1} << role_stream;
  }
  return Status::ok();
}

RankProgram ProgramBuilder::finish() && {
  if (role_.role().streams.empty()) role_.stream("compute");
  program_.role = std::move(role_).build();
  return std::move(program_);
}

}  // namespace prism::chakra
