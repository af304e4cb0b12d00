// The recorded peaks of a memory history, and its completeness checks.
#include "mem/trace_ledger.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace prism {
namespace {

using Action = AllocatorEvent::Action;

constexpr std::int64_t kMiB = 1 << 20;
constexpr std::uint64_t kBase = 0x7f0000000000;

MemoryTrace trace_of(const std::vector<AllocatorEvent>& events) {
  MemoryTrace t;
  for (const AllocatorEvent& e : events) t.events.push_back(RecordedEvent{e, t.events.size()});
  t.num_entries = events.size();
  return t;
}

AllocatorEvent ev(Action a, std::uint64_t addr, std::int64_t size, StreamId stream = 0) {
  return AllocatorEvent{a, addr, size, stream};
}

std::string error_of(const std::vector<AllocatorEvent>& events, const AllocatorConfig& c = {}) {
  const Result<RecordedPeaks> r = account_trace(trace_of(events), c);
  EXPECT_FALSE(r.is_ok());
  return r.is_ok() ? "" : r.status().message();
}

RecordedPeaks peaks_of(const std::vector<AllocatorEvent>& events, const AllocatorConfig& c = {}) {
  const Result<RecordedPeaks> r = account_trace(trace_of(events), c);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? r.value() : RecordedPeaks{};
}

TEST(TraceLedgerTest, SmallRequestsRoundTo512AndSplit) {
  const RecordedPeaks p = peaks_of({
      ev(Action::kSegmentAlloc, kBase, 2 * kMiB),
      ev(Action::kAlloc, kBase, 1000),
      ev(Action::kAlloc, kBase + 1024, 3000),
      ev(Action::kFreeRequested, kBase, 1000),
      ev(Action::kFreeCompleted, kBase, 1000),
  });
  EXPECT_EQ(p.allocated_peak, 1024 + 3072);
  EXPECT_EQ(p.requested_peak, 4000);
  EXPECT_EQ(p.allocated_final, 3072);
  EXPECT_EQ(p.reserved_peak, 2 * kMiB);
  EXPECT_EQ(p.allocs, 2);
  EXPECT_EQ(p.frees, 1);
  EXPECT_EQ(p.segment_allocs, 1);
}

TEST(TraceLedgerTest, LargeRemainderOfOneMiBOrLessIsNotSplit) {
  // 19.5 MiB asks for a 20 MiB segment; 0.5 MiB is left: the block is all of it.
  const RecordedPeaks p = peaks_of({
      ev(Action::kSegmentAlloc, kBase, 20 * kMiB),
      ev(Action::kAlloc, kBase, 19 * kMiB + kMiB / 2),
  });
  EXPECT_EQ(p.allocated_peak, 20 * kMiB);
  EXPECT_EQ(p.requested_peak, 19 * kMiB + kMiB / 2);
}

TEST(TraceLedgerTest, OversizeBlocksAreNotSplit) {
  AllocatorConfig c;
  c.max_split_size = 64 * kMiB;
  const std::vector<AllocatorEvent> events = {
      ev(Action::kSegmentAlloc, kBase, 100 * kMiB),  ev(Action::kAlloc, kBase, 100 * kMiB),
      ev(Action::kFreeRequested, kBase, 100 * kMiB), ev(Action::kFreeCompleted, kBase, 100 * kMiB),
      ev(Action::kAlloc, kBase, 90 * kMiB),
  };
  EXPECT_EQ(peaks_of(events, c).allocated_final, 100 * kMiB);
  EXPECT_EQ(peaks_of(events).allocated_final, 90 * kMiB);  // no limit: split
}

TEST(TraceLedgerTest, SettingsTheTraceDoesNotFitAreNoted) {
  // Read with max_split_size_mb:64, 90 MiB keeps the whole 100 MiB block; a
  // trace recorded without that limit then allocates in the 10 MiB split
  // off it: the block is cut back and the entry noted.
  AllocatorConfig c;
  c.max_split_size = 64 * kMiB;
  const RecordedPeaks p = peaks_of(
      {
          ev(Action::kSegmentAlloc, kBase, 100 * kMiB),
          ev(Action::kAlloc, kBase, 90 * kMiB),
          ev(Action::kAlloc, kBase + 90 * kMiB, 10 * kMiB),
      },
      c);
  ASSERT_TRUE(p.misfit_entry.has_value());
  EXPECT_EQ(*p.misfit_entry, 2u);
  EXPECT_EQ(p.allocated_final, 100 * kMiB);
  EXPECT_FALSE(
      peaks_of({ev(Action::kSegmentAlloc, kBase, 2 * kMiB), ev(Action::kAlloc, kBase, 512)})
          .misfit_entry.has_value());
}

TEST(TraceLedgerTest, RoundupPowerOfTwoDivisions) {
  AllocatorConfig c;
  c.roundup_power2_divisions[0] = 4;  // [1 MiB, 2 MiB) in quarters
  c.roundup_power2_divisions[1] = 4;
  const RecordedPeaks p = peaks_of(
      {
          ev(Action::kSegmentAlloc, kBase, 20 * kMiB),
          ev(Action::kAlloc, kBase, kMiB + 200 * 1024),
      },
      c);
  EXPECT_EQ(p.allocated_peak, kMiB + kMiB / 4);
}

TEST(TraceLedgerTest, DeferredFreeHoldsItsSpace) {
  const std::vector<AllocatorEvent> events = {
      ev(Action::kSegmentAlloc, kBase, 20 * kMiB),
      ev(Action::kAlloc, kBase, 4 * kMiB),
      ev(Action::kFreeRequested, kBase, 4 * kMiB),
      ev(Action::kAlloc, kBase + 4 * kMiB, 4 * kMiB),
  };
  const RecordedPeaks p = peaks_of(events);
  EXPECT_EQ(p.allocated_peak, 4 * kMiB);  // allocated drops at free_requested
  std::vector<AllocatorEvent> reuse = events;
  reuse.push_back(ev(Action::kAlloc, kBase, 1 * kMiB + 512));
  EXPECT_EQ(error_of(reuse),
            "trace entry 4 (alloc): 0x7f0000000000 is a live block already: the trace is "
            "inconsistent");
}

TEST(TraceLedgerTest, ExpandableMappingsJoinAndUnmapInPart) {
  AllocatorConfig c;
  c.expandable_segments = true;
  const RecordedPeaks p = peaks_of(
      {
          ev(Action::kSegmentMap, kBase, 20 * kMiB),
          ev(Action::kAlloc, kBase, 5 * kMiB),
          ev(Action::kSegmentMap, kBase + 20 * kMiB, 20 * kMiB),
          ev(Action::kAlloc, kBase + 5 * kMiB, 18 * kMiB),  // spans both pages
          ev(Action::kFreeRequested, kBase + 5 * kMiB, 18 * kMiB),
          ev(Action::kFreeCompleted, kBase + 5 * kMiB, 18 * kMiB),
          ev(Action::kSegmentUnmap, kBase + 20 * kMiB, 20 * kMiB),
      },
      c);
  EXPECT_EQ(p.allocated_peak, 23 * kMiB);
  EXPECT_EQ(p.reserved_peak, 40 * kMiB);
  EXPECT_EQ(p.reserved_final, 20 * kMiB);
  EXPECT_EQ(p.segment_frees, 1);
}

TEST(TraceLedgerTest, RejectsHistoriesThatStartLate) {
  const std::string hint =
      "the history must be recorded from the start: call "
      "torch.cuda.memory._record_memory_history() before the first CUDA allocation, with "
      "max_entries above the number of events";
  EXPECT_EQ(error_of({ev(Action::kAlloc, kBase, 512)}),
            "trace entry 0 (alloc): 0x7f0000000000 is in no segment the trace allocated: " + hint);
  EXPECT_EQ(error_of({ev(Action::kFreeRequested, kBase, 512)}),
            "trace entry 0 (free_requested): 0x7f0000000000 was not handed out by an alloc in "
            "the trace: " +
                hint);
  EXPECT_EQ(error_of({ev(Action::kFreeCompleted, kBase, 512)}),
            "trace entry 0 (free_completed): 0x7f0000000000 was not handed out by an alloc in "
            "the trace: " +
                hint);
  EXPECT_EQ(error_of({ev(Action::kSegmentFree, kBase, 2 * kMiB)}),
            "trace entry 0 (segment_free): [0x7f0000000000, 0x7f0000200000) is not memory the "
            "trace allocated: " +
                hint);
  EXPECT_EQ(error_of({ev(Action::kSegmentUnmap, kBase, 2 * kMiB)}),
            "trace entry 0 (segment_unmap): [0x7f0000000000, 0x7f0000200000) is not memory the "
            "trace allocated: " +
                hint);
}

TEST(TraceLedgerTest, RejectsInconsistentHistories) {
  const AllocatorEvent seg = ev(Action::kSegmentAlloc, kBase, 2 * kMiB);
  const AllocatorEvent alloc = ev(Action::kAlloc, kBase, 512);
  EXPECT_EQ(error_of({seg, ev(Action::kSegmentAlloc, kBase + kMiB, 2 * kMiB)}),
            "trace entry 1 (segment_alloc): [0x7f0000100000, 0x7f0000300000) overlaps memory "
            "the allocator already holds: the trace is inconsistent");
  EXPECT_EQ(error_of({seg, alloc, ev(Action::kSegmentFree, kBase, 2 * kMiB)}),
            "trace entry 2 (segment_free): [0x7f0000000000, 0x7f0000200000) still holds live "
            "blocks: the trace is inconsistent");
  EXPECT_EQ(error_of({seg, alloc, ev(Action::kFreeCompleted, kBase, 512)}),
            "trace entry 2 (free_completed): 0x7f0000000000 completes a free that was never "
            "requested");
  EXPECT_EQ(error_of({seg, alloc, ev(Action::kFreeRequested, kBase, 512),
                      ev(Action::kFreeRequested, kBase, 512)}),
            "trace entry 3 (free_requested): 0x7f0000000000 was already freed: the trace is "
            "inconsistent");
  EXPECT_EQ(error_of({ev(Action::kSegmentMap, kBase + 128, 2 * kMiB)}),
            "trace entry 0 (segment_map): 0x7f0000000080 is not 256-byte aligned, as the "
            "addresses of device memory are");
  // A cudaMalloc segment is freed whole, never unmapped.
  EXPECT_EQ(error_of({seg, ev(Action::kSegmentUnmap, kBase, 2 * kMiB)}),
            "trace entry 1 (segment_unmap): [0x7f0000000000, 0x7f0000200000) is not memory the "
            "trace allocated: the history must be recorded from the start: call "
            "torch.cuda.memory._record_memory_history() before the first CUDA allocation, with "
            "max_entries above the number of events");
}

TEST(TraceLedgerTest, EntryNumbersAreTheFiles) {
  MemoryTrace t = trace_of({ev(Action::kAlloc, kBase, 512)});
  t.events[0].entry = 41;
  const Result<RecordedPeaks> r = account_trace(t, AllocatorConfig{});
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message().substr(0, 22), "trace entry 41 (alloc)");
}

}  // namespace
}  // namespace prism
