// export_chakra(): one trace per rank, every op of the rank's role one node.
//
// Most of a node depends only on the role: the node is encoded once per role
// and copied into each rank's file. Communication nodes name concrete ranks
// and groups, and a rank with a compute scale has its own durations, so those
// are encoded per rank.
#include <algorithm>
#include <unordered_map>

#include <fmt/format.h>

#include "chakra/attributes.h"
#include "chakra/chakra.h"
#include "chakra/comm_groups.h"
#include "chakra/et_file.h"
#include "graph/validate.h"
#include "util/file.h"

namespace prism {
namespace {

namespace fs = std::filesystem;
using chakra::Attrs;
using ChakraProtoMsg::Node;

constexpr std::int64_t kUnscaled = 1'000'000;
constexpr char kEtVersion[] = "0.0.4";  // Chakra's schema version of these fields

// ET group ids (1, 2, ...) of the groups of every slot a collective uses,
// slot by slot, each slot's groups in order of their lowest rank.
class GroupIds {
 public:
  explicit GroupIds(const ExecutionGraph& g) : ids_(g.slots.size()) {
    std::vector<bool> used(g.slots.size(), false);
    for (const Role& role : g.roles)
      for (const Op& op : role.ops)
        if (op.kind == OpKind::kCollective) used[op.ref] = true;
    const SlotResolver res = g.resolver();
    for (std::size_t s = 0; s < g.slots.size(); ++s) {
      if (!used[s]) continue;
      for (Rank r = 0; r < g.world_size(); ++r) {
        const std::int64_t gid = res.group_id(static_cast<int>(s), r);
        if (gid == kNone || ids_[s].contains(gid)) continue;
        ids_[s][gid] = static_cast<int>(groups_.size()) + 1;
        res.members(static_cast<int>(s), r, &groups_.emplace_back());
      }
    }
  }
  int id(const SlotResolver& res, int slot, Rank r) const {
    return ids_[slot].at(res.group_id(slot, r));
  }
  const std::vector<std::vector<Rank>>& groups() const { return groups_; }

 private:
  std::vector<std::unordered_map<std::int64_t, int>> ids_;  // slot -> group id -> ET id
  std::vector<std::vector<Rank>> groups_;                   // ET id - 1 -> members
};

class Exporter {
 public:
  Exporter(const ExecutionGraph& g, const ChakraExportOptions& o)
      : g_(g), o_(o), res_(g.resolver()), groups_(g) {}

  Status run(const fs::path& dir) {
    for (std::size_t ri = 0; ri < g_.roles.size(); ++ri) PRISM_RETURN_IF_ERROR(prepare(ri));
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec)
      return Status::io_error(fmt::format("{}: cannot create: {}", dir.string(), ec.message()));
    for (Rank r = 0; r < g_.world_size(); ++r) {
      const fs::path file = dir / chakra::trace_file_name(o_.prefix, r);
      PRISM_RETURN_IF_ERROR(write_file_atomic(file.string(), encode_rank(r)));
    }
    PRISM_RETURN_IF_ERROR(
        write_file_atomic((dir / chakra::comm_groups_file_name(o_.prefix)).string(),
                          chakra::write_comm_groups(groups_.groups())));
    return remove_stale(dir);
  }

 private:
  struct RoleNodes {
    std::string metadata;            // delimited GlobalMetadata
    std::vector<std::int32_t> prev;  // op -> previous op of its stream, or kNone
    std::vector<SimTime> duration;   // compute ops: unscaled duration
    std::vector<std::string> fixed;  // op -> delimited node, empty when per rank
  };

  static bool rank_dependent(const Op& op) { return is_communication(op.kind); }

  // Durations, stream predecessors and the rank-independent nodes of a role.
  Status prepare(std::size_t ri) {
    const Role& role = g_.roles[ri];
    RoleNodes& rn = roles_.emplace_back();
    ChakraProtoMsg::GlobalMetadata meta;
    meta.set_version(kEtVersion);
    chakra::add_string(meta.mutable_attr(), chakra::kPrismRole, role.name);
    chakra::add_string_list(meta.mutable_attr(), chakra::kPrismStreams, role.streams);
    if (!g_.cluster.empty())
      chakra::add_string(meta.mutable_attr(), chakra::kPrismCluster, g_.cluster);
    chakra::append_delimited(meta, &rn.metadata);
    std::vector<std::int32_t> last(role.streams.size(), kNone);
    rn.prev.resize(role.ops.size());
    rn.duration.resize(role.ops.size());
    rn.fixed.resize(role.ops.size());
    for (std::size_t i = 0; i < role.ops.size(); ++i) {
      const Op& op = role.ops[i];
      rn.prev[i] = last[op.stream];
      last[op.stream] = static_cast<std::int32_t>(i);
      if (op.kind == OpKind::kCompute) PRISM_RETURN_IF_ERROR(resolve_duration(role, i, &rn));
      if (!rank_dependent(op)) chakra::append_delimited(node(ri, i, -1, kUnscaled), &rn.fixed[i]);
    }
    return Status::ok();
  }

