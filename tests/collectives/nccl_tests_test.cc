// The pieces of `fathom coll` both backends share: the size sweep, each
// rank's buffers and the per-rank check (which must catch a wrong element
// and accept a correct result computed independently here).
#include "transport/collectives/nccl_tests.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace fathom::transport::coll
