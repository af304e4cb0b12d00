#include "slicing/slices_grid.h"

#include <algorithm>
#include <cstdint>
#include <set>

#include <fmt/format.h>

#include "slicing/rank_program_groups.h"
#include "util/hash.h"

namespace prism::slices_internal {
namespace {

using rank_program_internal::describe_members;

// The coordinate set `c` (ascending) shifted so that it reads least: the
// name of a set that moves with the rank.
std::vector<int> least_shift(const std::vector<int>& c, int size) {
  std::vector<int> best;
  for (int s : c) {
    std::vector<int> shifted;
    for (int x : c) shifted.push_back(((x - s) % size + size) % size);
    std::sort(shifted.begin(), shifted.end());
    if (best.empty() || shifted < best) best = std::move(shifted);
  }
  return best;
}

// The least of an irregular group's moves, for its name.
Result<std::vector<Rank>> least_move(const Layout& l, const std::vector<Rank>& members,
                                     int fixed_dim) {
  const Rank from = members.front();
  const std::int64_t moves = l.world_size() / l.dims()[static_cast<std::size_t>(fixed_dim)].size;
  if (moves * static_cast<std::int64_t>(members.size()) > 100'000'000)
    return Status::invalid_argument(fmt::format(
        "communicator {} is neither whole grid dimensions nor small enough to name by its "
        "moves ({} ranks, {} places)",
        describe_members(members), members.size(), moves));
  std::vector<Rank> best;
  for (Rank to = 0; to < l.world_size(); ++to) {
    if (l.coord(to, fixed_dim) != l.coord(from, fixed_dim)) continue;
    std::vector<Rank> moved;
    for (Rank m : members) moved.push_back(move(l, m, from, to));
    std::sort(moved.begin(), moved.end());
    if (best.empty() || moved < best) best = std::move(moved);
  }
  return best;
}

// What an op of `p` is, for a difference.
std::string describe(const RankProgram& p, const Op* op) {
  if (op == nullptr) return "the end of its program";
  switch (op->kind) {
    case OpKind::kCollective:
      return fmt::format("{} of {} bytes ({}) on ranks {}", to_string(op->collective),
                         op->bytes.count, to_string(op->dtype),
                         describe_members(p.comms[static_cast<std::size_t>(op->ref)].members));
    case OpKind::kSend:
    case OpKind::kRecv:
      return fmt::format("{} of {} bytes {} rank {} (tag {})", to_string(op->kind), op->bytes.count,
                         op->kind == OpKind::kSend ? "to" : "from",
                         p.peers[static_cast<std::size_t>(op->ref)], op->arg);
    case OpKind::kAlloc:
    case OpKind::kFree:
      return fmt::format("{} of {} bytes", to_string(op->kind), op->bytes.count);
    case OpKind::kMarker:
      return fmt::format("{} marker {}", to_string(op->marker), op->arg);
    default:
      return std::string(to_string(op->kind));
  }
}

// Whether b's op `y` is a's op `x` moved from a's place to b's.
bool same_op(const Layout& l, const RankProgram& a, const Op& x, const RankProgram& b, const Op& y,
             std::set<std::size_t>* anchored) {
  if (x.kind != y.kind || x.bytes != y.bytes) return false;
  switch (x.kind) {
    case OpKind::kCollective: {
      if (x.collective != y.collective || x.dtype != y.dtype || x.arg != y.arg) return false;
      std::vector<Rank> moved =
          move_group(l, a.comms[static_cast<std::size_t>(x.ref)].members, a.rank, b.rank);
      std::vector<Rank> theirs = b.comms[static_cast<std::size_t>(y.ref)].members;
      std::sort(moved.begin(), moved.end());
      std::sort(theirs.begin(), theirs.end());
      return moved == theirs;
    }
    case OpKind::kSend:
    case OpKind::kRecv: {
      if (x.arg != y.arg || x.dtype != y.dtype) return false;
      const Rank peer = a.peers[static_cast<std::size_t>(x.ref)];
      const Rank theirs = b.peers[static_cast<std::size_t>(y.ref)];
      if (move(l, peer, a.rank, b.rank) == theirs) return true;
      if (anchor(l, peer, a.rank, b.rank) != theirs) return false;
      if (anchored != nullptr) anchored->insert(static_cast<std::size_t>(x.ref));
      return true;
    }
    case OpKind::kMarker:
      return x.marker == y.marker && x.arg == y.arg;
    default:
      return true;
  }
}

// The ops two captures of a role must share: all but compute and events.
std::vector<const Op*> compared_ops(const Role& r) {
  std::vector<const Op*> out;
  for (const Op& op : r.ops) {
    if (op.kind != OpKind::kCompute && op.kind != OpKind::kEventRecord &&
        op.kind != OpKind::kEventWait)
      out.push_back(&op);
  }
  return out;
}

}  // namespace

Rank move(const Layout& l, Rank m, Rank from, Rank to) {
  Rank out = 0;
  for (std::size_t d = 0; d < l.dims().size(); ++d) {
    const int i = static_cast<int>(d);
    const int size = l.dims()[d].size;
    const int c = ((l.coord(m, i) - l.coord(from, i) + l.coord(to, i)) % size + size) % size;
    out += c * l.stride(i);
  }
  return out;
}

Rank anchor(const Layout& l, Rank m, Rank from, Rank to) {
  Rank out = 0;
  for (std::size_t d = 0; d < l.dims().size(); ++d) {
    const int i = static_cast<int>(d);
    const int c = l.coord(m, i) == l.coord(from, i) ? l.coord(to, i) : l.coord(m, i);
    out += c * l.stride(i);
  }
  return out;
}

std::vector<Rank> move_group(const Layout& l, const std::vector<Rank>& members, Rank from,
                             Rank to) {
  std::vector<Rank> out;
  out.reserve(members.size());
  for (Rank m : members) out.push_back(move(l, m, from, to));
  if (std::is_sorted(members.begin(), members.end())) std::sort(out.begin(), out.end());
  return out;
}

Result<GroupShape> group_shape(const Layout& l, const std::vector<Rank>& members, int fixed_dim) {
  const std::vector<GridDim>& dims = l.dims();
  std::vector<std::vector<int>> coords(dims.size());
  std::size_t product = 1;
  for (std::size_t d = 0; d < dims.size(); ++d) {
    std::set<int> c;
    for (Rank m : members) c.insert(l.coord(m, static_cast<int>(d)));
    coords[d].assign(c.begin(), c.end());
    product *= c.size();
  }
  GroupShape s;
  if (members.size() == 1) {
    s.name = "self";
    return s;
  }
  if (product == members.size()) {  // a box: every combination of its coordinates
    bool whole = true;              // each dimension whole or one coordinate
    bool every = true;              // every dimension of size > 1 whole
    std::vector<std::string> parts;
    for (std::size_t d = 0; d < dims.size(); ++d) {
      const int size = dims[d].size;
      const std::vector<int>& c = coords[d];
      if (size > 1 && std::ssize(c) == size) {
        s.dims.push_back(static_cast<int>(d));
        parts.push_back(dims[d].name);
        continue;
      }
      if (size > 1) every = false;
      if (c.size() == 1) continue;
      whole = false;
      const std::vector<int> named = static_cast<int>(d) == fixed_dim ? c : least_shift(c, size);
      parts.push_back(fmt::format("{}{{{}}}", dims[d].name, fmt::join(named, ",")));
    }
    s.grid = whole && std::is_sorted(members.begin(), members.end());
    s.name = s.grid && every ? "world" : fmt::format("{}", fmt::join(parts, "+"));
    if (whole && !s.grid) s.name += "-reordered";  // not a grid slot's order
    if (!s.grid) s.dims.clear();
    return s;
  }
  PRISM_ASSIGN_OR_RETURN(const std::vector<Rank> least, least_move(l, members, fixed_dim));
  const std::uint64_t h = fnv1a(least.data(), least.size() * sizeof(Rank));
  s.name = fmt::format("group-{:08x}", static_cast<std::uint32_t>(h ^ (h >> 32)));
  return s;
}

Status check_same_program(const Layout& l, const RankProgram& a, const RankProgram& b,
                          std::set<std::size_t>* anchored) {
  const std::vector<const Op*> xs = compared_ops(a.role);
  const std::vector<const Op*> ys = compared_ops(b.role);
  for (std::size_t i = 0; i < std::max(xs.size(), ys.size()); ++i) {
    const Op* x = i < xs.size() ? xs[i] : nullptr;
    const Op* y = i < ys.size() ? ys[i] : nullptr;
    if (x != nullptr && y != nullptr && same_op(l, a, *x, b, *y, anchored)) continue;
    return Status::invalid_argument(fmt::format(
        "rank {} ({}) does not run rank {}'s program ({}) moved to its place: at their "
        "communication, memory or marker op {}, rank {} has {}, rank {} has {}",
        b.rank, b.source, a.rank, a.source, i, a.rank, describe(a, x), b.rank, describe(b, y)));
  }
  return Status::ok();
}

}  // namespace prism::slices_internal
