// perftest's arithmetic and table formats for `fathom perf`.
#include "transport/verbs/perf_report.h"

#include <gtest/gtest.h>

namespace fathom::transport::verbs {
namespace {

TEST(PerfReportTest, BandwidthInPerftestUnits) {
  // 1000 x 1 MiB in 1 s: 1000 MB/sec (MB = 2^20 B), 8.388608 Gb/sec, 0.001 Mpps.
  BwResult r = ComputeBw(1u << 20, 1000, 1.0, 0, false);
  EXPECT_DOUBLE_EQ(r.average, 1000.0);
  EXPECT_DOUBLE_EQ(r.peak, 1000.0);
  EXPECT_DOUBLE_EQ(r.msg_rate_mpps, 0.001);
  r = ComputeBw(1u << 20, 1000, 1.0, 0.0005, true);
  EXPECT_NEAR(r.average, 8.388608, 1e-9);
  EXPECT_NEAR(r.peak, 16.777216, 1e-9);  // the fastest message took 0.5 ms
  EXPECT_EQ(ComputeBw(64, 0, 1.0, 0, false).average, 0);
}

TEST(PerfReportTest, LatencyStatistics) {
  std::vector<double> s;
  for (int i = 1; i <= 1000; ++i) s.push_back(static_cast<double>(i));
  const LatResult r = ComputeLat(2, s);
  EXPECT_EQ(r.iterations, 1000u);
  EXPECT_DOUBLE_EQ(r.t_min, 1);
  EXPECT_DOUBLE_EQ(r.t_max, 1000);
  EXPECT_DOUBLE_EQ(r.t_typical, 501);
  EXPECT_DOUBLE_EQ(r.t_avg, 500.5);
  EXPECT_NEAR(r.t_stdev, 288.6749, 1e-3);
  EXPECT_DOUBLE_EQ(r.p99, 990);
  EXPECT_DOUBLE_EQ(r.p999, 999);
}

TEST(PerfReportTest, TablesHavePerftestColumns) {
  EXPECT_NE(BwHeader(false).find("BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]"),
            std::string::npos);
  EXPECT_NE(BwHeader(true).find("BW average[Gb/sec]"), std::string::npos);
  EXPECT_NE(LatHeader().find("t_typical[usec]"), std::string::npos);
  EXPECT_NE(LatHeader().find("99.9% percentile[usec]"), std::string::npos);
  const std::string line = BwLine(ComputeBw(65536, 5000, 2.0, 0, false));
  EXPECT_EQ(line.substr(0, 18), " 65536      5000  ");
  EXPECT_NE(line.find("156.25"), std::string::npos);
  EXPECT_NE(BwJson("write_bw", {ComputeBw(65536, 5000, 2.0, 0, false)}, false)
                .find("\"test\":\"write_bw\",\"unit\":\"MB/sec\""),
            std::string::npos);
  EXPECT_NE(LatJson("write_lat", {ComputeLat(2, {1.0, 2.0})}).find("\"t_min\":1.000"),
            std::string::npos);
}

}  // namespace
}  // namespace fathom::transport::verbs
