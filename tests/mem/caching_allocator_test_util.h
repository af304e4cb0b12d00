// Helpers shared by the caching allocator tests: a compact, exact text form
// of the segment layout and an event recorder.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mem/caching_allocator.h"

namespace prism::testing {

inline constexpr std::uint64_t kBase = 0x7f0000000000;  // SimulatedDevice's first address
inline constexpr std::int64_t kKiB = 1024;
inline constexpr std::int64_t kMiB = 1024 * 1024;
inline constexpr std::int64_t kGiB = 1024 * kMiB;

// The default configuration with max_split_size_mb:`mib`.
inline AllocatorConfig with_max_split(std::int64_t mib) {
  AllocatorConfig c;
  c.max_split_size = mib * kMiB;
  return c;
}

// "20M", "1536K", "512" (bytes).
inline std::string bytes(std::int64_t b) {
  if (b != 0 && b % kMiB == 0) return std::to_string(b / kMiB) + "M";
  if (b != 0 && b % kKiB == 0) return std::to_string(b / kKiB) + "K";
  return std::to_string(b);
}

// One segment per line: "L@20M s0: A5M F15M", addresses relative to kBase;
// S/L = small/large pool, E = expandable; blocks A(llocated), P(ending
// free), F(ree), U(nmapped) with their sizes, in address order.
inline std::string layout(const CachingAllocator& a) {
  std::string s;
  for (const SegmentInfo& seg : a.segments()) {
    s += seg.small_pool ? "S" : "L";
    if (seg.expandable) s += "E";
    s += '@';
    s += bytes(static_cast<std::int64_t>(seg.addr - kBase));
    s += " s";
    s += std::to_string(seg.stream);
    s += ':';
    for (const auto& b : seg.blocks) {
      static constexpr char kState[] = {'A', 'P', 'F', 'U'};
      s += " ";
      s += kState[static_cast<int>(b.state)];
      s += bytes(b.size);
    }
    s += "\n";
  }
  return s;
}

inline std::string event_string(const AllocatorEvent& e) {
  static const char* const kNames[] = {
      "ALLOC",        "FREE_REQUESTED", "FREE_COMPLETED", "SEGMENT_ALLOC",
      "SEGMENT_FREE", "SEGMENT_MAP",    "SEGMENT_UNMAP",  "OOM"};
  const bool oom = e.action == AllocatorEvent::Action::kOom;
  const std::string addr = oom ? bytes(static_cast<std::int64_t>(e.addr))
                               : bytes(static_cast<std::int64_t>(e.addr - kBase));
  return std::string(kNames[static_cast<int>(e.action)]) + " " + addr + " " + bytes(e.size) + " s" +
         std::to_string(e.stream);
}

// Records every event as event_string.
struct EventLog {
  std::vector<std::string> events;
  void attach(CachingAllocator& a) {
    a.set_observer([this](const AllocatorEvent& e) { events.push_back(event_string(e)); });
  }
  std::vector<std::string> take() { return std::move(events); }
};

}  // namespace prism::testing
