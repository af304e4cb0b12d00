// Replaying hand-crafted PyTorch memory histories (tests/mem/data, made by
// make_snapshots.py from the rules of CUDACachingAllocator.cpp) through the
// allocator model: exact matches, and the first divergence when the history
// or the settings are wrong.
#include "mem/snapshot_replay.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace prism {
namespace {

using Action = AllocatorEvent::Action;
using State = SegmentInfo::Block::State;

constexpr std::int64_t kMiB = 1 << 20;

MemoryTrace load(const std::string& name) {
  Result<MemoryTrace> t = load_memory_trace(PRISM_SOURCE_DIR "/tests/mem/data/" + name + ".json");
  EXPECT_TRUE(t.is_ok()) << t.status().message();
  return t.is_ok() ? std::move(t).value() : MemoryTrace{};
}

SnapshotReplayResult replay(const MemoryTrace& t, SnapshotReplayOptions options) {
  Result<SnapshotReplayResult> r = replay_memory_trace(t, options);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? std::move(r).value() : SnapshotReplayResult{};
}

SnapshotReplayResult replay_recorded(const MemoryTrace& t) {
  SnapshotReplayOptions options;
  options.config = t.settings;
  return replay(t, options);
}

void expect_exact(const SnapshotReplayResult& r) {
  EXPECT_TRUE(r.events_match()) << describe_divergence(*r.divergence);
  EXPECT_EQ(r.matched, r.events);
  EXPECT_TRUE(r.peaks_match());
  EXPECT_TRUE(r.segments_checked);
  EXPECT_TRUE(r.segments_match()) << r.segments_difference;
}

TEST(SnapshotReplayTest, BasicSmallAndLargePools) {
  const SnapshotReplayResult r = replay_recorded(load("basic"));
  expect_exact(r);
  EXPECT_EQ(r.events, 18u);
  // 1 KiB + 3 KiB + 5 MiB + 31458304 (30 MiB + 1000 B rounded) + 2 MiB.
  EXPECT_EQ(r.recorded.allocated_peak, 1024 + 3072 + 5 * kMiB + 31458304 + 2 * kMiB);
  EXPECT_EQ(r.recorded.reserved_peak, (2 + 20 + 32) * kMiB);
  EXPECT_EQ(r.modelled.num_device_alloc, 3);
  EXPECT_EQ(r.modelled.num_device_free, 1);
  EXPECT_EQ(r.modelled_segments, 2u);
}

TEST(SnapshotReplayTest, RecordStreamFreesWaitForTheirStreams) {
  const SnapshotReplayResult r = replay_recorded(load("record_stream"));
  expect_exact(r);
  EXPECT_EQ(r.recorded.allocated_peak, 8 * kMiB + 512);
  EXPECT_EQ(r.recorded.reserved_peak, 22 * kMiB);
  EXPECT_EQ(r.modelled.reserved, 2 * kMiB);
}

TEST(SnapshotReplayTest, ExpandableSegmentsMapAndUnmapPages) {
  const MemoryTrace t = load("expandable");
  ASSERT_TRUE(t.settings.expandable_segments);
  const SnapshotReplayResult r = replay_recorded(t);
  expect_exact(r);
  EXPECT_EQ(r.recorded.allocated_peak, 1024 + 5 * kMiB + 18 * kMiB);
  EXPECT_EQ(r.recorded.reserved_peak, (2 + 20 + 20) * kMiB);
  EXPECT_EQ(r.modelled.reserved, 2 * kMiB);
}

TEST(SnapshotReplayTest, MaxSplitSizeReleaseRetryAndOutOfMemory) {
  const MemoryTrace t = load("max_split");
  ASSERT_EQ(t.settings.max_split_size, 64 * kMiB);
  const SnapshotReplayResult r = replay_recorded(t);
  expect_exact(r);
  EXPECT_EQ(r.recorded.allocated_peak, 120 * kMiB);  // 90 MiB took the whole 100 MiB block
  EXPECT_EQ(r.recorded.reserved_peak, 180 * kMiB);
  EXPECT_EQ(r.recorded.ooms, 1);
  EXPECT_EQ(r.modelled.num_ooms, 1);
  EXPECT_EQ(r.modelled.num_alloc_retries, 1);
}

TEST(SnapshotReplayTest, WrongAddressIsTheFirstDivergence) {
  const SnapshotReplayResult r = replay_recorded(load("diverging"));
  ASSERT_TRUE(r.divergence.has_value());
  EXPECT_EQ(r.matched, 10u);
  EXPECT_EQ(r.divergence->entry, 10u);
  ASSERT_TRUE(r.divergence->expected && r.divergence->got);
  EXPECT_EQ(r.divergence->expected->addr, 0x7f0000b00000u);
  EXPECT_EQ(r.divergence->got->addr, 0x7f0000700000u);
  EXPECT_EQ(describe_divergence(*r.divergence),
            "trace entry 10: expected alloc addr=0x7f0000b00000 size=2097152 stream=0, got alloc "
            "addr=0x7f0000700000 size=2097152 stream=0");
  EXPECT_FALSE(r.segments_checked);
}

TEST(SnapshotReplayTest, WrongSettingsDiverge) {
  const MemoryTrace t = load("max_split");
  SnapshotReplayOptions options;
  options.config.max_split_size = 200 * kMiB;  // the 100 MiB block is no longer oversize
  const SnapshotReplayResult r = replay(t, options);
  ASSERT_TRUE(r.divergence.has_value());
  EXPECT_EQ(describe_divergence(*r.divergence),
            "trace entry 7: expected segment_alloc addr=0x7f8006400000 size=73400320 stream=0, "
            "got alloc addr=0x7f8000000000 size=73400320 stream=0");
  EXPECT_FALSE(r.peaks_match());
}

TEST(SnapshotReplayTest, CapacityMakesTheModelRunOutFirst) {
  const MemoryTrace t = load("basic");
  SnapshotReplayOptions options;
  options.capacity = 40 * kMiB;  // the 32 MiB segment no longer fits beside 22 MiB
  const SnapshotReplayResult r = replay(t, options);
  ASSERT_TRUE(r.divergence.has_value());
  EXPECT_EQ(describe_divergence(*r.divergence),
            "trace entry 5: expected segment_alloc addr=0x7f0001600000 size=33554432 stream=0, "
            "got oom size=31458304 stream=0");
  EXPECT_EQ(r.modelled.num_ooms, 1);
}

MemoryTrace trace_of(const std::vector<AllocatorEvent>& events) {
  MemoryTrace t;
  for (const AllocatorEvent& e : events) t.events.push_back(RecordedEvent{e, t.events.size()});
  t.num_entries = events.size();
  return t;
}

TEST(SnapshotReplayTest, ModelDoingMoreThanTheRecording) {
  // The recording's empty_cache() released only the large segment, though
  // the small one was unused too: the model releases both.
  const std::uint64_t s = 0x7f0000000000, l = 0x7f0000200000;
  const MemoryTrace t = trace_of({
      {Action::kSegmentAlloc, s, 2 * kMiB, 0},
      {Action::kAlloc, s, 512, 0},
      {Action::kFreeRequested, s, 512, 0},
      {Action::kFreeCompleted, s, 512, 0},
      {Action::kSegmentAlloc, l, 20 * kMiB, 0},
      {Action::kAlloc, l, 5 * kMiB, 0},
      {Action::kFreeRequested, l, 5 * kMiB, 0},
      {Action::kFreeCompleted, l, 5 * kMiB, 0},
      {Action::kSegmentFree, l, 20 * kMiB, 0},
  });
  const SnapshotReplayResult r = replay(t, {});
  ASSERT_TRUE(r.divergence.has_value());
  EXPECT_EQ(r.matched, 9u);
  EXPECT_EQ(describe_divergence(*r.divergence),
            "trace entry 9: expected the end of the trace, got segment_free addr=0x7f0000000000 "
            "size=2097152 stream=0");
}

TEST(SnapshotReplayTest, RejectsSegmentsNoAllocFollows) {
  const MemoryTrace t = trace_of({{Action::kSegmentAlloc, 0x7f0000000000, 2 * kMiB, 0}});
  const Result<SnapshotReplayResult> r = replay_memory_trace(t, {});
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(),
            "trace entry 0 (segment_alloc): no alloc or oom follows, as one must after a segment "
            "is allocated: the trace is inconsistent");
}