  Status resolve_duration(const Role& role, std::size_t i, RoleNodes* rn) const {
    const Op& op = role.ops[i];
    if (op.cost == kNone) {
      rn->duration[i] = op.duration;
      return Status::ok();
    }
    if (o_.compute == nullptr) {
      return Status::invalid_argument(fmt::format(
          "role '{}' op {}{}: a compute op with a kernel cost and no duration; a Chakra trace "
          "needs durations (pass a compute model in ChakraExportOptions::compute)",
          role.name, i, op.name == kNone ? "" : fmt::format(" ('{}')", role.names[op.name])));
    }
    rn->duration[i] = o_.compute->duration(role.costs[op.cost]);
    return Status::ok();
  }

  std::string encode_rank(Rank r) const {
    const int ri = g_.role_of_rank[r];
    const Role& role = g_.roles[ri];
    const RoleNodes& rn = roles_[ri];
    const std::int64_t ppm = g_.compute_scale_ppm(r);
    std::string out = rn.metadata;
    for (std::size_t i = 0; i < role.ops.size(); ++i) {
      const bool scaled = ppm != kUnscaled && role.ops[i].kind == OpKind::kCompute;
      if (!scaled && !rn.fixed[i].empty()) {
        out += rn.fixed[i];
      } else {
        chakra::append_delimited(node(ri, i, r, ppm), &out);
      }
    }
    return out;
  }

  // Op `i` of role `ri` as a node; `r` is the rank for communication ops.
  Node node(std::size_t ri, std::size_t i, Rank r, std::int64_t ppm) const {
    const Role& role = g_.roles[ri];
    const RoleNodes& rn = roles_[ri];
    const Op& op = role.ops[i];
    Node n;
    n.set_id(i);
    n.set_name(op.name != kNone                 ? role.names[op.name]
               : op.kind == OpKind::kCollective ? std::string(to_string(op.collective))
                                                : std::string(to_string(op.kind)));
    if (rn.prev[i] != kNone) n.add_data_deps(static_cast<std::uint64_t>(rn.prev[i]));
    for (std::uint32_t d = op.deps_begin; d < op.deps_end; ++d) {
      const auto dep = static_cast<std::uint64_t>(role.deps[d]);
      if (std::find(n.data_deps().begin(), n.data_deps().end(), dep) == n.data_deps().end())
        n.add_data_deps(dep);
    }
    Attrs* a = n.mutable_attr();
    const std::string& stream = role.streams[op.stream];
    // ASTRA-sim refuses communication on the CPU.
    chakra::add_bool(a, chakra::kIsCpuOp,
                     !is_communication(op.kind) && (stream == "cpu" || stream == "host"));
    chakra::add_int(a, chakra::kStream, op.stream);
    if (op.group != 0) chakra::add_int(a, chakra::kPrismGroup, op.group);
    if (op.transport != Transport::kNccl)
      chakra::add_string(a, chakra::kPrismTransport, to_string(op.transport));
    switch (op.kind) {
      case OpKind::kCompute:
        compute(role, rn, i, ppm, &n);
        break;
      case OpKind::kCollective:
        collective(op, r, &n);
        break;
      case OpKind::kSend:
      case OpKind::kRecv:
        p2p(op, r, &n);
        break;
      default:
        untimed(role, op, &n);
        break;
    }
    return n;
  }

  static void compute(const Role& role, const RoleNodes& rn, std::size_t i, std::int64_t ppm,
                      Node* n) {
    const Op& op = role.ops[i];
    const SimTime d = ppm == kUnscaled ? rn.duration[i] : scale_duration(rn.duration[i], ppm);
    n->set_type(ChakraProtoMsg::COMP_NODE);
    n->set_duration_micros(static_cast<std::uint64_t>((d.ns + 500) / 1000));
    chakra::add_int(n->mutable_attr(), chakra::kPrismDurationNs, d.ns);
    if (op.cost == kNone) return;
    // ASTRA-sim's roofline mode reads num_ops and tensor_size.
    const KernelCost& c = role.costs[op.cost];
    const double max_ops = 9.2e18;  // below 2^63; kernel costs go up to 1e30
    chakra::add_int(n->mutable_attr(), chakra::kNumOps,
                    static_cast<std::int64_t>(std::min(c.flops, max_ops)));
    chakra::add_int(n->mutable_attr(), chakra::kTensorSize, c.bytes_accessed.count);
    chakra::add_double(n->mutable_attr(), chakra::kPrismFlops, c.flops);
    chakra::add_string(n->mutable_attr(), chakra::kPrismKernelClass, to_string(c.kernel_class));
  }

