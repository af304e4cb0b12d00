// OpMatcher: which op of the graph a live rank's message is.
//
// A live rank declares communicators (wire::CommInit) and enters ops on
// them (wire::Op); the graph has the same rank's role with its own slots and
// ops. The matcher ties the two, the way NCCL itself matches operations:
// - a communicator is the group slot of the rank's role whose group has the
//   declared members in that order (or, when the rank does not know them,
//   the declared size and the rank's position), the k-th such declaration
//   taking the k-th such slot; a communicator with known members that is no
//   slot's group carries only sends and receives, and so does one of the
//   whole job at the rank's own position when no slot is left for it (a
//   default process group that only device-mesh splits use);
// - a communicator split from another (ncclCommSplit) is a group slot whose
//   group lies within the parent's members: the one whose PyTorch split
//   color (runtime/split_color.h) is the split's color, else the first whose
//   lowest position in the parent is (split_group's color), else the first
//   such slot not bound yet, in the graph's slot order;
// - a collective is the rank's next collective on that slot, in issue order;
// - a send or receive is the rank's next one to or from that global peer with
//   that tag, in issue order.
// Anything else (an unknown communicator, another kind of collective, other
// bytes, an op the graph does not have) is a mismatch, named with the graph's
// expectation.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "graph/graph.h"
#include "util/status.h"
#include "wire/protocol.h"

namespace prism::runtime {

class OpMatcher {
 public:
  OpMatcher(const ExecutionGraph& g, Rank rank);

  // Binds the rank's communicator handle; rejected when it fits no slot.
  Status declare(const wire::CommInit& c);
  // Binds the communicator a split makes; rejected when no slot is left
  // within the parent. `seq` is set to the split's number among this rank's
  // splits of the same parent (0, 1, ...), `parent` to the parent's members.
  struct Split {
    wire::CommInfo info;
    std::vector<Rank> parent;
    int seq = 0;
  };
  Result<Split> split(const wire::CommSplit& s);
  // The graph op (index into the rank's role) that `op` is.
  Result<std::int32_t> match(const wire::Op& op);
  // "all_reduce #3 on 'dp' (op 812)": a graph op for messages.
  std::string describe(std::int32_t op) const;
  // Communication ops of the role not entered yet.
  std::int64_t remaining() const { return remaining_; }

 private:
  struct Comm {
    int slot = kNone;  // kNone: sends and receives only
    std::vector<Rank> members;
  };
  using P2PKey = std::tuple<bool, Rank, std::int32_t>;  // (is_send, global peer, tag)
  struct Queue {
    std::vector<std::int32_t> ops;  // issue order
    std::size_t next = 0;
  };

  Result<std::int32_t> match_collective(const Comm& c, const wire::Op& op);
  Result<std::int32_t> match_p2p(const Comm& c, const wire::Op& op);
  Status mismatch(const wire::Op& op, const std::string& why) const;

  const ExecutionGraph& g_;
  Rank rank_;
  const Role& role_;
  std::map<std::uint32_t, Comm> comms_;  // by the rank's handle
  std::set<int> slot_taken_;             // group slots a declaration is bound to
  std::map<int, Queue> collectives_;     // by group slot
  std::map<std::uint32_t, int> splits_;  // by parent handle: splits made of it
  std::map<P2PKey, Queue> p2p_;          // by (direction, peer, tag)
  std::vector<std::int32_t> seq_of_op_;  // per op: its number on its slot or channel
  std::int64_t remaining_ = 0;
};

}  // namespace prism::runtime