TEST(SnapshotReplayTest, RejectsHistoriesThatStartLate) {
  const MemoryTrace t = trace_of({{Action::kFreeRequested, 0x7f0000000000, 512, 0}});
  const Result<SnapshotReplayResult> r = replay_memory_trace(t, {});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("the history must be recorded from the start"),
            std::string::npos);
}

TEST(SnapshotReplayTest, FinalSegmentsThatDifferAreReported) {
  MemoryTrace t = load("basic");
  ASSERT_EQ(t.final_segments.size(), 2u);
  t.final_segments[1].blocks[1].requested = 1;  // the allocated 2 MiB block
  SnapshotReplayResult r = replay_recorded(t);
  EXPECT_TRUE(r.events_match());
  EXPECT_TRUE(r.peaks_match());
  EXPECT_EQ(r.segments_difference,
            "segment 0x7f0000200000 block 1: recorded 0x7f0000700000 size=2097152 requested=1 "
            "active_allocated, modelled 0x7f0000700000 size=2097152 requested=2097152 "
            "active_allocated");
  // Free blocks keep a stale requested size in torch: not compared.
  t = load("basic");
  t.final_segments[1].blocks[2].requested = 77;
  EXPECT_TRUE(replay_recorded(t).segments_match());
  t.final_segments.pop_back();
  EXPECT_EQ(replay_recorded(t).segments_difference, "recorded 1 segments, modelled 2");
}

