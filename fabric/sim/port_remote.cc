// A remote port's deferred shipping and its arrival-time settling (port.h:
// set_ship_deferred), for PFC across processes (fabric/parallel/pfc_cross.h).
// Cold: only ports whose far end another process simulates, on a lossless
// fabric, come here.
#include <algorithm>
#include <cstdint>

#include "base/rng.h"
#include "fabric/sim/port.h"

namespace fathom::sim {

void Port::HoldDeferred(uint64_t w0, uint64_t w1) {
  if (count_ == ring_mask_ + 1) Grow();
  ring_[(head_ + count_) & ring_mask_] = Held{w0, w1};
  ++count_;
  if (buffered_) ++queued_;
  if (count_ == 1) ScheduleSettle();
}

void Port::ScheduleSettle() {
  // The key of the arrival event one process would run for the oldest
  // entry (OnRingArrival: kArrival on the far end's component). It has no
  // fetch hint (hints are by handler).
  engine_->Schedule<&Port::OnRemoteSettle>(Picoseconds(ring_[head_].arrive_ps()),
                                           EventKind::kArrival, rx_component_, this, 0);
}

void Port::OnRemoteSettle(void* obj, uint64_t /*arg*/) {
  Port* tx = static_cast<Port*>(obj);
  const int64_t now = tx->engine_->Now().ps();
  // This event's digest as the canonical run loop forms it (nothing here
  // folds a value in), to be taken out of this process's sum.
  tx->settle_digest_ += Engine::CanonicalEventDigest(now, EventKind::kArrival, tx->rx_component_);
  ++tx->settle_events_;
  // What OnRingArrival does with the entries due, but the delivery (the far
  // end's process delivers its copy): they leave, releasing their bytes.
  tx->SettleShipped();
  if (tx->count_ > 0) {
    tx->ScheduleSettle();
  } else {
    tx->head_ = 0;
  }
}

int64_t Port::next_ship_ps() const {
  if (!ship_deferred_ || shipped_ >= count_) return INT64_MAX;
  const Held h = ring_[(head_ + shipped_) & ring_mask_];
  uint32_t bytes;
  uint8_t tc;
  SizeOf(h, &bytes, &tc);
  return h.arrive_ps() - latency_ps_ - SerializationPs(bytes);
}

void Port::ShipStarted(int64_t until_ps) {
  if (!ship_deferred_) return;  // shipped as they were queued
  // The ring is in start order (a FIFO serializer); the entries from
  // shipped_ on have not been shipped.
  while (shipped_ < count_) {
    const Held h = ring_[(head_ + shipped_) & ring_mask_];
    uint32_t bytes;
    uint8_t tc;
    SizeOf(h, &bytes, &tc);
    const int64_t start = h.arrive_ps() - latency_ps_ - SerializationPs(bytes);
    if (start > until_ps) break;
    if (h.pooled() && (h.w1 & Held::kTags) == Held::kAlone) {
      // A packet a fault delayed goes first, then its entry (the far end
      // pairs them).
      const Packet* p = h.packet();
      auto it = std::find_if(shipped_alone_.begin(), shipped_alone_.end(),
                             [p](const ShippedAlone& a) { return a.packet == p; });
      if (it != shipped_alone_.end()) {
        remote_->ship(remote_->ctx, *this, static_cast<uint64_t>(it->arrive_ps),
                      reinterpret_cast<uint64_t>(p), true);
        it->packet = nullptr;
      }
    }
    remote_->ship(remote_->ctx, *this, h.w0, h.w1, false);
    ++shipped_;
  }
}

}  // namespace fathom::sim
