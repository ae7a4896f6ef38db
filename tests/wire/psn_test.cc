#include "fabric/wire/psn.h"

#include <gtest/gtest.h>

namespace fathom::wire {
namespace {

TEST(PsnTest, AddWrapsAt24Bits) {
  EXPECT_EQ(PsnAdd(0xFFFFFF, 1), 0u);
  EXPECT_EQ(PsnAdd(0xFFFFFE, 5), 3u);
  EXPECT_EQ(PsnAdd(0, -1), 0xFFFFFFu);
  EXPECT_EQ(PsnAdd(10, 0x1000000), 10u);
  EXPECT_EQ(PsnAdd(5, 7), 12u);
}

TEST(PsnTest, DiffIsSignedAcrossTheWrap) {
  EXPECT_EQ(PsnDiff(1, 0xFFFFFF), 2);
  EXPECT_EQ(PsnDiff(0xFFFFFF, 1), -2);
  EXPECT_EQ(PsnDiff(100, 100), 0);
  EXPECT_EQ(PsnDiff(0x7FFFFF, 0), 0x7FFFFF);   // largest forward distance
  EXPECT_EQ(PsnDiff(0x800000, 0), -0x800000);  // half window counts as behind
  EXPECT_EQ(PsnDiff(0, 0x800000), -0x800000);
}

TEST(PsnTest, CompareUsesTheWindow) {
  EXPECT_TRUE(PsnLess(0xFFFFF0, 0x000010));
  EXPECT_FALSE(PsnLess(0x000010, 0xFFFFF0));
  EXPECT_TRUE(PsnGreater(0x000010, 0xFFFFF0));
  EXPECT_TRUE(PsnLessEqual(7, 7));
  EXPECT_FALSE(PsnLess(7, 7));
}

TEST(PsnTest, WindowMembershipWraps) {
  EXPECT_TRUE(PsnInWindow(0xFFFFFF, 0xFFFFFE, 4));
  EXPECT_TRUE(PsnInWindow(1, 0xFFFFFE, 4));
  EXPECT_FALSE(PsnInWindow(2, 0xFFFFFE, 4));
  EXPECT_FALSE(PsnInWindow(0xFFFFFD, 0xFFFFFE, 4));
}

// Every step of a long walk across the wrap agrees with plain integers.
TEST(PsnTest, SweepAgreesWithWideIntegers) {
  const int64_t start = 0xFFFF00;
  for (int64_t i = 0; i < 512; ++i) {
    for (int64_t d : {-300, -1, 0, 1, 255, 70000}) {
      const uint32_t a = PsnAdd(static_cast<uint32_t>(start), i);
      const uint32_t b = PsnAdd(a, d);
      EXPECT_EQ(PsnDiff(b, a), d);
      EXPECT_EQ(PsnLess(a, b), d > 0);
    }
  }
}

}  // namespace
}  // namespace fathom::wire
