// ECN marking at a switch's egress queue: RED/WRED per traffic class, as
// RoCE fabrics deploy it for DCQCN (Zhu et al., "Congestion Control for
// Large-Scale RDMA Deployments", SIGCOMM 2015, section 3.1: the switch marks
// on the instantaneous egress queue, with probability 0 below Kmin, rising
// linearly to Pmax at Kmax, and 1 above Kmax). An ECN-capable packet (ECT(0)
// or ECT(1) in its IP header: a QP's traffic_class, e.g. TOS 106 = DSCP 26 +
// ECT(0)) is marked CE instead of being dropped; others pass unmarked (tail
// drop still applies to every packet when the buffer is full).
//
// Ownership: NetworkConfig carries an EcnConfig; the Network builds one
// EcnMarker per switch egress port when it is enabled and owns it; the
// Port calls it (Port::set_ecn) for each packet it queues. Each marker
// draws from its own seeded stream (base/rng.h), so a run is deterministic
// and one port's draws never shift another's.
#pragma once

#include <array>
#include <cstdint>

#include "base/rng.h"

namespace fathom::sim {

// RED/WRED thresholds of one traffic class (priority 0..7).
struct EcnClassConfig {
  bool enabled = false;
  int64_t kmin_bytes = 0;
  int64_t kmax_bytes = 0;
  double pmax = 0;  // marking probability at kmax_bytes, in (0, 1]
};

struct EcnConfig {
  // Off (the default): no port marks, and the fabric behaves as before.
  bool enabled = false;
  std::array<EcnClassConfig, 8> classes{};
};

// The probability RED/WRED marks a packet that finds `queued_bytes` of its
// class ahead of it: 0 below kmin, linear from 0 at kmin to pmax at kmax, 1
// above kmax (a class not enabled: 0).
double EcnMarkProbability(const EcnClassConfig& c, int64_t queued_bytes);
// That ramp for an enabled class's thresholds (what both EcnMarkProbability
// and the marker's own line use).
inline double RedRamp(int64_t kmin_bytes, int64_t kmax_bytes, double pmax, int64_t queued_bytes) {
  if (queued_bytes < kmin_bytes) return 0;
  if (queued_bytes > kmax_bytes) return 1;
  if (kmax_bytes == kmin_bytes) return pmax;
  return pmax * static_cast<double>(queued_bytes - kmin_bytes) /
         static_cast<double>(kmax_bytes - kmin_bytes);
}

// One egress port's marker: its thresholds, its random stream and what it
// marked.
class EcnMarker {
 public:
  EcnMarker(const EcnConfig& config, Rng rng);

  // Whether a packet of class `tc` (ECN-capable: `ect`) that finds
  // `queued_bytes` of its class in the queue is marked CE. Draws only when
  // the probability is strictly between 0 and 1.
  bool Mark(uint8_t tc, bool ect, int64_t queued_bytes);

  // The lowest Kmin of the enabled classes, clamped to int32 (INT32_MAX:
  // none enabled): Mark is false, without a draw, for less queued.
  int32_t min_kmin() const;

  // Packets marked CE, in all and by traffic class.
  uint64_t marked_packets() const;
  uint64_t marked_packets(int tc) const {
    return (tc & 7) == hot_.tc ? hot_.marked : classes_[static_cast<size_t>(tc & 7)].marked;
  }

 private:
  // One line per Mark for the usual one marking class (one marker per
  // switch egress port: at k=16 each is cold at most hops): the stream,
  // and that class's thresholds (when they fit 32 bits) and count. Other
  // classes' thresholds and counts are in lines of their own.
  struct alignas(64) Hot {
    Rng rng;
    int32_t kmin_bytes = 0;
    int32_t kmax_bytes = 0;
    double pmax = 0;
    uint64_t marked = 0;
    uint8_t tc = 0xFF;  // the class these are for; 0xFF: none
  } hot_;
  static_assert(sizeof(Hot) == 64);
  struct alignas(64) Class {
    EcnClassConfig config;
    uint64_t marked = 0;  // unused for the hot class
  };
  std::array<Class, 8> classes_{};
  // Marks with probability p (EcnMarkProbability's value): one draw when
  // p is strictly between 0 and 1.
  bool Draw(double p) {
    if (p <= 0) return false;
    // 53 random bits as a uniform double in [0, 1): marked with probability p.
    return !(p < 1 && static_cast<double>(hot_.rng.Next() >> 11) * 0x1.0p-53 >= p);
  }
};

}  // namespace fathom::sim
