// Check 4 of validate_graph(): every op of a role can run, and every free
// runs after its alloc.
//
// The ops form a dependency graph: an edge from each op to the next op of its
// stream and from each dependency to its dependent. An NCCL group (ops of one
// stream that are consecutive and carry the same nonzero group) is issued as a
// unit once the dependencies of all its members are met (docs/replay.md), so
// it is one node of the graph: a member that depends on another member, or a
// path from a group back to itself, can never be issued. The graph of nodes
// must be acyclic.
//
// A free may only run after its alloc, which issue order does not imply when
// they are on different streams: the alloc must be an ancestor of the free.
// Vector clocks answer that for every free in one pass over a topological
// order: clock(x)[s] is the highest position on stream s of an ancestor of x
// (or x itself).
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "graph/validate_internal.h"

namespace prism::validate_internal {
namespace {

// The role's ops merged into nodes. A node is named by its first op (its
// representative); the other members of a group are no node of their own.
struct RoleDag {
  std::size_t num_nodes = 0;
  std::vector<std::int32_t> node_of;      // op -> its node
  std::vector<std::int32_t> next_member;  // op -> next op of its NCCL group, or kNone
  std::vector<std::int32_t> stream_pos;   // op -> position on its stream
  // Edges of node x: pred[pred_begin[x] .. pred_begin[x + 1]), likewise succ;
  // empty for ops that are no node.
  std::vector<std::uint32_t> pred_begin, succ_begin;
  std::vector<std::int32_t> pred, succ;
};

bool is_group(const RoleDag& dag, std::int32_t node) {
  return dag.next_member[node] != kNone;
}

// "NCCL group 1 on stream 'm' (ops 3..4)", or "op 7" for a plain op.
std::string describe_node(const Role& role, const RoleDag& dag, std::int32_t node) {
  if (!is_group(dag, node)) return fmt::format("op {}", node);
  std::vector<std::int32_t> members;
  for (std::int32_t m = node; m != kNone; m = dag.next_member[m]) members.push_back(m);
  std::string ops;
  if (members.back() - members.front() + 1 == static_cast<std::int32_t>(members.size())) {
    ops = fmt::format("{}..{}", members.front(), members.back());
  } else if (members.size() <= 6) {
    ops = fmt::format("{}", fmt::join(members, ", "));
  } else {
    ops = fmt::format("{}, {}, {}, ..., {}; {} ops", members[0], members[1], members[2],
                      members.back(), members.size());
  }
  const Op& op = role.ops[node];
  return fmt::format("NCCL group {} on stream '{}' (ops {})", op.group, role.streams[op.stream],
                     ops);
}

// Calls edge(from_node, to_node) for every edge between two nodes:
// stream order and explicit dependencies (event waits included). A
// dependency of a group member on another member of the same group is no
// edge but an error.
template <typename Edge>
Status for_each_edge(const Role& role, const RoleDag& dag,
                     const std::vector<std::int32_t>& prev_on_stream, Edge edge) {
  for (std::size_t i = 0; i < role.ops.size(); ++i) {
    const std::int32_t x = dag.node_of[i];
    const std::int32_t p = prev_on_stream[i];
    if (p != kNone && dag.node_of[p] != x) edge(dag.node_of[p], x);
    const Op& op = role.ops[i];
    for (std::uint32_t d = op.deps_begin; d < op.deps_end; ++d) {
      const std::int32_t y = dag.node_of[role.deps[d]];
      if (y != x) {
        edge(y, x);
        continue;
      }
      return Status::invalid_argument(
          fmt::format("role '{}': {}: op {} depends on op {} of the same group, which is issued "
                      "together with it",
                      role.name, describe_node(role, dag, x), i, role.deps[d]));
    }
  }
  return Status::ok();
}

Result<RoleDag> build_dag(const Role& role) {
  const std::size_t n = role.ops.size();
  RoleDag dag;
  dag.node_of.resize(n);
  dag.next_member.assign(n, kNone);
  dag.stream_pos.resize(n);
  std::vector<std::int32_t> prev_on_stream(n, kNone);
  std::vector<std::int32_t> last(role.streams.size(), kNone), count(role.streams.size(), 0);
  for (std::size_t i = 0; i < n; ++i) {
    const Op& op = role.ops[i];
    const std::int32_t p = last[op.stream];
    prev_on_stream[i] = p;
    dag.stream_pos[i] = count[op.stream]++;
    last[op.stream] = static_cast<std::int32_t>(i);
    if (op.group != 0 && p != kNone && role.ops[p].group == op.group) {
      dag.node_of[i] = dag.node_of[p];
      dag.next_member[p] = static_cast<std::int32_t>(i);
    } else {
      dag.node_of[i] = static_cast<std::int32_t>(i);
      ++dag.num_nodes;
    }
  }
  dag.pred_begin.assign(n + 1, 0);
  dag.succ_begin.assign(n + 1, 0);
  PRISM_RETURN_IF_ERROR(
      for_each_edge(role, dag, prev_on_stream, [&](std::int32_t a, std::int32_t b) {
        ++dag.succ_begin[a + 1];
        ++dag.pred_begin[b + 1];
      }));
  for (std::size_t i = 0; i < n; ++i) {
    dag.succ_begin[i + 1] += dag.succ_begin[i];
    dag.pred_begin[i + 1] += dag.pred_begin[i];
  }
  dag.succ.resize(dag.succ_begin[n]);
  dag.pred.resize(dag.pred_begin[n]);
  std::vector<std::uint32_t> sfill(dag.succ_begin.begin(), dag.succ_begin.end() - 1);
  std::vector<std::uint32_t> pfill(dag.pred_begin.begin(), dag.pred_begin.end() - 1);
  PRISM_RETURN_IF_ERROR(
      for_each_edge(role, dag, prev_on_stream, [&](std::int32_t a, std::int32_t b) {
        dag.succ[sfill[a]++] = b;
        dag.pred[pfill[b]++] = a;
      }));
  return dag;
}

// "op 3 -> op 7 -> op 9", eliding the middle of long paths; `close`, when
// not empty, is appended unelided ("... -> op 3").
std::string format_path(const std::vector<std::string>& labels, std::string_view close = {}) {
  constexpr std::size_t kHead = 8, kTail = 4;
  std::string out;
  for (std::size_t k = 0; k < labels.size(); ++k) {
    if (labels.size() > kHead + kTail && k == kHead) {
      out += fmt::format("... ({} more ops) -> ", labels.size() - kHead - kTail);
      k = labels.size() - kTail;
    }
    out += labels[k] + (k + 1 < labels.size() ? " -> " : "");
  }
  if (!close.empty()) out += fmt::format(" -> {}", close);
  return out;
}

// Some node is left with unfinished predecessors after Kahn's algorithm;
// every such node has such a predecessor, so walking predecessors must close
// a loop. The cycle comes back in dependency order, starting at its first
// group if it has one, else at its lowest op.
std::vector<std::int32_t> find_cycle(const RoleDag& dag,
                                     const std::vector<std::int32_t>& indegree) {
  std::size_t start = 0;
  while (indegree[start] == 0) ++start;  // ops that are no node have no predecessors
  std::vector<std::int32_t> pos(dag.node_of.size(), -1);
  std::vector<std::int32_t> path;
  auto x = static_cast<std::int32_t>(start);
  while (pos[x] < 0) {
    pos[x] = static_cast<std::int32_t>(path.size());
    path.push_back(x);
    std::int32_t next = kNone;
    for (std::uint32_t e = dag.pred_begin[x]; e < dag.pred_begin[x + 1] && next == kNone; ++e)
      if (indegree[dag.pred[e]] > 0) next = dag.pred[e];
    x = next;
  }
  std::vector<std::int32_t> cycle(path.begin() + pos[x], path.end());
  std::reverse(cycle.begin(), cycle.end());  // predecessors were walked backwards
  auto first = std::min_element(cycle.begin(), cycle.end(), [&](std::int32_t a, std::int32_t b) {
    return std::make_pair(!is_group(dag, a), a) < std::make_pair(!is_group(dag, b), b);
  });
  std::rotate(cycle.begin(), first, cycle.end());
  return cycle;
}

Status cycle_error(const Role& role, const RoleDag& dag, const std::vector<std::int32_t>& cycle) {
  std::vector<std::string> labels;
  for (std::int32_t x : cycle) labels.push_back(describe_node(role, dag, x));
  if (!is_group(dag, cycle.front())) {
    return Status::invalid_argument(fmt::format("role '{}': dependency cycle: {}", role.name,
                                                format_path(labels, labels.front())));
  }
  const std::string group = labels.front();
  labels.erase(labels.begin());
  return Status::invalid_argument(fmt::format("role '{}': {} depends on itself through {}",
                                              role.name, group, format_path(labels)));
}

// Kahn's algorithm over the nodes: their topological order, or the error
// that names a cycle.
Result<std::vector<std::int32_t>> topological_order(const Role& role, const RoleDag& dag) {
  const std::size_t n = dag.node_of.size();
  std::vector<std::int32_t> indegree(n);
  std::vector<std::int32_t> ready, order;
  order.reserve(dag.num_nodes);
  for (std::size_t x = 0; x < n; ++x) {
    indegree[x] = static_cast<std::int32_t>(dag.pred_begin[x + 1] - dag.pred_begin[x]);
    if (dag.node_of[x] == static_cast<std::int32_t>(x) && indegree[x] == 0)
      ready.push_back(static_cast<std::int32_t>(x));
  }
  while (!ready.empty()) {
    const std::int32_t x = ready.back();
    ready.pop_back();
    order.push_back(x);
    for (std::uint32_t e = dag.succ_begin[x]; e < dag.succ_begin[x + 1]; ++e)
      if (--indegree[dag.succ[e]] == 0) ready.push_back(dag.succ[e]);
  }
  if (order.size() == dag.num_nodes) return order;
  return cycle_error(role, dag, find_cycle(dag, indegree));
}

// Bounds the memory of the vector clocks; past it, streams are done in batches.
constexpr std::size_t kMaxClockEntries = std::size_t{1} << 24;

// clock[x * k + slot_of[s]]: the highest position on stream s of node x or of
// an ancestor of x (-1 for none), for the k streams that have a slot.
void vector_clocks(const Role& role, const RoleDag& dag, const std::vector<std::int32_t>& order,
                   const std::vector<std::int32_t>& slot_of, std::size_t k,
                   std::vector<std::int32_t>* clock) {
  clock->assign(role.ops.size() * k, -1);
  for (std::int32_t x : order) {
    std::int32_t* cx = &(*clock)[x * k];
    for (std::uint32_t e = dag.pred_begin[x]; e < dag.pred_begin[x + 1]; ++e) {
      const std::int32_t* cy = &(*clock)[dag.pred[e] * k];
      for (std::size_t s = 0; s < k; ++s) cx[s] = std::max(cx[s], cy[s]);
    }
    for (std::int32_t m = x; m != kNone; m = dag.next_member[m]) {
      const std::int32_t s = slot_of[role.ops[m].stream];
      if (s != kNone) cx[s] = std::max(cx[s], dag.stream_pos[m]);
    }
  }
}

// Frees whose alloc is on another stream must have it as an ancestor.
Status check_frees_ordered(const Role& role, const RoleDag& dag,
                           const std::vector<std::int32_t>& order) {
  const std::size_t n = role.ops.size();
  std::vector<std::int32_t> streams;  // streams holding an alloc freed on another stream
  std::size_t first_bad = n;
  for (std::size_t i = 0; i < n; ++i) {
    const Op& op = role.ops[i];
    if (op.kind != OpKind::kFree) continue;
    if (role.ops[op.ref].stream != op.stream) {
      streams.push_back(role.ops[op.ref].stream);
    } else if (static_cast<std::size_t>(op.ref) > i && first_bad == n) {
      first_bad = i;  // later on the same stream (finalize_graph rejects it too)
    }
  }
  std::sort(streams.begin(), streams.end());
  streams.erase(std::unique(streams.begin(), streams.end()), streams.end());
  const std::size_t batch =
      std::max<std::size_t>(1, kMaxClockEntries / std::max<std::size_t>(n, 1));
  std::vector<std::int32_t> slot_of(role.streams.size(), kNone), clock;
  for (std::size_t b0 = 0; b0 < streams.size(); b0 += batch) {
    const std::size_t k = std::min(batch, streams.size() - b0);
    std::fill(slot_of.begin(), slot_of.end(), kNone);
    for (std::size_t s = 0; s < k; ++s) slot_of[streams[b0 + s]] = static_cast<std::int32_t>(s);
    vector_clocks(role, dag, order, slot_of, k, &clock);
    for (std::size_t i = 0; i < first_bad; ++i) {
      const Op& op = role.ops[i];
      if (op.kind != OpKind::kFree) continue;
      const std::int32_t s = slot_of[role.ops[op.ref].stream];
      if (s != kNone && clock[dag.node_of[i] * k + s] < dag.stream_pos[op.ref]) first_bad = i;
    }
  }
  if (first_bad == n) return Status::ok();
  const std::int32_t a = role.ops[first_bad].ref;
  return Status::invalid_argument(fmt::format(
      "{}: free of op {} (alloc on stream '{}') is not ordered after it: add an event or a "
      "dependency",
      role_op(role, first_bad), a, role.streams[role.ops[a].stream]));
}

}  // namespace

Status validate_order(const Role& role) {
  PRISM_ASSIGN_OR_RETURN(RoleDag dag, build_dag(role));
  PRISM_ASSIGN_OR_RETURN(std::vector<std::int32_t> order, topological_order(role, dag));
  return check_frees_ordered(role, dag, order);
}

}  // namespace prism::validate_internal
