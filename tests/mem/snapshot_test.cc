// Loading converted memory snapshots: the accepted shape and every rejection.
#include "mem/snapshot.h"

#include <string>

#include <gtest/gtest.h>

namespace prism {
namespace {

using Action = AllocatorEvent::Action;
using State = SegmentInfo::Block::State;

// A document with `trace` and `extra` top-level members spliced in.
std::string doc(const std::string& trace, const std::string& extra = "") {
  return R"({"format": "prism-memory-trace", "version": 1, "device": 0, )" + extra +
         R"("trace": )" + trace + "}";
}

const std::string kSegments =
    R"("final_segments": [{"address": 4096, "total_size": 3072, "stream": 7,
        "segment_type": "small", "is_expandable": false, "allocated_size": 1024,
        "blocks": [{"address": 4096, "size": 1024, "requested_size": 1000,
                    "state": "active_allocated"},
                   {"address": 5120, "size": 1536, "requested_size": 0,
                    "state": "active_awaiting_free"},
                   {"address": 6656, "size": 512, "state": "inactive"}]}], )";

std::string error_of(const std::string& text) {
  const Result<MemoryTrace> t = parse_memory_trace(text, "t.json");
  EXPECT_FALSE(t.is_ok()) << text;
  return t.is_ok() ? "" : t.status().message();
}

TEST(MemoryTraceTest, ParsesEventsSettingsAndSegments) {
  const std::string text = doc(
      R"([["segment_alloc", 4096, 2097152, 7], ["alloc", 4096, 1000, 7],
          ["snapshot", 0, 1024, 0], ["oom", 123, 4096, 7], ["user_defined", 0, 0, 0],
          ["free_requested", 4096, 1000, 7], ["free_completed", 4096, 1000, 7]])",
      R"("allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:64",
         "max_split_size": 67108864, "expandable_segments": true,
         "garbage_collection_threshold": 0.5, "roundup_power2_divisions": [4, 0, 8],
         "pinned_num_register_threads": 1}, )" +
          kSegments);
  const Result<MemoryTrace> r = parse_memory_trace(text, "t.json");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  const MemoryTrace& t = r.value();
  EXPECT_EQ(t.num_entries, 7u);
  EXPECT_EQ(t.num_ignored, 2u);
  ASSERT_EQ(t.events.size(), 5u);
  EXPECT_EQ(t.events[0].event.action, Action::kSegmentAlloc);
  EXPECT_EQ(t.events[1].event.size, 1000);
  EXPECT_EQ(t.events[1].event.stream, 7);
  EXPECT_EQ(t.events[2].entry, 3u);  // entry numbers count the ignored ones
  EXPECT_EQ(t.events[2].event.action, Action::kOom);
  EXPECT_EQ(t.events[2].event.addr, 123u);
  EXPECT_EQ(t.events[4].event.action, Action::kFreeCompleted);

  ASSERT_TRUE(t.has_settings);
  EXPECT_EQ(t.settings_text, "max_split_size_mb:64");
  EXPECT_EQ(t.settings.max_split_size, 64 << 20);
  EXPECT_TRUE(t.settings.expandable_segments);
  EXPECT_DOUBLE_EQ(t.settings.garbage_collection_threshold, 0.5);
  EXPECT_EQ(t.settings.roundup_power2_divisions[0], 4);
  EXPECT_EQ(t.settings.roundup_power2_divisions[2], 8);
  EXPECT_EQ(t.settings.roundup_power2_divisions[3], 0);

  ASSERT_TRUE(t.has_final_segments);
  ASSERT_EQ(t.final_segments.size(), 1u);
  const SegmentInfo& s = t.final_segments[0];
  EXPECT_EQ(s.addr, 4096u);
  EXPECT_EQ(s.size, 3072);
  EXPECT_EQ(s.stream, 7);
  EXPECT_TRUE(s.small_pool);
  ASSERT_EQ(s.blocks.size(), 3u);
  EXPECT_EQ(s.blocks[0].state, State::kAllocated);
  EXPECT_EQ(s.blocks[0].requested, 1000);
  EXPECT_EQ(s.blocks[1].state, State::kPendingFree);
  EXPECT_EQ(s.blocks[2].state, State::kFree);
}

// A deeply nested "format" once overflowed the stack while its error was printed.
TEST(MemoryTraceTest, DeepNestingIsRefusedBeforeParsing) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const Result<MemoryTrace> r = parse_memory_trace(R"({"format": )" + deep + "}", "t.json");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(), "t.json: values nested deeper than 64 levels");
}

