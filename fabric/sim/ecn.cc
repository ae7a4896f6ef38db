#include "fabric/sim/ecn.h"

#include <algorithm>
#include <climits>

namespace fathom::sim {

double EcnMarkProbability(const EcnClassConfig& c, int64_t queued_bytes) {
  if (!c.enabled || queued_bytes < c.kmin_bytes) return 0;
  if (queued_bytes > c.kmax_bytes) return 1;
  if (c.kmax_bytes == c.kmin_bytes) return c.pmax;
  return c.pmax * static_cast<double>(queued_bytes - c.kmin_bytes) /
         static_cast<double>(c.kmax_bytes - c.kmin_bytes);
}

bool EcnMarker::Mark(uint8_t tc, bool ect, int64_t queued_bytes) {
  if (!ect) return false;
  Class& c = classes_[tc & 7];
  const double p = EcnMarkProbability(c.config, queued_bytes);
  if (p <= 0) return false;
  // 53 random bits as a uniform double in [0, 1): marked with probability p.
  if (p < 1 && static_cast<double>(rng_.Next() >> 11) * 0x1.0p-53 >= p) return false;
  ++c.marked;
  return true;
}

int32_t EcnMarker::min_kmin() const {
  int64_t k = INT32_MAX;
  for (const Class& c : classes_) {
    if (c.config.enabled) k = std::min(k, std::max<int64_t>(c.config.kmin_bytes, INT32_MIN));
  }
  return static_cast<int32_t>(k);
}

uint64_t EcnMarker::marked_packets() const {
  uint64_t n = 0;
  for (const Class& c : classes_) n += c.marked;
  return n;
}

}  // namespace fathom::sim
