// The pieces of `fathom coll` both backends share: the size sweep, each
// rank's buffers and the per-rank check (which must catch a wrong element
// and accept a correct result computed independently here).
#include "transport/collectives/nccl_tests.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace fathom::transport::coll {
namespace {

TEST(NcclTests, SizeSweepFollowsNcclTests) {
  EXPECT_EQ(SizeSweep(1024, 1 << 20, 0, 4),
            (std::vector<uint64_t>{1024, 4096, 16384, 65536, 262144, 1048576}));
  EXPECT_EQ(SizeSweep(1000, 3500, 1000, 1), (std::vector<uint64_t>{1000, 2000, 3000}));
  EXPECT_EQ(SizeSweep(64, 64, 0, 1), (std::vector<uint64_t>{64}));
  EXPECT_EQ(SizeSweep(0, 8, 0, 2), (std::vector<uint64_t>{0, 1, 2, 4, 8}));
  EXPECT_TRUE(SizeSweep(9, 8, 1, 1).empty());
}

TEST(NcclTests, ParseBytesNamesTheFlag) {
  EXPECT_EQ(ParseBytes("-b", "64K").value(), 65536u);
  EXPECT_EQ(ParseBytes("-e", "1G").value(), 1u << 30);
  EXPECT_EQ(ParseBytes("-b", "12").value(), 12u);
  auto bad = ParseBytes("-e", "12Q");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("-e '12Q'"), std::string::npos);
}

// Fills every rank, computes rank r's allreduce result by hand into its
// output, and checks: 0 wrong; one element off: 1 wrong.
TEST(NcclTests, AllreduceCheckCountsWrongElements) {
  const int n = 3;
  const uint64_t count = 37;
  for (bool in_place : {false, true}) {
    for (int r = 0; r < n; ++r) {
      RankBuffers b(CollKind::kAllReduce, n, r, DataType::kInt32, 64);
      b.Fill(count, in_place);
      EXPECT_EQ(LoadElement(b.in(), 5, DataType::kInt32), InputValue(r, 5));
      for (uint64_t i = 0; i < count; ++i) {
        double sum = 0;
        for (int q = 0; q < n; ++q) sum += InputValue(q, i);
        StoreElement(b.out(), i, DataType::kInt32, sum);
      }
      EXPECT_EQ(b.CountWrong(count, RedOp::kSum, 0), 0);
      StoreElement(b.out(), 11, DataType::kInt32, 1000);
      EXPECT_EQ(b.CountWrong(count, RedOp::kSum, 0), 1);
    }
  }
}

// Allgather in place: the input is the rank's slice of the output.
TEST(NcclTests, AllgatherInPlaceLayout) {
  const int n = 4;
  const uint64_t count = 10;
  RankBuffers b(CollKind::kAllGather, n, 2, DataType::kFloat32, count);
  b.Fill(count, true);
  EXPECT_EQ(static_cast<const char*>(b.in()),
            static_cast<const char*>(b.out()) + 2 * count * sizeof(float));
  // Only the own slice is filled: the others' (zeroed) are wrong until
  // gathered, except where the expected value is 0 itself.
  int64_t want = 0;
  for (int q = 0; q < n; ++q) {
    for (uint64_t i = 0; i < count; ++i) want += (q != 2 && InputValue(q, i) != 0) ? 1 : 0;
  }
  EXPECT_GT(want, 0);
  EXPECT_EQ(b.CountWrong(count, RedOp::kSum, 0), want);
}

// `fathom coll ... -b 64G` ended in SIGABRT (a failed allocation): sizes
// are bounded, and the memory a sweep needs is known before it allocates.
TEST(NcclTests, HugeSizesAreErrorsAndBufferBytesAreKnownUpFront) {
  auto huge = ParseBytes("-e", "2048T");
  EXPECT_FALSE(huge.ok());
  EXPECT_FALSE(ParseBytes("-e", "1e30G").ok());
  EXPECT_EQ(RankBuffers::BytesFor(CollKind::kAllReduce, 4, DataType::kFloat32, 1000),
            2 * (4000u + 8));
  EXPECT_EQ(RankBuffers::BytesFor(CollKind::kAllGather, 4, DataType::kInt8, 1000),
            (4000u + 8) + (4000u + 8));
  EXPECT_GT(AvailableMemoryBytes(), 0u);
}

// A barrier moves no data: nothing in its buffers is "wrong" (it reported
// every element of a 32M buffer as wrong).
TEST(NcclTests, BarrierHasNothingWrong) {
  RankBuffers b(CollKind::kBarrier, 2, 1, DataType::kFloat32, 0);
  b.Fill(0, false);
  EXPECT_EQ(b.CountWrong(0, RedOp::kSum, 0), 0);
}

