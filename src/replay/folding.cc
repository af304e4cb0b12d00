#include "replay/folding.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "util/check.h"

namespace prism {
namespace {

using Key = std::vector<std::int64_t>;

// Interns keys to dense ids in first-seen order, so numbering only depends on
// the order ranks are visited (ascending), never on hashing.
class Interner {
 public:
  std::int32_t id(const Key& k) {
    auto [it, inserted] = ids_.try_emplace(k, static_cast<std::int32_t>(ids_.size()));
    return it->second;
  }
  std::size_t size() const { return ids_.size(); }

 private:
  std::map<Key, std::int32_t> ids_;
};

// Initial colours: role, overrides, the geometry of every used group slot
// (computed once per group), and for every used peer slot: whether the peer
// shares the node, which of the rank's other peer slots reach the same rank,
// and which of the peer's slots point back at the rank. The last two make
// point-to-point pairing the same across a class: without them a fan-in
// (two senders, one receiver with a slot per sender) or a crossed pair of
// tables would fold ranks whose messages pair differently.
std::vector<std::int32_t> initial_colours(const ExecutionGraph& g, const SlotUse& used,
                                          const std::vector<Rank>& singletons,
                                          const std::vector<std::int64_t>& tags) {
  const SlotResolver res = g.resolver();
  Interner geometries;
  std::vector<std::vector<std::int32_t>> geometry_of_group(g.slots.size());
  Interner interner;
  std::vector<std::int32_t> colour(g.world_size());
  std::vector<Rank> members;
  for (Rank r = 0; r < g.world_size(); ++r) {
    const int role = g.role_of_rank[r];
    const bool single = std::find(singletons.begin(), singletons.end(), r) != singletons.end();
    Key key{role, g.compute_scale_ppm(r), single ? r : -1, tags.empty() ? 0 : tags[r]};
    std::vector<Rank> peers;
    for (int s : used.all[role]) {
      if (g.slots[s].kind == CommSlot::Kind::kGroup) {
        auto& cache = geometry_of_group[s];
        if (cache.empty()) {
          const auto& table = g.slots[s].explicit_groups;
          cache.assign(table.empty() ? g.world_size() : table.size(), kNone);
        }
        const std::int64_t gid = res.group_id(s, r);
        if (cache[gid] == kNone) {
          res.members(s, r, &members);
          const GroupGeometry geo = group_geometry(g.layout, members);
          cache[gid] = geometries.id({geo.num_ranks, geo.num_nodes, geo.max_ranks_per_node});
        }
        key.push_back(cache[gid]);
        continue;
      }
      const Rank p = res.peer(s, r);
      peers.push_back(p);
      if (p == kNone) {
        key.push_back(-1);
        continue;
      }
      key.push_back(g.layout.node_of(p) == g.layout.node_of(r) ? 1 : 0);
      // The peer's used peer slots that reach r, as a counted list.
      const std::size_t count_at = key.size();
      key.push_back(0);
      for (int t : used.peers[g.role_of_rank[p]]) {
        if (res.peer(t, p) != r) continue;
        key.push_back(t);
        ++key[count_at];
      }
    }
    for (std::size_t i = 0; i < peers.size(); ++i)
      for (std::size_t j = i + 1; j < peers.size(); ++j) key.push_back(peers[i] == peers[j]);
    colour[r] = interner.id(key);
  }
  return colour;
}

// One refinement round: a rank's new colour is its old colour plus its
// partners' colours per used slot.
std::vector<std::int32_t> refine(const ExecutionGraph& g, const SlotUse& used,
                                 const std::vector<std::int32_t>& colour) {
  const SlotResolver res = g.resolver();
  // Per group slot, the multiset of member colours of each group, interned;
  // computed once per group (keyed by group id) rather than once per member.
  std::vector<std::vector<std::int32_t>> group_sig(g.slots.size());
  Interner multisets;
  std::vector<Rank> members;
  Interner interner;
  std::vector<std::int32_t> next(g.world_size());
  for (Rank r = 0; r < g.world_size(); ++r) {
    const int role = g.role_of_rank[r];
    Key key{colour[r]};
    for (int s : used.all[role]) {
      if (g.slots[s].kind == CommSlot::Kind::kPeer) {
        const Rank p = res.peer(s, r);
        key.push_back(p == kNone ? -1 : colour[p]);
        continue;
      }
      const std::int64_t gid = res.group_id(s, r);
      auto& sig = group_sig[s];
      if (sig.empty()) {
        const std::size_t n =
            g.slots[s].explicit_groups.empty() ? g.world_size() : g.slots[s].explicit_groups.size();
        sig.assign(n, kNone);
      }
      if (sig[gid] == kNone) {
        res.members(s, r, &members);
        Key ms;
        for (Rank m : members) ms.push_back(colour[m]);
        std::sort(ms.begin(), ms.end());
        sig[gid] = multisets.id(ms);
      }
      key.push_back(sig[gid]);
    }
    next[r] = interner.id(key);
  }
  return next;
}

int count_colours(const std::vector<std::int32_t>& c) {
  return c.empty() ? 0 : *std::max_element(c.begin(), c.end()) + 1;
}

}  // namespace

SlotUse slots_used_by_role(const ExecutionGraph& g) {
  SlotUse use;
  use.all.resize(g.roles.size());
  use.peers.resize(g.roles.size());
  for (std::size_t i = 0; i < g.roles.size(); ++i) {
    std::vector<int>& all = use.all[i];
    for (const Op& op : g.roles[i].ops)
      if (is_communication(op.kind)) all.push_back(op.ref);
    std::sort(all.begin(), all.end());
    all.erase(std::unique(all.begin(), all.end()), all.end());
    for (int s : all)
      if (g.slots[s].kind == CommSlot::Kind::kPeer) use.peers[i].push_back(s);
  }
  return use;
}

FoldPlan plan_folding(const ExecutionGraph& g, const SlotUse& used, bool fold,
                      const std::vector<Rank>& singletons, const std::vector<std::int64_t>& tags) {
  FoldPlan plan;
  const int n = g.world_size();
  PRISM_CHECK(tags.empty() || std::ssize(tags) == n, "one fold tag per rank");
  if (!fold) {
    plan.class_of_rank.resize(n);
    std::iota(plan.class_of_rank.begin(), plan.class_of_rank.end(), 0);
  } else {
    std::vector<std::int32_t> colour = initial_colours(g, used, singletons, tags);
    // Each round either splits a class or reaches the fixpoint. A difference
    // spreads one hop per round, so a long chain (a ring of thousands of
    // ranks with one straggler) needs rounds in proportion to its length,
    // and by then nearly every rank is its own class anyway: past
    // kMaxRefinementRounds, fold nothing (always exact, never quadratic).
    bool converged = false;
    int classes = count_colours(colour);
    for (int round = 0; round < kMaxRefinementRounds && !converged; ++round) {
      colour = refine(g, used, colour);
      const int now = count_colours(colour);
      converged = now == classes;
      classes = now;
    }
    if (converged) {
      plan.class_of_rank = std::move(colour);
    } else {
      plan.class_of_rank.resize(n);
      std::iota(plan.class_of_rank.begin(), plan.class_of_rank.end(), 0);
    }
  }
  const int k = count_colours(plan.class_of_rank);
  plan.representative.assign(k, kNone);
  plan.class_size.assign(k, 0);
  for (Rank r = 0; r < n; ++r) {
    const std::int32_t c = plan.class_of_rank[r];
    if (plan.representative[c] == kNone) plan.representative[c] = r;
    ++plan.class_size[c];
  }
  return plan;
}

}  // namespace prism
