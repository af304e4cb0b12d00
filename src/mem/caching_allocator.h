// CachingAllocator: PyTorch's CUDA caching allocator
// (c10/cuda/CUDACachingAllocator.cpp, DeviceCachingAllocator), rule for rule,
// for one device. What it reproduces exactly, given the same requests in the
// same order and the same cudaMalloc addresses:
//   - request rounding: 512 bytes, or roundup_power2_divisions;
//   - pools: small (<= 1 MiB, 2 MiB segments) and large (20 MiB segments for
//     requests below 10 MiB, else rounded up to 2 MiB);
//   - best fit by (stream, size, address) within the request's pool and
//     stream; the max_split_size rules for oversize blocks;
//   - splitting (small pool: remainder >= 512 B; large: remainder > 1 MiB and
//     request below max_split_size) and merging of free neighbours;
//   - on a miss: garbage collection (with a memory fraction), cudaMalloc,
//     release of oversize cached blocks and retry, release of every cached
//     segment and retry, then out of memory;
//   - expandable segments (map / unmap of 2 MiB or 20 MiB pages);
//   - record-stream frees: allocated bytes drop when the block is freed, the
//     block returns to the pool when the streams that used it are done.
// docs/memory.md names the PyTorch version followed and every constant.
//
// Sizes are bytes in int64. Streams are opaque ids: the block belongs to the
// stream it was allocated on and is reused only by that stream.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mem/alloc_config.h"

namespace prism {

using StreamId = std::int64_t;
using BlockId = std::int32_t;  // a live allocation's handle; reused after its free
inline constexpr BlockId kOutOfMemory = -1;

// Where segments come from: cudaMalloc/cudaFree, and for expandable segments
// address reservation plus physical pages (cuMemAddressReserve, cuMemCreate +
// cuMemMap). SimulatedDevice is the usual one; a recorded trace's replay
// supplies the recorded addresses instead. Addresses must be 256-byte
// aligned, as cudaMalloc's are (the allocator checks).
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  // cudaMalloc(size): the address, or nullopt when the device has no room.
  virtual std::optional<std::uint64_t> malloc(std::int64_t size) = 0;
  virtual void free(std::uint64_t addr, std::int64_t size) = 0;
  // Virtual address range for an expandable segment (never fails).
  virtual std::uint64_t reserve(std::int64_t size) = 0;
  // Physical memory for `size` bytes of mapped pages; false when no room.
  virtual bool map(std::int64_t size) = 0;
  virtual void unmap(std::int64_t size) = 0;
  // Total device memory (cudaGetDeviceProperties' totalGlobalMem): sizes the
  // expandable segments' address reservation and a memory fraction's limit.
  // 0 = unknown; then neither may be used.
  virtual std::int64_t capacity() const { return 0; }
  // What cudaMemGetInfo reports free; only the OOM report reads it.
  virtual std::int64_t free_bytes() const { return 0; }
};

// A device of `capacity` bytes of which `used` are taken (CUDA context, NCCL
// buffers: add_external). Addresses grow from a fixed base in 2 MiB steps and
// are never reused, so runs repeat exactly.
class SimulatedDevice final : public DeviceMemory {
 public:
  explicit SimulatedDevice(std::int64_t capacity) : capacity_(capacity) {}
  std::optional<std::uint64_t> malloc(std::int64_t size) override;
  void free(std::uint64_t addr, std::int64_t size) override;
  std::uint64_t reserve(std::int64_t size) override;
  bool map(std::int64_t size) override;
  void unmap(std::int64_t size) override;
  // Memory taken outside the allocator (may exceed capacity: the next
  // cudaMalloc then fails).
  void add_external(std::int64_t bytes) { used_ += bytes; }
  std::int64_t capacity() const override { return capacity_; }
  std::int64_t used() const { return used_; }
  std::int64_t free_bytes() const override { return capacity_ > used_ ? capacity_ - used_ : 0; }

 private:
  std::int64_t capacity_;
  std::int64_t used_ = 0;
  std::uint64_t next_addr_ = 0x7f0000000000;
};

// torch.cuda.memory_stats() counterparts ("all" pools). Peaks are since
// construction.
struct AllocatorStats {
  std::int64_t allocated = 0;  // bytes of allocated blocks (rounded sizes)
  std::int64_t allocated_peak = 0;
  std::int64_t reserved = 0;  // bytes of segments (mapped pages when expandable)
  std::int64_t reserved_peak = 0;
  std::int64_t active = 0;  // allocated + freed but awaiting their streams
  std::int64_t active_peak = 0;
  std::int64_t requested = 0;  // bytes asked for, before rounding (active blocks)
  std::int64_t requested_peak = 0;
  std::int64_t inactive_split = 0;  // free bytes in split segments (fragmentation)
  std::int64_t inactive_split_peak = 0;
  std::int64_t num_allocs = 0;
  std::int64_t num_frees = 0;
  std::int64_t segments = 0;
  std::int64_t num_device_alloc = 0;  // cudaMalloc calls (and page maps)
  std::int64_t num_device_free = 0;
  std::int64_t num_alloc_retries = 0;  // mallocs that released cached segments and retried
  std::int64_t num_sync_all_streams = 0;
  std::int64_t num_ooms = 0;
};

