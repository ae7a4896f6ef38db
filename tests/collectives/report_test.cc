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
  row.algo = "tree";
  row.out_of_place = Measure(CollKind::kAllReduce, 2, row.size_bytes, 50.0, 0);
  row.in_place = Measure(CollKind::kAllReduce, 2, row.size_bytes, 40.0, 3);
  const std::string h = TableHeader();
  for (const char* col : {"size", "count", "type", "redop", "root", "time", "algbw", "busbw",
                          "#wrong", "out-of-place", "in-place", "algo"}) {
    EXPECT_NE(h.find(col), std::string::npos) << col;
  }
  const std::string r = TableRow(row);
  EXPECT_NE(r.find("1048576"), std::string::npos);
  EXPECT_NE(r.find("float"), std::string::npos);
  EXPECT_NE(r.find("20.97"), std::string::npos);  // 1048576 B / 50 us
  // The algorithm that ran, last: nccl-tests' columns keep their positions.
  EXPECT_NE(r.find("   tree\n"), std::string::npos) << r;
  const std::string f = TableFooter({row});
  EXPECT_NE(f.find("# Out of bounds values : 3 FAILED"), std::string::npos) << f;
  EXPECT_NE(f.find("# Avg bus bandwidth"), std::string::npos);
  EXPECT_NE(RowsToJson({row}).find("\"in_place\":{\"time_us\":40.000"), std::string::npos);
  EXPECT_NE(RowsToJson({row}).find("\"algo\":\"tree\""), std::string::npos);
}

// nccl-tests' first line and "# Using devices" lines, which scripts parse.
TEST(ReportTest, ParamsAndDeviceLinesFollowNcclTests) {
  SweepParams p;
  p.min_bytes = 8;
  p.max_bytes = 134217728;
  p.step_factor = 2;
  EXPECT_EQ(ParamsLine(p),
            "# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 "
            "iters: 20 agg iters: 1 validation: 1 graph: 0\n");
  p.step_factor = 1;
  p.step_bytes = 1048576;
  EXPECT_NE(ParamsLine(p).find("step: 1048576(bytes)"), std::string::npos);
  EXPECT_EQ(DeviceLine(3, 42, "h3", "rxe0"),
            "#  Rank  3 Group  0 Pid     42 on         h3 device rxe0\n");
}

// A zero-byte op (a barrier) shows 0 GB/s, as nccl-tests does for size 0.
TEST(ReportTest, ZeroBytesShowZeroBandwidth) {
  const Measurement m = Measure(CollKind::kBarrier, 4, 0, 12.5, 0);
  EXPECT_EQ(m.algbw_gbs, 0);
  EXPECT_EQ(m.busbw_gbs, 0);
  EXPECT_EQ(m.wrong, 0);
}

}  // namespace
}  // namespace fathom::transport::coll
