// Random streams for fault models. Every model owns one stream, seeded from
// hash(scenario seed, model id), so a scenario and a seed give the same
// verdict sequence on every run, whatever other models draw (DESIGN.md "Time
// and determinism"). xoshiro256** (Blackman & Vigna) seeded by SplitMix64:
// four words of state, no allocation, a handful of instructions per draw.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>

namespace fathom::faults {

// SplitMix64 step: a good 64-bit mixer, used for seeding and id hashing.
constexpr uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// FNV-1a of a model id such as "loss#0@leaf1-spine3>": stable across runs
// and platforms (std::hash is neither).
constexpr uint64_t HashId(std::string_view id) {
  uint64_t h = 0xCBF29CE484222325ULL;
  for (char c : id) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001B3ULL;
  }
  return h;
}

// The seed of one model's stream: hash(scenario seed, model id).
constexpr uint64_t StreamSeed(uint64_t scenario_seed, uint64_t model_id) {
  uint64_t s = scenario_seed ^ (model_id * 0x9E3779B97F4A7C15ULL);
  SplitMix64(s);
  return SplitMix64(s);
}

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) { Seed(seed); }

  void Seed(uint64_t seed) {
    uint64_t sm = seed;
    for (auto& w : s_) w = SplitMix64(sm);
  }

  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // Uniform in (0, 1]: safe to take the log of.
  double UniformOpen() { return static_cast<double>((Next() >> 11) + 1) * 0x1.0p-53; }

  // Threshold for Hit(): true with probability p (p clamped to [0, 1]).
  // Precomputed once so the hot path is one draw and one compare.
  static uint64_t Threshold(double p) {
    if (!(p > 0)) return 0;
    if (p >= 1) return std::numeric_limits<uint64_t>::max();
    return static_cast<uint64_t>(std::ldexp(p, 64));
  }
  bool Hit(uint64_t threshold) { return Next() < threshold; }

 private:
  static constexpr uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

// Samples gaps of a Bernoulli(p) process: the number of trials before the
// next success, Geometric on {0, 1, ...}, by inversion
// floor(ln U / ln(1 - p)). One log per event instead of one draw per trial,
// which is what makes per-bit and per-symbol error models affordable at
// realistic error rates (1e-12 .. 1e-4).
class GapSampler {
 public:
  GapSampler() = default;
  explicit GapSampler(double p) { SetProbability(p); }

  void SetProbability(double p) {
    p_ = p;
    inv_log_q_ = (p > 0 && p < 1) ? 1.0 / std::log1p(-p) : 0;
  }
  double probability() const { return p_; }

  // Trials before the next success; "never" (max) when p == 0.
  uint64_t Next(Rng& rng) const {
    if (!(p_ > 0)) return kNever;
    if (p_ >= 1) return 0;
    const double g = std::floor(std::log(rng.UniformOpen()) * inv_log_q_);
    return g >= 9.0e18 ? kNever : static_cast<uint64_t>(g);
  }

  static constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();

 private:
  double p_ = 0;
  double inv_log_q_ = 0;
};

}  // namespace fathom::faults
