// EventQueue: the discrete-event core. Events are ordered by (time, priority,
// insertion sequence), as in SST, so ties never depend on container or hash
// order and a run repeats exactly. The payload is a typed value chosen by the
// user of the queue; the queue knows nothing of what events mean.
#pragma once

#include <cstdint>
#include <queue>
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
    heap_.push(Event{time, (static_cast<std::uint64_t>(priority) << 56) | seq_++, p});
  }
  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  SimTime next_time() const { return heap_.empty() ? SimTime::never() : heap_.top().time; }
  // Removes and returns the first event; the clock moves to its time.
  Event pop() {
    Event e = heap_.top();
    heap_.pop();
    now_ = e.time;
    return e;
  }
  SimTime now() const { return now_; }
  // Moves the clock without an event (e.g. to a network completion).
  void advance_to(SimTime t) {
    PRISM_CHECK(t >= now_, "clock moved backwards");
    now_ = t;
  }

 private:
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      return a.time != b.time ? a.time > b.time : a.order > b.order;
    }
  };
  std::priority_queue<Event, std::vector<Event>, Later> heap_;
  std::uint64_t seq_ = 0;
  SimTime now_;
};

}  // namespace prism
