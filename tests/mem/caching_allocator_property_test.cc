// Seeded random traces under several configurations, with the allocator's
// invariants checked after every operation.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "caching_allocator_test_util.h"
#include "mem/caching_allocator.h"

namespace prism {
namespace {

using namespace prism::testing;  // NOLINT(google-build-using-namespace)
using State = SegmentInfo::Block::State;

struct Live {
  BlockId id;
  std::int64_t requested;
};

// Everything that must hold between operations, from the segment listing,
// the stats, the device and the live handles.
void check_invariants(const CachingAllocator& a, const SimulatedDevice& dev,
                      const std::vector<Live>& live, int step) {
  SCOPED_TRACE("step " + std::to_string(step));
  ASSERT_EQ(a.check_internal_state(), "");
  const std::vector<SegmentInfo> segs = a.segments();
  std::int64_t allocated = 0, active = 0, requested = 0, reserved = 0, inactive_split = 0;
  std::int64_t cuda_segments = 0;
  std::uint64_t prev_end = 0;
  for (const SegmentInfo& seg : segs) {
    ASSERT_GE(seg.addr, prev_end) << "segments overlap";
    prev_end = seg.addr + static_cast<std::uint64_t>(seg.size);
    ASSERT_FALSE(seg.blocks.empty());
    std::uint64_t at = seg.addr;
    for (std::size_t i = 0; i < seg.blocks.size(); ++i) {
      const auto& b = seg.blocks[i];
      ASSERT_EQ(b.addr, at) << "blocks do not tile the segment";
      ASSERT_GT(b.size, 0);
      at += static_cast<std::uint64_t>(b.size);
      if (i > 0) {
        const State p = seg.blocks[i - 1].state;
        const bool both_free = p == b.state && (p == State::kFree || p == State::kUnmapped);
        ASSERT_FALSE(both_free) << "unmerged free neighbours";
      }
      if (b.state == State::kAllocated) allocated += b.size;
      if (b.state == State::kAllocated || b.state == State::kPendingFree) {
        active += b.size;
        requested += b.requested;
      }
      if (!seg.expandable && b.state == State::kFree && seg.blocks.size() > 1)
        inactive_split += b.size;
      if (seg.expandable && b.state != State::kUnmapped) reserved += b.size;
      if (b.state == State::kUnmapped) {
        const std::uint64_t page = seg.small_pool ? 2 * kMiB : 20 * kMiB;
        ASSERT_EQ((b.addr - seg.addr) % page, 0u) << "unmapped block not page-aligned";
        ASSERT_EQ(static_cast<std::uint64_t>(b.size) % page, 0u);
      }
    }
    ASSERT_EQ(at, seg.addr + static_cast<std::uint64_t>(seg.size));
    if (!seg.expandable) {
      reserved += seg.size;
      ++cuda_segments;
    }
  }
  const AllocatorStats& s = a.stats();
  EXPECT_EQ(s.allocated, allocated);
  EXPECT_EQ(s.active, active);
  EXPECT_EQ(s.requested, requested);
  EXPECT_EQ(s.reserved, reserved);
  EXPECT_EQ(s.inactive_split, inactive_split);
  EXPECT_EQ(s.segments, cuda_segments);
  EXPECT_EQ(dev.used(), reserved);
  EXPECT_GE(s.allocated_peak, s.allocated);
  EXPECT_GE(s.reserved_peak, s.reserved);
  EXPECT_GE(s.active_peak, s.active);
  EXPECT_GE(s.requested_peak, s.requested);
  EXPECT_GE(s.inactive_split_peak, s.inactive_split);
  std::int64_t live_bytes = 0;
  for (const Live& l : live) {
    live_bytes += a.block_size(l.id);
    EXPECT_GE(a.block_size(l.id), l.requested);
  }
  EXPECT_EQ(live_bytes, allocated);
}

struct RunResult {
  std::string layout;
  std::vector<std::string> events;
  AllocatorStats stats;
};

// Sizes from 512 B to 512 MiB, log-uniform, with repeats as in training.
std::int64_t draw_size(std::mt19937_64& rng) {
  static const std::int64_t kCommon[] = {4096, 2 * kMiB, 8 * kMiB + 4096, 64 * kMiB, 96 * kMiB};
  if (rng() % 3 == 0) return kCommon[rng() % 5];
  std::uniform_real_distribution<double> log2size(9.0, 29.0);
  return static_cast<std::int64_t>(std::exp2(log2size(rng))) + static_cast<std::int64_t>(rng() % 7);
}

RunResult run(const AllocatorConfig& config, std::int64_t capacity, std::uint64_t seed, int ops,
              bool check) {
  SimulatedDevice dev(capacity);
  CachingAllocator a(config, &dev);
  RunResult result;
  a.set_observer([&](const AllocatorEvent& e) { result.events.push_back(event_string(e)); });
  std::mt19937_64 rng(seed);
  std::vector<Live> live;
  std::vector<std::uint64_t> tickets;
  for (int step = 0; step < ops; ++step) {
    const int op = static_cast<int>(rng() % 100);
    if (op < 50 || live.empty()) {
      const std::int64_t size = draw_size(rng);
      const BlockId b = a.malloc(size, static_cast<StreamId>(rng() % 3));
      if (b != kOutOfMemory) live.push_back({b, size});
    } else if (op < 80) {
      const std::size_t i = rng() % live.size();
      a.free(live[i].id);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (op < 90) {
      const std::size_t i = rng() % live.size();
      tickets.push_back(a.free_deferred(live[i].id));
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (op < 99) {
      if (!tickets.empty()) {
        // Any pending ticket, sometimes twice (the second is ignored).
        const std::size_t i = rng() % tickets.size();
        a.complete_free(tickets[i]);
        if (rng() % 4 != 0) tickets.erase(tickets.begin() + static_cast<std::ptrdiff_t>(i));
      }
    } else {
      a.empty_cache();
    }
    if (check) {
      check_invariants(a, dev, live, step);
      if (::testing::Test::HasFailure()) break;
    }
  }
  result.layout = layout(a);
  result.stats = a.stats();
  return result;
}

struct Case {
  const char* name;
  AllocatorConfig config;
  std::int64_t capacity;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  out.push_back({"default", {}, 80 * kGiB});
  AllocatorConfig split;
  split.max_split_size = 128 * kMiB;
  split.roundup_power2_divisions.fill(4);
  split.roundup_power2_divisions[0] = 1;
  out.push_back({"max_split+divisions, tight", split, 3 * kGiB});
  AllocatorConfig exp;
  exp.expandable_segments = true;
  out.push_back({"expandable, tight", exp, 3 * kGiB});
  AllocatorConfig gc;
  gc.memory_fraction = 0.5;
  gc.garbage_collection_threshold = 0.6;
  gc.max_split_size = 64 * kMiB;
  out.push_back({"fraction+gc", gc, 8 * kGiB});
  AllocatorConfig all = exp;
  all.max_split_size = 64 * kMiB;
  all.memory_fraction = 0.9;
  all.garbage_collection_threshold = 0.5;
  out.push_back({"expandable+max_split+gc", all, 2 * kGiB});
  return out;
}

TEST(CachingAllocatorPropertyTest, InvariantsHoldOnRandomTraces) {
  for (const Case& c : cases()) {
    for (std::uint64_t seed : {1u, 2u, 3u}) {
      SCOPED_TRACE(std::string(c.name) + " seed " + std::to_string(seed));
      run(c.config, c.capacity, seed, 1500, true);
      if (HasFailure()) return;
    }
  }
}

TEST(CachingAllocatorPropertyTest, SameSeedSameRun) {
  for (const Case& c : cases()) {
    const RunResult x = run(c.config, c.capacity, 42, 3000, false);
    const RunResult y = run(c.config, c.capacity, 42, 3000, false);
    EXPECT_EQ(x.layout, y.layout) << c.name;
    EXPECT_EQ(x.events, y.events) << c.name;
    EXPECT_EQ(x.stats.reserved_peak, y.stats.reserved_peak) << c.name;
    EXPECT_GT(x.events.size(), 3000u) << c.name;
  }
}

TEST(CachingAllocatorPropertyTest, TightDevicesExerciseTheFallbacks) {
  // The tight configurations must reach the retry and OOM paths, or the
  // invariant test above proves little about them.
  const auto all = cases();
  for (int i : {1, 2}) {
    const RunResult r = run(all[i].config, all[i].capacity, 7, 3000, false);
    EXPECT_GT(r.stats.num_alloc_retries, 0) << all[i].name;
    EXPECT_GT(r.stats.num_ooms, 0) << all[i].name;
    EXPECT_GT(r.stats.num_device_free, 0) << all[i].name;
  }
  const RunResult g = run(all[3].config, all[3].capacity, 7, 3000, false);
  EXPECT_GT(g.stats.num_device_free, 0);
}

}  // namespace
}  // namespace prism
