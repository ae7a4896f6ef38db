#include "base/rng.h"

#include <gtest/gtest.h>

namespace fathom {
namespace {

// The simulator's per-component streams and the fault models' streams were
// two classes until they became this one: these are the first draws each
// produced then, so every scenario's trace stays what it was.
TEST(RngTest, ComponentStreamIsTheEnginesStream) {
  Rng r(1, 0xF1085);
  EXPECT_EQ(r.Next(), 0x6dfc1c18a7cabd44ULL);
  EXPECT_EQ(r.Next(), 0x70be03ab7cf1aeafULL);
  EXPECT_EQ(r.Next(), 0x23ca3e7c77eb4e9cULL);
}

TEST(RngTest, SeedStreamIsTheFaultModelsStream) {
  Rng r(42);
  EXPECT_EQ(r.Next(), 0x15780b2e0c2ec716ULL);
  EXPECT_EQ(r.Next(), 0x6104d9866d113a7eULL);
  EXPECT_EQ(r.Next(), 0xae17533239e499a1ULL);
}

TEST(RngTest, DrawsStayInRange) {
  Rng r(7, 8);
  for (int i = 0; i < 1000; ++i) {
    EXPECT_LT(r.Below(10), 10u);
    const double u = r.Uniform();
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
    const double o = r.UniformOpen();
    EXPECT_GT(o, 0.0);
    EXPECT_LE(o, 1.0);
  }
  EXPECT_FALSE(r.Hit(Rng::Threshold(0)));
  EXPECT_TRUE(r.Hit(Rng::Threshold(1)));
}

}  // namespace
}  // namespace fathom
