// Forward error correction and the physical layer behind it: the Reed-Solomon
// codes of Ethernet (IEEE 802.3 clause 91 "KR4" RS(528,514), clause 134/91
// "KP4" RS(544,514), both over 10-bit symbols), the analytic codeword failure
// probability, a fast sampler of symbol errors per codeword, and an optical
// link budget -> pre-FEC BER model. Pure math and plain values; FecModel in
// models.h applies it to frames. The model is written down in fec.cc.
#pragma once

#include <cstdint>
#include <string_view>

#include "base/status.h"
#include "base/units.h"
#include "faults/rng.h"

namespace fathom::faults {

enum class FecMode : uint8_t { kNone = 0, kKr4, kKp4 };

struct FecCode {
  FecMode mode;
  const char* name;
  int n;                       // symbols per codeword
  int k;                       // data symbols per codeword
  int t;                       // correctable symbol errors per codeword = (n - k) / 2
  int symbol_bits;             // 10 for both Ethernet RS codes
  Picoseconds decode_latency;  // typical decoder latency per hop (see fec.cc)
  int data_bits() const { return k * symbol_bits; }
};

const FecCode& FecCodeFor(FecMode mode);
// "none", "kr4" / "rs528", "kp4" / "rs544" (case-insensitive).
StatusOr<FecMode> ParseFecMode(std::string_view name);
// Whether a link of `rate` runs this FEC mode (802.3 PHYs): KR4 on 25G NRZ
// lanes (25/50/100 Gb/s), KP4 on 50G+ PAM4 lanes (50..800 Gb/s), no FEC only
// up to 100 Gb/s (every PAM4 PHY mandates RS-FEC).
Status CheckFecForRate(FecMode mode, BitsPerSecond rate);

// Probability that a `bits`-bit symbol has at least one bit error at `ber`:
// 1 - (1 - ber)^bits, computed without cancellation.
double SymbolErrorProbability(double ber, int symbol_bits);
// Probability that a codeword has more than t symbol errors: the binomial
// tail sum_{j>t} C(n,j) q^j (1-q)^(n-j), q = SymbolErrorProbability(ber).
double CodewordFailureProbability(const FecCode& code, double ber);
// Codewords a frame of `frame_bits` spans: ceil(frame_bits / data bits).
inline uint64_t CodewordsForBits(const FecCode& code, uint64_t frame_bits) {
  const uint64_t d = static_cast<uint64_t>(code.data_bits());
  return frame_bits == 0 ? 1 : (frame_bits + d - 1) / d;
}

// Symbol errors drawn for one frame.
struct FecFrameResult {
  uint32_t codewords = 0;
  uint32_t corrected = 0;      // codewords with 1..t symbol errors
  uint32_t uncorrectable = 0;  // codewords with > t symbol errors
  uint64_t corrected_symbols = 0;
};

// Draws symbol errors on the continuous symbol stream of one link direction.
// Instead of a die per symbol it samples the gap to the next error event
// (GapSampler), so an error-free frame costs one compare. With
// mean_burst_symbols > 1, each event corrupts a run of consecutive symbols of
// geometric length with that mean (PAM4 DFE error propagation), and events
// are rarer by the same factor so the mean symbol error rate is unchanged.
class FecErrorSampler {
 public:
  FecErrorSampler() = default;
  FecErrorSampler(const FecCode& code, double ber, double mean_burst_symbols, Rng& rng);

  FecFrameResult SampleFrame(uint64_t frame_bits, Rng& rng);
  double symbol_error_probability() const { return q_; }

 private:
  uint64_t BurstLength(Rng& rng) const;

  int n_ = 0;
  int t_ = 0;
  int data_bits_ = 1;
  double q_ = 0;
  double burst_continue_ = 0;  // P(burst goes on one more symbol)
  GapSampler events_;
  GapSampler burst_;
  uint64_t gap_ = GapSampler::kNever;  // error-free symbols before the next event
};

// An optical link and its receiver: the inputs of a power budget.
struct LinkBudget {
  double tx_power_dbm = 0;      // launch power
  double length_km = 0;         // fiber length
  double loss_db_per_km = 0.4;  // single-mode fiber at 1310 nm
  int connectors = 2;           // mated connector pairs on the path
  double loss_db_per_connector = 0.5;
  double penalty_db = 0;            // dispersion, reflection, aging
  double rx_sensitivity_dbm = -10;  // receive power at which BER = reference_ber
  double reference_ber = 2.4e-4;    // BER the sensitivity is specified at (CASES.md 18)
};

double ReceivedPowerDbm(const LinkBudget& b);
// Received power minus sensitivity, in dB; negative = below sensitivity.
double MarginDb(const LinkBudget& b);
// Pre-FEC BER of the link (model in fec.cc): strictly decreasing in margin,
// equal to reference_ber at zero margin, always in (0, 0.5). Errors on
// inputs that make no physical sense (reference BER outside (0, 0.5), negative
// lengths or losses).
StatusOr<double> BerFromLinkBudget(const LinkBudget& b);

// Gaussian-noise receiver: BER = Q(q) = erfc(q / sqrt 2) / 2, and its inverse.
double BerFromQ(double q);
double QFromBer(double ber);

}  // namespace fathom::faults
