// BlockSet against std::set: the same answers for every lookup and walk,
// across chunk splits and merges; the packed key's fields.
#include "mem/caching_allocator_block_set.h"

#include <iterator>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace prism::alloc_internal {
namespace {

using Entry = std::pair<std::int64_t, std::uint64_t>;  // (size, addr)

SetKey key_of(const Entry& e, std::int32_t slot) {
  return block_key(e.first, e.second, slot);
}

std::vector<Entry> contents(const BlockSet& s) {
  std::vector<Entry> out;
  for (BlockSet::Pos p = s.begin(); p != s.end(); p = s.next(p))
    out.emplace_back(key_size(s.key(p)), static_cast<std::uint64_t>(s.key(p) >> 30) * 256);
  return out;
}

TEST(BlockSetTest, KeysPackSizeAddressAndSlot) {
  const std::int64_t size = (std::int64_t{1} << 50) + 512;
  const std::uint64_t addr = 0xffffffffffffff00u;
  const SetKey k = block_key(size, addr, kMaxSlots - 1);
  EXPECT_EQ(key_size(k), size);
  EXPECT_EQ(key_slot(k), kMaxSlots - 1);
  EXPECT_EQ(static_cast<std::uint64_t>(k >> 30) * 256, addr);
  EXPECT_LT(block_key(512, addr, 7), block_key(1024, 0, 0));  // size first
  EXPECT_LT(block_key(512, 256, 9), block_key(512, 512, 0));  // then address
  EXPECT_EQ(search_key(1), search_key(512));                  // sizes round up
  EXPECT_LT(block_key(512, addr, 9), search_key(513));
}

TEST(BlockSetTest, OrdersBySizeThenAddress) {
  BlockSet s;
  s.insert(block_key(1024, 7 * 256, 0));
  s.insert(block_key(2048, 1 * 256, 1));
  s.insert(block_key(1024, 3 * 256, 2));
  s.insert(block_key(512, 9 * 256, 3));
  std::vector<int> slots;
  s.for_each([&](std::int32_t slot) { slots.push_back(slot); });
  EXPECT_EQ(slots, (std::vector<int>{3, 2, 0, 1}));
  EXPECT_EQ(s.slot(s.lower_bound(search_key(600))), 2);
  EXPECT_EQ(s.lower_bound(search_key(2049)), s.end());
}

TEST(BlockSetTest, MatchesStdSetOnRandomOperations) {
  std::mt19937_64 rng(5);
  BlockSet s;
  std::set<Entry> ref;
  auto random_entry = [&] {
    return Entry{static_cast<std::int64_t>(1 + rng() % 400) << 20, (rng() % 3000) << 9};
  };
  for (int step = 0; step < 20000; ++step) {
    // Grow to several hundred keys, shrink to a handful, grow again.
    const bool growing = (step / 2500) % 2 == 0;
    const Entry e = random_entry();
    if (rng() % 100 < (growing ? 70u : 30u)) {
      if (ref.insert(e).second) s.insert(key_of(e, step));
    } else if (!ref.empty() && rng() % 2 == 0) {
      // replace: a split remainder (smaller) or a merged block (larger).
      auto it = ref.lower_bound(e);
      if (it == ref.end()) it = ref.begin();
      const Entry moved{rng() % 2 ? it->first / 1024 * 512 + 512 : it->first * 3, it->second};
      if (ref.count(moved) == 0) {
        s.replace(s.lower_bound(key_of(*it, 0)), key_of(moved, step));
        ref.erase(it);
        ref.insert(moved);
      }
    } else if (!ref.empty()) {
      auto it = ref.lower_bound(e);
      if (it == ref.end()) it = ref.begin();
      const BlockSet::Pos p = s.lower_bound(key_of(*it, 0));
      ASSERT_EQ(contents(s).size(), ref.size());
      ASSERT_EQ(key_size(s.key(p)), it->first);
      s.erase(s.key(p));
      ref.erase(it);
    }
    ASSERT_EQ(s.size(), ref.size());
    const Entry q = random_entry();
    const BlockSet::Pos p = s.lower_bound(key_of(q, 0));
    const auto r = ref.lower_bound(q);
    ASSERT_EQ(p == s.end(), r == ref.end());
    if (r != ref.end()) {
      ASSERT_EQ(key_size(s.key(p)), r->first);
      if (r != ref.begin()) {
        ASSERT_EQ(key_size(s.key(s.prev(p))), std::prev(r)->first);
      }
    } else if (!ref.empty()) {
      ASSERT_EQ(key_size(s.key(s.prev(p))), ref.rbegin()->first);
    }
    if (step % 500 == 0) {
      ASSERT_EQ(contents(s), std::vector<Entry>(ref.begin(), ref.end()));
    }
  }
}

}  // namespace
}  // namespace prism::alloc_internal
