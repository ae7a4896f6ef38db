// Statistical and schedule tests of the fault models. Seeds are fixed, so
// every test is deterministic; tolerances come from the distributions (4
// sigma), not from observed runs.
#include "faults/models.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "faults/fault_set.h"

namespace fathom::faults {
namespace {

Frame MakeFrame(int64_t at_ps = 0, uint32_t bytes = 1100) {
  Frame f{};
  f.at = Picoseconds(at_ps);
  f.wire_bytes = bytes;
  f.ip_bytes = bytes - 38;
  f.dest_qpn = 0x11;
  f.opcode = 0x0A;
  f.udp_sport = 0xC001;
  f.src_host = 0;
  f.dst_host = 1;
  return f;
}

// |observed - expected| within 4 sigma of a binomial proportion.
void ExpectProportion(uint64_t hits, uint64_t n, double p) {
  const double sigma = std::sqrt(p * (1 - p) / static_cast<double>(n));
  EXPECT_NEAR(static_cast<double>(hits) / static_cast<double>(n), p, 4 * sigma)
      << hits << " of " << n << ", expected p=" << p;
}

// One list of drop reasons serves the fabric and the fault models: every
// reason has its own name, and the fabric's keep the values the simulator's
// trace digest was made with.
TEST(DropReasonTest, OneNamePerReasonAndFabricValuesKept) {
  std::set<std::string> names;
  for (size_t i = 0; i < static_cast<size_t>(DropReason::kCount); ++i) {
    const std::string name = DropReasonName(static_cast<DropReason>(i));
    EXPECT_NE(name, "unknown") << i;
    EXPECT_TRUE(names.insert(name).second) << name;
  }
  EXPECT_EQ(static_cast<int>(DropReason::kTailDrop), 0);
  EXPECT_EQ(static_cast<int>(DropReason::kImpairment), 3);
  EXPECT_EQ(static_cast<int>(DropReason::kHostCrashed), 6);
  EXPECT_EQ(Verdict{}.reason, DropReason::kNone);
}

TEST(Rng, StreamSeedsDifferByModelAndScenario) {
  EXPECT_NE(StreamSeed(1, HashId("a")), StreamSeed(1, HashId("b")));
  EXPECT_NE(StreamSeed(1, HashId("a")), StreamSeed(2, HashId("a")));
  EXPECT_EQ(StreamSeed(7, HashId("loss#0")), StreamSeed(7, HashId("loss#0")));
}

TEST(Rng, GapSamplerMatchesGeometricMean) {
  Rng rng(42);
  for (double p : {0.5, 0.01, 1e-4}) {
    GapSampler g(p);
    const int n = 200000;
    double sum = 0;
    for (int i = 0; i < n; ++i) sum += static_cast<double>(g.Next(rng));
    const double mean = (1 - p) / p;
    const double sd = std::sqrt(1 - p) / p;
    EXPECT_NEAR(sum / n, mean, 4 * sd / std::sqrt(n)) << "p=" << p;
  }
  EXPECT_EQ(GapSampler(0).Next(rng), GapSampler::kNever);
  EXPECT_EQ(GapSampler(1).Next(rng), 0u);
}

TEST(BernoulliLoss, RateWithinFourSigma) {
  for (double p : {0.001, 0.01, 0.05}) {
    BernoulliLoss m(p, Window{}, Filter{}, 123);
    const uint64_t n = 1000000;
    uint64_t dropped = 0;
    for (uint64_t i = 0; i < n; ++i) {
      Verdict v;
      if (!m.Apply(MakeFrame(static_cast<int64_t>(i)), v)) {
        ++dropped;
        EXPECT_EQ(v.reason, DropReason::kLoss);
      }
    }
    ExpectProportion(dropped, n, p);
    EXPECT_EQ(m.counters().frames_dropped, dropped);
    EXPECT_EQ(m.counters().frames_seen, n);
  }
}

TEST(BernoulliLoss, FilterAndWindowLimitWhatIsDropped) {
  Filter filter;
  filter.fields = Filter::kQpn | Filter::kSize;
  filter.qpn = 0x22;
  filter.min_bytes = 1000;
  BernoulliLoss m(1.0, Window{Picoseconds(100), Picoseconds(200)}, filter, 1);
  Frame f = MakeFrame(150);
  Verdict v;
  EXPECT_TRUE(m.Apply(f, v));  // wrong QP
  f.dest_qpn = 0x22;
  EXPECT_FALSE(m.Apply(f, v));  // matches
  f.wire_bytes = 500;
  v = Verdict{};
  EXPECT_TRUE(m.Apply(f, v));  // too small
  f.wire_bytes = 1100;
  f.at = Picoseconds(200);
  EXPECT_TRUE(m.Apply(f, v));  // window is [100, 200)
  f.at = Picoseconds(99);
  EXPECT_TRUE(m.Apply(f, v));
  EXPECT_EQ(m.counters().frames_seen, 1u);
  EXPECT_EQ(m.counters().frames_dropped, 1u);
}

TEST(GilbertElliott, StationaryLossMatchesNetemDefinition) {
  // netem: loss gemodel p r 1-h 1-k
  const GilbertElliottLoss::Params params{0.01, 0.3, 0.8, 0.001};
  GilbertElliottLoss m(params, Window{}, Filter{}, 99);
  const double expected = 0.001 * 0.3 / 0.31 + 0.8 * 0.01 / 0.31;
  EXPECT_DOUBLE_EQ(m.StationaryLoss(), expected);
  const uint64_t n = 2000000;
  uint64_t dropped = 0;
  uint64_t runs = 0;
  bool last = false;
  for (uint64_t i = 0; i < n; ++i) {
    Verdict v;
    const bool lost = !m.Apply(MakeFrame(), v);
    dropped += lost;
    runs += lost && !last;
    last = lost;
  }
  // Losses are correlated: the variance of the count is inflated by about
  // (1 + 2 sum of autocorrelations) ~ (2 - p - r) / (p + r) for the state
  // chain; use that factor on the binomial sigma.
  const double inflate = (2 - params.p - params.r) / (params.p + params.r);
  const double sigma = std::sqrt(expected * (1 - expected) / n * inflate);
  EXPECT_NEAR(static_cast<double>(dropped) / n, expected, 4 * sigma);
  // Bursty: mean loss run longer than Bernoulli's 1/(1-p).
  EXPECT_GT(static_cast<double>(dropped) / runs, 1.0 / (1 - expected) + 0.5);
}

TEST(Determinism, SameSeedSameVerdicts) {
  auto run = [](uint64_t seed) {
    FaultSet set;
    set.Add(BernoulliLoss(0.1, Window{}, Filter{}, StreamSeed(seed, HashId("loss"))), "loss");
    set.Add(DelayModel(Picoseconds(1000), Picoseconds(500), Window{}, Filter{},
                       StreamSeed(seed, HashId("delay"))),
            "delay");
    FecModel::Params fp;
    fp.mode = FecMode::kKp4;
    fp.pre_fec_ber = 2e-3;
    set.Add(FecModel(fp, Window{}, Filter{}, StreamSeed(seed, HashId("fec"))), "fec");
    std::vector<int64_t> trace;
    for (int i = 0; i < 5000; ++i) {
      const Verdict v = set.Evaluate(MakeFrame(i * 1000, 4200));
      trace.push_back(static_cast<int64_t>(v.action) * 1000000000 + v.extra_delay.ps());
    }
    return trace;
  };
  EXPECT_EQ(run(5), run(5));
  EXPECT_NE(run(5), run(6));
}

TEST(FaultSet, OrdersModelsPhysicallyAndStopsAtDrop) {
  FaultSet set;
  set.Add(DelayModel(Picoseconds(10), Picoseconds(0), Window{}, Filter{}, 1), "delay");
  set.Add(MtuModel(1500, Window{}, Filter{}, 2), "mtu");
  EXPECT_STREQ(ModelKindName(set.model(0)), "mtu");
  EXPECT_EQ(set.label(1), "delay");
  Verdict v = set.Evaluate(MakeFrame(0, 4200));
  EXPECT_TRUE(v.dropped());
  EXPECT_EQ(v.reason, DropReason::kOversize);
  EXPECT_EQ(set.counters(0).port_xmit_discards, 1u);
  EXPECT_EQ(set.counters(1).frames_seen, 0u);  // never reached the delay model
  v = set.Evaluate(MakeFrame(0, 1538));        // ip_bytes 1500: fits
  EXPECT_FALSE(v.dropped());
  EXPECT_EQ(v.extra_delay, Picoseconds(10));
}

TEST(FlapSchedule, EdgesAndRepeats) {
  FlapSchedule s;
  s.start = Picoseconds(1000);
  s.duration = Picoseconds(100);
  s.period = Picoseconds(500);
  s.until = Picoseconds(2600);  // outages at 1000, 1500, 2000, 2500
  EXPECT_FALSE(s.IsDown(Picoseconds(999)));
  EXPECT_TRUE(s.IsDown(Picoseconds(1000)));
  EXPECT_TRUE(s.IsDown(Picoseconds(1099)));
  EXPECT_FALSE(s.IsDown(Picoseconds(1100)));
  EXPECT_TRUE(s.IsDown(Picoseconds(1500)));
  EXPECT_TRUE(s.IsDown(Picoseconds(2599)));
  EXPECT_FALSE(s.IsDown(Picoseconds(3000)));  // no outage starts at or after 2600
  EXPECT_EQ(s.DownEventsBy(Picoseconds(999)), 0u);
  EXPECT_EQ(s.DownEventsBy(Picoseconds(1000)), 1u);
  EXPECT_EQ(s.DownEventsBy(Picoseconds(1600)), 2u);
  EXPECT_EQ(s.DownEventsBy(Picoseconds(100000)), 4u);
  // In flight across an outage start.
  EXPECT_TRUE(s.DownDuring(Picoseconds(1400), Picoseconds(1500)));
  EXPECT_FALSE(s.DownDuring(Picoseconds(1100), Picoseconds(1499)));
  auto t = s.NextTransition(Picoseconds(0));
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->at, Picoseconds(1000));
  EXPECT_TRUE(t->down);
  t = s.NextTransition(Picoseconds(1000));
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->at, Picoseconds(1100));
  EXPECT_FALSE(t->down);
  t = s.NextTransition(Picoseconds(1100));
  EXPECT_EQ(t->at, Picoseconds(1500));
  EXPECT_FALSE(s.NextTransition(Picoseconds(2600)).has_value());
}

