#include "util/units.h"

#include <gtest/gtest.h>

namespace prism {
namespace {

TEST(UnitsTest, SimTimeArithmeticAndConversions) {
  SimTime a = SimTime::from_us(3);
  EXPECT_EQ(a.ns, 3000);
  EXPECT_EQ((a + SimTime{5}).ns, 3005);
  EXPECT_EQ((a - SimTime{1000}).ns, 2000);
  EXPECT_DOUBLE_EQ(SimTime::from_ms(2).seconds(), 0.002);
  EXPECT_LT(SimTime{1}, SimTime::never());
  EXPECT_EQ(max(SimTime{4}, SimTime{9}).ns, 9);
}

TEST(UnitsTest, BandwidthTimeRoundsUpToNanoseconds) {
  const Bandwidth bw = Bandwidth::from_gbps(1);  // one byte per ns
  EXPECT_EQ(bw.bytes_per_s, 1'000'000'000);
  EXPECT_EQ(bw.time_for(Bytes{1000}).ns, 1000);
  EXPECT_EQ(Bandwidth::from_gbps(3).time_for(Bytes{10}).ns, 4);  // 3.33 ns -> 4
  EXPECT_EQ(bw.time_for(Bytes{0}).ns, 0);
}

TEST(UnitsTest, BandwidthIsExactForHugeTransfers) {
  // 1 TiB at 48 GB/s: no overflow of the 64-bit intermediate.
  const Bandwidth bw = Bandwidth::from_gbps(48);
  const std::int64_t tib = std::int64_t{1} << 40;
  const Int128 expect =
      (static_cast<Int128>(tib) * 1'000'000'000 + 47'999'999'999) / 48'000'000'000;
  EXPECT_EQ(bw.time_for(Bytes{tib}).ns, static_cast<std::int64_t>(expect));
  EXPECT_EQ(bw.time_for(Bytes{tib}).ns, 22'906'492'246);  // 22.9 s
}

}  // namespace
}  // namespace prism
