// The Port's PFC mechanics (pfc.h): the lossless policy's admission and
// release, pause and resume of an egress class, PAUSE frames sent and
// received, XOFF assertion and its refresh. All of it is off the hot path:
// a port reaches it only for classes in policy_mask_.
#include <algorithm>
#include <cmath>

#include "fabric/sim/port.h"

namespace fathom::sim {
namespace {

constexpr uint32_t kCountedOffWire = wire::kPreambleSfdGapBytes;
// A waiting pool packet a tap has seen already (pulled back off the ring of
// a hooked port): it is not shown, nor impaired, twice. Beside Held's tags.
constexpr uintptr_t kSeen = 4;

// What every PAUSE frame points at: no route, no full-size form (the ports
// never hold it compact, and no receiver looks it up).
alignas(QpFlow) const QpFlow kMacControlFlow{};

// Flow and hop count of an entry (hops as held).
void FlowAndHops(uint64_t w0, uint64_t w1, bool pooled, const QpFlow** flow, uint32_t* hops,
                 int hops_shift, uint64_t hops_max, uint64_t tag_mask) {
  if (pooled) {
    const Packet* p = reinterpret_cast<const Packet*>(w1 & ~tag_mask);
    *flow = p->flow;
    *hops = p->hops;
  } else {
    *flow = reinterpret_cast<const QpFlow*>((w1 >> 24) << 7);
    *hops = static_cast<uint32_t>((w0 >> hops_shift) & hops_max);
  }
}

// Gives a drained batch's storage back to its (still empty) queue, so that
// pausing and resuming again allocates nothing.
void KeepStorage(std::vector<std::array<uint64_t, 2>>* batch,
                 std::vector<std::array<uint64_t, 2>>* queue) {
  batch->clear();
  if (queue->empty()) queue->swap(*batch);
}

}  // namespace

int64_t PfcHeadroomBytes(int64_t rate_bps, int64_t cable_ps, int64_t max_frame_wire_bytes) {
  // Bytes on the cable one way: rate x delay.
  const int64_t cable_bytes = static_cast<int64_t>(
      std::ceil(static_cast<double>(rate_bps) * static_cast<double>(cable_ps) / 8e12));
  return 2 * cable_bytes + 2 * max_frame_wire_bytes + kPauseWireBytes;
}

int64_t PfcSwitch::XoffLevel(int c) const {
  if (qos_->dynamic_alpha > 0) {
    const int64_t free_bytes = std::max<int64_t>(0, qos_->shared_buffer_bytes - used_);
    return static_cast<int64_t>(qos_->dynamic_alpha * static_cast<double>(free_bytes));
  }
  return qos_->classes[static_cast<size_t>(c)].xoff_bytes;
}

namespace {
// Port::Account::static_xoff for a switch with this configuration.
int32_t StaticXoff(const QosConfig& qos) {
  if (qos.dynamic_alpha > 0) return -1;
  int64_t level = -1;
  for (const PfcClassConfig& c : qos.classes) {
    if (!c.lossless) continue;
    if (level >= 0 && c.xoff_bytes != level) return -1;
    level = c.xoff_bytes;
  }
  return level >= 0 && level <= INT32_MAX ? static_cast<int32_t>(level) : -1;
}
}  // namespace

int64_t PfcSwitch::XonLevel(int c, int64_t xoff_level) const {
  const int64_t xon = qos_->classes[static_cast<size_t>(c)].xon_bytes;
  if (qos_->dynamic_alpha > 0) return xon > 0 ? std::min(xon, xoff_level) : xoff_level / 2;
  return xon;
}

std::vector<Port*> PfcSwitch::EgressHolding(const Port* upstream, int c) const {
  std::vector<Port*> out;
  for (Port* e : egress_) {
    if (e->HoldsFrom(upstream, c)) out.push_back(e);
  }
  return out;
}

PortPfc& Port::EnsurePfc() {
  if (!pfc_) pfc_ = std::make_unique<PortPfc>();
  return *pfc_;
}

PortPfc& Port::EnablePfc(uint8_t lossless, PfcSwitch* far_switch, const QosConfig* qos,
                         int64_t headroom_bytes) {
  PortPfc& pfc = EnsurePfc();
  account_.far_switch = far_switch;
  account_.static_xoff = far_switch != nullptr ? StaticXoff(*qos) : -1;
  rx_forwards_ =
      static_cast<uint8_t>((rx_forwards_ & kForwards) | (far_switch != nullptr ? kAccounted : 0));
  qos_ = qos;
  headroom_bytes_ = headroom_bytes;
  lossless_mask_ = lossless;
  policy_mask_ = static_cast<uint8_t>(lossless_mask_ | pfc.paused);
  if (lossless != 0 && !buffered_) {
    // The lossless accounting rides on the buffer's (Release): keep one,
    // unlimited.
    buffered_ = true;
    buffer_bytes_ = INT32_MAX;
    queued_ = count_;
  }
  return pfc;
}

int64_t Port::QuantaPs(uint32_t quanta) const {
  // A quantum is 512 bit times (IEEE 802.3 31B.2): 64 bytes' serialization.
  return config_.rate.SerializationTime(uint64_t{quanta} * (kBitsPerQuantum / 8)).ps();
}

int64_t Port::waiting_bytes(int tc) const {
  if (!pfc_) return 0;
  int64_t total = 0;
  for (const auto& e : pfc_->waiting[static_cast<size_t>(tc & 7)]) {
    uint32_t bytes;
    uint8_t cls;
    SizeOf(Held{e[0], e[1] & ~uint64_t{kSeen}}, &bytes, &cls);
    total += bytes;
  }
  return total;
}

std::optional<PfcCounters> Port::pfc_counters() const {
  if (!pfc_) return std::nullopt;
  PfcCounters c = pfc_->counters;
  const int64_t now = engine_->Now().ps();
  bool any = false;
  for (size_t i = 0; i < kPriorities; ++i) {
    if ((pfc_->paused >> i) & 1) c.rx_pause_duration_ps[i] += now - pfc_->paused_since_ps[i];
    if ((pfc_->emitting >> i) & 1) c.tx_pause_duration_ps[i] += now - pfc_->emitting_since_ps[i];
    any = any || c.rx_pause[i] + c.tx_pause[i] + c.headroom_drops[i] + c.watchdog_dropped[i] +
                         c.watchdog_forwarded[i] >
                     0;
  }
  if (!any) return std::nullopt;
  return c;
}

bool Port::SendPolicy(uint64_t w0, uint64_t w1, uint32_t bytes, uint8_t tc) {
  const bool pooled = (w0 & Held::kPooled) != 0;
  w0 = pooled ? Held::kPooled : (w0 & ~kTimeMask);
  if ((pfc_watchdog_drop_ >> tc) & 1) [[unlikely]] {
    ++pfc_->counters.watchdog_dropped[tc];
    if (pooled) {
      Drop(reinterpret_cast<Packet*>(w1), DropReason::kPfcWatchdog);
    } else {
      pool_->DropCompact();
      CountDrop(static_cast<uint32_t>(w1 & kPsnMask), DropReason::kPfcWatchdog);
    }
    return false;
  }
  if ((lossless_mask_ >> tc) & 1) {
    // The ingress account of the port that delivered it (the route's
    // previous hop), at this switch (pfc.h).
    const QpFlow* flow;
    uint32_t hops;
    FlowAndHops(w0, w1, pooled, &flow, &hops, kHopsShift, kHopsMax, Held::kTags);
    Port* up = hops >= 1 ? NextHop(*flow, hops - 1) : nullptr;
    if (up != nullptr && up->account_.far_switch != nullptr) {
      Account& u = up->account_;
      PfcSwitch& sw = *u.far_switch;
      const bool xoff = ((u.xoff >> tc) & 1) != 0;
      // Past XOFF the headroom takes what the upstream sends for a round
      // trip; an account not yet XOFF takes the frame and goes XOFF.
      if (xoff && u.held[tc] + bytes > u.limit[tc]) {
        // Past the headroom: what PFC exists to prevent, counted.
        ++pfc_->counters.headroom_drops[tc];
        if (pooled) {
          Drop(reinterpret_cast<Packet*>(w1), DropReason::kPfcHeadroom);
        } else {
          pool_->DropCompact();
          CountDrop(static_cast<uint32_t>(w1 & kPsnMask), DropReason::kPfcHeadroom);
        }
        return false;
      }
      u.held[tc] += bytes;
      const int64_t fixed = u.static_xoff;
      if (fixed < 0) sw.Add(bytes);
      if (!xoff && u.held[tc] > (fixed >= 0 ? fixed : sw.XoffLevel(tc))) {
        // What it holds now (past the threshold by this frame at most, or
        // by more when a dynamic threshold fell under it): the headroom
        // counts from here.
        PortPfc& upfc = *up->pfc_;
        upfc.xoff_level[tc] = u.held[tc];
        u.limit[tc] = u.held[tc] + up->headroom_bytes_;
        u.xon[tc] = sw.XonLevel(tc, u.held[tc]);
        u.xoff |= static_cast<uint8_t>(1u << tc);
        Port* emitter = up->peer_;
        emitter->EnsurePfc().by_account |= static_cast<uint8_t>(1u << tc);
        emitter->UpdateEmit();
      }
    }
    if (buffered_) occupancy_[tc] += static_cast<int32_t>(bytes);
  } else if (!AdmitDropTail(bytes, tc)) {
    if (pooled) {
      DropOnSend(reinterpret_cast<Packet*>(w1), DropReason::kTailDrop);
    } else {
      ++counters_.port_xmit_discards;
      pool_->DropCompact();
      CountDrop(static_cast<uint32_t>(w1 & kPsnMask), DropReason::kTailDrop);
    }
    return false;
  }
  if ((pfc_paused_ >> tc) & 1) {
    pfc_->waiting[tc].push_back({w0, w1});
    return false;
  }
  return true;
}

void Port::ReleaseRest(Port* up, uint8_t tc, uint32_t bytes) {
  Account& u = up->account_;
  if (u.static_xoff < 0) u.far_switch->Add(-static_cast<int64_t>(bytes));
  if (!u.xon_pending && ((u.xoff >> tc) & 1) && u.held[tc] <= u.xon[tc]) {
    // XON, from an event of its own: this runs inside a send or an arrival
    // of another port (or the watchdog's poll), which a PAUSE frame's send
    // must not cut into.
    u.xon_pending = true;
    engine_->Schedule<&Port::OnXonCheck>(engine_->Now(), EventKind::kUser, up->component_, up, 0);
  }
}

void Port::OnXonCheck(void* obj, uint64_t /*arg*/) {
  Port* up = static_cast<Port*>(obj);
  up->account_.xon_pending = false;
  up->CheckXon();
}

bool Port::HoldsFrom(const Port* upstream, int c) const {
  for (uint32_t i = count_ - queued_; i < count_; ++i) {
    const Held& h = ring_[(head_ + i) & ring_mask_];
    uint32_t bytes;
    uint8_t tc;
    SizeOf(h, &bytes, &tc);
    if (tc != c) continue;
    const QpFlow* flow;
    uint32_t hops;
    FlowAndHops(h.w0, h.w1, h.pooled(), &flow, &hops, kHopsShift, kHopsMax, Held::kTags);
    if (hops >= 2 && NextHop(*flow, hops - 2) == upstream) return true;
  }
  if (pfc_) {
    for (const auto& e : pfc_->waiting[static_cast<size_t>(c & 7)]) {
      const bool pooled = (e[0] & Held::kPooled) != 0;
      const QpFlow* flow;
      uint32_t hops;
      FlowAndHops(e[0], e[1], pooled, &flow, &hops, kHopsShift, kHopsMax, Held::kTags);
      if (hops >= 1 && NextHop(*flow, hops - 1) == upstream) return true;
    }
  }
  return false;
}

bool Port::CheckXon() {
  // This port's far end is a switch asserting XOFF toward it (by account).
  if (!pfc_ || peer_ == nullptr || !peer_->pfc_) return false;
  PortPfc& e = *peer_->pfc_;
  PfcSwitch& sw = *account_.far_switch;
  uint8_t off = 0;
  for (int c = 0; c < kPriorities; ++c) {
    if (((e.by_account >> c) & 1) && account_.held[static_cast<size_t>(c)] <=
                                         sw.XonLevel(c, pfc_->xoff_level[static_cast<size_t>(c)])) {
      off |= static_cast<uint8_t>(1u << c);
    }
  }
  if (off != 0) {
    e.by_account &= static_cast<uint8_t>(~off);
    account_.xoff &= static_cast<uint8_t>(~off);
    peer_->UpdateEmit();
  }
  return e.by_account != 0;
}

void Port::PullBack(std::vector<std::array<uint64_t, 2>>* out) {
  const int64_t now = engine_->Now().ps();
  out->clear();
  int64_t first_start = -1;
  // The oldest entry stays: its arrival is the engine's event (and an
  // entry that has not started can only be the oldest when it starts now).
  while (count_ > 1) {
    const Held h = ring_[(head_ + count_ - 1) & ring_mask_];
    if (h.skipped()) break;  // lost or travelling alone: leave it be
    uint32_t bytes;
    uint8_t tc;
    SizeOf(h, &bytes, &tc);
    const int64_t start = h.arrive_ps() - latency_ps_ - SerializationPs(bytes);
    if (start < now) break;  // in progress (or done): it goes on
    --count_;
    if (buffered_) --queued_;
    --xmit_packets_;
    xmit_data_ -= bytes - kCountedOffWire;
    first_start = start;
    if (h.pooled()) {
      Packet* p = h.packet();
      --p->hops;
      out->push_back({Held::kPooled, h.w1 | (hooked_ ? kSeen : 0)});
    } else {
      out->push_back({(h.w0 & ~kTimeMask) - (uint64_t{1} << kHopsShift), h.w1});
    }
  }
  if (first_start >= 0) busy_until_ps_ = first_start;
  std::reverse(out->begin(), out->end());
}

void Port::Requeue(const std::vector<std::array<uint64_t, 2>>& pulled) {
  for (const auto& e : pulled) {
    uint32_t bytes;
    uint8_t tc;
    SizeOf(Held{e[0], e[1] & ~uint64_t{kSeen}}, &bytes, &tc);
    if (pfc_ && ((pfc_->paused >> tc) & 1)) {
      pfc_->waiting[tc].push_back(e);
    } else {
      Transmit(e[0], e[1], bytes, (e[1] & kSeen) != 0);
    }
  }
}

void Port::OnPauseFrame(uint8_t class_enable, const uint16_t* quanta) {
  PortPfc& pfc = EnsurePfc();
  const int64_t now = engine_->Now().ps();
  uint8_t newly = 0;
  for (int c = 0; c < kPriorities; ++c) {
    if (((class_enable >> c) & 1) == 0) continue;
    ++pfc.counters.rx_pause[static_cast<size_t>(c)];
    if (now < pfc.ignore_until_ps[static_cast<size_t>(c)]) continue;  // the watchdog's
    if (quanta[c] == 0) {
      if ((pfc.paused >> c) & 1) Resume(c);
      continue;
    }
    const int64_t until = now + QuantaPs(quanta[c]);
    pfc.paused_until_ps[static_cast<size_t>(c)] = until;
    // A pending expiry due no later re-arms itself (OnPauseExpiry); a
    // shorter pause than the pending one's needs an event of its own.
    const int64_t pending = pfc.expiry_at_ps[static_cast<size_t>(c)];
    if (pending < 0 || pending > until) ArmPauseExpiry(c, until);
    if (((pfc.paused >> c) & 1) == 0) newly |= static_cast<uint8_t>(1u << c);
  }
  if (newly == 0) return;
  pfc.paused |= newly;
  pfc_paused_ = pfc.paused;
  pfc.paused_by = peer_;
  for (int c = 0; c < kPriorities; ++c) {
    if ((newly >> c) & 1) pfc.paused_since_ps[static_cast<size_t>(c)] = now;
  }
  policy_mask_ = static_cast<uint8_t>(lossless_mask_ | pfc.paused);
  // Frames queued that have not started: those of the paused classes wait.
  PullBack(&pfc.scratch);
  Requeue(pfc.scratch);
}

void Port::ArmPauseExpiry(int c, int64_t at_ps) {
  pfc_->expiry_at_ps[static_cast<size_t>(c)] = at_ps;
  engine_->Schedule<&Port::OnPauseExpiry>(
      Picoseconds(at_ps), EventKind::kUser, component_, this,
      static_cast<uint64_t>(at_ps) << 3 | static_cast<uint64_t>(c));
}

void Port::OnPauseExpiry(void* obj, uint64_t arg) {
  Port* self = static_cast<Port*>(obj);
  const int c = static_cast<int>(arg & 7);
  PortPfc& pfc = *self->pfc_;
  const size_t i = static_cast<size_t>(c);
  if (pfc.expiry_at_ps[i] != static_cast<int64_t>(arg >> 3)) return;  // superseded
  pfc.expiry_at_ps[i] = -1;
  if (((pfc.paused >> c) & 1) == 0) return;
  if (pfc.paused_until_ps[i] > self->engine_->Now().ps()) {
    self->ArmPauseExpiry(c, pfc.paused_until_ps[i]);  // refreshed since
    return;
  }
  self->Resume(c);
}

void Port::Resume(int c) {
  PortPfc& pfc = *pfc_;
  const size_t i = static_cast<size_t>(c);
  pfc.paused &= static_cast<uint8_t>(~(1u << c));
  pfc_paused_ = pfc.paused;
  pfc.counters.rx_pause_duration_ps[i] += engine_->Now().ps() - pfc.paused_since_ps[i];
  policy_mask_ = static_cast<uint8_t>(lossless_mask_ | pfc.paused);
  // The waiting frames go, in order, behind what is queued.
  std::vector<std::array<uint64_t, 2>> waiting;
  waiting.swap(pfc.waiting[i]);
  for (const auto& e : waiting) {
    uint32_t bytes;
    uint8_t tc;
    SizeOf(Held{e[0], e[1] & ~uint64_t{kSeen}}, &bytes, &tc);
    Transmit(e[0], e[1], bytes, (e[1] & kSeen) != 0);
  }
  KeepStorage(&waiting, &pfc.waiting[i]);
  if (on_resume_ != nullptr) on_resume_(on_resume_obj_);
}

void Port::SendPause(uint8_t classes, uint16_t quanta) {
  PortPfc& pfc = EnsurePfc();
  Packet* p = pool_->Alloc();
  p->flow = &kMacControlFlow;
  p->opcode = static_cast<Opcode>(kPauseOpcode);
  p->psn = classes;                                   // the class-enable vector
  p->dest_qpn = static_cast<uint32_t>(config_.node);  // the sender (capture's MAC)
  p->wire_bytes = static_cast<uint16_t>(kPauseWireBytes);
  uint64_t words[2] = {0, 0};
  for (int c = 0; c < kPriorities; ++c) {
    if ((classes >> c) & 1) {
      words[c / 4] |= uint64_t{quanta} << (16 * (c & 3));
      ++pfc.counters.tx_pause[static_cast<size_t>(c)];
    }
  }
  p->ext().va = words[0];
  p->ext().compare = words[1];
  engine_->TraceMix(0xfc000000ULL | (uint64_t{classes} << 16) | quanta);
  // MAC control goes ahead of queued data, after the frame in progress.
  std::vector<std::array<uint64_t, 2>>& pulled = pfc.scratch;
  PullBack(&pulled);
  // Counted in class 0's buffer like data (Release takes it out again);
  // never dropped, never paused.
  if (buffered_) occupancy_[0] += static_cast<int32_t>(kPauseWireBytes);
  Transmit(Held::kPooled, reinterpret_cast<uint64_t>(p), kPauseWireBytes, false);
  Requeue(pulled);
}

void Port::UpdateEmit() {
  PortPfc& pfc = *pfc_;
  const int64_t now = engine_->Now().ps();
  const uint8_t want = static_cast<uint8_t>(pfc.by_account | pfc.by_request);
  const uint8_t rising = static_cast<uint8_t>(want & ~pfc.emitting);
  const uint8_t falling = static_cast<uint8_t>(pfc.emitting & ~want);
  for (int c = 0; c < kPriorities; ++c) {
    const size_t i = static_cast<size_t>(c);
    if ((rising >> c) & 1) pfc.emitting_since_ps[i] = now;
    if ((falling >> c) & 1) pfc.counters.tx_pause_duration_ps[i] += now - pfc.emitting_since_ps[i];
  }
  pfc.emitting = want;
  if (falling != 0) SendPause(falling, 0);
  if (rising != 0) {
    SendPause(rising, kPauseQuantaXoff);
    // Refresh at half the pause time: a refresh waits at most one frame
    // in progress (microseconds) behind 0xFFFF quanta (335 us at 100G),
    // so the far end never sees its pause lapse while XOFF holds; a
    // shorter period only adds frames.
    pfc.next_refresh_ps = now + QuantaPs(kPauseQuantaXoff) / 2;
    ScheduleTimer(pfc.next_refresh_ps);
  }
}

void Port::ScheduleTimer(int64_t at_ps) {
  PortPfc& pfc = *pfc_;
  if (pfc.timer_at_ps >= 0 && pfc.timer_at_ps <= at_ps) return;  // an earlier one re-arms
  pfc.timer_at_ps = at_ps;
  engine_->Schedule<&Port::OnRefresh>(Picoseconds(at_ps), EventKind::kUser, component_, this,
                                      static_cast<uint64_t>(at_ps));
}

void Port::OnRefresh(void* obj, uint64_t arg) {
  Port* self = static_cast<Port*>(obj);
  PortPfc& pfc = *self->pfc_;
  if (static_cast<int64_t>(arg) != pfc.timer_at_ps) return;  // superseded
  pfc.timer_at_ps = -1;
  const int64_t now = self->engine_->Now().ps();
  // Requests that ran their time end (XON).
  uint8_t done = 0;
  for (int c = 0; c < kPriorities; ++c) {
    const int64_t until = pfc.request_until_ps[static_cast<size_t>(c)];
    if (((pfc.by_request >> c) & 1) && until > 0 && until <= now) {
      done |= static_cast<uint8_t>(1u << c);
    }
  }
  if (done != 0) {
    pfc.by_request &= static_cast<uint8_t>(~done);
    self->UpdateEmit();
  }
  if (pfc.emitting != 0 && now >= pfc.next_refresh_ps) {
    self->SendPause(pfc.emitting, kPauseQuantaXoff);
    pfc.next_refresh_ps = now + self->QuantaPs(kPauseQuantaXoff) / 2;
  }
  if (pfc.emitting == 0) return;
  int64_t next = pfc.next_refresh_ps;
  for (int c = 0; c < kPriorities; ++c) {
    const int64_t until = pfc.request_until_ps[static_cast<size_t>(c)];
    if (((pfc.by_request >> c) & 1) && until > now) next = std::min(next, until);
  }
  self->ScheduleTimer(next);
}

void Port::EmitPause(uint8_t classes, Picoseconds duration) {
  PortPfc& pfc = EnsurePfc();
  const int64_t now = engine_->Now().ps();
  for (int c = 0; c < kPriorities; ++c) {
    if ((classes >> c) & 1) {
      pfc.request_until_ps[static_cast<size_t>(c)] = duration.ps() > 0 ? now + duration.ps() : 0;
    }
  }
  pfc.by_request |= classes;
  UpdateEmit();
  if (duration.ps() > 0) ScheduleTimer(now + duration.ps());
}

void Port::ReleasePause(uint8_t classes) {
  if (!pfc_) return;
  pfc_->by_request &= static_cast<uint8_t>(~classes);
  UpdateEmit();
}

void Port::DropWaiting(int c) {
  if (!pfc_) return;
  const size_t i = static_cast<size_t>(c & 7);
  std::vector<std::array<uint64_t, 2>> waiting;
  waiting.swap(pfc_->waiting[i]);
  for (const auto& e : waiting) {
    const Held h{e[0], e[1] & ~uint64_t{kSeen}};
    uint32_t bytes;
    uint8_t tc;
    SizeOf(h, &bytes, &tc);
    // Out of the buffer (and the ingress account: as if it had left).
    if (buffered_) occupancy_[tc] -= static_cast<int32_t>(bytes);
    if ((lossless_mask_ >> tc) & 1) {
      // Its hop count is one short of a held entry's.
      const QpFlow* flow;
      uint32_t hops;
      FlowAndHops(h.w0, h.w1, h.pooled(), &flow, &hops, kHopsShift, kHopsMax, Held::kTags);
      Port* up = hops >= 1 ? NextHop(*flow, hops - 1) : nullptr;
      // Released as a frame that left: the account may fall to XON, and
      // the upstream's pause must then end (else it waits for good on
      // frames that are gone).
      if (up != nullptr && up->account_.far_switch != nullptr) {
        ReleaseAccount(up, tc, bytes);
      }
    }
    ++pfc_->counters.watchdog_dropped[i];
    if (h.pooled()) {
      Drop(h.packet(), DropReason::kPfcWatchdog);
    } else {
      pool_->DropCompact();
      CountDrop(static_cast<uint32_t>(h.w1 & kPsnMask), DropReason::kPfcWatchdog);
    }
  }
  KeepStorage(&waiting, &pfc_->waiting[i]);
}

void Port::ForwardWaiting(int c) {
  if (!pfc_) return;
  const size_t i = static_cast<size_t>(c & 7);
  std::vector<std::array<uint64_t, 2>> waiting;
  waiting.swap(pfc_->waiting[i]);
  for (const auto& e : waiting) {
    uint32_t bytes;
    uint8_t tc;
    SizeOf(Held{e[0], e[1] & ~uint64_t{kSeen}}, &bytes, &tc);
    ++pfc_->counters.watchdog_forwarded[i];
    Transmit(e[0], e[1], bytes, (e[1] & kSeen) != 0);
  }
  KeepStorage(&waiting, &pfc_->waiting[i]);
}

void Port::WatchdogDrop(int c, bool on) {
  PortPfc& pfc = EnsurePfc();
  const uint8_t bit = static_cast<uint8_t>(1u << (c & 7));
  pfc.watchdog_drop = on ? static_cast<uint8_t>(pfc.watchdog_drop | bit)
                         : static_cast<uint8_t>(pfc.watchdog_drop & ~bit);
  pfc_watchdog_drop_ = pfc.watchdog_drop;
}

void Port::IgnorePause(int c, Picoseconds until) {
  PortPfc& pfc = EnsurePfc();
  pfc.ignore_until_ps[static_cast<size_t>(c & 7)] = until.ps();
  if ((pfc.paused >> (c & 7)) & 1) Resume(c & 7);
}

}  // namespace fathom::sim