TEST(MemoryTraceTest, UnlimitedSplitAndMissingSettings) {
  Result<MemoryTrace> r = parse_memory_trace(
      doc("[]",
          R"("allocator_settings": {"max_split_size": -1}, "device_total_memory": 85899345920, )"),
      "t");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->settings.max_split_size, AllocatorConfig::kNoLimit);
  EXPECT_EQ(r->device_total_memory, 85899345920);
  r = parse_memory_trace(doc("[]", R"("allocator_settings": null, "final_segments": null, )"), "t");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_FALSE(r->has_settings);
  EXPECT_FALSE(r->has_final_segments);
}

TEST(MemoryTraceTest, RejectsOtherFiles) {
  EXPECT_EQ(error_of("\x80\x04\x95"),
            "t.json: a pickle, not a prism memory trace: convert it with "
            "scripts/memory_snapshot_to_json.py");
  EXPECT_EQ(error_of("{\n  \"format\" 1}"), "t.json:2:12: malformed JSON: unexpected '1'");
  EXPECT_EQ(error_of("[1]"), "t.json: /: expected an object, got an array");
  EXPECT_EQ(error_of(R"({"segments": [], "device_traces": []})"),
            "t.json: a raw torch memory snapshot, not a prism memory trace: convert it with "
            "scripts/memory_snapshot_to_json.py");
  EXPECT_EQ(error_of(R"({"trace": []})"),
            "t.json: /: missing field \"format\" (not a prism memory trace)");
  EXPECT_EQ(error_of(R"({"format": "prism-graph", "trace": []})"),
            "t.json: format: expected \"prism-memory-trace\", got \"prism-graph\"");
}

TEST(MemoryTraceTest, RejectsBadTopLevelFields) {
  EXPECT_EQ(error_of(doc("[]", R"("frames": [], )")), "t.json: /: unknown field \"frames\"");
  EXPECT_EQ(error_of(R"({"format": "prism-memory-trace", "trace": []})"),
            "t.json: /: missing field \"version\"");
  EXPECT_EQ(error_of(R"({"format": "prism-memory-trace", "version": 2, "trace": []})"),
            "t.json: version: version 2 is not supported (this prism reads version 1)");
  EXPECT_EQ(error_of(R"({"format": "prism-memory-trace", "version": 1, "device": -1,
                         "trace": []})"),
            "t.json: device: -1 is out of range [0, 65536]");
  EXPECT_EQ(error_of(doc("[]", R"("device_total_memory": 0, )")),
            "t.json: device_total_memory: 0 is out of range [1, 1125899906842624]");
  EXPECT_EQ(error_of(R"({"format": "prism-memory-trace", "version": 1})"),
            "t.json: /: missing field \"trace\"");
  EXPECT_EQ(error_of(doc("{}")), "t.json: trace: expected an array, got an object");
}

TEST(MemoryTraceTest, RejectsBadSettings) {
  const auto settings = [](const std::string& s) {
    return error_of(doc("[]", "\"allocator_settings\": " + s + ", "));
  };
  EXPECT_EQ(settings("[]"), "t.json: allocator_settings: expected an object, got an array");
  EXPECT_EQ(settings(R"({"max_split_size": "64"})"),
            "t.json: allocator_settings/max_split_size: expected an integer, got a string");
  EXPECT_EQ(settings(R"({"max_split_size": -2})"),
            "t.json: allocator_settings/max_split_size: -2 is out of range [-1, "
            "9223372036854775807]");
  EXPECT_EQ(settings(R"({"expandable_segments": 1})"),
            "t.json: allocator_settings/expandable_segments: expected a boolean");
  EXPECT_EQ(settings(R"({"garbage_collection_threshold": 1.5})"),
            "t.json: allocator_settings/garbage_collection_threshold: expected a number in [0, "
            "1)");
  EXPECT_EQ(settings(R"({"roundup_power2_divisions": [0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]})"),
            "t.json: allocator_settings/roundup_power2_divisions: expected a list of at most 16 "
            "integers");
  EXPECT_EQ(settings(R"({"PYTORCH_CUDA_ALLOC_CONF": 3})"),
            "t.json: allocator_settings/PYTORCH_CUDA_ALLOC_CONF: expected a string");
}

