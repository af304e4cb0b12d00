// The allocator's end state in torch.cuda.memory_snapshot() form, and its
// comparison with a recording's final segments (mem/snapshot_replay.h).
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "mem/snapshot_replay.h"

namespace prism {
namespace {

std::string state_name(SegmentInfo::Block::State s) {
  switch (s) {
    case SegmentInfo::Block::State::kAllocated:
      return "active_allocated";
    case SegmentInfo::Block::State::kPendingFree:
      return "active_pending_free";
    case SegmentInfo::Block::State::kFree:
      return "inactive";
    case SegmentInfo::Block::State::kUnmapped:
      return "unmapped";
  }
  return "?";
}

bool active(SegmentInfo::Block::State s) {
  return s == SegmentInfo::Block::State::kAllocated || s == SegmentInfo::Block::State::kPendingFree;
}

std::string compare_blocks(const SegmentInfo& r, const SegmentInfo& m) {
  const std::string where = fmt::format("segment {:#x}", r.addr);
  if (r.blocks.size() != m.blocks.size())
    return fmt::format("{}: recorded {} blocks, modelled {}", where, r.blocks.size(),
                       m.blocks.size());
  for (std::size_t i = 0; i < r.blocks.size(); ++i) {
    const SegmentInfo::Block& a = r.blocks[i];
    const SegmentInfo::Block& b = m.blocks[i];
    const bool same_requested = !active(a.state) || a.requested == b.requested;
    if (a.addr != b.addr || a.size != b.size || a.state != b.state || !same_requested)
      return fmt::format(
          "{} block {}: recorded {:#x} size={} requested={} {}, modelled {:#x} size={} "
          "requested={} {}",
          where, i, a.addr, a.size, a.requested, state_name(a.state), b.addr, b.size, b.requested,
          state_name(b.state));
  }
  return "";
}

}  // namespace

std::vector<SegmentInfo> torch_segments(const std::vector<SegmentInfo>& segments) {
  std::vector<SegmentInfo> out;
  for (const SegmentInfo& seg : segments) {
    if (!seg.expandable) {
      out.push_back(seg);
      continue;
    }
    // One segment per run of mapped blocks.
    bool open = false;
    for (const SegmentInfo::Block& b : seg.blocks) {
      if (b.state == SegmentInfo::Block::State::kUnmapped) {
        open = false;
        continue;
      }
      if (!open) {
        SegmentInfo run = seg;
        run.addr = b.addr;
        run.size = 0;
        run.blocks.clear();
        out.push_back(std::move(run));
        open = true;
      }
      out.back().blocks.push_back(b);
      out.back().size += b.size;
    }
  }
  return out;
}

std::string compare_segments(const std::vector<SegmentInfo>& recorded,
                             const std::vector<SegmentInfo>& modelled) {
  for (std::size_t i = 0; i < recorded.size() && i < modelled.size(); ++i) {
    const SegmentInfo& r = recorded[i];
    const SegmentInfo& m = modelled[i];
    if (r.addr != m.addr || r.size != m.size)
      return fmt::format("segment {}: recorded {:#x} size={}, modelled {:#x} size={}", i, r.addr,
                         r.size, m.addr, m.size);
    if (r.stream != m.stream || r.small_pool != m.small_pool || r.expandable != m.expandable)
      return fmt::format("segment {:#x}: recorded stream={} {}{}, modelled stream={} {}{}", r.addr,
                         r.stream, r.small_pool ? "small" : "large",
                         r.expandable ? " expandable" : "", m.stream,
                         m.small_pool ? "small" : "large", m.expandable ? " expandable" : "");
    if (std::string d = compare_blocks(r, m); !d.empty()) return d;
  }
  if (recorded.size() != modelled.size())
    return fmt::format("recorded {} segments, modelled {}", recorded.size(), modelled.size());
  return "";
}

}  // namespace prism
