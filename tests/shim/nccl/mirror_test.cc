// The copies that give a collective's receive buffer this rank's own bytes
// (src/shim/nccl/mirror.h), run on host memory.
#include "shim/nccl/mirror.h"

#include <cstring>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

namespace prism::nccl {
namespace {

void run(const std::vector<Copy>& copies) {
  for (const Copy& c : copies) std::memmove(c.dst, c.src, c.bytes);
}

TEST(MirrorTest, AllGatherFillsEverySlotByDoubling) {
  for (int n : {1, 2, 3, 5, 8, 1024}) {
    SCOPED_TRACE(n);
    std::vector<int> send = {4, 2}, recv(static_cast<std::size_t>(2 * n), -1);
    const auto copies =
        mirror_copies({PRISM_ALL_GATHER, send.data(), recv.data(), 2 * sizeof(int), n, n - 1, 0});
    // One copy of the input, then ceil(log2 n) doublings.
    std::size_t doublings = 0;
    while ((std::size_t{1} << doublings) < static_cast<std::size_t>(n)) ++doublings;
    EXPECT_EQ(copies.size(), 1 + doublings);
    run(copies);
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(recv[2 * i], 4);
      EXPECT_EQ(recv[2 * i + 1], 2);
    }
  }
}

TEST(MirrorTest, InPlaceAllGatherOfRankZeroCopiesNoInput) {
  std::vector<int> buf = {6, 0, 0, 0};
  const auto copies =
      mirror_copies({PRISM_ALL_GATHER, buf.data(), buf.data(), sizeof(int), 4, 0, 0});
  ASSERT_EQ(copies.size(), 2u);  // [0,1) -> [1,2), [0,2) -> [2,4)
  run(copies);
  EXPECT_EQ(buf, (std::vector<int>{6, 6, 6, 6}));
}

TEST(MirrorTest, ReductionsGiveTheInputUnchanged) {
  std::vector<int> in(8), out(2, -1);
  std::iota(in.begin(), in.end(), 0);
  run(mirror_copies({PRISM_REDUCE_SCATTER, in.data(), out.data(), 2 * sizeof(int), 4, 2, 0}));
  EXPECT_EQ(out, (std::vector<int>{4, 5}));
  int x = 7, y = 0;
  run(mirror_copies({PRISM_ALL_REDUCE, &x, &y, sizeof(int), 4, 2, 0}));
  EXPECT_EQ(y, 7);
  EXPECT_TRUE(mirror_copies({PRISM_ALL_REDUCE, &x, &x, sizeof(int), 4, 2, 0}).empty());
  EXPECT_TRUE(mirror_copies({PRISM_REDUCE, &x, &y, sizeof(int), 4, 2, 0}).empty());   // not root
  EXPECT_EQ(mirror_copies({PRISM_REDUCE, &x, &y, sizeof(int), 4, 0, 0}).size(), 1u);  // root
}

TEST(MirrorTest, AllToAllKeepsEachChunkInPlace) {
  std::vector<int> in = {1, 2, 3, 4}, out(4, 0);
  const auto copies =
      mirror_copies({PRISM_ALL_TO_ALL, in.data(), out.data(), sizeof(int), 4, 1, 0});
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].bytes, 4 * sizeof(int));
  run(copies);
  EXPECT_EQ(out, in);
}

TEST(MirrorTest, BroadcastOffTheRootAndPointToPointCopyNothing) {
  int x = 1, y = 2;
  EXPECT_TRUE(mirror_copies({PRISM_BROADCAST, &x, &y, sizeof(int), 4, 1, 0}).empty());
  EXPECT_EQ(mirror_copies({PRISM_BROADCAST, &x, &y, sizeof(int), 4, 0, 0}).size(), 1u);
  EXPECT_TRUE(mirror_copies({PRISM_SEND, &x, nullptr, sizeof(int), 4, 0, 1}).empty());
  EXPECT_TRUE(mirror_copies({PRISM_RECV, nullptr, &y, sizeof(int), 4, 0, 1}).empty());
}

}  // namespace
}  // namespace prism::nccl
