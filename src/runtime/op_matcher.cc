#include "runtime/op_matcher.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/split_color.h"

namespace prism::runtime {

OpMatcher::OpMatcher(const ExecutionGraph& g, Rank rank)
    : g_(g), rank_(rank), role_(g.roles[g.role_of_rank[rank]]) {
  const SlotResolver res = g.resolver();
  std::map<std::tuple<bool, Rank, std::int32_t>, std::int32_t> p2p_seq;
  std::map<int, std::int32_t> coll_seq;
  seq_of_op_.assign(role_.ops.size(), kNone);
  for (std::size_t i = 0; i < role_.ops.size(); ++i) {
    const Op& op = role_.ops[i];
    const auto oi = static_cast<std::int32_t>(i);
    if (op.kind == OpKind::kCollective) {
      collectives_[op.ref].ops.push_back(oi);
      seq_of_op_[i] = coll_seq[op.ref]++;
    } else if (op.kind == OpKind::kSend || op.kind == OpKind::kRecv) {
      const P2PKey key{op.kind == OpKind::kSend, res.peer(op.ref, rank), op.arg};
      p2p_[key].ops.push_back(oi);
      seq_of_op_[i] = p2p_seq[key]++;
    } else {
      continue;
    }
    ++remaining_;
  }
}

Status OpMatcher::declare(const wire::CommInit& c) {
  const auto where = [&] {
    return fmt::format("rank {} communicator {} ({} ranks, position {})", rank_, c.comm, c.nranks,
                       c.rank_in_comm);
  };
  if (comms_.contains(c.comm))
    return Status::invalid_argument(fmt::format("{}: declared twice", where()));
  if (!c.members.empty() && (c.members[c.rank_in_comm] != rank_ ||
                             std::any_of(c.members.begin(), c.members.end(),
                                         [&](std::int32_t m) { return m >= g_.world_size(); }))) {
    return Status::invalid_argument(fmt::format(
        "{}: members [{}] do not hold this rank at its position, or name ranks beyond {}", where(),
        fmt::join(c.members, ", "), g_.world_size() - 1));
  }
  const SlotResolver res = g_.resolver();
  std::vector<Rank> members;
  Comm comm;
  for (const auto& [slot, queue] : collectives_) {
    res.members(slot, rank_, &members);
    const bool fits =
        c.members.empty()
            ? std::ssize(members) == c.nranks && res.index_in_group(slot, rank_) == c.rank_in_comm
            : members == std::vector<Rank>(c.members.begin(), c.members.end());
    if (!fits || !slot_taken_.insert(slot).second) continue;
    comm.slot = slot;
    comm.members = members;
    break;
  }
  if (comm.slot == kNone) {
    if (!c.members.empty()) {
      comm.members.assign(c.members.begin(), c.members.end());  // sends and receives only
    } else if (c.nranks == g_.world_size() && c.rank_in_comm == rank_) {
      // The whole job, as every rank's default process group is (the parent
      // of device-mesh splits), with no collective of its own in the graph.
      comm.members.resize(static_cast<std::size_t>(g_.world_size()));
      for (Rank r = 0; r < g_.world_size(); ++r) comm.members[static_cast<std::size_t>(r)] = r;
    } else {
      return Status::invalid_argument(fmt::format(
          "{}: no communicator of the graph left with that size and position", where()));
    }
  }
  comms_.emplace(c.comm, std::move(comm));
  return Status::ok();
}

Result<OpMatcher::Split> OpMatcher::split(const wire::CommSplit& s) {
  const auto where = [&] {
    return fmt::format("rank {} communicator {} (split of communicator {} with color {})", rank_,
                       s.comm, s.parent, s.color);
  };
  const auto parent = comms_.find(s.parent);
  if (parent == comms_.end())
    return Status::invalid_argument(fmt::format("{}: the parent was never declared", where()));
  if (comms_.contains(s.comm))
    return Status::invalid_argument(fmt::format("{}: declared twice", where()));
  const std::set<Rank> within(parent->second.members.begin(), parent->second.members.end());
  const SlotResolver res = g_.resolver();
  std::vector<Rank> members;
  int chosen = kNone;
  int lowest = kNone;  // the first whose lowest rank is the color, as split_group's
  for (const auto& [slot, queue] : collectives_) {
    if (slot_taken_.contains(slot)) continue;
    res.members(slot, rank_, &members);
    if (!std::all_of(members.begin(), members.end(), [&](Rank m) { return within.contains(m); }))
      continue;
    if (chosen == kNone) chosen = slot;  // the order rule, unless a color names one
    if (torch_split_color(members) == s.color) {
      chosen = slot;
      lowest = kNone;
      break;
    }
    if (lowest == kNone && torch_split_group_color(members, parent->second.members) == s.color)
      lowest = slot;
  }
  if (lowest != kNone) chosen = lowest;
  if (chosen == kNone) {
    return Status::invalid_argument(
        fmt::format("{}: the graph has no communicator left within the parent's {} ranks", where(),
                    within.size()));
  }
  res.members(chosen, rank_, &members);
  slot_taken_.insert(chosen);
  Split out;
  out.info = wire::CommInfo{s.comm, res.index_in_group(chosen, rank_),
                            std::vector<std::int32_t>(members.begin(), members.end())};
  out.parent = parent->second.members;
  out.seq = splits_[s.parent]++;
  comms_.emplace(s.comm, Comm{chosen, members});
  return out;
}

Status OpMatcher::mismatch(const wire::Op& op, const std::string& why) const {
  return Status::invalid_argument(
      fmt::format("rank {} op {} ({} of {} bytes on communicator {}): {}", rank_, op.op_id,
                  wire::to_string(op.code), op.bytes, op.comm, why));
}

Result<std::int32_t> OpMatcher::match(const wire::Op& op) {
  const auto it = comms_.find(op.comm);
  if (it == comms_.end()) return mismatch(op, "the communicator was never declared");
  const bool p2p = op.code == wire::OpCode::kSend || op.code == wire::OpCode::kRecv;
  PRISM_ASSIGN_OR_RETURN(const std::int32_t oi,
                         p2p ? match_p2p(it->second, op) : match_collective(it->second, op));
  --remaining_;
  return oi;
}

Result<std::int32_t> OpMatcher::match_collective(const Comm& c, const wire::Op& op) {
  if (c.slot == kNone)
    return mismatch(op, "the graph has no collectives on a communicator of these members");
  Queue& q = collectives_.at(c.slot);
  if (q.next == q.ops.size()) {
    return mismatch(op, fmt::format("the graph has only {} collectives on '{}'", q.ops.size(),
                                    g_.slots[c.slot].name));
  }
  const std::int32_t oi = q.ops[q.next];
  const Op& want = role_.ops[oi];
  const bool rooted =
      want.collective == CollectiveKind::kBroadcast || want.collective == CollectiveKind::kReduce;
  if (wire::collective_of(op.code) != want.collective || op.bytes != want.bytes.count ||
      op.dtype != want.dtype || (rooted && op.peer != want.arg)) {
    return mismatch(
        op, fmt::format("the graph has {} of {} bytes of {}{} here: {}", to_string(want.collective),
                        want.bytes.count, to_string(want.dtype),
                        rooted ? fmt::format(" from root {}", want.arg) : "", describe(oi)));
  }
  ++q.next;
  return oi;
}

Result<std::int32_t> OpMatcher::match_p2p(const Comm& c, const wire::Op& op) {
  if (op.peer >= std::ssize(c.members))
    return mismatch(op, fmt::format("peer {} is outside the communicator's {} ranks", op.peer,
                                    c.members.size()));
  const Rank peer = c.members[op.peer];
  const bool is_send = op.code == wire::OpCode::kSend;
  const auto it = p2p_.find(P2PKey{is_send, peer, op.tag});
  if (it == p2p_.end() || it->second.next == it->second.ops.size()) {
    return mismatch(op,
                    fmt::format("the graph has {} {} {} rank {} with tag {}",
                                it == p2p_.end() ? "no" : "no more", is_send ? "sends" : "receives",
                                is_send ? "to" : "from", peer, op.tag));
  }
  Queue& q = it->second;
  const std::int32_t oi = q.ops[q.next];
  const Op& want = role_.ops[oi];
  if (op.bytes != want.bytes.count || op.dtype != want.dtype) {
    return mismatch(op, fmt::format("the graph has {} bytes of {} here: {}", want.bytes.count,
                                    to_string(want.dtype), describe(oi)));
  }
  ++q.next;
  return oi;
}

std::string OpMatcher::describe(std::int32_t oi) const {
  const Op& op = role_.ops[oi];
  if (op.kind == OpKind::kCollective) {
    return fmt::format("{} #{} on '{}' (op {})", to_string(op.collective), seq_of_op_[oi],
                       g_.slots[op.ref].name, oi);
  }
  const Rank peer = g_.resolver().peer(op.ref, rank_);
  const bool is_send = op.kind == OpKind::kSend;
  return fmt::format("{} #{} {} rank {} tag {} (op {})", is_send ? "send" : "recv", seq_of_op_[oi],
                     is_send ? "to" : "from", peer, op.arg, oi);
}

}  // namespace prism::runtime