TEST(SnapshotReplayTest, CompletionsBeforeAFailedCudaMallocCameFirst) {
  // A record-stream free completes at the next malloc (process_events), which
  // then finds no block, fails cudaMalloc and releases the oversize one.
  const std::uint64_t s1 = 0x7f0000000000, s2 = 0x7f0010000000, x = 0x7f0030000000;
  MemoryTrace t = trace_of({
      {Action::kSegmentAlloc, s1, 100 * kMiB, 0},
      {Action::kAlloc, s1, 100 * kMiB, 0},
      {Action::kFreeRequested, s1, 100 * kMiB, 0},
      {Action::kFreeCompleted, s1, 100 * kMiB, 0},
      {Action::kSegmentAlloc, s2, 20 * kMiB, 0},
      {Action::kAlloc, s2, 4 * kMiB, 0},
      {Action::kFreeRequested, s2, 4 * kMiB, 0},  // recorded on another stream
      {Action::kSegmentAlloc, x, 2 * kMiB, 0},
      {Action::kAlloc, x, 512, 0},
      {Action::kFreeCompleted, s2, 4 * kMiB, 0},  // process_events() of the next malloc
      {Action::kSegmentFree, s1, 100 * kMiB, 0},  // release_available_cached_blocks()
      {Action::kSegmentAlloc, s1, 40 * kMiB, 0},
      {Action::kAlloc, s1, 40 * kMiB, 0},
  });
  SnapshotReplayOptions options;
  options.config.max_split_size = 64 * kMiB;
  const SnapshotReplayResult r = replay(t, options);
  EXPECT_TRUE(r.events_match()) << describe_divergence(*r.divergence);
  EXPECT_TRUE(r.peaks_match());
}

TEST(SnapshotReplayTest, CompletionsThatWouldServeTheMallocCameFromItsSynchronize) {
  // The pending 8 MiB block, once back, would serve 14 MiB: torch cannot
  // have completed it before the search, so it did in release_cached_blocks.
  const std::uint64_t s2 = 0x7f0010000000, x = 0x7f0030000000, y = 0x7f0020000000;
  MemoryTrace t = trace_of({
      {Action::kSegmentAlloc, s2, 20 * kMiB, 0},
      {Action::kAlloc, s2, 8 * kMiB, 0},
      {Action::kFreeRequested, s2, 8 * kMiB, 0},  // recorded on another stream
      {Action::kSegmentAlloc, x, 2 * kMiB, 0},
      {Action::kAlloc, x, 512, 0},
      {Action::kFreeCompleted, s2, 8 * kMiB, 0},  // synchronize_and_free_events()
      {Action::kSegmentFree, s2, 20 * kMiB, 0},
      {Action::kSegmentAlloc, y, 14 * kMiB, 0},
      {Action::kAlloc, y, 14 * kMiB, 0},
  });
  const SnapshotReplayResult r = replay(t, {});
  EXPECT_TRUE(r.events_match()) << describe_divergence(*r.divergence);
  EXPECT_EQ(r.modelled.num_alloc_retries, 1);
}

TEST(SnapshotReplayTest, DescribesEvents) {
  EXPECT_EQ(describe_event({Action::kSegmentMap, 0x7f0000000000, 2 * kMiB, 3}),
            "segment_map addr=0x7f0000000000 size=2097152 stream=3");
  EXPECT_EQ(describe_event({Action::kOom, 12345, 4096, 0}), "oom size=4096 stream=0");
}

TEST(SnapshotReplayTest, RepeatsExactly) {
  const MemoryTrace t = load("record_stream");
  const SnapshotReplayResult a = replay_recorded(t), b = replay_recorded(t);
  EXPECT_EQ(a.modelled.allocated_peak, b.modelled.allocated_peak);
  EXPECT_EQ(a.modelled.reserved_peak, b.modelled.reserved_peak);
  EXPECT_EQ(a.matched, b.matched);
}

}  // namespace
}  // namespace prism
