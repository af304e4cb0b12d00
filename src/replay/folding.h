// Folding: which ranks provably behave identically, so that one representative
// per class can be simulated for all of them.
//
// Classes are the coarsest partition, refined to a fixpoint (colour
// refinement), in which two ranks share a class only if they have the same
// role, the same overrides, the same communicator geometry (group size, nodes
// spanned, ranks per node; same-node-ness of each peer; which of its peer
// slots reach the same rank) and, for every slot
// their role uses, class-equal partners: the same multiset of member classes
// in their group, the same class of peer. By induction over events, ranks of
// one class then see identical arrival times at every rendezvous and have
// identical timelines, which is why the folded replay equals the unfolded one.
// A rank that differs (a straggler) splits its class and, transitively, the
// classes of everyone whose timeline it can touch.
#pragma once

#include <cstdint>
#include <vector>

#include "graph/graph.h"

namespace prism {

// Refinement rounds before folding gives up and simulates every rank (see
// plan_folding). A pipeline of up to about this many stages still folds
// around a straggler.
inline constexpr int kMaxRefinementRounds = 128;

struct FoldPlan {
  std::vector<std::int32_t> class_of_rank;  // size world_size
  std::vector<Rank> representative;         // per class: its lowest rank
  std::vector<std::int32_t> class_size;     // per class: number of ranks
  int num_classes() const { return static_cast<int>(representative.size()); }
};

// The slots each role's ops use, derived once and shared with the engine.
struct SlotUse {
  std::vector<std::vector<int>> all;    // per role: ascending, unique
  std::vector<std::vector<int>> peers;  // per role: the peer slots among `all`
};
SlotUse slots_used_by_role(const ExecutionGraph& g);

// Identity plan (every rank its own class) when `fold` is false, or when the
// refinement has not reached its fixpoint after kMaxRefinementRounds. Each
// rank of `singletons` (live ranks, whose timing comes from outside) starts
// in a class of its own, and the refinement splits whoever it can touch.
// `tags` (per rank, or empty) split classes as overrides do.
FoldPlan plan_folding(const ExecutionGraph& g, const SlotUse& used, bool fold,
                      const std::vector<Rank>& singletons = {},
                      const std::vector<std::int64_t>& tags = {});
inline FoldPlan plan_folding(const ExecutionGraph& g, bool fold) {
  return plan_folding(g, slots_used_by_role(g), fold);
}

}  // namespace prism
