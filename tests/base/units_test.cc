#include "base/units.h"

#include <gtest/gtest.h>

namespace fathom {
namespace {

TEST(UnitsTest, SerializationTimeRoundsUp) {
  // 1500 bytes at 100 Gb/s = 120 ns exactly.
  EXPECT_EQ(BitsPerSecond::Gbps(100).SerializationTime(1500).ps(), 120000);
  // 1 byte at 3 b/s = 8/3 s, rounded up to whole picoseconds.
  EXPECT_EQ(BitsPerSecond(3).SerializationTime(1).ps(), 2666666666667);
  // A 4 GiB message at 400 Gb/s does not overflow.
  EXPECT_EQ(BitsPerSecond::Gbps(400).SerializationTime(int64_t{1} << 32).ps(),
            ((int64_t{1} << 32) * 8 * 1000) / 400);
}

TEST(UnitsTest, PicosecondArithmetic) {
  Picoseconds a = Picoseconds::FromMicroseconds(4);
  EXPECT_EQ((a + Picoseconds::FromNanoseconds(96)).ps(), 4096000);
  EXPECT_LT(a, a * 2);
  EXPECT_DOUBLE_EQ(Picoseconds::FromMilliseconds(1).seconds(), 1e-3);
}

}  // namespace
}  // namespace fathom
