// Strong units. Simulated time is an integer number of nanoseconds (SimTime);
// sizes are an integer number of bytes (Bytes). Keeping them distinct types
// stops "bytes + nanoseconds" from compiling, and integers keep every run
// bit-for-bit repeatable.
#pragma once

#include <compare>
#include <cstdint>
#include <limits>

namespace prism {

// 128-bit intermediate for exact products of 64-bit quantities.
__extension__ typedef __int128 Int128;

struct SimTime {
  std::int64_t ns = 0;

  static constexpr SimTime zero() { return SimTime{0}; }
  static constexpr SimTime never() { return SimTime{std::numeric_limits<std::int64_t>::max()}; }
  static constexpr SimTime from_us(std::int64_t us) { return SimTime{us * 1000}; }
  static constexpr SimTime from_ms(std::int64_t ms) { return SimTime{ms * 1000 * 1000}; }

  constexpr double seconds() const { return static_cast<double>(ns) * 1e-9; }
  constexpr double micros() const { return static_cast<double>(ns) * 1e-3; }

  friend constexpr auto operator<=>(SimTime, SimTime) = default;
  friend constexpr SimTime operator+(SimTime a, SimTime b) { return SimTime{a.ns + b.ns}; }
  friend constexpr SimTime operator-(SimTime a, SimTime b) { return SimTime{a.ns - b.ns}; }
  constexpr SimTime& operator+=(SimTime o) {
    ns += o.ns;
    return *this;
  }
  constexpr SimTime& operator-=(SimTime o) {
    ns -= o.ns;
    return *this;
  }
};

constexpr SimTime max(SimTime a, SimTime b) {
  return a < b ? b : a;
}
constexpr SimTime min(SimTime a, SimTime b) {
  return a < b ? a : b;
}

struct Bytes {
  std::int64_t count = 0;

  constexpr double gib() const { return static_cast<double>(count) / (1024.0 * 1024.0 * 1024.0); }

  friend constexpr auto operator<=>(Bytes, Bytes) = default;
  friend constexpr Bytes operator+(Bytes a, Bytes b) { return Bytes{a.count + b.count}; }
  friend constexpr Bytes operator-(Bytes a, Bytes b) { return Bytes{a.count - b.count}; }
  constexpr Bytes& operator+=(Bytes o) {
    count += o.count;
    return *this;
  }
  constexpr Bytes& operator-=(Bytes o) {
    count -= o.count;
    return *this;
  }
};

// Limits that keep every sum of durations inside 64-bit nanoseconds: one op
// lasts at most kMaxOpDuration (about 13 days; models clamp to it, graphs are
// rejected above it), and a replay stops with an error past kTimeHorizon
// (about 73 years), so now + duration never overflows.
inline constexpr SimTime kMaxOpDuration{std::int64_t{1} << 50};
inline constexpr SimTime kTimeHorizon{std::int64_t{1} << 61};
inline constexpr Bytes kMaxBytes{std::int64_t{1} << 50};            // 1 PiB
inline constexpr std::int64_t kMaxComputeScalePpm = 1'000'000'000;  // x1000

// Bandwidth in bytes per second, integral so that transfer times are exact.
struct Bandwidth {
  std::int64_t bytes_per_s = 0;

  static constexpr Bandwidth from_gbps(double gb_per_s) {  // GB/s = 1e9 bytes/s, as nccl-tests
    // Round half up (inputs are non-negative; std::llround is not constexpr).
    return Bandwidth{
        static_cast<std::int64_t>(gb_per_s * 1e9 + 0.5)};  // NOLINT(bugprone-incorrect-roundings)
  }
  // Time to move `b` at this rate, rounded up to the next nanosecond and
  // clamped to kMaxOpDuration (1 PiB at 1 byte/s would not fit 64 bits).
  constexpr SimTime time_for(Bytes b) const {
    if (b.count <= 0) return SimTime::zero();
    const Int128 num = static_cast<Int128>(b.count) * 1'000'000'000;
    const Int128 ns = (num + bytes_per_s - 1) / bytes_per_s;
    return ns < kMaxOpDuration.ns ? SimTime{static_cast<std::int64_t>(ns)} : kMaxOpDuration;
  }
  friend constexpr auto operator<=>(Bandwidth, Bandwidth) = default;
};

}  // namespace prism
