// MemoryTrace: one device's PyTorch CUDA memory history, as
// scripts/memory_snapshot_to_json.py converts the pickle that
// torch.cuda.memory._dump_snapshot() writes (docs/memory.md):
//
//   {"format": "prism-memory-trace", "version": 1, "device": 0,
//    "device_total_memory": bytes (optional),
//    "allocator_settings": {...} or null,
//    "trace": [["alloc", addr, size, stream], ...],
//    "final_segments": [...]}
//
// The trace is what the caching allocator recorded (TraceEntry), in order,
// without stack frames; final_segments is the snapshot's 'segments' list,
// the allocator's state when the pickle was dumped. Loading checks the shape
// of every entry; whether the entries tell a consistent story is the
// replay's business (mem/snapshot_replay.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mem/alloc_config.h"
#include "mem/caching_allocator.h"
#include "util/status.h"

namespace prism {

inline constexpr std::string_view kMemoryTraceFormat = "prism-memory-trace";
inline constexpr int kMemoryTraceVersion = 1;

// One allocator action of the recording. `entry` is its index in the file's
// "trace" array, so that messages name the entry the user can find.
struct RecordedEvent {
  AllocatorEvent event;  // for an OOM, addr is the device's free bytes
  std::size_t entry = 0;
};

struct MemoryTrace {
  int device = 0;
  // The GPU's total memory (torch.cuda.get_device_properties().total_memory)
  // when the recording says it; 0 = unknown. The pickle does not hold it:
  // the converter's --device-memory adds it.
  std::int64_t device_total_memory = 0;
  // The allocator's settings at the dump ('allocator_settings'), when the
  // recording has them (recent PyTorch versions).
  bool has_settings = false;
  AllocatorConfig settings;
  std::string settings_text;          // PYTORCH_CUDA_ALLOC_CONF as recorded, if any
  std::size_t num_entries = 0;        // entries in "trace", ignored ones included
  std::size_t num_ignored = 0;        // 'snapshot' and 'user_defined' entries
  std::vector<RecordedEvent> events;  // the allocator actions, in order
  bool has_final_segments = false;
  std::vector<SegmentInfo> final_segments;  // address order
};

// Action names as torch writes them ("alloc", "segment_map", ...).
std::string_view action_name(AllocatorEvent::Action action);

// Parses the JSON text; errors name `source` and the place ("trace entry
// 12: unknown action 'x'", "final segment 2 block 1: ...").
Result<MemoryTrace> parse_memory_trace(std::string_view text, std::string_view source);
Result<MemoryTrace> load_memory_trace(const std::string& path);

}  // namespace prism
