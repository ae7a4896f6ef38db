// FEC math and sampler tests: analytic failure probability against the
// sampler, the gap sampler against a naive per-symbol die, the link budget.
#include "faults/fec.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>

#include "faults/models.h"

namespace fathom::faults {
namespace {

void ExpectProportion(uint64_t hits, uint64_t n, double p) {
  const double sigma = std::sqrt(p * (1 - p) / static_cast<double>(n));
  EXPECT_NEAR(static_cast<double>(hits) / static_cast<double>(n), p, 4 * sigma + 1e-12)
      << hits << " of " << n << ", expected p=" << p;
}

TEST(FecCode, ParametersOfTheEthernetCodes) {
  const FecCode& kr4 = FecCodeFor(FecMode::kKr4);
  const FecCode& kp4 = FecCodeFor(FecMode::kKp4);
  EXPECT_EQ(kr4.n, 528);
  EXPECT_EQ(kr4.t, 7);
  EXPECT_EQ(kp4.n, 544);
  EXPECT_EQ(kp4.t, 15);
  EXPECT_EQ(kp4.data_bits(), 5140);
  EXPECT_EQ(CodewordsForBits(kp4, 5140), 1u);
  EXPECT_EQ(CodewordsForBits(kp4, 5141), 2u);
  EXPECT_EQ(CodewordsForBits(kp4, 4138 * 8), 7u);
}

TEST(FecCode, ParseAndRateChecks) {
  EXPECT_EQ(*ParseFecMode("KP4"), FecMode::kKp4);
  EXPECT_EQ(*ParseFecMode("rs528"), FecMode::kKr4);
  EXPECT_FALSE(ParseFecMode("ldpc").ok());
  EXPECT_TRUE(CheckFecForRate(FecMode::kKr4, BitsPerSecond::Gbps(100)).ok());
  EXPECT_TRUE(CheckFecForRate(FecMode::kKp4, BitsPerSecond::Gbps(400)).ok());
  EXPECT_FALSE(CheckFecForRate(FecMode::kKr4, BitsPerSecond::Gbps(400)).ok());
  EXPECT_FALSE(CheckFecForRate(FecMode::kKp4, BitsPerSecond::Gbps(25)).ok());
  EXPECT_FALSE(CheckFecForRate(FecMode::kNone, BitsPerSecond::Gbps(400)).ok());
  EXPECT_NE(CheckFecForRate(FecMode::kKr4, BitsPerSecond::Gbps(400)).message().find("400"),
            std::string::npos);
}

TEST(FecMath, SymbolErrorProbability) {
  EXPECT_DOUBLE_EQ(SymbolErrorProbability(0, 10), 0);
  EXPECT_NEAR(SymbolErrorProbability(1e-5, 10), 1 - std::pow(1 - 1e-5, 10), 1e-15);
  EXPECT_NEAR(SymbolErrorProbability(0.1, 10), 1 - std::pow(0.9, 10), 1e-12);
}

TEST(FecMath, FailureProbabilityIsABinomialTail) {
  const FecCode& kp4 = FecCodeFor(FecMode::kKp4);
  // Head + tail = 1 at a BER where both are sizeable.
  const double ber = 2e-3;
  const double q = SymbolErrorProbability(ber, 10);
  double head = 0;
  for (int j = 0; j <= kp4.t; ++j) {
    head += std::exp(std::lgamma(kp4.n + 1.0) - std::lgamma(j + 1.0) -
                     std::lgamma(kp4.n - j + 1.0) + j * std::log(q) + (kp4.n - j) * std::log1p(-q));
  }
  EXPECT_NEAR(CodewordFailureProbability(kp4, ber) + head, 1.0, 1e-12);
  // Monotonic in BER, and the KP4 limit of CASES.md 18: 2.4e-4 is deep in
  // the correctable region (post-FEC ~1e-12 or better per codeword... tiny).
  EXPECT_LT(CodewordFailureProbability(kp4, 2.4e-4), 1e-12);
  EXPECT_LT(CodewordFailureProbability(kp4, 1e-4), CodewordFailureProbability(kp4, 1e-3));
  EXPECT_GT(CodewordFailureProbability(kp4, 5e-3), 0.5);
  // KR4 (t = 7) gives up earlier than KP4 (t = 15).
  EXPECT_GT(CodewordFailureProbability(FecCodeFor(FecMode::kKr4), 5e-4),
            CodewordFailureProbability(kp4, 5e-4));
}

TEST(FecSampler, NearlyAllCorrectableAtBer1e5OnKp4) {
  Rng rng(11);
  const FecCode& kp4 = FecCodeFor(FecMode::kKp4);
  FecErrorSampler s(kp4, 1e-5, 1, rng);
  uint64_t corrected = 0, uncorrectable = 0, codewords = 0;
  for (int i = 0; i < 200000; ++i) {
    const FecFrameResult r = s.SampleFrame(4200 * 8, rng);
    codewords += r.codewords;
    corrected += r.corrected;
    uncorrectable += r.uncorrectable;
  }
  EXPECT_EQ(uncorrectable, 0u);
  // P(codeword has >= 1 symbol error) = 1 - (1-q)^544, q ~ 1e-4.
  ExpectProportion(corrected, codewords,
                   -std::expm1(kp4.n * std::log1p(-SymbolErrorProbability(1e-5, 10))));
}

TEST(FecSampler, MatchesAnalyticFailureProbability) {
  Rng rng(12);
  for (FecMode mode : {FecMode::kKp4, FecMode::kKr4}) {
    const FecCode& code = FecCodeFor(mode);
    const double ber = mode == FecMode::kKp4 ? 1.4e-3 : 5e-4;
    const double p = CodewordFailureProbability(code, ber);
    ASSERT_GT(p, 1e-3);
    FecErrorSampler s(code, ber, 1, rng);
    const uint64_t n = 400000;
    uint64_t failed = 0;
    for (uint64_t i = 0; i < n; ++i) failed += s.SampleFrame(code.data_bits(), rng).uncorrectable;
    ExpectProportion(failed, n, p);
  }
}

TEST(FecSampler, GapSamplerAgreesWithNaivePerSymbolDie) {
  // Distribution of symbol errors per codeword: gap sampler vs a die per
  // symbol. Each bin within 4 sigma of the other (two-sample difference).
  const FecCode& kp4 = FecCodeFor(FecMode::kKp4);
  const double ber = 5e-4;
  const double q = SymbolErrorProbability(ber, 10);
  const uint64_t hit = Rng::Threshold(q);
  const int n = 100000;
  std::array<uint64_t, 8> naive{}, gap{};
  Rng a(21), b(22);
  for (int i = 0; i < n; ++i) {
    int errors = 0;
    for (int j = 0; j < kp4.n; ++j) errors += a.Hit(hit);
    ++naive[std::min(errors, 7)];
  }
  // Through the sampler: one codeword per frame, counting corrected symbols
  // (q*544 ~ 0.27, so no codeword here exceeds t).
  FecErrorSampler s(kp4, ber, 1, b);
  for (int i = 0; i < n; ++i) {
    const FecFrameResult r = s.SampleFrame(kp4.data_bits(), b);
    ASSERT_EQ(r.uncorrectable, 0u);
    ++gap[std::min<uint64_t>(r.corrected_symbols, 7)];
  }
  for (int k = 0; k < 4; ++k) {
    const double pa = static_cast<double>(naive[k]) / n;
    const double pb = static_cast<double>(gap[k]) / n;
    const double pooled = (pa + pb) / 2;
    const double sigma = std::sqrt(2 * pooled * (1 - pooled) / n);
    EXPECT_NEAR(pa, pb, 4 * sigma + 1e-9) << "bin " << k;
  }
}

TEST(FecSampler, BurstsKeepTheMeanButFailMoreCodewords) {
  const FecCode& kp4 = FecCodeFor(FecMode::kKp4);
  const double ber = 4e-4;
  Rng r1(31), r2(32);
  FecErrorSampler plain(kp4, ber, 1, r1);
  FecErrorSampler bursty(kp4, ber, 8, r2);
  uint64_t fail_plain = 0, fail_bursty = 0;
  for (int i = 0; i < 200000; ++i) {
    fail_plain += plain.SampleFrame(kp4.data_bits(), r1).uncorrectable;
    fail_bursty += bursty.SampleFrame(kp4.data_bits(), r2).uncorrectable;
  }
  EXPECT_GT(fail_bursty, fail_plain * 10 + 10);
}

TEST(FecModel, CorrectedFirstThenUncorrectableAcrossTheCliff) {
  uint64_t last_uncorrectable = 0;
  bool saw_corrected_only = false;
  for (double ber : {1e-6, 1e-4, 1e-3, 3e-3}) {
    FecModel::Params p;
    p.mode = FecMode::kKp4;
    p.pre_fec_ber = ber;
    FecModel m(p, Window{}, Filter{}, 5);
    Frame f{};
    f.wire_bytes = 4200;
    for (int i = 0; i < 20000; ++i) {
      Verdict v;
      m.Apply(f, v);
      ASSERT_EQ(v.extra_delay, Picoseconds::FromNanoseconds(150));
    }
    const Counters& c = m.counters();
    EXPECT_EQ(c.port_rcv_errors, c.frames_corrupted);
    EXPECT_EQ(c.symbol_error, c.fec_uncorrectable_blocks);
    if (c.fec_corrected_blocks > 0 && c.fec_uncorrectable_blocks == 0) saw_corrected_only = true;
    EXPECT_GE(c.fec_uncorrectable_blocks, last_uncorrectable);
    last_uncorrectable = c.fec_uncorrectable_blocks;
  }
  EXPECT_TRUE(saw_corrected_only);
  EXPECT_GT(last_uncorrectable, 10000u);
}

TEST(LinkBudget, BerIsMonotonicInMarginAndReferenceAtZero) {
  LinkBudget b;
  b.tx_power_dbm = 0;
  b.length_km = 2;
  b.loss_db_per_km = 0.4;
  b.connectors = 2;
  b.loss_db_per_connector = 0.5;
  b.rx_sensitivity_dbm = -1.8;  // zero margin
  EXPECT_NEAR(MarginDb(b), 0, 1e-12);
  EXPECT_NEAR(*BerFromLinkBudget(b), 2.4e-4, 1e-9);
  double last = 0.5;
  for (double km = 0; km <= 40; km += 0.5) {
    b.length_km = 40 - km;  // shorter fiber, more margin, fewer errors
    const double ber = *BerFromLinkBudget(b);
    EXPECT_LT(ber, last) << "km=" << b.length_km;
    EXPECT_GE(ber, 0);
    EXPECT_LT(ber, 0.5);
    last = ber;
  }
  b.reference_ber = 0.7;
  EXPECT_FALSE(BerFromLinkBudget(b).ok());
  b.reference_ber = 2.4e-4;
  b.length_km = -1;
  EXPECT_FALSE(BerFromLinkBudget(b).ok());
}

TEST(LinkBudget, QAndBerAreInverse) {
  for (double ber : {1e-12, 1e-6, 2.4e-4, 0.1}) {
    EXPECT_NEAR(BerFromQ(QFromBer(ber)) / ber, 1.0, 1e-9);
  }
}

}  // namespace
}  // namespace fathom::faults