TEST(FlapSchedule, SingleOutageAndPermanentDown) {
  FlapSchedule once;
  once.start = Picoseconds(10);
  once.duration = Picoseconds(5);
  EXPECT_TRUE(once.IsDown(Picoseconds(14)));
  EXPECT_FALSE(once.IsDown(Picoseconds(15)));
  EXPECT_EQ(once.DownEventsBy(Picoseconds(1000)), 1u);
  FlapSchedule forever;
  forever.start = Picoseconds(10);
  EXPECT_TRUE(forever.IsDown(Picoseconds(1000000000)));
  EXPECT_FALSE(forever.NextTransition(Picoseconds(20)).has_value());
}

TEST(LinkFlapModel, DropsInFlightFramesAndCountsLinkDowned) {
  FlapSchedule s;
  s.start = Picoseconds(1000);
  s.duration = Picoseconds(100);
  s.period = Picoseconds(1000);
  LinkFlapModel m(s, Filter{}, 3);
  Frame f = MakeFrame(900);
  f.end = Picoseconds(1001);  // still on the wire when the link drops
  Verdict v;
  EXPECT_FALSE(m.Apply(f, v));
  EXPECT_EQ(v.reason, DropReason::kLinkDown);
  f = MakeFrame(1100);
  f.end = Picoseconds(1200);
  v = Verdict{};
  EXPECT_TRUE(m.Apply(f, v));
  m.SyncTo(Picoseconds(5500));
  EXPECT_EQ(m.counters().link_downed, 5u);
}

