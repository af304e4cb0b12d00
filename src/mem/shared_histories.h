// SharedHistories: the memory states of many ranks, one state per history of
// calls rather than one per rank. In a replay the ranks of one role make the
// same allocator calls in the same order (unless a straggler, jitter or a
// what-if makes them diverge), so the first rank to make a call applies it
// and records (call, result); the others find their next call recorded and
// take the result. This is exact: a rank's state is a function of its
// calls alone (mem/rank_memory.h).
//
// A history holds the state at its head (after every recorded call) and, while
// another rank lags behind or may still join, the state at its base (the
// lowest position anything stands at) plus the calls from base to head. A rank
// whose next call differs from the recorded one branches off: its state is
// the base state with the recorded calls up to its position replayed, then
// its own call. Ranks that diverge at the same position with the same call
// share the branch; the branch keeps a hold on its start for them while the
// parent has ranks at or before the fork. Each recorded call is applied
// twice (head and base), once however many ranks follow it.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "mem/rank_memory.h"

namespace prism {

class SharedHistories {
 public:
  // `num_ranks` ranks in `initial`'s state, all on one history.
  void reset(int num_ranks, const RankMemory& initial);
  // Applies `call` to `rank`'s state; returns RankMemory::apply's result.
  bool apply(int rank, const MemoryCall& call);

  MemoryUsage usage(int rank) const;
  MemoryPeaks peaks(int rank) const;
  OomInfo oom(int rank) const;
  // Histories that ranks follow or may still join (for tests).
  int num_live_histories() const;

 private:
  // A recorded call with its result and the state's figures after it.
  struct Entry {
    MemoryCall call;
    bool ok = false;
    MemoryUsage usage;
    MemoryPeaks peaks;
  };
  struct History {
    std::unique_ptr<RankMemory> head;  // after every call of the history
    // At `base`; null when one rank alone follows the history (at its head).
    std::unique_ptr<RankMemory> tail;
    std::uint64_t base = 0;
    std::deque<Entry> log;         // the calls from base to head
    std::deque<std::uint32_t> at;  // ranks (and the hold) at base + i; log.size() + 1
    std::uint32_t followers = 0;   // ranks on this history
    bool hold = false;             // ranks of the parent may still join at 0
    std::int32_t parent = -1;
    std::uint64_t fork = 0;  // the parent's position this history starts at
    // Branches ranks may still join, by fork position.
    std::multimap<std::uint64_t, std::int32_t> children;

    std::uint64_t head_position() const { return base + log.size(); }
    std::uint32_t present() const { return followers + (hold ? 1 : 0); }
  };

  // Moves `rank` one call forward on history `h`.
  void step(std::int32_t h, int rank);
  // Catches the base up with the lowest position anything stands at.
  void advance_base(std::int32_t h);
  void release_hold(std::int32_t h);
  // A branch of `h` at `position` whose first call is `call`, or -1.
  std::int32_t find_branch(const History& h, std::uint64_t position, const MemoryCall& call) const;
  // A new branch of `h` at `position`, where `rank` stands.
  std::int32_t branch(std::int32_t h, std::uint64_t position);
  void move_to(int rank, std::int32_t to);
  // The state of a rank at `position` of `h`.
  std::unique_ptr<RankMemory> state_at(const History& h, std::uint64_t position) const;

  std::deque<History> histories_;  // a deque: references stay valid as it grows
  std::vector<std::int32_t> history_of_;
  std::vector<std::uint64_t> position_;
};

}  // namespace prism
