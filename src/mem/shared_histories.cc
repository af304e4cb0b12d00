#include "mem/shared_histories.h"

#include "util/check.h"

namespace prism {

void SharedHistories::reset(int num_ranks, const RankMemory& initial) {
  histories_.clear();
  history_of_.assign(static_cast<std::size_t>(num_ranks), 0);
  position_.assign(static_cast<std::size_t>(num_ranks), 0);
  History& h = histories_.emplace_back();
  h.head = std::make_unique<RankMemory>(initial);
  if (num_ranks >= 2) h.tail = std::make_unique<RankMemory>(initial);
  h.followers = static_cast<std::uint32_t>(num_ranks);
  h.at.push_back(h.followers);
}

bool SharedHistories::apply(int rank, const MemoryCall& call) {
  for (;;) {
    const std::int32_t hi = history_of_[rank];
    History& h = histories_[hi];
    const std::uint64_t p = position_[rank];
    if (h.tail == nullptr) {
      // The rank is alone on its history, at its head: nothing to record.
      ++h.base;
      ++position_[rank];
      return h.head->apply(call);
    }
    if (p == h.head_position()) {
      const bool ok = h.head->apply(call);
      h.log.push_back(Entry{call, ok, h.head->usage(), h.head->peaks()});
      h.at.push_back(0);
      step(hi, rank);
      return ok;
    }
    const Entry& e = h.log[p - h.base];
    if (e.call == call) {
      const bool ok = e.ok;
      step(hi, rank);
      return ok;
    }
    std::int32_t to = find_branch(h, p, call);
    if (to < 0) to = branch(hi, p);
    move_to(rank, to);  // at the branch's start, where `call` is next
  }
}

void SharedHistories::step(std::int32_t h, int rank) {
  History& hist = histories_[h];
  const std::uint64_t p = position_[rank];
  --hist.at[p - hist.base];
  ++hist.at[p + 1 - hist.base];
  position_[rank] = p + 1;
  if (p == hist.base && hist.at.front() == 0) advance_base(h);
}

void SharedHistories::advance_base(std::int32_t h) {
  History& hist = histories_[h];
  while (hist.at.front() == 0 && !hist.log.empty()) {
    const Entry& e = hist.log.front();
    PRISM_CHECK(hist.tail->apply(e.call) == e.ok, "a shared memory history replayed differently");
    hist.log.pop_front();
    hist.at.pop_front();
    ++hist.base;
  }
  if (hist.log.empty() && hist.present() <= 1) hist.tail.reset();
  if (hist.present() == 0) hist.head.reset();
  // Branches forked before the base can no longer be joined.
  while (!hist.children.empty() && hist.children.begin()->first < hist.base) {
    const std::int32_t c = hist.children.begin()->second;
    hist.children.erase(hist.children.begin());
    release_hold(c);
  }
}

void SharedHistories::release_hold(std::int32_t h) {
  History& hist = histories_[h];
  hist.hold = false;
  --hist.at.front();  // the hold stands at 0, which is still the base
  advance_base(h);
}

std::int32_t SharedHistories::find_branch(const History& h, std::uint64_t position,
                                          const MemoryCall& call) const {
  const auto [begin, end] = h.children.equal_range(position);
  for (auto it = begin; it != end; ++it) {
    const History& b = histories_[it->second];
    if (b.log.front().call == call) return it->second;
  }
  return -1;
}

std::int32_t SharedHistories::branch(std::int32_t h, std::uint64_t position) {
  History& parent = histories_[h];
  // Anything else at or before the fork may make the same call there.
  const bool hold = parent.base < position || parent.at.front() >= 2;
  std::unique_ptr<RankMemory> state = state_at(parent, position);
  const auto id = static_cast<std::int32_t>(histories_.size());
  History& b = histories_.emplace_back();
  b.parent = h;
  b.fork = position;
  b.hold = hold;
  b.at.push_back(hold ? 1 : 0);
  if (hold) {
    b.tail = std::make_unique<RankMemory>(*state);
    parent.children.emplace(position, id);
  }
  b.head = std::move(state);
  return id;
}

void SharedHistories::move_to(int rank, std::int32_t to) {
  History& target = histories_[to];
  PRISM_CHECK(target.base == 0, "a rank joins a history past its start");
  ++target.followers;
  ++target.at.front();
  const std::int32_t from = history_of_[rank];
  const std::uint64_t p = position_[rank];
  history_of_[rank] = to;
  position_[rank] = 0;
  History& source = histories_[from];
  --source.followers;
  --source.at[p - source.base];
  advance_base(from);
}

std::unique_ptr<RankMemory> SharedHistories::state_at(const History& h,
                                                      std::uint64_t position) const {
  if (position == h.head_position()) return std::make_unique<RankMemory>(*h.head);
  auto s = std::make_unique<RankMemory>(*h.tail);
  for (std::uint64_t i = h.base; i < position; ++i) s->apply(h.log[i - h.base].call);
  return s;
}

MemoryUsage SharedHistories::usage(int rank) const {
  const History& h = histories_[history_of_[rank]];
  const std::uint64_t p = position_[rank];
  if (p == h.head_position()) return h.head->usage();
  if (p == h.base) return h.tail->usage();
  return h.log[p - h.base - 1].usage;
}

MemoryPeaks SharedHistories::peaks(int rank) const {
  const History& h = histories_[history_of_[rank]];
  const std::uint64_t p = position_[rank];
  if (p == h.head_position()) return h.head->peaks();
  if (p == h.base) return h.tail->peaks();
  return h.log[p - h.base - 1].peaks;
}

OomInfo SharedHistories::oom(int rank) const {
  const History& h = histories_[history_of_[rank]];
  const std::uint64_t p = position_[rank];
  if (p == h.head_position()) return h.head->oom();
  return state_at(h, p)->oom();
}

int SharedHistories::num_live_histories() const {
  int n = 0;
  for (const History& h : histories_) n += h.head != nullptr ? 1 : 0;
  return n;
}

}  // namespace prism
