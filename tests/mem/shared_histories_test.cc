// SharedHistories against one RankMemory per rank: whatever the ranks' calls
// and their interleaving, every result, usage, peak and OOM report is the
// one the rank's own state gives.
#include "mem/shared_histories.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <random>
#include <set>
#include <vector>

#include <gtest/gtest.h>

namespace prism {
namespace {

constexpr std::int64_t kMiB = 1 << 20;

MemoryCall alloc(std::int64_t id, std::int64_t bytes, std::int32_t stream = 0) {
  return MemoryCall{MemoryCall::Kind::kAlloc, stream, id, bytes};
}
MemoryCall free_now(std::int64_t id) {
  return MemoryCall{MemoryCall::Kind::kFree, 0, id, 0};
}

DeviceMemoryOptions small_device() {
  DeviceMemoryOptions o;
  o.capacity = Bytes{96 * kMiB};
  o.context = Bytes{4 * kMiB};
  return o;
}

void expect_same(const MemoryUsage& a, const MemoryUsage& b) {
  EXPECT_EQ(a.allocated.count, b.allocated.count);
  EXPECT_EQ(a.reserved.count, b.reserved.count);
  EXPECT_EQ(a.external.count, b.external.count);
}

void expect_same(const MemoryPeaks& a, const MemoryPeaks& b) {
  EXPECT_EQ(a.requested.count, b.requested.count);
  EXPECT_EQ(a.allocated.count, b.allocated.count);
  EXPECT_EQ(a.reserved.count, b.reserved.count);
  EXPECT_EQ(a.device.count, b.device.count);
  EXPECT_EQ(a.cached_at_reserved_peak.count, b.cached_at_reserved_peak.count);
  EXPECT_EQ(a.inactive_split.count, b.inactive_split.count);
}

TEST(SharedHistoriesTest, RanksMakingTheSameCallsShareOneState) {
  SharedHistories h;
  h.reset(4, RankMemory(small_device()));
  for (int r = 0; r < 4; ++r) ASSERT_TRUE(h.apply(r, alloc(1, 3 * kMiB)));
  EXPECT_EQ(h.num_live_histories(), 1);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(h.usage(r).allocated.count, 3 * kMiB);
}

TEST(SharedHistoriesTest, ADivergingRankBranchesAndLaggingRanksKeepTheirState) {
  SharedHistories h;
  h.reset(3, RankMemory(small_device()));
  ASSERT_TRUE(h.apply(0, alloc(1, 3 * kMiB)));
  ASSERT_TRUE(h.apply(0, alloc(2, 5 * kMiB)));
  // Rank 1 lags by two calls, rank 2 by one and then departs from rank 0.
  ASSERT_TRUE(h.apply(2, alloc(1, 3 * kMiB)));
  EXPECT_EQ(h.usage(1).allocated.count, 0);
  EXPECT_EQ(h.usage(2).allocated.count, 3 * kMiB);
  ASSERT_TRUE(h.apply(2, alloc(2, 7 * kMiB)));
  EXPECT_EQ(h.num_live_histories(), 2);
  EXPECT_EQ(h.usage(0).allocated.count, 8 * kMiB);
  EXPECT_EQ(h.usage(2).allocated.count, 10 * kMiB);
  // Rank 1 makes rank 2's second call: it joins rank 2's branch.
  ASSERT_TRUE(h.apply(1, alloc(1, 3 * kMiB)));
  ASSERT_TRUE(h.apply(1, alloc(2, 7 * kMiB)));
  EXPECT_EQ(h.usage(1).allocated.count, 10 * kMiB);
  // Nothing stands before the fork any more: rank 0's history and the
  // branch of ranks 1 and 2 are all there is.
  EXPECT_EQ(h.num_live_histories(), 2);
}

TEST(SharedHistoriesTest, AFollowerGetsTheRecordedOutOfMemory) {
  SharedHistories h;
  h.reset(2, RankMemory(small_device()));
  EXPECT_FALSE(h.apply(0, alloc(1, 200 * kMiB)));
  EXPECT_FALSE(h.apply(1, alloc(1, 200 * kMiB)));
  EXPECT_EQ(h.oom(1).requested, 200 * kMiB);
  EXPECT_EQ(h.oom(0).requested, 200 * kMiB);
  // The failed alloc left nothing: the same id can be allocated again.
  ASSERT_TRUE(h.apply(1, alloc(1, kMiB)));
  EXPECT_EQ(h.oom(1).requested, 200 * kMiB);
  h.apply(1, free_now(1));
  EXPECT_EQ(h.usage(1).allocated.count, 0);
}

// A program of `length` valid calls: the first `split` drawn from
// `prefix_seed`, the rest from `suffix_seed`, so programs with the same
// prefix seed agree up to the smaller split and then (usually) differ.
std::vector<MemoryCall> program(unsigned prefix_seed, int split, unsigned suffix_seed, int length) {
  std::mt19937 rng(prefix_seed);
  std::vector<std::int64_t> live, pending;
  std::int64_t next_id = 1;
  std::vector<MemoryCall> calls;
  for (int i = 0; i < length; ++i) {
    if (i == split) rng.seed(suffix_seed);
    const int pick = static_cast<int>(rng() % 100);
    auto take = [&](std::vector<std::int64_t>& from) {
      const std::size_t k = rng() % from.size();
      const std::int64_t id = from[k];
      from.erase(from.begin() + static_cast<std::ptrdiff_t>(k));
      return id;
    };
    if (pick < 45 || live.empty()) {
      const std::int64_t sizes[] = {700, 300'000, 3 * kMiB, 11 * kMiB, 23 * kMiB};
      const std::int64_t bytes = sizes[rng() % 5] + static_cast<std::int64_t>(rng() % 4096);
      const auto stream = static_cast<std::int32_t>(rng() % 2);
      calls.push_back(alloc(next_id, bytes, stream));
      live.push_back(next_id++);  // an alloc that fails is never freed: see below
    } else if (pick < 75) {
      calls.push_back(free_now(take(live)));
    } else if (pick < 88) {
      const std::int64_t id = take(live);
      calls.push_back(MemoryCall{MemoryCall::Kind::kFreeDeferred, 0, id, 0});
      pending.push_back(id);
    } else if (pick < 96 && !pending.empty()) {
      calls.push_back(MemoryCall{MemoryCall::Kind::kRelease, 0, take(pending), 0});
    } else {
      calls.push_back(MemoryCall{MemoryCall::Kind::kExternal, 0, 0, 64 * 1024});
    }
  }
  return calls;
}

// Runs the programs' calls interleaved at random on SharedHistories and on
// one RankMemory per rank, comparing as it goes. A failed alloc ends its
// rank's program (as an OOM ends the replay), so later frees stay valid.
// Returns the number of failed allocs.
int check_against_private_states(const std::vector<std::vector<MemoryCall>>& programs,
                                 unsigned seed, int max_lag) {
  const auto n = static_cast<int>(programs.size());
  const DeviceMemoryOptions o = small_device();
  SharedHistories shared;
  shared.reset(n, RankMemory(o));
  std::vector<RankMemory> own(static_cast<std::size_t>(n), RankMemory(o));
  std::vector<std::size_t> next(static_cast<std::size_t>(n), 0);
  std::mt19937 rng(seed);
  int ooms = 0;
  std::set<int> running;
  for (int r = 0; r < n; ++r) running.insert(r);
  while (!running.empty()) {
    // Ranks advance at uneven speeds, but no further than max_lag calls
    // ahead of the slowest, as ranks of one replay do.
    std::size_t slowest = SIZE_MAX;
    for (int r : running) slowest = std::min(slowest, next[r]);
    auto it = running.begin();
    std::advance(it, static_cast<long>(rng() % running.size()));
    const int r = *it;
    if (next[r] > slowest + static_cast<std::size_t>(max_lag)) continue;
    const MemoryCall& call = programs[r][next[r]++];
    const bool ok = own[r].apply(call);
    EXPECT_EQ(shared.apply(r, call), ok) << "rank " << r << " call " << next[r] - 1;
    if (!ok && call.kind == MemoryCall::Kind::kAlloc) {
      ++ooms;
      EXPECT_EQ(shared.oom(r).requested, own[r].oom().requested);
      EXPECT_EQ(shared.oom(r).reserved, own[r].oom().reserved);
      running.erase(r);
    }
    if (next[r] == programs[r].size()) running.erase(r);
    const int q = static_cast<int>(rng() % static_cast<unsigned>(n));
    expect_same(shared.usage(q), own[q].usage());
    expect_same(shared.peaks(q), own[q].peaks());
  }
  for (int r = 0; r < n; ++r) {
    expect_same(shared.usage(r), own[r].usage());
    expect_same(shared.peaks(r), own[r].peaks());
  }
  return ooms;
}

TEST(SharedHistoriesTest, IdenticalProgramsGiveEachRankItsOwnFigures) {
  std::vector<std::vector<MemoryCall>> programs(8, program(1, 400, 1, 400));
  check_against_private_states(programs, 11, 5);
}

TEST(SharedHistoriesTest, DivergingProgramsGiveEachRankItsOwnFigures) {
  int ooms = 0;
  for (unsigned seed = 0; seed < 12; ++seed) {
    SCOPED_TRACE(seed);
    std::mt19937 rng(seed);
    std::vector<std::vector<MemoryCall>> programs;
    for (int r = 0; r < 10; ++r) {
      // Three families of programs, each with ranks that depart from it at
      // a few points, some in the same way.
      const unsigned family = static_cast<unsigned>(r % 3);
      const int split = 20 + static_cast<int>(rng() % 4) * 60;
      programs.push_back(program(100 + family, split, 200 + static_cast<unsigned>(rng() % 3), 300));
    }
    ooms += check_against_private_states(programs, seed, 1 + static_cast<int>(seed % 4) * 20);
  }
  EXPECT_GT(ooms, 0);  // the device is small enough for some
}

}  // namespace
}  // namespace prism
