// A live rank's virtual clock (docs/protocol.md, "Time"): virtual time runs
// with the real clock between waits, and jumps to an op's completion when the
// rank waits for it. If the coordinator's answer came after that completion
// was due, the clock restarts at the completion: the lateness is the
// emulator's, not the job's, and is not counted.
#pragma once

#include <chrono>
#include <cstdint>

namespace prism::client {

class VirtualClock {
 public:
  using Clock = std::chrono::steady_clock;

  VirtualClock(std::int64_t start_ns, Clock::time_point real_start)
      : ref_ns_(start_ns), ref_real_(real_start) {}

  // Virtual ns at the real moment `t`.
  std::int64_t at(Clock::time_point t) const {
    return ref_ns_ + std::chrono::duration_cast<std::chrono::nanoseconds>(t - ref_real_).count();
  }
  // The real moment virtual time `ns` is reached (in the past if it was).
  Clock::time_point real_at(std::int64_t ns) const {
    return ref_real_ + std::chrono::nanoseconds(ns - ref_ns_);
  }
  // Real time `d` the rank spent in the emulator's own work (sending a
  // message) does not count: virtual time stands still for it.
  void exclude(std::chrono::nanoseconds d) { ref_real_ += d; }

  // The rank was released at real moment `t` for a completion at `ns`:
  // when `t` is late, virtual time at `t` becomes `ns`. Returns the real
  // lateness dropped (0 when on time).
  std::chrono::nanoseconds release(std::int64_t ns, Clock::time_point t) {
    const auto due = real_at(ns);
    if (t <= due) return std::chrono::nanoseconds(0);
    ref_ns_ = ns;
    ref_real_ = t;
    return t - due;
  }

 private:
  std::int64_t ref_ns_;
  Clock::time_point ref_real_;
};

}  // namespace prism::client