TEST(MemoryTraceTest, RejectsBadTraceEntries) {
  EXPECT_EQ(error_of(doc(R"([["alloc", 0, 512, 0], ["alloc", 0, 512]])")),
            "t.json: trace entry 1: expected [action, addr, size, stream]");
  EXPECT_EQ(error_of(doc(R"([{"action": "alloc"}])")),
            "t.json: trace entry 0: expected [action, addr, size, stream]");
  EXPECT_EQ(error_of(doc(R"([["alloc", 0, 512, 0], ["snapshot", 0, 0, 0], ["x", 0, 0, 0]])")),
            "t.json: trace entry 2: unknown action 'x'");
  EXPECT_EQ(error_of(doc(R"([["alloc", -4096, 512, 0]])")),
            "t.json: trace entry 0 addr: expected an address (an integer >= 0), got a negative "
            "integer");
  EXPECT_EQ(error_of(doc(R"([["alloc", "0x10", 512, 0]])")),
            "t.json: trace entry 0 addr: expected an address (an integer >= 0), got a string");
  EXPECT_EQ(error_of(doc(R"([["alloc", 0, -1, 0]])")),
            "t.json: trace entry 0 size: -1 is out of range [0, 1125899906842624]");
  EXPECT_EQ(error_of(doc(R"([["alloc", 0, 1125899906842625, 0]])")),
            "t.json: trace entry 0 size: 1125899906842625 is out of range [0, 1125899906842624]");
  EXPECT_EQ(error_of(doc(R"([["alloc", 1152921504606846977, 512, 0]])")),
            "t.json: trace entry 0 addr: 0x1000000000000001 is beyond 2^60, not a device "
            "address");
  EXPECT_EQ(error_of(doc(R"([["alloc", 0, 512.5, 0]])")),
            "t.json: trace entry 0 size: expected an integer, got a float");
  EXPECT_EQ(error_of(doc(R"([["alloc", 0, 512, null]])")),
            "t.json: trace entry 0 stream: expected an integer, got null");
  EXPECT_EQ(error_of(doc(R"([["alloc", 0, 18446744073709551615, 0]])")),
            "t.json: trace entry 0 size: 18446744073709551615 is out of range");
}

TEST(MemoryTraceTest, RejectsBadFinalSegments) {
  const auto segs = [](const std::string& s) {
    return error_of(doc("[]", "\"final_segments\": " + s + ", "));
  };
  const std::string head = R"({"address": 4096, "total_size": 1024, "stream": 0, )";
  EXPECT_EQ(segs("{}"), "t.json: final_segments: expected an array, got an object");
  EXPECT_EQ(segs("[3]"), "t.json: final segment 0: expected an object, got an integer");
  EXPECT_EQ(segs(R"([{"total_size": 1024}])"),
            "t.json: final segment 0: missing field \"address\"");
  EXPECT_EQ(segs("[" + head + R"("segment_type": "huge", "blocks": []}])"),
            "t.json: final segment 0 segment_type: expected \"small\" or \"large\"");
  EXPECT_EQ(segs("[" + head + R"("segment_type": "small"}])"),
            "t.json: final segment 0: missing field \"blocks\"");
  EXPECT_EQ(segs("[" + head + R"("segment_type": "small", "is_expandable": "no", "blocks": []}])"),
            "t.json: final segment 0 is_expandable: expected a boolean");
  EXPECT_EQ(segs("[" + head + R"("segment_type": "small", "blocks":
                 [{"address": 4096, "size": 1024, "state": "freed"}]}])"),
            "t.json: final segment 0 block 0 state: unknown block state 'freed' (valid: "
            "active_allocated, active_pending_free, inactive)");
  EXPECT_EQ(segs("[" + head + R"("segment_type": "small", "blocks":
                 [{"address": 4096, "size": 512, "state": "inactive"},
                  {"address": 5632, "size": 512, "state": "inactive"}]}])"),
            "t.json: final segment 0 block 1: address 0x1600 does not follow the previous block "
            "(expected 0x1200)");
  EXPECT_EQ(segs("[" + head + R"("segment_type": "small", "blocks":
                 [{"address": 4096, "size": 512, "state": "inactive"}]}])"),
            "t.json: final segment 0: blocks add up to 512 bytes, total_size is 1024");
  EXPECT_EQ(segs("[" + head + R"("segment_type": "small", "blocks":
                 [{"address": 4096, "size": 0, "state": "inactive"}]}])"),
            "t.json: final segment 0 block 0 size: 0 is out of range [1, 1125899906842624]");
}

TEST(MemoryTraceTest, LoadNamesTheFile) {
  const Result<MemoryTrace> r = load_memory_trace("/nonexistent-prism-dir/x.json");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(), "/nonexistent-prism-dir/x.json: no such file");
}

TEST(MemoryTraceTest, ShippedSnapshotsLoad) {
  for (const char* name : {"basic", "diverging", "record_stream", "expandable", "max_split"}) {
    const Result<MemoryTrace> r =
        load_memory_trace(std::string(PRISM_SOURCE_DIR "/tests/mem/data/") + name + ".json");
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    EXPECT_FALSE(r->events.empty()) << name;
    EXPECT_TRUE(r->has_settings) << name;
    EXPECT_TRUE(r->has_final_segments) << name;
  }
}

TEST(MemoryTraceTest, ActionNames) {
  EXPECT_EQ(action_name(Action::kAlloc), "alloc");
  EXPECT_EQ(action_name(Action::kSegmentUnmap), "segment_unmap");
  EXPECT_EQ(action_name(Action::kOom), "oom");
}

}  // namespace
}  // namespace prism
