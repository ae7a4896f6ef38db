#include "fabric/sim/ecn.h"

#include <algorithm>
#include <climits>

namespace fathom::sim {

double EcnMarkProbability(const EcnClassConfig& c, int64_t queued_bytes) {
  return c.enabled ? RedRamp(c.kmin_bytes, c.kmax_bytes, c.pmax, queued_bytes) : 0;
}

EcnMarker::EcnMarker(const EcnConfig& config, Rng rng) {
  hot_.rng = rng;
  for (size_t c = 0; c < classes_.size(); ++c) classes_[c].config = config.classes[c];
  for (size_t c = 0; c < classes_.size(); ++c) {
    const EcnClassConfig& k = config.classes[c];
    if (!k.enabled || k.kmin_bytes < 0 || k.kmin_bytes > INT32_MAX || k.kmax_bytes > INT32_MAX) {
      continue;
    }
    hot_.tc = static_cast<uint8_t>(c);
    hot_.kmin_bytes = static_cast<int32_t>(k.kmin_bytes);
    hot_.kmax_bytes = static_cast<int32_t>(k.kmax_bytes);
    hot_.pmax = k.pmax;
    break;
  }
}

bool EcnMarker::Mark(uint8_t tc, bool ect, int64_t queued_bytes) {
  if (!ect) return false;
  if ((tc & 7) == hot_.tc) {
    if (!Draw(RedRamp(hot_.kmin_bytes, hot_.kmax_bytes, hot_.pmax, queued_bytes))) return false;
    ++hot_.marked;
    return true;
  }
  Class& c = classes_[tc & 7];
  if (!Draw(EcnMarkProbability(c.config, queued_bytes))) return false;
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
  uint64_t n = hot_.marked;
  for (const Class& c : classes_) n += c.marked;
  return n;
}

}  // namespace fathom::sim
