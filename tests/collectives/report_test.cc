#include "transport/collectives/report.h"

#include <gtest/gtest.h>

namespace fathom::transport::coll {
namespace {

TEST(ReportTest, BusBwFactorsFollowNcclTests) {
  EXPECT_DOUBLE_EQ(BusBwFactor(CollKind::kAllReduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(BusBwFactor(CollKind::kAllGather, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(BusBwFactor(CollKind::kReduceScatter, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(BusBwFactor(CollKind::kBroadcast, 16), 1.0);
  EXPECT_DOUBLE_EQ(BusBwFactor(CollKind::kAllReduce, 1), 0.0);
}

TEST(ReportTest, AlgbwIsBytesOverTimeInGBs) {
  const Measurement m = Measure(CollKind::kAllReduce, 4, 1000000, 100.0, 0);
  EXPECT_DOUBLE_EQ(m.algbw_gbs, 10.0);  // 1e6 B / 100 us = 10 GB/s
  EXPECT_DOUBLE_EQ(m.busbw_gbs, 15.0);  // x 2(n-1)/n = 1.5
}

TEST(ReportTest, TableHasNcclTestsColumnsAndFooter) {
  ReportRow row;
  row.size_bytes = 1048576;
  row.count = 262144;
  row.redop = "sum";
  row.out_of_place = Measure(CollKind::kAllReduce, 2, row.size_bytes, 50.0, 0);
  row.in_place = Measure(CollKind::kAllReduce, 2, row.size_bytes, 40.0, 3);
  const std::string h = TableHeader();
  for (const char* col : {"size", "count", "type", "redop", "root", "time", "algbw", "busbw",
                          "#wrong", "out-of-place", "in-place"}) {
    EXPECT_NE(h.find(col), std::string::npos) << col;
  }
  const std::string r = TableRow(row);
  EXPECT_NE(r.find("1048576"), std::string::npos);
  EXPECT_NE(r.find("float"), std::string::npos);
  EXPECT_NE(r.find("20.97"), std::string::npos);  // 1048576 B / 50 us
  const std::string f = TableFooter({row});
  EXPECT_NE(f.find("# Out of bounds values : 3 FAILED"), std::string::npos) << f;
  EXPECT_NE(f.find("# Avg bus bandwidth"), std::string::npos);
  EXPECT_NE(RowsToJson({row}).find("\"in_place\":{\"time_us\":40.000"), std::string::npos);
}

}  // namespace
}  // namespace fathom::transport::coll
