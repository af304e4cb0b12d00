#include "sim/event_queue.h"

#include <algorithm>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

namespace prism {
namespace {

TEST(EventQueueTest, OrdersByTimeThenPriorityThenInsertion) {
  EventQueue<int> q;
  q.push(SimTime{10}, 1, 0);
  q.push(SimTime{5}, 2, 1);
  q.push(SimTime{10}, 0, 2);
  q.push(SimTime{10}, 1, 3);
  q.push(SimTime{5}, 2, 4);
  std::vector<int> order;
  while (!q.empty()) order.push_back(q.pop().payload);
  EXPECT_EQ(order, (std::vector<int>{1, 4, 2, 0, 3}));
  EXPECT_EQ(q.now().ns, 10);
}

// Property: whatever was pushed comes out sorted by (time, priority,
// insertion), with no event lost or duplicated.
TEST(EventQueueTest, PropertyBatchPopsAreSorted) {
  std::mt19937_64 rng(12345);
  for (int trial = 0; trial < 50; ++trial) {
    EventQueue<int> q;
    std::vector<std::tuple<std::int64_t, int, int>> pushed;
    const int n = 1 + static_cast<int>(rng() % 500);
    for (int i = 0; i < n; ++i) {
      const std::int64_t t = static_cast<std::int64_t>(rng() % 40);
      const int prio = static_cast<int>(rng() % 4);
      pushed.emplace_back(t, prio, i);
      q.push(SimTime{t}, prio, i);
    }
    std::vector<std::tuple<std::int64_t, int, int>> popped;
    while (!q.empty()) {
      auto e = q.pop();
      popped.emplace_back(e.time.ns, e.priority(), e.payload);
    }
    std::sort(pushed.begin(), pushed.end());
    EXPECT_EQ(popped, pushed);
  }
}

// Property: with pushes interleaved between pops (never in the past), the
// clock never moves backwards.
TEST(EventQueueTest, PropertyInterleavedClockIsMonotone) {
  std::mt19937_64 rng(99);
  EventQueue<int> q;
  SimTime prev;
  for (int step = 0; step < 5000; ++step) {
    if (rng() % 3 != 0 || q.empty()) {
      q.push(q.now() + SimTime{static_cast<std::int64_t>(rng() % 20)}, static_cast<int>(rng() % 3),
             step);
    } else {
      auto e = q.pop();
      ASSERT_GE(e.time, prev);
      prev = e.time;
    }
  }
}

// Property: with many distinct times (more than the queue's table of recent
// buckets holds) and times that recur after their bucket was evicted or
// emptied, pops interleaved with pushes still follow (time, priority,
// insertion) exactly.
TEST(EventQueueTest, PropertyRecurringTimesKeepInsertionOrder) {
  std::mt19937_64 rng(2026);
  for (int trial = 0; trial < 20; ++trial) {
    EventQueue<int> q;
    std::set<std::tuple<std::int64_t, int, int>> pending;  // what the queue must hold
    int next = 0;
    for (int step = 0; step < 20000; ++step) {
      if (rng() % 5 < 3 || q.empty()) {
        // A few hot times ahead of now and many cold ones.
        const std::int64_t ahead = rng() % 2 == 0 ? static_cast<std::int64_t>(rng() % 4) * 100
                                                  : static_cast<std::int64_t>(rng() % 5000);
        const std::int64_t t = q.now().ns + ahead;
        const int prio = static_cast<int>(rng() % 3);
        q.push(SimTime{t}, prio, next);
        pending.emplace(t, prio, next++);
      } else {
        const auto e = q.pop();
        ASSERT_FALSE(pending.empty());
        ASSERT_EQ(std::make_tuple(e.time.ns, e.priority(), e.payload), *pending.begin());
        pending.erase(pending.begin());
      }
    }
    EXPECT_EQ(q.size(), pending.size());
  }
}

TEST(EventQueueTest, SameInputsSameOrder) {
  auto run = [] {
    EventQueue<int> q;
    std::mt19937 rng(7);
    for (int i = 0; i < 1000; ++i) q.push(SimTime{static_cast<std::int64_t>(rng() % 50)}, 0, i);
    std::vector<int> out;
    while (!q.empty()) out.push_back(q.pop().payload);
    return out;
  };
  EXPECT_EQ(run(), run());
}

TEST(EventQueueDeathTest, PastEventsAreABug) {
  EventQueue<int> q;
  q.push(SimTime{10}, 0, 0);
  (void)q.pop();
  EXPECT_DEATH(q.push(SimTime{5}, 0, 1), "in the past");
}

}  // namespace
}  // namespace prism