// Integer types are checked exactly, wrapping as the type does: -3 is 253
// in uint8, so the minimum of {253, 0} is 0, not -3.
TEST(NcclTests, IntegerChecksWrapLikeTheType) {
  const int n = 2;
  const uint64_t count = 7;
  for (DataType t : {DataType::kUint8, DataType::kInt8, DataType::kUint64}) {
    for (RedOp op : {RedOp::kSum, RedOp::kMin, RedOp::kMax, RedOp::kProd}) {
      RankBuffers b(CollKind::kAllReduce, n, 0, t, count);
      b.Fill(count, false);
      for (uint64_t i = 0; i < count; ++i) {
        uint8_t x[8], y[8];
        StoreElement(x, 0, t, InputValue(0, i));
        StoreElement(y, 0, t, InputValue(1, i));
        std::memcpy(static_cast<uint8_t*>(b.out()) + i * DataTypeSize(t), x, DataTypeSize(t));
        ReduceInto(static_cast<uint8_t*>(b.out()) + i * DataTypeSize(t), y, 1, t, op);
      }
      EXPECT_EQ(b.CountWrong(count, op, 0), 0) << DataTypeName(t) << " " << RedOpName(op);
      StoreInteger(b.out(), 3, t, LoadInteger(b.out(), 3, t) + 1);
      EXPECT_EQ(b.CountWrong(count, op, 0), 1) << DataTypeName(t) << " " << RedOpName(op);
    }
  }
}

// avg's reference is the mean; the sum is wrong.
TEST(NcclTests, AvgCheckWantsTheMeanNotTheSum) {
  const int n = 3;
  const uint64_t count = 5;
  RankBuffers b(CollKind::kAllReduce, n, 0, DataType::kFloat64, count);
  b.Fill(count, false);
  for (uint64_t i = 0; i < count; ++i) {
    const double sum = InputValue(0, i) + InputValue(1, i) + InputValue(2, i);
    StoreElement(b.out(), i, DataType::kFloat64, sum);
  }
  EXPECT_GT(b.CountWrong(count, RedOp::kAvg, 0), 0);
  for (uint64_t i = 0; i < count; ++i) {
    const double sum = InputValue(0, i) + InputValue(1, i) + InputValue(2, i);
    StoreElement(b.out(), i, DataType::kFloat64, sum / 3);
  }
  EXPECT_EQ(b.CountWrong(count, RedOp::kAvg, 0), 0);
}

// -d all reuses one set of buffers: built for int8 (the largest count), it
// holds every type's count for the same size in bytes.
TEST(NcclTests, BuffersBuiltForInt8HoldEveryType) {
  const uint64_t size = 1000;
  RankBuffers b(CollKind::kAllGather, 3, 1, DataType::kInt8, size / 3);
  for (DataType t : kAllDataTypes) {
    b.SetType(t);
    const uint64_t count = size / CountUnitBytes(CollKind::kAllGather, 3, t);
    b.Fill(count, true);
    EXPECT_EQ(b.type(), t);
  }
}

// The check's reference is computed per residue of the input's period
// (issue 30), not replayed rank by rank: it must accept exactly what a
// rank-by-rank replay (here, through the collectives' own ReduceInto)
// produces and catch one wrong element, for many ranks, every reducing
// kind, integer and floating types, and a reduce-scatter rank's offset.
TEST(NcclTests, ComputedReferenceMatchesTheRankByRankReplay) {
  for (int n : {1, 2, 7, 9, 1024}) {
    for (CollKind kind : {CollKind::kAllReduce, CollKind::kReduceScatter}) {
      for (DataType t : {DataType::kInt32, DataType::kUint8, DataType::kFloat32, DataType::kFloat16,
                         DataType::kBfloat16}) {
        for (RedOp op : {RedOp::kSum, RedOp::kMax, RedOp::kMin, RedOp::kAvg}) {
          const uint64_t count = 23;
          const int rank = n - 1;
          RankBuffers b(kind, n, rank, t, count);
          b.Fill(count, false);
          const size_t es = DataTypeSize(t);
          for (uint64_t i = 0; i < count; ++i) {
            const uint64_t j = kind == CollKind::kReduceScatter ? rank * count + i : i;
            uint8_t acc[8], v[8];
            StoreElement(acc, 0, t, InputValue(0, j));
            for (int q = 1; q < n; ++q) {
              StoreElement(v, 0, t, InputValue(q, j));
              ReduceInto(acc, v, 1, t, op == RedOp::kAvg ? RedOp::kSum : op);
            }
            if (op == RedOp::kAvg) {
              if (IsFloatingType(t)) {
                StoreElement(acc, 0, t, LoadElement(acc, 0, t) / n);
              } else if (IsSignedInteger(t)) {
                StoreInteger(
                    acc, 0, t,
                    static_cast<uint64_t>(static_cast<int64_t>(LoadInteger(acc, 0, t)) / n));
              } else {
                StoreInteger(acc, 0, t, LoadInteger(acc, 0, t) / static_cast<uint64_t>(n));
              }
            }
            std::memcpy(static_cast<uint8_t*>(b.out()) + i * es, acc, es);
          }
          const std::string what =
              std::to_string(n) + " ranks " + std::string(DataTypeName(t)) + " " +
              std::string(RedOpName(op)) +
              (kind == CollKind::kAllReduce ? " allreduce" : " reduce-scatter");
          EXPECT_EQ(b.CountWrong(count, op, 0), 0) << what;
          // Half precision's tolerance grows as ranks^2 (it rounds each
          // partial sum): a wrong element shows in the exact types.
          if (t == DataType::kFloat16 || t == DataType::kBfloat16) continue;
          StoreElement(b.out(), 12, t, LoadElement(b.out(), 12, t) + 64);
          EXPECT_EQ(b.CountWrong(count, op, 0), 1) << what;
        }
      }
    }
  }
}

}  // namespace
}  // namespace fathom::transport::coll