// What the allocator saw when a request failed; PyTorch's OutOfMemoryError
// message is built from the same figures.
struct OomInfo {
  std::int64_t requested = 0;   // the request
  std::int64_t rounded = 0;     // after round_size
  std::int64_t alloc_size = 0;  // the segment it tried to create
  StreamId stream = 0;
  std::int64_t device_free = 0;  // what the device had left
  std::int64_t allocated = 0;    // allocator's state at the failure
  std::int64_t reserved = 0;
};

// One allocator action, as torch's memory history records it
// (TraceEntry::Action): what a recorded trace is checked against.
struct AllocatorEvent {
  enum class Action : std::uint8_t {
    kAlloc,          // block handed out (size: the request)
    kFreeRequested,  // free() called (size: the request)
    kFreeCompleted,  // block back in its pool (size: the request)
    kSegmentAlloc,   // cudaMalloc (size: the segment)
    kSegmentFree,    // cudaFree
    kSegmentMap,     // expandable: pages mapped (addr/size: the range)
    kSegmentUnmap,
    kOom,  // size: the rounded request (torch records params.size()); addr: device free bytes
  };
  Action action = Action::kAlloc;
  std::uint64_t addr = 0;
  std::int64_t size = 0;
  StreamId stream = 0;
};

// A segment and its blocks in address order, as torch.cuda.memory_snapshot()
// lists them.
struct SegmentInfo {
  struct Block {
    enum class State : std::uint8_t { kAllocated, kPendingFree, kFree, kUnmapped };
    std::uint64_t addr = 0;
    std::int64_t size = 0;
    std::int64_t requested = 0;  // allocated and pending-free blocks
    State state = State::kFree;
  };
  std::uint64_t addr = 0;
  std::int64_t size = 0;  // total (reserved address range when expandable)
  StreamId stream = 0;
  bool small_pool = false;
  bool expandable = false;
  std::vector<Block> blocks;
};

class CachingAllocator {
 public:
  // `device` must outlive the allocator.
  CachingAllocator(const AllocatorConfig& config, DeviceMemory* device);
  // A copy of `other`'s state on `device`, which must be a copy of other's
  // device (the same segments taken, the same addresses next); the observer
  // is not copied.
  CachingAllocator(const CachingAllocator& other, DeviceMemory* device);
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // torch's malloc(size, stream): a handle, or kOutOfMemory (last_oom() says
  // why; the state is as PyTorch leaves it after raising OutOfMemoryError).
  // size 0 allocates nothing in PyTorch; here it returns a handle of size 0
  // (address 0) that free() accepts, with no event and no stats. Sizes above
  // 1 PiB are a bug (PRISM_CHECK).
  BlockId malloc(std::int64_t size, StreamId stream);
  // free(): the block goes back to its pool now.
  void free(BlockId b);
  // free() of a block recorded on other streams (Tensor.record_stream):
  // allocated bytes drop now (active and requested bytes, as in PyTorch,
  // when the block returns to its pool at complete_free(ticket)). Returns
  // the ticket.
  std::uint64_t free_deferred(BlockId b);
  // The streams are done with the block. A ticket already completed (by an
  // empty_cache or a malloc's release of all cached blocks, which wait for
  // every pending free as PyTorch's synchronize_and_free_events does) is
  // ignored.
  void complete_free(std::uint64_t ticket);
  // torch.cuda.empty_cache(): waits for pending frees, releases every
  // segment with no allocated block.
  void empty_cache();

  std::uint64_t address(BlockId b) const;
  std::int64_t block_size(BlockId b) const;  // the rounded size handed out

  const AllocatorStats& stats() const;
  const OomInfo& last_oom() const;
  const AllocatorConfig& config() const;
  // Segments in address order (torch.cuda.memory_snapshot()).
  std::vector<SegmentInfo> segments() const;
  // Receives every AllocatorEvent as it happens (none when unset).
  void set_observer(std::function<void(const AllocatorEvent&)> observer);
  // Checks the internal structures against each other (pool sets against
  // blocks, segment links, the pending list): "" when consistent, else what
  // is wrong. O(blocks); for tests.
  std::string check_internal_state() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// round_size() and get_allocation_size() of PyTorch, exposed for tests and
// the docs' tables.
std::int64_t round_request(std::int64_t size, const AllocatorConfig& config);
std::int64_t segment_size_for(std::int64_t rounded);

}  // namespace prism