  void collective(const Op& op, Rank r, Node* n) const {
    n->set_type(ChakraProtoMsg::COMM_COLL_NODE);
    Attrs* a = n->mutable_attr();
    chakra::add_int(a, chakra::kCommType, chakra::comm_type_of(op.collective));
    chakra::add_int(a, chakra::kCommSize, op.bytes.count);
    chakra::add_string(a, chakra::kPgName, std::to_string(groups_.id(res_, op.ref, r)));
    chakra::add_string(a, chakra::kPrismDtype, to_string(op.dtype));
    if (op.arg != 0) chakra::add_int(a, chakra::kPrismRoot, op.arg);
  }

  void p2p(const Op& op, Rank r, Node* n) const {
    const bool send = op.kind == OpKind::kSend;
    const Rank peer = res_.peer(op.ref, r);
    n->set_type(send ? ChakraProtoMsg::COMM_SEND_NODE : ChakraProtoMsg::COMM_RECV_NODE);
    Attrs* a = n->mutable_attr();
    chakra::add_int(a, chakra::kCommSrc, send ? r : peer);
    chakra::add_int(a, chakra::kCommDst, send ? peer : r);
    chakra::add_int(a, chakra::kCommTag, op.arg);
    chakra::add_int(a, chakra::kCommSize, op.bytes.count);
    chakra::add_string(a, chakra::kPrismDtype, to_string(op.dtype));
  }

  // Memory, events and markers take no time: METADATA nodes, which ASTRA-sim
  // completes at once, that keep the op for a PrismLLM import.
  static void untimed(const Role& role, const Op& op, Node* n) {
    n->set_type(ChakraProtoMsg::METADATA_NODE);
    Attrs* a = n->mutable_attr();
    chakra::add_string(a, chakra::kPrismOp, to_string(op.kind));
    switch (op.kind) {
      case OpKind::kAlloc:
        chakra::add_int(a, chakra::kPrismBytes, op.bytes.count);
        break;
      case OpKind::kFree: {
        chakra::add_int(a, chakra::kPrismAlloc, op.ref);
        std::vector<std::int64_t> streams;
        for (int s = 0; s <= kMaxRecordStream; ++s)
          if ((op.arg >> s) & 1) streams.push_back(s);
        if (!streams.empty()) chakra::add_int_list(a, chakra::kPrismRecordStreams, streams);
        break;
      }
      case OpKind::kEventRecord:
      case OpKind::kEventWait:
        chakra::add_string(a, chakra::kPrismEvent, role.events[op.ref]);
        break;
      case OpKind::kMarker:
        chakra::add_string(a, chakra::kPrismMarker, to_string(op.marker));
        chakra::add_int(a, chakra::kPrismIndex, op.arg);
        break;
      default:
        break;
    }
  }

  // Rank files of this prefix past the world, from an earlier export.
  Status remove_stale(const fs::path& dir) const {
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
      std::string prefix;
      long long rank = 0;
      if (!chakra::split_trace_file_name(e.path().filename().string(), &prefix, &rank) ||
          prefix != o_.prefix || rank < g_.world_size())
        continue;
      fs::remove(e.path(), ec);
      if (ec)
        return Status::io_error(
            fmt::format("{}: cannot remove: {}", e.path().string(), ec.message()));
    }
    if (ec) return Status::io_error(fmt::format("{}: cannot list: {}", dir.string(), ec.message()));
    return Status::ok();
  }

  const ExecutionGraph& g_;
  const ChakraExportOptions& o_;
  SlotResolver res_;
  GroupIds groups_;
  std::vector<RoleNodes> roles_;
};

}  // namespace

Status export_chakra(const ExecutionGraph& g, const fs::path& out_dir,
                     const ChakraExportOptions& options) {
  if (options.prefix.empty() || options.prefix.find('/') != std::string::npos) {
    return Status::invalid_argument(
        fmt::format("Chakra export: prefix '{}' must be a non-empty file name", options.prefix));
  }
  PRISM_RETURN_IF_ERROR(validate_graph(g));
  Exporter e(g, options);
  return e.run(out_dir);
}

}  // namespace prism
