#include "net/collective_sweep.h"

#include <gtest/gtest.h>

namespace prism {
namespace {

NcclTuner tuner_for(int gpus) {
  ClusterSpec c = *cluster_preset("dgx-h100");
  EXPECT_TRUE(size_cluster(&c, gpus, 0).is_ok());
  return NcclTuner(c);
}

TEST(CollectiveSweep, RowsFollowNcclTests) {
  SweepOptions o;
  o.op = *parse_sweep_op("allgather");
  o.min_bytes = 8;
  o.max_bytes = 1 << 20;
  o.step_factor = 4;
  const auto rows = run_sweep(tuner_for(64), o);
  ASSERT_TRUE(rows.is_ok());
  // 8, 32 and 128 bytes are less than one fp32 per rank for 64 ranks: skipped.
  ASSERT_EQ(rows->front().bytes, 512);
  EXPECT_EQ(rows->front().count, 2);
  EXPECT_EQ(rows->back().bytes, 1 << 19);  // 8 x 4^8; the next step passes 1 MiB
  for (const SweepRow& r : *rows) EXPECT_NEAR(r.busbw_GBps, r.algbw_GBps * 63 / 64, 1e-9);
}

TEST(CollectiveSweep, ParseSizeAndOps) {
  EXPECT_EQ(*parse_size("-b", "8"), 8);
  EXPECT_EQ(*parse_size("-b", "64K"), 65536);
  EXPECT_EQ(*parse_size("-e", "8G"), std::int64_t{8} << 30);
  EXPECT_EQ(parse_size("-e", "8X").status().message(),
            "-e: \"8X\" is not a size (e.g. 8, 64K, 8G)");
  EXPECT_EQ(parse_size("-e", "2048T").status().message(), "-e: 2048T is more than 1 PiB");
  EXPECT_EQ(sweep_op_name(*parse_sweep_op("All_Reduce")), "all_reduce");
  EXPECT_EQ(sweep_op_name(*parse_sweep_op("sendrecv")), "send_recv");
  EXPECT_FALSE(parse_sweep_op("scan").is_ok());
}

TEST(CollectiveSweep, Rejections) {
  const NcclTuner t = tuner_for(8);
  SweepOptions o;
  o.min_bytes = 0;
  EXPECT_EQ(run_sweep(t, o).status().message(), "--min-bytes must be >= 1 (got 0)");
  o.min_bytes = 64;
  o.max_bytes = 8;
  EXPECT_EQ(run_sweep(t, o).status().message(), "--max-bytes (8) is below --min-bytes (64)");
  o.max_bytes = 64;
  o.step_factor = 1;
  EXPECT_EQ(run_sweep(t, o).status().message(), "--step-factor must be >= 2 (got 1)");
}

TEST(CollectiveSweep, Deterministic) {
  SweepOptions o;
  const auto a = run_sweep(tuner_for(256), o);
  const auto b = run_sweep(tuner_for(256), o);
  ASSERT_EQ(a->size(), b->size());
  for (std::size_t i = 0; i < a->size(); ++i) EXPECT_EQ((*a)[i].time, (*b)[i].time);
}

}  // namespace
}  // namespace prism
