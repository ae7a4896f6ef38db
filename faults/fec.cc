// The FEC and link-budget model.
//
// Codes (IEEE 802.3): RS(528,514) "KR4" (clause 91, 100GBASE-CR4/SR4, 25G
// lanes) and RS(544,514) "KP4" (clauses 91/134, 50G-per-lane PAM4 PHYs),
// both over GF(2^10): a codeword carries 514 data symbols = 5140 bits and
// corrects up to t = (n - k) / 2 symbol errors (7 and 15).
//
// Errors: bit errors are independent with probability BER (the pre-FEC BER a
// PHY reports), so a 10-bit symbol is in error with q = 1 - (1 - BER)^10 and
// a codeword's symbol errors are Binomial(n, q). A codeword with <= t errors
// is corrected (fec_corrected_blocks); with > t it is uncorrectable, the PCS
// marks the block bad and the frame that contains it fails its FCS/ICRC at
// the receiver. A frame spans ceil(frame bits / 5140) codewords; 64b/66b and
// 256b/257b transcoding overhead and alignment of frames to codewords are
// ignored (they change a frame's codeword count by at most one).
//
// Decoder latency: RS decoding needs the whole codeword before it can emit
// it, plus the syndrome/Chien/Forney pipeline; published figures are about
// 100 ns for KR4 and a little more for KP4 at 50G lanes. We use 100 ns and
// 150 ns per hop (a scenario can override it).
//
// Link budget: received power P_rx = P_tx - length * loss/km - connectors *
// loss/connector - penalty (all dB). The receiver's sensitivity S is the
// received power at which BER equals a reference BER (for PAM4 optics the
// usual 2.4e-4, CASES.md 18). For a thermal-noise-limited receiver the
// photocurrent, hence the signal amplitude and the Q factor, is proportional
// to the received optical power, so Q = Q_ref * 10^(margin_dB / 10) with
// margin = P_rx - S, and BER = Q(Q) = erfc(Q / sqrt 2) / 2. This is monotonic
// (more margin, fewer errors), gives the reference BER at zero margin, and
// shows the steep waterfall real links have: from a 2.4e-4 reference, +1 dB
// of margin gives about 6e-6 and +3 dB about 2e-12.
#include "faults/fec.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>

