// Engine set-up: per-role tables, simulated ranks, communicators and the
// point-to-point channels, all derived once before the event loop runs.
#include <algorithm>
#include <map>

#include "replay/engine.h"
#include "replay/nccl_memory.h"

namespace prism {

Engine::Engine(const ExecutionGraph& g, const ReplayOptions& options, const ReplayModels& models,
               LiveListener* listener)
    : g_(g),
      options_(options),
      models_(models),
      listener_(listener),
      resolver_(g.resolver()),
      used_(slots_used_by_role(g)),
      fold_(plan_folding(g, used_, options.fold && options.jitter_ppm == 0, options.live_ranks,
                         options.fold_tags)) {
  PRISM_CHECK(listener != nullptr || options.live_ranks.empty(), "live ranks need a listener");
  build_role_tables();
  build_sim_ranks();
  build_communicators();
  build_p2p_sequences();
  release_waits_.resize(streams_.size());
  models_.memory->reset(static_cast<int>(sranks_.size()));
  if (models_.nccl != nullptr) models_.nccl->reset(static_cast<int>(sranks_.size()));
}

void Engine::build_role_tables() {
  tables_.resize(g_.roles.size());
  for (std::size_t r = 0; r < g_.roles.size(); ++r) {
    const Role& role = g_.roles[r];
    RoleTables& t = tables_[r];
    t.stream_ops.resize(role.streams.size());
    t.dep_index.assign(role.ops.size(), kNone);
    for (std::size_t i = 0; i < role.ops.size(); ++i)
      t.stream_ops[role.ops[i].stream].push_back(static_cast<std::int32_t>(i));
    for (std::int32_t d : role.deps)
      if (t.dep_index[d] == kNone) t.dep_index[d] = t.num_dep_targets++;
    t.comm_index.assign(role.ops.size(), kNone);
    std::vector<std::int32_t> per_slot(g_.slots.size(), 0);
    t.record_wait_begin.reserve(role.ops.size() + 1);
    for (std::size_t i = 0; i < role.ops.size(); ++i) {
      t.record_wait_begin.push_back(static_cast<std::uint32_t>(t.record_waits.size()));
      const Op& op = role.ops[i];
      if (op.kind == OpKind::kCollective) t.comm_index[i] = per_slot[op.ref]++;
      if (op.kind == OpKind::kSend || op.kind == OpKind::kRecv) t.comm_index[i] = t.num_p2p++;
      if (op.kind == OpKind::kFree && op.arg != 0) {
        for (std::uint16_t st = 0; st < role.streams.size() && st <= kMaxRecordStream; ++st) {
          if (st == op.stream || (op.arg & (1 << st)) == 0) continue;
          const auto& list = t.stream_ops[st];
          const auto before = static_cast<std::uint32_t>(
              std::lower_bound(list.begin(), list.end(), static_cast<std::int32_t>(i)) -
              list.begin());
          if (before > 0) t.record_waits.emplace_back(st, before);
        }
      }
    }
    t.record_wait_begin.push_back(static_cast<std::uint32_t>(t.record_waits.size()));
  }
}

void Engine::build_sim_ranks() {
  std::vector<bool> traced_class(fold_.num_classes(), false);
  for (Rank r : options_.trace_ranks) {
    PRISM_CHECK(r >= 0 && r < g_.world_size(), "trace rank out of range");
    traced_class[fold_.class_of_rank[r]] = true;
  }
  sranks_.resize(fold_.num_classes());
  std::uint32_t streams = 0, deps = 0, p2p = 0;
  for (int c = 0; c < fold_.num_classes(); ++c) {
    SimRank& sr = sranks_[c];
    sr.rank = fold_.representative[c];
    sr.role = g_.role_of_rank[sr.rank];
    sr.scale_ppm = g_.compute_scale_ppm(sr.rank);
    sr.first_stream = streams;
    sr.first_dep = deps;
    sr.first_slot = static_cast<std::uint32_t>(c * g_.slots.size());
    sr.first_p2p = p2p;
    sr.traced = traced_class[c];
    sr.live = std::find(options_.live_ranks.begin(), options_.live_ranks.end(), sr.rank) !=
              options_.live_ranks.end();
    sr.failed =
        std::binary_search(options_.failed_ranks.begin(), options_.failed_ranks.end(), sr.rank);
    p2p += static_cast<std::uint32_t>(tables_[sr.role].num_p2p);
    streams += static_cast<std::uint32_t>(g_.roles[sr.role].streams.size());
    deps += static_cast<std::uint32_t>(tables_[sr.role].num_dep_targets);
  }
  for (Rank r : options_.failed_ranks)
    PRISM_CHECK(sranks_[fold_.class_of_rank[r]].rank == r, "a failed rank folded with another");
  streams_.resize(streams);
  dep_done_.assign(deps, SimTime::never());
  p2p_seq_.resize(p2p);
}

// One communicator per distinct (slot, set of member classes). Unfolded, the
// classes are the ranks and this is the real group; folded, all groups whose
// members fall in the same classes behave alike and share one rendezvous.
// Each real group is expanded once, however many simulated ranks it holds.
void Engine::build_communicators() {
  const std::size_t num_slots = g_.slots.size();
  comm_of_slot_.assign(sranks_.size() * num_slots, kNone);
  std::map<std::pair<int, std::vector<std::int32_t>>, std::int32_t> index;
  std::vector<std::vector<std::int32_t>> by_group(num_slots);  // group id -> communicator
  std::vector<Rank> members;
  for (std::uint32_t s = 0; s < sranks_.size(); ++s) {
    const SimRank& sr = sranks_[s];
    for (int slot : used_.all[sr.role]) {
      if (g_.slots[slot].kind != CommSlot::Kind::kGroup) continue;
      auto& cache = by_group[slot];
      if (cache.empty()) {
        const auto& table = g_.slots[slot].explicit_groups;
        cache.assign(table.empty() ? g_.world_size() : table.size(), kNone);
      }
      const std::int64_t gid = resolver_.group_id(slot, sr.rank);
      if (cache[gid] == kNone) {
        resolver_.members(slot, sr.rank, &members);
        std::vector<std::int32_t> classes;
        std::int64_t ranks_in_classes = 0;
        for (Rank m : members) classes.push_back(fold_.class_of_rank[m]);
        std::sort(classes.begin(), classes.end());
        classes.erase(std::unique(classes.begin(), classes.end()), classes.end());
        for (std::int32_t c : classes) ranks_in_classes += fold_.class_size[c];
        auto [it, inserted] =
            index.try_emplace({slot, classes}, static_cast<std::int32_t>(comms_.size()));
        if (inserted) {
          const int multiplicity = static_cast<int>(ranks_in_classes / std::ssize(members));
          comms_.emplace_back(slot, std::move(classes), members, multiplicity);
          comms_.back().set_layout(g_.layout);
        }
        cache[gid] = it->second;
      }
      comm_of_slot_[sr.first_slot + slot] = cache[gid];
    }
  }
}

// Numbers every send and receive within its channel in issue order, so that
// the n-th send pairs with the n-th receive whichever stream gets there first.
void Engine::build_p2p_sequences() {
  // (direction, channel) -> ops numbered so far; the channel includes the
  // tag. A rank has a handful of channels: a vector scanned beats a tree.
  struct Count {
    bool is_send;
    P2PRendezvous::Key key;
    std::int32_t n;
  };
  std::vector<Count> n;
  for (std::uint32_t s = 0; s < sranks_.size(); ++s) {
    const SimRank& sr = sranks_[s];
    const Role& role = g_.roles[sr.role];
    const RoleTables& t = tables_[sr.role];
    if (t.num_p2p == 0) continue;
    n.clear();
    for (std::size_t i = 0; i < role.ops.size(); ++i) {
      const Op& op = role.ops[i];
      if (op.kind != OpKind::kSend && op.kind != OpKind::kRecv) continue;
      Rank peer = kNone;
      const P2PRendezvous::Key k = p2p_channel(s, op, &peer);
      const bool is_send = op.kind == OpKind::kSend;
      auto it = std::find_if(n.begin(), n.end(),
                             [&](const Count& c) { return c.is_send == is_send && c.key == k; });
      if (it == n.end()) it = n.insert(n.end(), Count{is_send, k, 0});
      p2p_seq_[sr.first_p2p + t.comm_index[i]] = it->n++;
    }
  }
}

// The channel of send/recv `op` of simulated rank `s`; `peer` gets the real
// peer of the rank's representative.
P2PRendezvous::Key Engine::p2p_channel(std::uint32_t s, const Op& op, Rank* peer) const {
  const SimRank& sr = sranks_[s];
  *peer = resolver_.peer(op.ref, sr.rank);
  PRISM_CHECK(*peer != kNone, "peer slot does not resolve (graph not validated?)");
  const std::int32_t self = static_cast<std::int32_t>(s);
  const std::int32_t other = fold_.class_of_rank[*peer];
  if (op.kind == OpKind::kSend) return {self, other, op.arg, p2p_route(sr.rank, *peer)};
  return {other, self, op.arg, p2p_route(*peer, sr.rank)};
}

// Folded, one channel between two simulated ranks may stand for several real
// pairs: a rank whose "+1" and "+2" ring peers share a class sends to both.
// Messages pair only within one real pair, named by the lowest peer slot
// through which the sender reaches the receiver; folding makes that slot the
// same for every rank of a class (replay/folding.h). Unfolded, the simulated
// ranks are the real pair already.
std::int32_t Engine::p2p_route(Rank sender, Rank receiver) const {
  if (!options_.fold) return 0;
  for (int t : used_.peers[g_.role_of_rank[sender]])
    if (resolver_.peer(t, sender) == receiver) return t;
  PRISM_CHECK(false, "no peer slot of the sender reaches the receiver");
  return kNone;
}

}  // namespace prism
