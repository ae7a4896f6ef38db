// Random streams for fault models. Every model owns one stream (base/rng.h),
// seeded from hash(scenario seed, model id), so a scenario and a seed give
// the same verdict sequence on every run, whatever other models draw
// (DESIGN.md "Time and determinism"); and the gap sampler that makes rare
// per-bit events cheap to draw.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>

#include "base/rng.h"

namespace fathom::faults {

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
