// Property: a history the allocator model records itself (random mallocs on
// three streams, frees, record-stream frees completed in any order,
// empty_cache(), and out-of-memory on a small device) replays through the
// model event for event, with the same peaks and the same end state. This
// checks how the replay infers the calls behind a trace; the hand-crafted
// snapshots check the model against torch.
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "mem/snapshot_replay.h"

namespace prism {
namespace {

constexpr std::int64_t kMiB = 1 << 20;

struct Recording {
  MemoryTrace trace;
  AllocatorStats stats;
};

std::int64_t random_size(std::mt19937_64& rng) {
  switch (rng() % 4) {
    case 0:
      return 1 + static_cast<std::int64_t>(rng() % kMiB);  // small pool
    case 1:
      return kMiB + 1 + static_cast<std::int64_t>(rng() % (9 * kMiB));  // 20 MiB segments
    case 2:
      return 10 * kMiB + static_cast<std::int64_t>(rng() % (90 * kMiB));
    default:  // sizes that repeat, as a training step's do
      return (1 + static_cast<std::int64_t>(rng() % 4)) * 8 * kMiB;
  }
}

Recording record(const AllocatorConfig& config, std::int64_t capacity, std::uint64_t seed) {
  SimulatedDevice device(capacity);
  CachingAllocator allocator(config, &device);
  Recording rec;
  allocator.set_observer([&](const AllocatorEvent& e) {
    rec.trace.events.push_back({e, rec.trace.events.size()});
  });
  std::mt19937_64 rng(seed);
  std::vector<BlockId> live;
  std::vector<std::uint64_t> pending;
  for (int step = 0; step < 600; ++step) {
    const int r = static_cast<int>(rng() % 100);
    if (r < 45 || live.empty()) {
      const std::int64_t size = random_size(rng);
      const auto stream = static_cast<StreamId>(rng() % 3) * 7;
      const BlockId b = allocator.malloc(size, stream);
      if (b != kOutOfMemory) live.push_back(b);
    } else if (r < 82) {
      const std::size_t i = rng() % live.size();
      if (rng() % 4 == 0) {
        pending.push_back(allocator.free_deferred(live[i]));
      } else {
        allocator.free(live[i]);
      }
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (r < 95 && !pending.empty()) {
      const std::size_t i = rng() % pending.size();
      allocator.complete_free(pending[i]);
      pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (r < 98) {
      allocator.empty_cache();
      pending.clear();  // completed by the empty_cache
    }
  }
  rec.trace.num_entries = rec.trace.events.size();
  rec.trace.has_final_segments = true;
  rec.trace.final_segments = torch_segments(allocator.segments());
  rec.stats = allocator.stats();
  return rec;
}

void expect_replays_exactly(const AllocatorConfig& config, std::int64_t capacity) {
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    const Recording rec = record(config, capacity, seed);
    SnapshotReplayOptions options;
    options.config = config;
    options.capacity = capacity;
    const Result<SnapshotReplayResult> r = replay_memory_trace(rec.trace, options);
    ASSERT_TRUE(r.is_ok()) << "seed " << seed << ": " << r.status().message();
    ASSERT_TRUE(r->events_match())
        << "seed " << seed << ": " << describe_divergence(*r->divergence);
    EXPECT_EQ(r->matched, rec.trace.events.size());
    EXPECT_EQ(r->recorded.allocated_peak, rec.stats.allocated_peak) << "seed " << seed;
    EXPECT_EQ(r->recorded.reserved_peak, rec.stats.reserved_peak) << "seed " << seed;
    EXPECT_TRUE(r->peaks_match()) << "seed " << seed;
    EXPECT_TRUE(r->segments_match()) << "seed " << seed << ": " << r->segments_difference;
    EXPECT_EQ(r->modelled.num_ooms, rec.stats.num_ooms) << "seed " << seed;
  }
}

TEST(SnapshotReplayPropertyTest, DefaultSettings) {
  expect_replays_exactly(AllocatorConfig{}, 600 * kMiB);
}

TEST(SnapshotReplayPropertyTest, MaxSplitSize) {
  AllocatorConfig c;
  c.max_split_size = 32 * kMiB;
  expect_replays_exactly(c, 600 * kMiB);
}

TEST(SnapshotReplayPropertyTest, RoundupPowerOfTwoDivisions) {
  AllocatorConfig c;
  c.roundup_power2_divisions.fill(4);
  expect_replays_exactly(c, 600 * kMiB);
}

TEST(SnapshotReplayPropertyTest, ExpandableSegments) {
  AllocatorConfig c;
  c.expandable_segments = true;
  expect_replays_exactly(c, 600 * kMiB);
  expect_replays_exactly(c, 250 * kMiB);
}

TEST(SnapshotReplayPropertyTest, ExpandableSegmentsAndMaxSplitSize) {
  AllocatorConfig c;
  c.expandable_segments = true;
  c.max_split_size = 48 * kMiB;
  expect_replays_exactly(c, 300 * kMiB);
}

}  // namespace
}  // namespace prism
