// Replaying memory histories recorded on a real GPU: tests/mem/data/
// h100-torch2.11 holds what scripts/record_memory_snapshot.py wrote on an
// NVIDIA H100 80GB HBM3 with torch 2.11.0+cu130 (docs/memory.md, "The
// shipped snapshots"). Each history must replay event for event with the
// final segments torch dumped, and the peaks, retries and out-of-memory
// counts must be those torch.cuda.memory_stats() reported at the end of the
// recording (manifest.json).
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "mem/snapshot_replay.h"

namespace prism {
namespace {

const std::string kDir = PRISM_SOURCE_DIR "/tests/mem/data/h100-torch2.11/";
// Every workload of scripts/record_memory_snapshot.py.
const std::vector<std::string> kWorkloads = {"mlp_adam",   "transformer_adam", "record_stream",
                                             "expandable", "max_split",        "roundup",
                                             "gpt_bf16",   "retry_oom",        "expandable_oom"};

nlohmann::json manifest() {
  std::ifstream in(kDir + "manifest.json");
  EXPECT_TRUE(in) << kDir << "manifest.json";
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

// Replayed under the recorded settings, on a GPU of the recorded size.
Result<SnapshotReplayResult> replay(const MemoryTrace& t) {
  SnapshotReplayOptions options;
  options.config = t.settings;
  options.device_memory = t.device_total_memory;
  return replay_memory_trace(t, options);
}

class RecordedSnapshotTest : public testing::TestWithParam<std::string> {};

TEST(RecordedSnapshotManifestTest, HoldsEveryWorkloadOfTheRecorder) {
  const nlohmann::json m = manifest();
  ASSERT_TRUE(m.is_object());
  for (const std::string& name : kWorkloads) {
    ASSERT_TRUE(m.contains(name)) << name;
    EXPECT_EQ(m[name]["torch"], "2.11.0+cu130") << name;
    EXPECT_EQ(m[name]["gpu"], "NVIDIA H100 80GB HBM3") << name;
    EXPECT_FALSE(m[name].contains("error")) << name;
  }
}

TEST_P(RecordedSnapshotTest, ReplaysEventForEventWithTorchsPeaks) {
  const std::string name = GetParam();
  const nlohmann::json info = manifest().at(name);

  Result<MemoryTrace> loaded = load_memory_trace(kDir + name + ".json");
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
  const MemoryTrace& t = loaded.value();
  ASSERT_TRUE(t.has_settings);
  EXPECT_EQ(t.settings_text, info["alloc_conf"].get<std::string>());
  EXPECT_EQ(t.num_entries, info["trace_entries"].get<std::size_t>());
  EXPECT_EQ(t.device_total_memory, info["total_memory"].get<std::int64_t>());

  Result<SnapshotReplayResult> replayed = replay(t);
  ASSERT_TRUE(replayed.is_ok()) << replayed.status().message();
  const SnapshotReplayResult& r = replayed.value();

  EXPECT_TRUE(r.events_match()) << describe_divergence(*r.divergence);
  EXPECT_EQ(r.matched, r.events);
  EXPECT_GT(r.events, 0u);
  ASSERT_TRUE(r.segments_checked);
  EXPECT_TRUE(r.segments_match()) << r.segments_difference;

  // The peaks rebuilt from the trace, and the model's, are torch's own.
  const auto peak_allocated = info["peak_allocated_bytes"].get<std::int64_t>();
  const auto peak_reserved = info["peak_reserved_bytes"].get<std::int64_t>();
  EXPECT_EQ(r.recorded.allocated_peak, peak_allocated);
  EXPECT_EQ(r.recorded.reserved_peak, peak_reserved);
  EXPECT_EQ(r.modelled.allocated_peak, peak_allocated);
  EXPECT_EQ(r.modelled.reserved_peak, peak_reserved);
  EXPECT_EQ(r.modelled.num_alloc_retries, info["num_alloc_retries"].get<std::int64_t>());
  EXPECT_EQ(r.modelled.num_ooms, info["num_ooms"].get<std::int64_t>());
}

INSTANTIATE_TEST_SUITE_P(H100Torch211, RecordedSnapshotTest, testing::ValuesIn(kWorkloads),
                         [](const testing::TestParamInfo<std::string>& p) { return p.param; });

TEST(RecordedRetryTest, RetryReleasesTheCacheBeforeRunningOut) {
  // Filling the GPU with 1 GiB tensors ends in an out-of-memory; after every
  // other tensor is freed, 2 GiB fits only once the cached 1 GiB segments
  // are released (a retry), and a request for the whole GPU runs out again.
  Result<MemoryTrace> t = load_memory_trace(kDir + "retry_oom.json");
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  Result<SnapshotReplayResult> r = replay(t.value());
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r.value().recorded.ooms, 2);
  EXPECT_EQ(r.value().recorded.allocated_peak, std::int64_t{78} << 30);
  EXPECT_GT(r.value().modelled.num_device_free, 0);
}

}  // namespace
}  // namespace prism
