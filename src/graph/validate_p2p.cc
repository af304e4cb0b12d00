// Check 8 of validate_graph(): for every ordered pair of ranks (a, b), the
// messages a sends to b must equal, tag by tag and in issue order, the
// messages b receives from a. A pair's messages depend only on the two roles
// and on which of their slots link the two ranks, so each such combination is
// compared once; walking the ranks costs O(ranks x p2p slots per role).
#include <algorithm>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "graph/validate_internal.h"

namespace prism::validate_internal {
namespace {

// (sender role, its slots that reach the receiver, receiver role, its slots
// that reach the sender).
using PairKey = std::tuple<int, std::vector<int>, int, std::vector<int>>;

struct Message {
  std::int32_t tag;
  std::int32_t op;
};

class P2pChecker {
 public:
  P2pChecker(const ExecutionGraph& g, const std::vector<RoleComm>& comm)
      : g_(g), comm_(comm), res_(g.resolver()) {}

  Status run();

 private:
  // The slots of `from`'s role whose `kind` list is nonempty and whose peer
  // for `from` is `to`.
  std::vector<int> linking_slots(Rank from, Rank to, bool sends) const;
  // The messages on `slots` of `role`, by tag, in issue order.
  std::vector<Message> messages(int role, const std::vector<int>& slots, bool sends) const;
  Status check_pair(Rank a, Rank b);
  Status compare(Rank a, Rank b, const std::vector<Message>& sent,
                 const std::vector<Message>& received) const;

  const ExecutionGraph& g_;
  const std::vector<RoleComm>& comm_;
  SlotResolver res_;
  std::set<PairKey> agree_;
};

std::vector<int> P2pChecker::linking_slots(Rank from, Rank to, bool sends) const {
  std::vector<int> out;
  const RoleComm& rc = comm_[g_.role_of_rank[from]];
  for (int s : rc.used) {
    const SlotUse& use = rc.slot[s];
    if ((sends ? use.sends : use.recvs).empty()) continue;
    if (res_.peer(s, from) == to) out.push_back(s);
  }
  return out;
}

std::vector<Message> P2pChecker::messages(int role, const std::vector<int>& slots,
                                          bool sends) const {
  std::vector<Message> out;
  for (int s : slots) {
    for (std::int32_t i : sends ? comm_[role].slot[s].sends : comm_[role].slot[s].recvs)
      out.push_back(Message{g_.roles[role].ops[i].arg, i});
  }
  // Issue order within each tag.
  std::sort(out.begin(), out.end(), [](const Message& x, const Message& y) {
    return std::tie(x.tag, x.op) < std::tie(y.tag, y.op);
  });
  return out;
}

Status P2pChecker::compare(Rank a, Rank b, const std::vector<Message>& sent,
                           const std::vector<Message>& received) const {
  const Role& ra = g_.roles[g_.role_of_rank[a]];
  const Role& rb = g_.roles[g_.role_of_rank[b]];
  std::size_t i = 0, j = 0;
  while (i < sent.size() && j < received.size() && sent[i].tag == received[j].tag) {
    const Op& s = ra.ops[sent[i].op];
    const Op& r = rb.ops[received[j].op];
    if (s.bytes != r.bytes) {
      return Status::invalid_argument(
          fmt::format("{} op {} sends {} B with tag {} to rank {}, but the matching receive, {} op "
                      "{}, expects {} B",
                      rank_role(g_, a), sent[i].op, s.bytes.count, s.arg, b, rank_role(g_, b),
                      received[j].op, r.bytes.count));
    }
    ++i;
    ++j;
  }
  if (i == sent.size() && j == received.size()) return Status::ok();
  // One side has a message with a tag the other has run out of.
  const std::int32_t tag = i == sent.size()       ? received[j].tag
                           : j == received.size() ? sent[i].tag
                                                  : std::min(sent[i].tag, received[j].tag);
  auto count = [tag](const std::vector<Message>& v) {
    return std::count_if(v.begin(), v.end(), [tag](const Message& m) { return m.tag == tag; });
  };
  return Status::invalid_argument(
      fmt::format("{} sends {} messages with tag {} to {}, which receives {} with tag {} from it",
                  rank_role(g_, a), count(sent), tag, rank_role(g_, b), count(received), tag));
}

Status P2pChecker::check_pair(Rank a, Rank b) {
  const int ra = g_.role_of_rank[a];
  const int rb = g_.role_of_rank[b];
  PairKey key{ra, linking_slots(a, b, true), rb, linking_slots(b, a, false)};
  if (agree_.count(key) != 0) return Status::ok();
  PRISM_RETURN_IF_ERROR(
      compare(a, b, messages(ra, std::get<1>(key), true), messages(rb, std::get<3>(key), false)));
  agree_.insert(std::move(key));
  return Status::ok();
}

Status P2pChecker::run() {
  for (Rank a = 0; a < g_.world_size(); ++a) {
    const RoleComm& rc = comm_[g_.role_of_rank[a]];
    for (int s : rc.used) {
      const SlotUse& use = rc.slot[s];
      if (use.sends.empty() && use.recvs.empty()) continue;
      const Rank p = res_.peer(s, a);
      if (!use.sends.empty()) PRISM_RETURN_IF_ERROR(check_pair(a, p));
      if (!use.recvs.empty()) PRISM_RETURN_IF_ERROR(check_pair(p, a));
    }
  }
  return Status::ok();
}

}  // namespace

Status check_p2p(const ExecutionGraph& g, const std::vector<RoleComm>& comm) {
  return P2pChecker(g, comm).run();
}

}  // namespace prism::validate_internal
