// EventQueue: the discrete-event core. Events are ordered by (time, priority,
// insertion sequence), as in SST, so ties never depend on container or hash
// order and a run repeats exactly. The payload is a typed value chosen by the
// user of the queue; the queue knows nothing of what events mean.
//
// Events wait in first-in first-out buckets of one (time, priority), and a
// 4-ary heap orders the buckets by (time, priority, first sequence): a large
// replay has thousands of ranks finishing ops at the same instant, and a
// heap of buckets stays small where a heap of events would not fit in the
// cache. A push goes to the newest bucket of its (time, priority) when a small
// direct-mapped table still names it, else to a new bucket. Either way every
// event of an older bucket of that (time, priority) precedes every event of
// a newer one, so the order is exactly (time, priority, insertion).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "util/check.h"
#include "util/units.h"

namespace prism {

template <typename Payload>
class EventQueue {
 public:
  struct Event {
    SimTime time;
    std::uint64_t order;  // priority in the top 8 bits, then insertion sequence
    Payload payload;
    int priority() const { return static_cast<int>(order >> 56); }
  };

  // Lower priority values run first among events at the same time.
  void push(SimTime time, int priority, const Payload& p) {
    PRISM_CHECK(time >= now_, "event scheduled in the past");
    PRISM_CHECK(priority >= 0 && priority < 256, "event priority out of range");
    const std::uint64_t order = (static_cast<std::uint64_t>(priority) << 56) | seq_++;
    Recent& r = recent_[slot(time, priority)];
    if (r.bucket == kNoBucket || r.time != time || r.priority != priority) {
      r = Recent{time, priority, new_bucket()};
      heap_push(Key{time, order, r.bucket});
    }
    buckets_[r.bucket].events.push_back(Entry{order, p});
    ++size_;
  }
  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  SimTime next_time() const { return heap_.empty() ? SimTime::never() : heap_.front().time; }
  // Removes and returns the first event; the clock moves to its time.
  Event pop() {
    const Key k = heap_.front();
    Bucket& b = buckets_[k.bucket];
    const Entry e = b.events[b.next++];
    if (b.next == b.events.size()) {
      b.events.clear();
      b.next = 0;
      spare_.push_back(k.bucket);
      Recent& r = recent_[slot(k.time, static_cast<int>(k.order >> 56))];
      if (r.bucket == k.bucket) r.bucket = kNoBucket;
      heap_pop();
    }
    --size_;
    now_ = k.time;
    return Event{k.time, e.order, e.payload};
  }
  SimTime now() const { return now_; }
  // Moves the clock without an event (e.g. to a network completion).
  void advance_to(SimTime t) {
    PRISM_CHECK(t >= now_, "clock moved backwards");
    now_ = t;
  }

 private:
  static constexpr std::uint32_t kNoBucket = ~0u;
  static constexpr std::size_t kRecent = 256;  // a power of two
  struct Entry {
    std::uint64_t order;
    Payload payload;
  };
  struct Bucket {
    std::vector<Entry> events;
    std::size_t next = 0;  // the first not yet popped
  };
  // A bucket in the heap, ordered by its first event.
  struct Key {
    SimTime time;
    std::uint64_t order;
    std::uint32_t bucket;
  };
  static bool before(const Key& a, const Key& b) {
    return a.time != b.time ? a.time < b.time : a.order < b.order;
  }
  // The newest bucket of a (time, priority), while it holds events.
  struct Recent {
    SimTime time;
    int priority = 0;
    std::uint32_t bucket = kNoBucket;
  };

  static std::size_t slot(SimTime time, int priority) {
    const auto h =
        (static_cast<std::uint64_t>(time.ns) ^ static_cast<std::uint64_t>(priority) << 48) *
        0x9e3779b97f4a7c15ULL;
    return static_cast<std::size_t>(h >> 56) & (kRecent - 1);
  }
  // heap_ is a 4-ary min-heap: half the depth of a binary one, with a
  // node's children side by side in memory.
  void heap_push(const Key& k) {
    std::size_t i = heap_.size();
    heap_.push_back(k);
    while (i > 0 && before(k, heap_[(i - 1) / 4])) {
      heap_[i] = heap_[(i - 1) / 4];
      i = (i - 1) / 4;
    }
    heap_[i] = k;
  }
  void heap_pop() {
    const Key last = heap_.back();
    heap_.pop_back();
    const std::size_t n = heap_.size();
    if (n == 0) return;
    std::size_t i = 0;
    for (;;) {
      const std::size_t first = 4 * i + 1;
      if (first >= n) break;
      std::size_t best = first;
      for (std::size_t c = first + 1; c < first + 4 && c < n; ++c)
        if (before(heap_[c], heap_[best])) best = c;
      if (!before(heap_[best], last)) break;
      heap_[i] = heap_[best];
      i = best;
    }
    heap_[i] = last;
  }
  // An empty bucket, reusing one (and its capacity) when there is one.
  std::uint32_t new_bucket() {
    if (!spare_.empty()) {
      const std::uint32_t b = spare_.back();
      spare_.pop_back();
      return b;
    }
    buckets_.emplace_back();
    return static_cast<std::uint32_t>(buckets_.size() - 1);
  }

  std::vector<Key> heap_;  // the buckets with events
  std::vector<Bucket> buckets_;
  std::vector<std::uint32_t> spare_;
  std::array<Recent, kRecent> recent_{};
  std::size_t size_ = 0;
  std::uint64_t seq_ = 0;
  SimTime now_;
};

}  // namespace prism
