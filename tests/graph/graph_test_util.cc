#include "graph_test_util.h"

#include <fmt/format.h>

#include "graph/validate.h"
#include "util/check.h"

namespace prism::testing {
namespace {

std::string dump_op(const Op& op) {
  return fmt::format(
      "kind={} coll={} dtype={} marker={} stream={} ref={} arg={} name={} cost={} group={} "
      "transport={} deps=[{},{}) dur={} bytes={}",
      to_string(op.kind), to_string(op.collective), to_string(op.dtype), to_string(op.marker),
      op.stream, op.ref, op.arg, op.name, op.cost, op.group, to_string(op.transport), op.deps_begin,
      op.deps_end, op.duration.ns, op.bytes.count);
}

std::string dump_role(const Role& role) {
  std::string out =
      fmt::format("role {} streams=[{}] events=[{}] names=[{}] deps=[{}]\n", role.name,
                  fmt::join(role.streams, ","), fmt::join(role.events, ","),
                  fmt::join(role.names, ","), fmt::join(role.deps, ","));
  for (const KernelCost& c : role.costs) {
    out += fmt::format("  cost {} {} {}\n", to_string(c.kernel_class), c.flops,
                       c.bytes_accessed.count);
  }
  for (std::size_t i = 0; i < role.ops.size(); ++i)
    out += fmt::format("  op {}: {}\n", i, dump_op(role.ops[i]));
  return out;
}

}  // namespace

std::string graph_fixture(const std::string& name) {
  return std::string(PRISM_SOURCE_DIR) + "/tests/data/graphs/" + name;
}

std::string dump_graph(const ExecutionGraph& g) {
  std::string out =
      fmt::format("name={} world={} gpn={}\n", g.name, g.world_size(), g.layout.gpus_per_node());
  for (const GridDim& d : g.layout.dims()) out += fmt::format("dim {} {}\n", d.name, d.size);
  for (const CommSlot& s : g.slots) {
    std::string groups;
    for (const auto& grp : s.explicit_groups) groups += fmt::format("[{}]", fmt::join(grp, ","));
    out += fmt::format(
        "slot {} kind={} dims=[{}] groups={} group_of_rank=[{}] peer_dim={} offset={} wrap={} "
        "peers=[{}]\n",
        s.name, static_cast<int>(s.kind), fmt::join(s.dims, ","), groups,
        fmt::join(s.group_of_rank, ","), s.peer_dim, s.offset, s.wrap,
        fmt::join(s.explicit_peers, ","));
  }
  for (const Role& role : g.roles) out += dump_role(role);
  out += fmt::format("role_of_rank=[{}]\n", fmt::join(g.role_of_rank, ","));
  for (const RankOverride& o : g.overrides)
    out += fmt::format("override {} {}\n", o.rank, o.compute_scale_ppm);
  return out;
}

Op make_op(OpKind kind, std::uint16_t stream, std::int32_t ref, std::uint32_t group) {
  Op op;
  op.kind = kind;
  op.stream = stream;
  op.ref = ref;
  op.group = group;
  return op;
}

void set_deps(Role& role, std::size_t op, const std::vector<std::int32_t>& deps) {
  role.ops[op].deps_begin = static_cast<std::uint32_t>(role.deps.size());
  role.deps.insert(role.deps.end(), deps.begin(), deps.end());
  role.ops[op].deps_end = static_cast<std::uint32_t>(role.deps.size());
}

std::string error_of(ExecutionGraph g) {
  Status st = finalize_graph(g);
  if (st.is_ok()) st = validate_graph(g);
  return st.is_ok() ? "(ok)" : st.message();
}

namespace {

struct StageBuilder {
  Role role;
  Op& add(OpKind kind, std::uint16_t stream) {
    Op op;
    op.kind = kind;
    op.stream = stream;
    op.deps_begin = op.deps_end = static_cast<std::uint32_t>(role.deps.size());
    role.ops.push_back(op);
    return role.ops.back();
  }
  void comm(OpKind kind, int slot, std::int64_t bytes, int tag = 0) {
    Op& op = add(kind, 1);
    op.ref = slot;
    op.bytes.count = bytes;
    op.arg = tag;
  }
  // Compute on stream 0 that waits for the latest comm op.
  void compute(std::int64_t ns) {
    const auto last = static_cast<std::int32_t>(role.ops.size()) - 1;
    Op& op = add(OpKind::kCompute, 0);
    op.duration.ns = ns;
    if (last >= 0) {
      role.deps.push_back(last);
      op.deps_end = static_cast<std::uint32_t>(role.deps.size());
    }
  }
};

enum Slot { kTp = 0, kDp = 1, kNext = 2, kPrev = 3 };

Role make_stage(int stage, int pp, int microbatches) {
  StageBuilder b;
  b.role.name = fmt::format("stage{}", stage);
  b.role.streams = {"compute", "comm"};
  const bool first = stage == 0, last = stage == pp - 1;
  for (int m = 0; m < microbatches; ++m) {
    if (!first) b.comm(OpKind::kRecv, kPrev, 1 << 20, m);
    b.compute(1000);
    b.comm(OpKind::kCollective, kTp, 1 << 20);
    if (!last) b.comm(OpKind::kSend, kNext, 1 << 20, m);
  }
  for (int m = 0; m < microbatches; ++m) {
    if (!last) b.comm(OpKind::kRecv, kNext, 1 << 20, m);
    b.compute(2000);
    b.comm(OpKind::kCollective, kTp, 1 << 20);
    if (!first) b.comm(OpKind::kSend, kPrev, 1 << 20, m);
  }
  b.comm(OpKind::kCollective, kDp, 64 << 20);
  return std::move(b.role);
}

}  // namespace

ExecutionGraph make_pipeline(int tp, int dp, int pp, int microbatches) {
  ExecutionGraph g;
  g.name = fmt::format("tp{}-dp{}-pp{}", tp, dp, pp);
  g.layout = Layout(tp * dp * pp, {{"tp", tp}, {"dp", dp}, {"pp", pp}}, 8);
  g.slots = {CommSlot::grid_group("tp", {0}), CommSlot::grid_group("dp", {1}),
             CommSlot::grid_peer("pp_next", 2, 1), CommSlot::grid_peer("pp_prev", 2, -1)};
  for (int s = 0; s < pp; ++s) g.roles.push_back(make_stage(s, pp, microbatches));
  for (Rank r = 0; r < g.world_size(); ++r) g.role_of_rank.push_back(g.layout.coord(r, 2));
  const Status st = finalize_graph(g);
  PRISM_CHECK(st.is_ok(), st.message());
  return g;
}

}  // namespace prism::testing