namespace fathom::faults {
namespace {

constexpr FecCode kNoFec{FecMode::kNone, "none", 0, 0, 0, 10, Picoseconds(0)};
constexpr FecCode kKr4{FecMode::kKr4, "kr4", 528, 514, 7, 10, Picoseconds::FromNanoseconds(100)};
constexpr FecCode kKp4{FecMode::kKp4, "kp4", 544, 514, 15, 10, Picoseconds::FromNanoseconds(150)};

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// log C(n, j) q^j (1-q)^(n-j)
double LogBinomialTerm(int n, int j, double log_q, double log_1mq) {
  return std::lgamma(n + 1.0) - std::lgamma(j + 1.0) - std::lgamma(n - j + 1.0) + j * log_q +
         (n - j) * log_1mq;
}

}  // namespace

const FecCode& FecCodeFor(FecMode mode) {
  switch (mode) {
    case FecMode::kKr4:
      return kKr4;
    case FecMode::kKp4:
      return kKp4;
    case FecMode::kNone:
      break;
  }
  return kNoFec;
}

StatusOr<FecMode> ParseFecMode(std::string_view name) {
  const std::string s = Lower(name);
  if (s == "none" || s == "off") return FecMode::kNone;
  if (s == "kr4" || s == "rs528" || s == "rs(528,514)") return FecMode::kKr4;
  if (s == "kp4" || s == "rs544" || s == "rs(544,514)") return FecMode::kKp4;
  return InvalidArgument("fec mode \"" + std::string(name) +
                         "\": unknown (expected none, kr4 or kp4)");
}

Status CheckFecForRate(FecMode mode, BitsPerSecond rate) {
  const double g = rate.gbps();
  const std::string where = "fec mode " + std::string(FecCodeFor(mode).name) + " on a " +
                            std::to_string(static_cast<int64_t>(g)) + " Gb/s link";
  switch (mode) {
    case FecMode::kNone:
      if (g > 100) return InvalidArgument(where + ": PAM4 links above 100 Gb/s require RS-FEC");
      return Status::Ok();
    case FecMode::kKr4:
      if (g < 25 || g > 100) {
        return InvalidArgument(where + ": RS(528,514) runs on 25G NRZ lanes (25-100 Gb/s)");
      }
      return Status::Ok();
    case FecMode::kKp4:
      if (g < 50) {
        return InvalidArgument(where + ": RS(544,514) runs on 50G+ PAM4 lanes (>= 50 Gb/s)");
      }
      return Status::Ok();
  }
  return InvalidArgument(where + ": unknown mode");
}

double SymbolErrorProbability(double ber, int symbol_bits) {
  if (!(ber > 0)) return 0;
  if (ber >= 1) return 1;
  return -std::expm1(symbol_bits * std::log1p(-ber));
}

double CodewordFailureProbability(const FecCode& code, double ber) {
  if (code.mode == FecMode::kNone) return SymbolErrorProbability(ber, code.symbol_bits);
  const double q = SymbolErrorProbability(ber, code.symbol_bits);
  if (q <= 0) return 0;
  if (q >= 1) return 1;
  const double log_q = std::log(q);
  const double log_1mq = std::log1p(-q);
  // Sum the tail directly: its terms are tiny at realistic BERs, where
  // 1 - (head sum) would cancel to zero.
  double sum = 0;
  for (int j = code.t + 1; j <= code.n; ++j) {
    const double term = std::exp(LogBinomialTerm(code.n, j, log_q, log_1mq));
    sum += term;
    if (term < sum * 1e-17 && j > code.n * q) break;  // past the mode and negligible
  }
  return std::min(sum, 1.0);
}

FecErrorSampler::FecErrorSampler(const FecCode& code, double ber, double mean_burst_symbols,
                                 Rng& rng)
    : n_(code.n), t_(code.t), data_bits_(code.data_bits()) {
  q_ = SymbolErrorProbability(ber, code.symbol_bits);
  const double m = std::max(1.0, mean_burst_symbols);
  // Events at rate q/m per symbol, each m symbols long on average.
  events_.SetProbability(q_ / m);
  burst_continue_ = 1.0 - 1.0 / m;
  burst_.SetProbability(1.0 / m);
  gap_ = events_.Next(rng);
}

uint64_t FecErrorSampler::BurstLength(Rng& rng) const {
  if (burst_continue_ <= 0) return 1;
  // Geometric on {1, 2, ...} with mean m: failures before success, plus one.
  const uint64_t extra = burst_.Next(rng);
  return extra >= (1ULL << 20) ? (1ULL << 20) : extra + 1;
}

FecFrameResult FecErrorSampler::SampleFrame(uint64_t frame_bits, Rng& rng) {
  FecFrameResult r;
  const uint64_t d = static_cast<uint64_t>(data_bits_);
  const uint64_t cws = frame_bits == 0 ? 1 : (frame_bits + d - 1) / d;
  r.codewords = static_cast<uint32_t>(cws);
  const uint64_t total = cws * static_cast<uint64_t>(n_);
  if (gap_ >= total) {  // the common case: no error in this frame
    if (gap_ != GapSampler::kNever) gap_ -= total;
    return r;
  }
  uint64_t pos = gap_;
  uint64_t cw = pos / n_;
  uint64_t errors_in_cw = 0;
  auto close_codeword = [&]() {
    if (errors_in_cw == 0) return;
    if (errors_in_cw <= static_cast<uint64_t>(t_)) {
      ++r.corrected;
      r.corrected_symbols += errors_in_cw;
    } else {
      ++r.uncorrectable;
    }
    errors_in_cw = 0;
  };
  while (pos < total) {
    const uint64_t len = BurstLength(rng);
    const uint64_t stop = std::min(total, pos + len);
    for (uint64_t s = pos; s < stop;) {
      const uint64_t this_cw = s / n_;
      if (this_cw != cw) {
        close_codeword();
        cw = this_cw;
      }
      const uint64_t cw_end = std::min(stop, (this_cw + 1) * n_);
      errors_in_cw += cw_end - s;
      s = cw_end;
    }
    const uint64_t next = events_.Next(rng);
    if (next == GapSampler::kNever) {
      pos = GapSampler::kNever;
      break;
    }
    pos = pos + len + next;
  }
  close_codeword();
  gap_ = pos == GapSampler::kNever ? pos : pos - total;
  return r;
}

double ReceivedPowerDbm(const LinkBudget& b) {
  return b.tx_power_dbm - b.length_km * b.loss_db_per_km - b.connectors * b.loss_db_per_connector -
         b.penalty_db;
}

double MarginDb(const LinkBudget& b) { return ReceivedPowerDbm(b) - b.rx_sensitivity_dbm; }

double BerFromQ(double q) { return 0.5 * std::erfc(q / std::sqrt(2.0)); }

double QFromBer(double ber) {
  // BerFromQ is strictly decreasing on [0, 40]; bisect (60 halvings reach
  // double precision on that interval).
  double lo = 0, hi = 40;
  for (int i = 0; i < 100; ++i) {
    const double mid = 0.5 * (lo + hi);
    if (BerFromQ(mid) > ber) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return 0.5 * (lo + hi);
}

StatusOr<double> BerFromLinkBudget(const LinkBudget& b) {
  if (!(b.reference_ber > 0 && b.reference_ber < 0.5)) {
    return InvalidArgument("link budget reference_ber=" + std::to_string(b.reference_ber) +
                           ": must be in (0, 0.5)");
  }
  if (b.length_km < 0 || b.loss_db_per_km < 0 || b.connectors < 0 || b.loss_db_per_connector < 0 ||
      b.penalty_db < 0) {
    return InvalidArgument("link budget: length_km=" + std::to_string(b.length_km) +
                           " loss_db_per_km=" + std::to_string(b.loss_db_per_km) +
                           " connectors=" + std::to_string(b.connectors) +
                           " loss_db_per_connector=" + std::to_string(b.loss_db_per_connector) +
                           " penalty_db=" + std::to_string(b.penalty_db) +
                           ": lengths and losses must be >= 0");
  }
  const double q = QFromBer(b.reference_ber) * std::pow(10.0, MarginDb(b) / 10.0);
  // Q -> 0 gives BER -> 0.5 from below; keep it strictly inside the range.
  return std::min(BerFromQ(q), std::nextafter(0.5, 0.0));
}

}  // namespace fathom::faults
