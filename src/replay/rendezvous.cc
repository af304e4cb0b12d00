#include "replay/rendezvous.h"

#include <algorithm>
#include <tuple>
#include <utility>

namespace prism {

CollectiveRendezvous::CollectiveRendezvous(int slot, std::vector<std::int32_t> members,
                                           std::vector<Rank> real_ranks, int multiplicity)
    : slot_(slot),
      members_(std::move(members)),
      real_ranks_(std::move(real_ranks)),
      multiplicity_(multiplicity),
      ring_(4) {}

void CollectiveRendezvous::set_layout(const Layout& layout) {
  geometry_ = group_geometry(layout, real_ranks_);
}

const CollectiveRendezvous::Pending& CollectiveRendezvous::slot_for(std::int64_t seq) const {
  const Pending& p = ring_[static_cast<std::size_t>(seq) % ring_.size()];
  PRISM_CHECK(p.seq == seq, "collective sequence not in flight");
  return p;
}

CollectiveRendezvous::Pending& CollectiveRendezvous::slot_for(std::int64_t seq) {
  PRISM_CHECK(seq >= base_, "collective sequence already released");
  if (seq - base_ >= static_cast<std::int64_t>(ring_.size())) {
    // Grow the ring until `seq` fits, keeping every live entry at its new
    // position (live entries lie in [base_, base_ + old size), so they stay
    // distinct modulo any larger size).
    std::size_t size = ring_.size();
    while (seq - base_ >= static_cast<std::int64_t>(size)) size *= 2;
    std::vector<Pending> bigger(size);
    for (Pending& p : ring_)
      if (p.seq >= 0) bigger[static_cast<std::size_t>(p.seq) % size] = std::move(p);
    ring_ = std::move(bigger);
  }
  Pending& p = ring_[static_cast<std::size_t>(seq) % ring_.size()];
  if (p.seq != seq) {
    PRISM_CHECK(p.seq < 0, "collective ring slot still in use");
    p.seq = seq;
    p.done = false;
    p.arrivals.clear();
  }
  return p;
}

bool CollectiveRendezvous::arrive(std::int64_t seq, const Arrival& a) {
  Pending& p = slot_for(seq);
  p.arrivals.push_back(a);
  return p.arrivals.size() == members_.size();
}

void CollectiveRendezvous::release(std::int64_t seq) {
  slot_for(seq).done = true;
  // Collectives issued on different streams may finish out of order; the ring
  // moves past a sequence number only once it and all before it are done (a
  // number nobody has reached yet is not done).
  for (;;) {
    Pending& head = ring_[static_cast<std::size_t>(base_) % ring_.size()];
    if (head.seq != base_ || !head.done) break;
    head.seq = -1;
    head.done = false;
    head.arrivals.clear();
    ++base_;
  }
}

std::vector<std::int64_t> CollectiveRendezvous::incomplete() const {
  std::vector<std::int64_t> out;
  for (const Pending& p : ring_)
    if (p.seq >= 0 && !p.done && p.arrivals.size() < members_.size()) out.push_back(p.seq);
  std::sort(out.begin(), out.end());
  return out;
}

bool P2PRendezvous::post(bool is_send, const Key& k, std::int64_t seq, const Arrival& a, Match* m) {
  Channel& c = channels_[k];
  auto& other = is_send ? c.recvs : c.sends;
  for (std::size_t i = 0; i < other.size(); ++i) {
    if (other[i].first != seq) continue;
    *m = is_send ? Match{a, other[i].second} : Match{other[i].second, a};
    other[i] = other.back();
    other.pop_back();
    return true;
  }
  auto& mine = is_send ? c.sends : c.recvs;
  for (const auto& [s, unused] : mine) PRISM_CHECK(s != seq, "point-to-point op posted twice");
  mine.emplace_back(seq, a);
  return false;
}

std::vector<P2PRendezvous::Unmatched> P2PRendezvous::unmatched() const {
  std::vector<Unmatched> out;
  for (const auto& [k, c] : channels_) {
    for (const auto& [seq, a] : c.sends) out.push_back({true, k, a});
    for (const auto& [seq, a] : c.recvs) out.push_back({false, k, a});
  }
  std::sort(out.begin(), out.end(), [](const Unmatched& a, const Unmatched& b) {
    return std::tie(a.arrival.srank, a.arrival.stream, a.arrival.op) <
           std::tie(b.arrival.srank, b.arrival.stream, b.arrival.op);
  });
  return out;
}

}  // namespace prism