TEST(CorruptionModel, FrameCorruptionFollowsBitErrorRate) {
  const double ber = 1e-6;
  CorruptionModel m(ber, 0, Window{}, Filter{}, 8);
  const uint32_t bytes = 1000;
  const uint64_t n = 500000;
  uint64_t corrupted = 0;
  for (uint64_t i = 0; i < n; ++i) {
    Verdict v;
    m.Apply(MakeFrame(0, bytes), v);
    corrupted += v.corrupted();
  }
  ExpectProportion(corrupted, n, -std::expm1(8.0 * bytes * std::log1p(-ber)));
  EXPECT_EQ(m.counters().port_rcv_errors, corrupted);
  EXPECT_GE(m.counters().bit_flips, corrupted);
}

TEST(DelayModel, JitterStaysInRangeAndAveragesToDelay) {
  DelayModel m(Picoseconds(10000), Picoseconds(2000), Window{}, Filter{}, 4);
  const int n = 100000;
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    Verdict v;
    m.Apply(MakeFrame(), v);
    ASSERT_GE(v.extra_delay.ps(), 8000);
    ASSERT_LE(v.extra_delay.ps(), 12000);
    sum += static_cast<double>(v.extra_delay.ps());
  }
  // Uniform on 4001 values: sd = 2000/sqrt(3).
  EXPECT_NEAR(sum / n, 10000, 4 * 2000 / std::sqrt(3.0) / std::sqrt(n));
}

TEST(BlackHoleAndCrash, DropOnlyWhatTheyTarget) {
  Filter flow;
  flow.fields = Filter::kUdpSport;
  flow.udp_sport = 0xC002;
  BlackHoleModel hole(Window{}, flow, 1);
  HostCrashModel crash(7, Window{Picoseconds(500)}, 2);
  Frame f = MakeFrame(1000);
  Verdict v;
  EXPECT_TRUE(hole.Apply(f, v));
  f.udp_sport = 0xC002;
  EXPECT_FALSE(hole.Apply(f, v));
  EXPECT_EQ(v.reason, DropReason::kBlackHole);
  v = Verdict{};
  EXPECT_TRUE(crash.Apply(f, v));
  f.dst_host = 7;
  EXPECT_FALSE(crash.Apply(f, v));
  EXPECT_EQ(v.reason, DropReason::kHostDown);
  f.at = Picoseconds(499);
  v = Verdict{};
  EXPECT_TRUE(crash.Apply(f, v));
}

}  // namespace
}  // namespace fathom::faults
