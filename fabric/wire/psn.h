// Packet sequence number arithmetic. PSNs are 24-bit and wrap; two PSNs are
// ordered by the signed 24-bit difference, i.e. within a window of 2^23
// (IBTA vol. 1 9.7.1, ROCEV2.md "PSN arithmetic"). Used by the codec's
// decoder, the emulated NIC's requester/responder and the capture analysis.
#pragma once

#include <cstdint>

namespace fathom::wire {

inline constexpr uint32_t kPsnMask = 0xFFFFFF;
inline constexpr uint32_t kPsnModulus = 0x1000000;   // 2^24
inline constexpr int32_t kPsnHalfWindow = 0x800000;  // 2^23

// (psn + delta) mod 2^24; delta may be negative.
constexpr uint32_t PsnAdd(uint32_t psn, int64_t delta) {
  return static_cast<uint32_t>((static_cast<int64_t>(psn) + delta) & kPsnMask);
}

// The signed distance from b to a, in [-2^23, 2^23): positive when a is
// "after" b. PsnDiff(0x000001, 0xFFFFFF) == 2.
constexpr int32_t PsnDiff(uint32_t a, uint32_t b) {
  const uint32_t d = (a - b) & kPsnMask;
  return d >= static_cast<uint32_t>(kPsnHalfWindow) ? static_cast<int32_t>(d) - 0x1000000
                                                    : static_cast<int32_t>(d);
}

constexpr bool PsnLess(uint32_t a, uint32_t b) { return PsnDiff(a, b) < 0; }
constexpr bool PsnLessEqual(uint32_t a, uint32_t b) { return PsnDiff(a, b) <= 0; }
constexpr bool PsnGreater(uint32_t a, uint32_t b) { return PsnDiff(a, b) > 0; }

// True when psn lies in [first, first + count) modulo 2^24 (count <= 2^23).
constexpr bool PsnInWindow(uint32_t psn, uint32_t first, uint32_t count) {
  return static_cast<uint32_t>((psn - first) & kPsnMask) < count;
}

}  // namespace fathom::wire
