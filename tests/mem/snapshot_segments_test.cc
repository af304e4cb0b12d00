// The allocator's segments in torch.cuda.memory_snapshot() form.
#include <vector>

#include <gtest/gtest.h>

#include "mem/snapshot_replay.h"

namespace prism {
namespace {

using State = SegmentInfo::Block::State;

constexpr std::int64_t kMiB = 1 << 20;

TEST(SnapshotSegmentsTest, ExpandableSegmentsListOneSegmentPerMappedRun) {
  SegmentInfo seg;
  seg.addr = 0x1000000;
  seg.size = 10 * kMiB;
  seg.expandable = true;
  const auto block = [](std::uint64_t addr, std::int64_t size, State state) {
    SegmentInfo::Block b;
    b.addr = addr;
    b.size = size;
    b.state = state;
    return b;
  };
  seg.blocks = {block(0x1000000, 2 * kMiB, State::kAllocated),
                block(0x1200000, 2 * kMiB, State::kUnmapped), block(0x1400000, kMiB, State::kFree),
                block(0x1500000, kMiB, State::kAllocated),
                block(0x1600000, 4 * kMiB, State::kUnmapped)};
  const std::vector<SegmentInfo> out = torch_segments({seg});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].addr, 0x1000000u);
  EXPECT_EQ(out[0].size, 2 * kMiB);
  EXPECT_EQ(out[0].blocks.size(), 1u);
  EXPECT_EQ(out[1].addr, 0x1400000u);
  EXPECT_EQ(out[1].size, 2 * kMiB);
  EXPECT_EQ(out[1].blocks.size(), 2u);
  EXPECT_TRUE(out[1].expandable);
}

TEST(SnapshotSegmentsTest, ComparesAddressesPoolsAndBlocks) {
  SegmentInfo a;
  a.addr = 0x1000000;
  a.size = 2 * kMiB;
  a.small_pool = true;
  SegmentInfo::Block b;
  b.addr = a.addr;
  b.size = a.size;
  b.state = State::kFree;
  a.blocks = {b};
  EXPECT_EQ(compare_segments({a}, {a}), "");
  SegmentInfo m = a;
  m.small_pool = false;
  EXPECT_EQ(compare_segments({a}, {m}),
            "segment 0x1000000: recorded stream=0 small, modelled stream=0 large");
  m = a;
  m.addr = 0x2000000;
  EXPECT_EQ(compare_segments({a}, {m}),
            "segment 0: recorded 0x1000000 size=2097152, modelled 0x2000000 size=2097152");
  m = a;
  m.blocks[0].state = State::kAllocated;
  EXPECT_EQ(compare_segments({a}, {m}),
            "segment 0x1000000 block 0: recorded 0x1000000 size=2097152 requested=0 inactive, "
            "modelled 0x1000000 size=2097152 requested=0 active_allocated");
  EXPECT_EQ(compare_segments({a}, {}), "recorded 1 segments, modelled 0");
}

}  // namespace
}  // namespace prism
