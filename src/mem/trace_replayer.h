// TraceReplayer: one pass of a recorded memory history through the
// allocator model (mem/snapshot_replay.h drives it). Internal to src/mem.
//
// A trace records outcomes, not calls; where it does not say which call
// produced a run of events, the replayer picks one of the calls that could
// have, and says so when the model then diverges inside that run, so that
// the driver can try the next one. The ambiguous runs are releases and
// completions right before a malloc that needed device memory or failed
// (with expandable segments, before any malloc):
//   - completions from the malloc's process_events() or from its
//     synchronize after the search failed;
//   - releases from an empty_cache() before the malloc, or from the
//     malloc's own fallbacks after cudaMalloc failed;
// and a free_requested / free_completed pair just before such a run: an
// ordinary free, or a record-stream free that the malloc's synchronize
// completed. Every other event fixes its call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "mem/caching_allocator.h"
#include "mem/snapshot.h"
#include "mem/snapshot_replay.h"
#include "util/status.h"

namespace prism::snapshot_internal {

inline constexpr std::int64_t kSmallSize = 1 << 20;     // largest small-pool request
inline constexpr std::int64_t kLargeBuffer = 20 << 20;  // large-pool segments and pages

// Run start (index into trace.events) -> the alternative to take there.
using Choices = std::map<std::size_t, int>;

class TraceReplayer {
 public:
  TraceReplayer(const MemoryTrace& trace, const SnapshotReplayOptions& options,
                const Choices& choices);

  // Replays until the end or the first divergence; errors for traces no
  // call sequence can produce.
  Status run();

  std::size_t matched() const { return next_; }
  const std::optional<Divergence>& divergence() const { return divergence_; }
  const CachingAllocator& allocator() const { return allocator_; }
  // After a divergence inside ambiguous runs: the innermost run with an
  // alternative left, and that alternative (depth-first search).
  std::optional<std::pair<std::size_t, int>> retry() const { return retry_; }

 private:
  // Answers the model's device calls from the recording.
  class RecordedDevice final : public DeviceMemory {
   public:
    RecordedDevice(TraceReplayer* r, std::int64_t capacity, std::int64_t device_memory)
        : r_(r), capacity_(capacity), device_memory_(device_memory) {}
    std::optional<std::uint64_t> malloc(std::int64_t size) override;
    void free(std::uint64_t addr, std::int64_t size) override;
    std::uint64_t reserve(std::int64_t size) override;
    bool map(std::int64_t size) override;
    void unmap(std::int64_t size) override;
    std::int64_t capacity() const override;
    std::int64_t free_bytes() const override;

   private:
    bool full(std::int64_t size) const { return capacity_ > 0 && used_ + size > capacity_; }
    std::uint64_t unrecorded(std::int64_t size);

    TraceReplayer* r_;
    std::int64_t capacity_;
    std::int64_t device_memory_;
    std::int64_t used_ = 0;
    std::uint64_t next_unrecorded_ = kUnrecordedAddress;
  };

  // An ambiguous run being replayed with alternative `taken` of `count`.
  struct OpenChoice {
    std::size_t run = 0;
    std::size_t end = 0;  // the malloc's alloc or oom
    int taken = 0;
    int count = 0;
  };

  const AllocatorEvent& expected(std::size_t i) const { return trace_.events[i].event; }
  std::size_t size() const { return trace_.events.size(); }
  const AllocatorEvent* peek() const;
  // The address torch reserved for the expandable segment the malloc under
  // way creates, if the recording shows it.
  std::optional<std::uint64_t> fresh_segment_base() const;

  void observe(const AllocatorEvent& e);
  void diverge(const std::optional<AllocatorEvent>& got);
  Status step();
  Result<std::size_t> request_after(std::size_t i) const;
  void malloc_for(std::size_t i);
  Status free_block(const AllocatorEvent& e);
  void complete(const AllocatorEvent& e);
  Status release_run();
  // The first index from `i` on that is not a release or completion.
  std::size_t run_end(std::size_t i) const;
  // Whether a malloc that needed device memory (or failed) is at `i`.
  bool malloc_follows(std::size_t i) const;
  // The alloc or oom of a malloc whose fallbacks may have produced the run
  // that ends at `i`, if any.
  Result<std::optional<std::size_t>> malloc_after(std::size_t i) const;
  // The alternative to take at `run`, of `count`.
  int choice_at(std::size_t run, int count) const;
  void complete_leading(std::size_t end, const AllocatorEvent* unless_fits);
  bool cache_fits(const AllocatorEvent& request,
                  const std::vector<std::uint64_t>& completing) const;

  const MemoryTrace& trace_;
  AllocatorConfig config_;
  Choices choices_;
  RecordedDevice device_;
  CachingAllocator allocator_;
  std::size_t next_ = 0;  // the first recorded event not yet produced
  std::optional<Divergence> divergence_;
  std::vector<OpenChoice> open_;  // the ambiguous runs under way, outermost first
  std::optional<std::pair<std::size_t, int>> retry_;
  StreamId request_stream_ = 0;                               // of the malloc under way
  bool request_small_ = false;                                // whether it is for the small pool
  std::unordered_map<std::uint64_t, BlockId> live_;           // addr -> block
  std::unordered_map<std::uint64_t, std::uint64_t> pending_;  // addr -> ticket
};

}  // namespace prism::snapshot_internal
