#include "mem/alloc_config.h"

#include <array>
#include <string>

#include <gtest/gtest.h>

namespace prism {
namespace {

constexpr std::int64_t kMiB = 1024 * 1024;

AllocatorConfig parse_ok(std::string_view conf) {
  auto r = parse_alloc_conf(conf);
  EXPECT_TRUE(r.is_ok()) << conf << ": " << r.status().message();
  return r.is_ok() ? *r : AllocatorConfig{};
}

std::string parse_error(std::string_view conf) {
  auto r = parse_alloc_conf(conf);
  EXPECT_FALSE(r.is_ok()) << conf << " was accepted";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  return r.status().message();
}

std::array<int, 16> all(int d) {
  std::array<int, 16> a{};
  a.fill(d);
  return a;
}

TEST(AllocConfigTest, EmptyIsDefault) {
  const AllocatorConfig c = parse_ok("");
  EXPECT_EQ(c.max_split_size, AllocatorConfig::kNoLimit);
  EXPECT_EQ(c.roundup_power2_divisions, all(0));
  EXPECT_EQ(c.garbage_collection_threshold, 0);
  EXPECT_FALSE(c.expandable_segments);
  EXPECT_EQ(c.to_string(), "");
}

TEST(AllocConfigTest, MaxSplitSize) {
  EXPECT_EQ(parse_ok("max_split_size_mb:21").max_split_size, 21 * kMiB);
  EXPECT_EQ(parse_ok("max_split_size_mb:512").max_split_size, 512 * kMiB);
  // Spaces vanish anywhere, as in PyTorch's lexArgs.
  EXPECT_EQ(parse_ok(" max_split _size_mb : 5 12 ").max_split_size, 512 * kMiB);
}

TEST(AllocConfigTest, MaxSplitSizeRejections) {
  EXPECT_EQ(parse_error("max_split_size_mb:16"),
            "PYTORCH_CUDA_ALLOC_CONF: max_split_size_mb:16 is too small (must be > 20)");
  EXPECT_EQ(parse_error("max_split_size_mb:20"),
            "PYTORCH_CUDA_ALLOC_CONF: max_split_size_mb:20 is too small (must be > 20)");
  EXPECT_NE(parse_error("max_split_size_mb:abc").find("max_split_size_mb:abc"), std::string::npos);
  EXPECT_NE(parse_error("max_split_size_mb:512MB").find("512MB"), std::string::npos);
  EXPECT_NE(parse_error("max_split_size_mb:-5").find("-5"), std::string::npos);
  EXPECT_NE(parse_error("max_split_size_mb:99999999999").find("out of range"), std::string::npos);
  EXPECT_NE(parse_error("max_split_size_mb").find("expected ':'"), std::string::npos);
  EXPECT_NE(parse_error("max_split_size_mb:").find("needs a value"), std::string::npos);
  EXPECT_NE(parse_error("max_split_size_mb:,").find("needs a value"), std::string::npos);
}

TEST(AllocConfigTest, GarbageCollectionThreshold) {
  EXPECT_DOUBLE_EQ(parse_ok("garbage_collection_threshold:0.6").garbage_collection_threshold, 0.6);
  EXPECT_DOUBLE_EQ(parse_ok("garbage_collection_threshold:.25").garbage_collection_threshold, 0.25);
  for (const char* bad : {"0", "1", "1.5", "-0.1", "0.0"})
    EXPECT_NE(
        parse_error(std::string("garbage_collection_threshold:") + bad).find("must be in (0, 1)"),
        std::string::npos)
        << bad;
  EXPECT_NE(parse_error("garbage_collection_threshold:half").find("not a number"),
            std::string::npos);
}

TEST(AllocConfigTest, DivisionsSingleValue) {
  EXPECT_EQ(parse_ok("roundup_power2_divisions:4").roundup_power2_divisions, all(4));
  EXPECT_EQ(parse_ok("roundup_power2_divisions:1").roundup_power2_divisions, all(1));
  EXPECT_EQ(parse_error("roundup_power2_divisions:3"),
            "PYTORCH_CUDA_ALLOC_CONF: roundup_power2_divisions:3 is not a power of two");
  EXPECT_NE(parse_error("roundup_power2_divisions:0").find("not a power of two"),
            std::string::npos);
}

TEST(AllocConfigTest, DivisionsListForm) {
  // PyTorch's documented example. The first key also covers every interval
  // below it; ">" starts at the last key's interval, so 1024 MB gets 8, not 4
  // (PyTorch's parseRoundUpPower2Divisions does the same).
  const auto c = parse_ok("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]");
  std::array<int, 16> want{};
  for (int i = 0; i <= 8; ++i) want[i] = 1;
  want[9] = 2;
  for (int i = 10; i < 16; ++i) want[i] = 8;
  EXPECT_EQ(c.roundup_power2_divisions, want);

  const auto d = parse_ok("roundup_power2_divisions:[1:2,64:4]");
  std::array<int, 16> want2{};
  want2[0] = 2;
  want2[6] = 4;
  EXPECT_EQ(d.roundup_power2_divisions, want2);
  // Keys past 32768 MB land in the last interval; 0 disables an interval;
  // a trailing comma and an empty list are fine.
  EXPECT_EQ(parse_ok("roundup_power2_divisions:[65536:2]").roundup_power2_divisions, all(2));
  EXPECT_EQ(parse_ok("roundup_power2_divisions:[>:4]").roundup_power2_divisions, all(4));
  EXPECT_EQ(parse_ok("roundup_power2_divisions:[2:4,>:0]").roundup_power2_divisions[0], 4);
  EXPECT_EQ(parse_ok("roundup_power2_divisions:[2:4,]").roundup_power2_divisions[1], 4);
  EXPECT_EQ(parse_ok("roundup_power2_divisions:[]").roundup_power2_divisions, all(0));
}

TEST(AllocConfigTest, DivisionsListRejections) {
  EXPECT_NE(
      parse_error("roundup_power2_divisions:[300:4]").find("interval 300 is not a power of two"),
      std::string::npos);
  EXPECT_NE(parse_error("roundup_power2_divisions:[256:3]").find("256:3 is not a power of two"),
            std::string::npos);
  EXPECT_NE(parse_error("roundup_power2_divisions:[0:4]").find("interval 0"), std::string::npos);
  EXPECT_NE(parse_error("roundup_power2_divisions:[256:4").find("missing ']'"), std::string::npos);
  EXPECT_NE(parse_error("roundup_power2_divisions:[256:4:8]").find("expected ',' or ']'"),
            std::string::npos);
  EXPECT_NE(parse_error("roundup_power2_divisions:[256]").find("expected ':'"), std::string::npos);
  EXPECT_NE(parse_error("roundup_power2_divisions:[abc:4]").find("abc"), std::string::npos);
}

TEST(AllocConfigTest, ExpandableSegmentsAndBackend) {
  EXPECT_TRUE(parse_ok("expandable_segments:True").expandable_segments);
  EXPECT_FALSE(parse_ok("expandable_segments:False").expandable_segments);
  EXPECT_EQ(parse_error("expandable_segments:true"),
            "PYTORCH_CUDA_ALLOC_CONF: expandable_segments:true must be True or False");
  EXPECT_EQ(parse_ok("backend:native").to_string(), "");
  EXPECT_NE(parse_error("backend:cudaMallocAsync").find("not modelled"), std::string::npos);
  EXPECT_NE(parse_error("backend:magic").find("backend:magic is unknown"), std::string::npos);
}

TEST(AllocConfigTest, HostOptionsAreAcceptedAndIgnored) {
  const auto c = parse_ok(
      "pinned_use_cuda_host_register:True,pinned_num_register_threads:8,"
      "release_lock_on_cudamalloc:True,pinned_use_background_threads:False,"
      "pinned_use_hip_host_register:False,release_lock_on_hipmalloc:False");
  EXPECT_EQ(c.to_string(), "");
  EXPECT_NE(parse_error("pinned_num_register_threads:3").find("power of two <= 128"),
            std::string::npos);
  EXPECT_NE(parse_error("pinned_num_register_threads:256").find("<= 128"), std::string::npos);
  EXPECT_NE(parse_error("release_lock_on_cudamalloc:1").find("True or False"), std::string::npos);
  EXPECT_NE(parse_error("pinned_use_background_threads:yes").find("True or False"),
            std::string::npos);
}

TEST(AllocConfigTest, StructureErrors) {
  EXPECT_EQ(parse_error("max_split_size_mb:512,foo:1"),
            "PYTORCH_CUDA_ALLOC_CONF: unknown option 'foo'");
  EXPECT_NE(parse_error("max_non_split_rounding_mb:64").find("'max_non_split_rounding_mb'"),
            std::string::npos);
  EXPECT_NE(parse_error(",,").find("unknown option ','"), std::string::npos);
  EXPECT_NE(parse_error("expandable_segments:True max_split_size_mb:64").find("True or False"),
            std::string::npos);  // spaces vanish: "Truemax_split_size_mb"
  EXPECT_NE(parse_error("expandable_segments:True:False").find("expected ','"), std::string::npos);
  // A trailing comma is accepted, as in PyTorch.
  EXPECT_TRUE(parse_ok("expandable_segments:True,").expandable_segments);
}

TEST(AllocConfigTest, LaterOptionsWin) {
  const auto c = parse_ok("max_split_size_mb:64,max_split_size_mb:128,expandable_segments:True");
  EXPECT_EQ(c.max_split_size, 128 * kMiB);
}

TEST(AllocConfigTest, ToStringIsCanonicalAndRoundTrips) {
  const auto c = parse_ok(
      "expandable_segments:True,garbage_collection_threshold:0.6,"
      "roundup_power2_divisions:4, max_split_size_mb:512");
  EXPECT_EQ(c.to_string(),
            "max_split_size_mb:512,roundup_power2_divisions:4,"
            "garbage_collection_threshold:0.6,expandable_segments:True");
  const char* confs[] = {
      "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]",
      "roundup_power2_divisions:[1:2,64:4]",
      "roundup_power2_divisions:[2:4,4:2,8:0,16:1,32768:16]",
      "roundup_power2_divisions:[32768:8]",
  };
  for (const char* conf : confs) {
    const auto a = parse_ok(conf);
    const auto b = parse_ok(a.to_string());
    EXPECT_EQ(a.roundup_power2_divisions, b.roundup_power2_divisions)
        << conf << " -> " << a.to_string();
    EXPECT_EQ(a.to_string(), b.to_string());
  }
  EXPECT_EQ(parse_ok("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]").to_string(),
            "roundup_power2_divisions:[256:1,512:2,1024:8,>:8]");
}

}  // namespace
}  // namespace prism
