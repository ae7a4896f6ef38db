#include "transport/collectives/reduce.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

namespace fathom::transport::coll {
namespace {

TEST(HalfTest, ExactValuesRoundTrip) {
  for (float f : {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f, 5.9604644775390625e-08f,
                  0.333251953125f}) {
    EXPECT_EQ(HalfToFloat(FloatToHalf(f)), f) << f;
  }
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(70000.0f), 0x7c00);                 // overflow -> Inf
  EXPECT_EQ(FloatToHalf(5.9604644775390625e-08f), 0x0001);  // smallest subnormal
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::nanf("")))));
}

TEST(HalfTest, RoundsToNearestEven) {
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1.0).
  EXPECT_EQ(FloatToHalf(1.0f + 0x1.0p-11f), 0x3c00);
  // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 (odd) and 1 + 2^-9: up.
  EXPECT_EQ(FloatToHalf(1.0f + 3 * 0x1.0p-11f), 0x3c02);
  EXPECT_EQ(FloatToHalf(1.0f + 0x1.8p-11f), 0x3c01);  // above halfway: up
}

TEST(HalfTest, EveryHalfRoundTripsThroughFloat) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(FloatToHalf(f), h) << std::hex << h;
  }
}

TEST(Bfloat16Test, RoundTripAndRounding) {
  EXPECT_EQ(FloatToBfloat16(1.0f), 0x3f80);
  EXPECT_EQ(Bfloat16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(FloatToBfloat16(1.0f + 0x1.0p-8f), 0x3f80);  // tie -> even
  EXPECT_EQ(FloatToBfloat16(1.0f + 0x1.8p-8f), 0x3f81);
  for (uint32_t b = 0; b < 0x10000; b += 7) {
    const float f = Bfloat16ToFloat(static_cast<uint16_t>(b));
    if (std::isnan(f)) continue;
    EXPECT_EQ(FloatToBfloat16(f), b);
  }
}

class ReduceTest : public ::testing::TestWithParam<std::tuple<DataType, RedOp>> {};

TEST_P(ReduceTest, MatchesScalarReference) {
  const auto [type, op] = GetParam();
  const size_t n = 37;  // odd: exercises the vector loop's remainder
  const size_t es = DataTypeSize(type);
  std::vector<uint8_t> a(n * es), b(n * es);
  for (size_t i = 0; i < n; ++i) {
    StoreElement(a.data(), i, type, static_cast<double>(static_cast<int>(i % 7) - 3));
    StoreElement(b.data(), i, type, static_cast<double>(static_cast<int>(i % 5) - 1));
  }
  ReduceInto(a.data(), b.data(), n, type, op);
  for (size_t i = 0; i < n; ++i) {
    const double x = static_cast<int>(i % 7) - 3, y = static_cast<int>(i % 5) - 1;
    if (!IsFloatingType(type)) {
      // Exactly, in the type: -3 in uint8 is 253, so its min is not -3.
      const int64_t xi = static_cast<int64_t>(x), yi = static_cast<int64_t>(y);
      uint8_t xs[8], ys[8], ws[8];
      StoreInteger(xs, 0, type, static_cast<uint64_t>(xi));
      StoreInteger(ys, 0, type, static_cast<uint64_t>(yi));
      const uint64_t xb = LoadInteger(xs, 0, type), yb = LoadInteger(ys, 0, type);
      const bool less =
          IsSignedInteger(type) ? static_cast<int64_t>(yb) < static_cast<int64_t>(xb) : yb < xb;
      uint64_t want = 0;
      switch (op) {
        case RedOp::kSum:
        case RedOp::kAvg:
          want = xb + yb;
          break;
        case RedOp::kProd:
          want = xb * yb;
          break;
        case RedOp::kMin:
          want = less ? yb : xb;
          break;
        case RedOp::kMax:
          want = less ? xb : yb;
          break;
      }
      StoreInteger(ws, 0, type, want);
      EXPECT_EQ(LoadInteger(a.data(), i, type), LoadInteger(ws, 0, type)) << i;
      continue;
    }
    double want = 0;
    switch (op) {
      case RedOp::kSum:
      case RedOp::kAvg:  // a sum here; the collective scales the inputs
        want = x + y;
        break;
      case RedOp::kProd:
        want = x * y;
        break;
      case RedOp::kMin:
        want = std::min(x, y);
        break;
      case RedOp::kMax:
        want = std::max(x, y);
        break;
    }
    EXPECT_EQ(LoadElement(a.data(), i, type), want) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypesAndOps, ReduceTest,
                         ::testing::Combine(::testing::ValuesIn(kAllDataTypes),
                                            ::testing::ValuesIn(kAllRedOps)));

TEST(ReduceTest, IntegerSumWrapsLikeTwosComplement) {
  int32_t a = INT32_MAX, b = 1;
  ReduceInto(&a, &b, 1, DataType::kInt32, RedOp::kSum);
  EXPECT_EQ(a, INT32_MIN);
}

TEST(ReduceTest, NarrowUnsignedSumsWrap) {
  uint8_t a = 250, b = 10;
  ReduceInto(&a, &b, 1, DataType::kUint8, RedOp::kSum);
  EXPECT_EQ(a, 4);
  int8_t c = 127, d = 1;
  ReduceInto(&c, &d, 1, DataType::kInt8, RedOp::kSum);
  EXPECT_EQ(c, -128);
}

TEST(ReduceTest, ScaleRoundsTheFactorToTheType) {
  std::vector<uint8_t> buf(4 * 8);
  for (DataType t :
       {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBfloat16}) {
    for (size_t i = 0; i < 4; ++i) StoreElement(buf.data(), i, t, 3.0 * static_cast<double>(i));
    ScaleElements(buf.data(), 4, t, 1.0 / 3);
    for (size_t i = 0; i < 4; ++i) {
      EXPECT_NEAR(LoadElement(buf.data(), i, t), static_cast<double>(i), 0.02) << DataTypeName(t);
    }
  }
}

TEST(ParseTest, NamesRoundTripAndBadNamesAreErrors) {
  for (DataType t : kAllDataTypes) EXPECT_EQ(ParseDataType(DataTypeName(t)).value(), t);
  for (RedOp op : kAllRedOps) EXPECT_EQ(ParseRedOp(RedOpName(op)).value(), op);
  // nccl-tests' names, which users paste.
  for (const char* name : {"double", "int8", "uint8", "uint32", "uint64"}) {
    EXPECT_TRUE(ParseDataType(name).ok()) << name;
  }
  EXPECT_TRUE(ParseRedOp("avg").ok());
  EXPECT_FALSE(ParseDataType("float128").ok());
  EXPECT_FALSE(ParseRedOp("mean").ok());
}

}  // namespace
}  // namespace fathom::transport::coll
