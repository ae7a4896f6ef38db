// Strong types for the units fathom computes with: virtual time in integer
// picoseconds, data sizes in bytes, rates in bits per second. A value without
// a unit in its type or name is a bug waiting (STYLE.md).
#pragma once

#include <compare>
#include <cstdint>
#include <limits>

namespace fathom {

// 128-bit intermediate for rate arithmetic (__extension__ keeps -Wpedantic quiet).
__extension__ typedef __int128 Int128;

// A duration or a point in virtual time, in picoseconds. 2^63 ps is about
// 106 days of simulated time, far beyond any scenario.
class Picoseconds {
 public:
  constexpr Picoseconds() = default;
  constexpr explicit Picoseconds(int64_t ps) : ps_(ps) {}

  static constexpr Picoseconds FromNanoseconds(int64_t ns) { return Picoseconds(ns * 1000); }
  static constexpr Picoseconds FromMicroseconds(int64_t us) { return Picoseconds(us * 1000000); }
  static constexpr Picoseconds FromMilliseconds(int64_t ms) { return Picoseconds(ms * 1000000000); }
  static constexpr Picoseconds FromSeconds(double s) {
    return Picoseconds(static_cast<int64_t>(s * 1e12));
  }
  static constexpr Picoseconds Max() { return Picoseconds(std::numeric_limits<int64_t>::max()); }

  constexpr int64_t ps() const { return ps_; }
  constexpr double ns() const { return static_cast<double>(ps_) / 1e3; }
  constexpr double us() const { return static_cast<double>(ps_) / 1e6; }
  constexpr double seconds() const { return static_cast<double>(ps_) / 1e12; }

  constexpr auto operator<=>(const Picoseconds&) const = default;
  constexpr Picoseconds operator+(Picoseconds o) const { return Picoseconds(ps_ + o.ps_); }
  constexpr Picoseconds operator-(Picoseconds o) const { return Picoseconds(ps_ - o.ps_); }
  constexpr Picoseconds& operator+=(Picoseconds o) {
    ps_ += o.ps_;
    return *this;
  }
  constexpr Picoseconds& operator-=(Picoseconds o) {
    ps_ -= o.ps_;
    return *this;
  }
  constexpr Picoseconds operator*(int64_t k) const { return Picoseconds(ps_ * k); }

 private:
  int64_t ps_ = 0;
};

// A rate in bits per second.
class BitsPerSecond {
 public:
  constexpr BitsPerSecond() = default;
  constexpr explicit BitsPerSecond(int64_t bps) : bps_(bps) {}
  static constexpr BitsPerSecond Gbps(int64_t g) { return BitsPerSecond(g * 1000000000); }

  constexpr int64_t bps() const { return bps_; }
  constexpr double gbps() const { return static_cast<double>(bps_) / 1e9; }
  constexpr auto operator<=>(const BitsPerSecond&) const = default;

  // Time to put `bytes` on the wire at this rate, rounded up to whole
  // picoseconds (so that back-to-back frames never overlap).
  constexpr Picoseconds SerializationTime(int64_t bytes) const {
    // bytes * 8 * 1e12 / bps, without overflow for frames and rates we model
    // (bytes < 2^31, bps >= 1e6): 8e12 * 2^31 overflows, so split.
    const Int128 num = static_cast<Int128>(bytes) * 8 * 1000000000000LL;
    return Picoseconds(static_cast<int64_t>((num + bps_ - 1) / bps_));
  }

 private:
  int64_t bps_ = 0;
};

}  // namespace fathom
