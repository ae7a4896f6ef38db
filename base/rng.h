// Deterministic random streams: xoshiro256** (Blackman & Vigna) seeded by
// SplitMix64. Every component that draws (the simulator's workloads, each
// fault model) owns its own stream, seeded from the scenario seed and the
// component's id, so a scenario and a seed give the same numbers on every
// run, whatever other components draw (DESIGN.md "Time and determinism").
// Four words of state, no allocation, a handful of instructions per draw.
// It lives in base/ because both fabric/sim and faults/ draw from it.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace fathom {

// 64-bit mixing (SplitMix64's finalizer): fast, good avalanche. Also what
// flow hashes and the trace digest are made of.
constexpr uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// One SplitMix64 step: advances `state` and returns its next output.
constexpr uint64_t SplitMix64(uint64_t& state) { return Mix64(state += 0x9e3779b97f4a7c15ULL); }

class Rng {
 public:
  // The stream of `seed`: its state is the next four SplitMix64 outputs.
  explicit Rng(uint64_t seed = 0) { Seed(seed); }
  // The stream of component `component` under scenario seed `seed`
  // (Engine::MakeRng): adding a component never shifts another's numbers.
  Rng(uint64_t seed, uint64_t component)
      : Rng(Mix64(seed ^ Mix64(component + 0x632be59bd9b4e019ULL))) {}

  void Seed(uint64_t seed) {
    uint64_t sm = seed;
    for (uint64_t& w : s_) w = SplitMix64(sm);
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

  // Uniform in [0, n); n > 0 (Lemire's multiply, no division).
  uint64_t Below(uint64_t n) {
    __extension__ typedef unsigned __int128 U128;
    return static_cast<uint64_t>((static_cast<U128>(Next()) * n) >> 64);
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

}  // namespace fathom
