#include "fabric/sim/port.h"

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>

namespace fathom::sim {
namespace {
// A frame's wire bytes less what the byte counters leave out (preamble,
// SFD and gap): counters count the frame with its FCS, as PortXmitData does.
constexpr uint32_t kCountedOffWire = wire::kPreambleSfdGapBytes;
}  // namespace

uint64_t DropStats::total() const {
  uint64_t t = 0;
  for (uint64_t v : by_reason) t += v;
  return t;
}

Port::Port(Engine* engine, PacketPool* pool, HugePageArena* arena, DropStats* drops,
           const PortConfig& config)
    : engine_(engine),
      latency_ps_(config.latency.ps()),
      buffer_bytes_(static_cast<int32_t>(std::clamp<int64_t>(config.buffer_bytes, 0, INT32_MAX))),
      max_frame_bytes_(config.mtu_bytes > 0
                           ? static_cast<uint32_t>(config.mtu_bytes) + kEthernetWireOverhead
                           : UINT32_MAX),
      buffered_(config.buffer_bytes > 0),
      pool_(pool),
      drops_(drops),
      component_(static_cast<uint32_t>(config.node) * 1024u + static_cast<uint32_t>(config.index)),
      config_(config),
      arena_(arena) {
  // The line plan of port.h: a send reads lines 1 and 2, an arrival line 1
  // (and 2 when it settles the buffer).
  static_assert(offsetof(Port, busy_until_ps_) == 64 && offsetof(Port, occupancy_) == 120 &&
                offsetof(Port, pfc_) < 192 && offsetof(Port, ecn_kmin_) + sizeof(int32_t) <= 192 &&
                offsetof(Port, account_) == 192 &&
                offsetof(Account, held) + 6 * sizeof(int64_t) <= 64);
  constexpr uint32_t kFirstRing = 16;
  // Port and first ring alternate in the arena: an odd stride of lines
  // (stride_pad_).
  static_assert(sizeof(Port) % 64 == 0 && sizeof(Port) / 64 % 2 == 1 &&
                kFirstRing * sizeof(Held) % 128 == 0);
  ring_ = static_cast<Held*>(arena_->Allocate(kFirstRing * sizeof(Held), alignof(Held)));
  ring_mask_ = kFirstRing - 1;
  engine_->set_prefetcher<&Port::OnArrival>(&Port::PrefetchArrival);
  engine_->set_prefetcher<&Port::OnRingArrival>(&Port::PrefetchArrival);
  const int64_t bps = config_.rate.bps();
  if (bps > 0 && (8 * 1000000000000LL) % bps == 0 && 8 * 1000000000000LL / bps <= UINT32_MAX) {
    ps_per_byte_ = static_cast<uint32_t>(8 * 1000000000000LL / bps);
  }
}

PortCounters Port::counters() const {
  PortCounters c = counters_;
  c.port_xmit_packets = xmit_packets_;
  c.port_xmit_data = xmit_data_;
  c.port_xmit_wait_ps = xmit_wait_ps_;
  if (peer_ != nullptr) {
    const Received r = peer_->Delivered();
    c.port_rcv_data = r.data;
    c.port_rcv_packets = r.packets;
    c.port_rcv_errors = r.errors;
  }
  return c;
}

int64_t Port::queued_bytes(int tc) const {
  // The account may hold packets that finished serializing (Send settles it
  // lazily): count what has not.
  const int64_t now = engine_->Now().ps();
  int64_t bytes = occupancy_[tc & 7];
  for (uint32_t i = count_ - queued_; i < count_; ++i) {
    const Held& h = ring_[(head_ + i) & ring_mask_];
    if (h.arrive_ps() - latency_ps_ > now) break;
    uint32_t size;
    uint8_t cls;
    SizeOf(h, &size, &cls);
    if (cls == (tc & 7)) bytes -= size;
  }
  return bytes;
}

void Port::Drain(int64_t now_ps) {
  // Serialized by now_ps <=> arriving by now_ps + latency_ps_.
  const int64_t by = now_ps + latency_ps_;
  while (queued_ > 0) {
    const Held& h = ring_[(head_ + count_ - queued_) & ring_mask_];
    if (h.arrive_ps() > by) break;
    Release(h);
  }
}

void Port::CountDrop(uint32_t psn, DropReason r) {
  drops_->Add(r);
  engine_->TraceMix(0xd0000000ULL | static_cast<uint64_t>(r) | (uint64_t{psn} << 8));
}

void Port::Drop(Packet* p, DropReason r) {
  CountDrop(p->psn, r);
  pool_->Free(p);
}

void Port::DropOnSend(Packet* p, DropReason r) {
  if (r == DropReason::kMtuExceeded) {
    ++counters_.mtu_discards;
  } else {
    ++counters_.port_xmit_discards;
  }
  Drop(p, r);
}

void Port::Send(Packet* p) {
  // A full-size packet travels as a compact entry: its pool packet goes
  // back now (and is the next one its NIC takes, still in cache).
  if (!hooked_ && p->hops < kHopsMax && IsFullSize(*p) &&
      reinterpret_cast<uint64_t>(p->flow) >> 47 == 0) {
    const uint64_t w0 = uint64_t{static_cast<uint8_t>(p->opcode)} << kOpcodeShift |
                        uint64_t{p->hops} << kHopsShift | (p->ack_req ? kAckReq : 0) |
                        (p->ecn_ce ? kEcnCe : 0);
    const uint64_t w1 = uint64_t{p->psn} | (reinterpret_cast<uint64_t>(p->flow) >> 7) << 24;
    pool_->Compact(p);
    SendCompact(w0, w1);
    return;
  }
  SendInline(p);
}

void Port::SendFullSize(const QpFlow& flow, uint32_t wire_bytes, uint8_t tc, Opcode opcode,
                        uint32_t psn, bool ack_req) {
  SendCompactSized(uint64_t{static_cast<uint8_t>(opcode)} << kOpcodeShift | (ack_req ? kAckReq : 0),
                   uint64_t{psn & kPsnMask} | (reinterpret_cast<uint64_t>(&flow) >> 7) << 24,
                   wire_bytes, tc);
}

Packet* Port::Materialize(uint64_t w0, uint64_t w1) {
  const QpFlow* flow = FlowOf(w1);
  // Every field from the entry and its flow, built whole and stored at
  // once (Expand does not clear the packet).
  Packet m;
  m.next = nullptr;
  m.flow = flow;
  m.dest_qpn = flow->dest_qpn;
  m.psn = static_cast<uint32_t>(w1 & kPsnMask);
  m.payload_bytes = flow->full_payload;
  m.wire_bytes = flow->full_wire_bytes;
  m.opcode = static_cast<Opcode>(static_cast<uint8_t>(w0 >> kOpcodeShift));
  m.aeth_syndrome = 0;
  m.hops = static_cast<uint8_t>((w0 >> kHopsShift) & kHopsMax);
  m.ack_req = (w0 & kAckReq) != 0;
  m.corrupt = 0;
  m.ecn_ce = (w0 & kEcnCe) != 0;
  m.has_data = 0;
  m.buffer_class = flow->buffer_class;
  Packet* p = pool_->Expand();
  *p = m;
  return p;
}

bool Port::Admit(uint32_t bytes, uint8_t tc, int64_t now) {
  if (!buffered_) return true;
  // Settle what finished serializing only when the buffer looks full:
  // settling only lowers the count, so the verdict is the same, and the
  // entries it walks are cold at scale.
  if (int64_t{occupancy_[tc]} + bytes > buffer_bytes_) {
    Drain(now);
    if (int64_t{occupancy_[tc]} + bytes > buffer_bytes_) return false;
  }
  occupancy_[tc] += static_cast<int32_t>(bytes);
  return true;
}

int64_t Port::Serialize(uint32_t bytes, int64_t now) {
  const int64_t start = busy_until_ps_ > now ? busy_until_ps_ : now;
  const int64_t ser =
      ps_per_byte_ > 0 ? int64_t{ps_per_byte_} * bytes : config_.rate.SerializationTime(bytes).ps();
  busy_until_ps_ = start + ser;
  xmit_wait_ps_ += static_cast<uint64_t>(start - now);
  ++xmit_packets_;
  xmit_data_ += bytes - kCountedOffWire;
  return start;
}

void Port::SendCompact(uint64_t w0, uint64_t w1) {
  const QpFlow& flow = *FlowOf(w1);
  SendCompactSized(w0, w1, flow.full_wire_bytes, flow.buffer_class);
}

void Port::SendCompactSized(uint64_t w0, uint64_t w1, uint32_t bytes, uint8_t tc) {
  const int64_t now = engine_->Now().ps();
  if (hooked_ || bytes > max_frame_bytes_) {
    // The rare cases as a pool packet: a fault model or a tap sees it, or
    // the MTU drops it.
    SendInline(Materialize(w0, w1));
    return;
  }
  if ((policy_mask_ >> tc) & 1) [[unlikely]] {
    // Lossless here, or paused (pfc.h): admitted, queued or dropped there.
    if (!AdmitLossless(*FlowOf(w1), static_cast<uint32_t>((w0 >> kHopsShift) & kHopsMax), bytes,
                       tc) &&
        !SendPolicy(w0, w1, bytes, tc)) {
      return;
    }
  } else if (!Admit(bytes, tc, now)) {
    ++counters_.port_xmit_discards;
    pool_->DropCompact();
    CountDrop(static_cast<uint32_t>(w1 & kPsnMask), DropReason::kTailDrop);
    return;
  }
  if ((flags_ & kEcn) && EcnMarks(bytes, tc, now, *FlowOf(w1),
                                  static_cast<Opcode>(static_cast<uint8_t>(w0 >> kOpcodeShift)))) {
    w0 |= kEcnCe;
  }
  Serialize(bytes, now);
  const uint64_t arrive = static_cast<uint64_t>(busy_until_ps_ + latency_ps_);
  // The hop count stays within its 3 bits: Send takes only packets that
  // have crossed fewer than 7 links, and a compact entry that has crossed 7
  // is not forwarded by its route (NextHop: kPathMax is 7).
  static_assert(kPathMax <= kHopsMax);
  if (arrive > kTimeMask) {
    // Past what a compact entry holds: as a pool packet (counted above).
    Packet* p = Materialize(w0, w1);
    Leave(p);
    Hold(reinterpret_cast<uintptr_t>(p), static_cast<int64_t>(arrive));
    return;
  }
  HoldWords(arrive | ((w0 & ~kTimeMask) + (uint64_t{1} << kHopsShift)), w1);
}

void Port::SendInline(Packet* p) {
  const int64_t now = engine_->Now().ps();
  const uint32_t bytes = p->wire_bytes;
  if (bytes > max_frame_bytes_) {
    DropOnSend(p, DropReason::kMtuExceeded);
    return;
  }
  const uint8_t tc = ClassOf(*p);
  if ((policy_mask_ >> tc) & 1) [[unlikely]] {
    if (!AdmitLossless(*p->flow, p->hops, bytes, tc) &&
        !SendPolicy(Held::kPooled, reinterpret_cast<uint64_t>(p), bytes, tc)) {
      return;
    }
  } else if (!Admit(bytes, tc, now)) {
    DropOnSend(p, DropReason::kTailDrop);
    return;
  }
  if ((flags_ & kEcn) && EcnMarks(bytes, ClassOf(*p), now, *p->flow, p->opcode)) p->ecn_ce = 1;
  const int64_t start = Serialize(bytes, now);
  if (hooked_) {
    SendImpaired(p, start, busy_until_ps_);
    return;
  }
  Leave(p);
  Hold(reinterpret_cast<uintptr_t>(p), busy_until_ps_ + latency_ps_);
}

void Port::set_ecn(EcnMarker* m) {
  ecn_marker_ = m;
  flags_ = static_cast<uint8_t>(m != nullptr ? flags_ | kEcn : flags_ & ~kEcn);
  ecn_kmin_ = m != nullptr ? m->min_kmin() : INT32_MAX;
  if (m != nullptr && !buffered_) {
    buffered_ = true;
    buffer_bytes_ = INT32_MAX;
  }
}

bool Port::EcnMarks(uint32_t bytes, uint8_t tc, int64_t now, const QpFlow& flow, Opcode opcode) {
  // The queue the packet found: its class's bytes not yet serialized
  // (settled now: the account is lazy), less its own. RoCE packets carry
  // their QP's ECN field (traffic_class & 3: ECT when nonzero); CNPs do not.
  Drain(now);
  const int64_t queued = int64_t{occupancy_[tc]} - bytes;
  // Below every class's Kmin the marker says no without drawing (Mark), so
  // neither it nor the flow's header line (traffic_class) is read.
  if (queued < ecn_kmin_) return false;
  const bool ect = (flow.traffic_class & 3) != 0 && opcode != Opcode::kCnp;
  return ecn_marker_->Mark(tc, ect, queued);
}

void Port::SendImpaired(Packet* p, int64_t start, int64_t end) {
  if (tap_ != nullptr) tap_->on_packet(tap_->ctx, *p, Picoseconds(start));
  const uint32_t bytes = p->wire_bytes;
  const int64_t arrival = end + latency_ps_;
  int64_t delay = 0;
  if (impairment_ != nullptr) {
    const ImpairmentVerdict v =
        impairment_->decide(impairment_->ctx, *p, bytes, Picoseconds(start));
    switch (v.action) {
      case ImpairmentVerdict::kPass:
        break;
      case ImpairmentVerdict::kDrop:
        // Lost on the wire, but it took its turn at the serializer: its
        // entry holds the buffer space until then. The packet stays in the
        // ring (marked lost), which gives the entry its size and class, and
        // is freed when its turn comes, delivered to no one.
        ++lost_.packets;
        lost_.data += bytes - kCountedOffWire;
        CountDrop(p->psn, DropReason::kImpairment);
        Hold(reinterpret_cast<uintptr_t>(p) | Held::kLost, arrival);
        return;
      case ImpairmentVerdict::kCorrupt:
        p->corrupt = 1;
        break;
      case ImpairmentVerdict::kDelay:
        delay = v.extra_delay.ps();
        break;
    }
  }
  corrupted_ += p->corrupt;
  Leave(p);
  if (delay > 0) {
    // Late: it goes through the event list on its own, and its entry only
    // holds its buffer space, so that the ring's arrivals stay in order.
    SendAlone(p, arrival + delay);
    Hold(reinterpret_cast<uintptr_t>(p) | Held::kAlone, arrival);
    return;
  }
  Hold(reinterpret_cast<uintptr_t>(p), arrival);
}

void Port::Grow() {
  // Double the ring (power of two), keeping order. The old ring stays in
  // the arena: rings only grow, so the waste is at most what is in use.
  const uint32_t size = (ring_mask_ + 1) * 2;
  Held* bigger = static_cast<Held*>(arena_->Allocate(size * sizeof(Held), alignof(Held)));
  for (uint32_t i = 0; i < count_; ++i) bigger[i] = ring_[(head_ + i) & ring_mask_];
  ring_ = bigger;
  ring_mask_ = size - 1;
  head_ = 0;
}

void Port::Hold(uintptr_t tagged, int64_t arrive_ps) {
  HoldWords(static_cast<uint64_t>(arrive_ps) | Held::kPooled, tagged);
}

void Port::HoldWords(uint64_t w0, uint64_t w1) {
  if (flags_ & kRemote) [[unlikely]] {
    HoldShipped(w0, w1);
    return;
  }
  // Every entry arrives at its end of serialization plus the constant
  // latency, and ends only grow: the ring is in arrival order.
  if (count_ == ring_mask_ + 1) Grow();
  ring_[(head_ + count_) & ring_mask_] = Held{w0, w1};
  ++count_;
  if (buffered_) ++queued_;
  if (count_ == 1) ScheduleOldest();
}

void Port::ScheduleOldest() {
  // The argument is only a hint, which the engine fetches a few events
  // ahead (the handler reads the ring): a pool packet, or a compact entry's
  // flow, whose first line gives the route.
  const Held& h = ring_[head_];
  uint64_t hint;
  if (!h.pooled()) {
    hint =
        reinterpret_cast<uint64_t>(FlowOf(h.w1)) | kCompactHint | ((h.w0 >> kHopsShift) & kHopsMax);
  } else {
    hint = (h.w1 & Held::kTags) != 0 ? 0 : h.w1;
  }
  engine_->Schedule<&Port::OnRingArrival>(Picoseconds(h.arrive_ps()), EventKind::kArrival,
                                          rx_component_, this, hint);
}

void Port::OnRingArrival(void* obj, uint64_t /*arg*/) {
  Port* tx = static_cast<Port*>(obj);
  // The oldest entry is due: this event was scheduled for its arrival, and
  // only this handler takes entries off the ring.
  auto pop = [tx] {
    const Held h = tx->ring_[tx->head_];
    // Still counted in the buffer (arrival before Drain saw it end).
    if (tx->count_ == tx->queued_) tx->Release(h);
    tx->head_ = (tx->head_ + 1) & tx->ring_mask_;
    --tx->count_;
    return h;
  };
  Held h = pop();
  // Entries of packets not delivered here (lost on the wire, or gone on
  // their own) leave the ring with the first real packet due at the same
  // time.
  bool found = true;
  while (h.skipped()) {
    if ((h.w1 & Held::kTags) == Held::kLost) tx->pool_->Free(h.packet());
    if (tx->count_ == 0 || tx->ring_[tx->head_].arrive_ps() > tx->engine_->Now().ps()) {
      found = false;
      break;
    }
    h = pop();
  }
  if (tx->count_ > 0) {
    tx->ScheduleOldest();
  } else {
    // Empty: start over at the first slot, whose line is likelier in cache
    // than the next one round the ring.
    tx->head_ = 0;
  }
  if (!found) return;
  if (h.pooled()) {
    tx->Deliver(h.packet());
  } else {
    tx->DeliverCompact(h.w0, h.w1);
  }
}

void Port::PrefetchArrival(const void* obj, uint64_t arg) {
  const Port* port = static_cast<const Port*>(obj);
  if (arg == 0) return;
  // The ring's oldest entry (this arrival) and the next (its successor's
  // arrival time): written long ago, cold at scale.
  __builtin_prefetch(&port->ring_[port->head_]);
  __builtin_prefetch(&port->ring_[(port->head_ + 1) & port->ring_mask_]);
  if ((arg & kCompactHint) != 0) {
    // A compact entry: the engine fetched its flow's first line, which
    // names the egress port at a forwarding far end, or gives the QP the
    // receiver's hint wants.
    const QpFlow& flow = *reinterpret_cast<const QpFlow*>(arg & ~uint64_t{alignof(QpFlow) - 1});
    if (port->rx_forwards_) {
      const Port* out = NextHop(flow, static_cast<uint32_t>(arg & kHopsMax));
      if (out != nullptr) {
        out->PrefetchSendLines();
        // A lossless frame's admission there (SendPolicy) reads the
        // egress's line 3 and this port's account.
        if (port->rx_forwards_ & kAccounted) out->PrefetchPolicyLines(port);
      }
      return;
    }
    // The receiver takes the entry as it is (rx_full_size_fn_) or as a pool
    // packet (Materialize, through pool_): both on this line.
    __builtin_prefetch(&port->pool_);
    if (port->rx_prefetch_ != nullptr) port->rx_prefetch_(port->rx_obj_, flow.dest_qpn, true);
    return;
  }
  const Packet* p = reinterpret_cast<const Packet*>(arg);
  if (port->rx_forwards_) {
    // A packet with a route goes straight to the egress port it names
    // (Deliver): that port's lines, and the route's, which tells the next
    // switch. A packet without one is looked up by the switch: nothing to
    // fetch ahead.
    const Port* out = p->next_out;
    if (out != nullptr) {
      out->PrefetchSendLines();
      if (port->rx_forwards_ & kAccounted) out->PrefetchPolicyLines(port);
      __builtin_prefetch(p->flow->path);
    }
    return;
  }
  if (port->rx_prefetch_ != nullptr) port->rx_prefetch_(port->rx_obj_, p->dest_qpn, false);
}

void Port::SendAlone(Packet* p, int64_t arrive_ps) {
  ++alone_.packets;
  alone_.data += p->wire_bytes - kCountedOffWire;
  alone_.errors += p->corrupt;
  if (remote_ != nullptr && ship_deferred_) {
    // Shipped with its ring entry (ShipStarted).
    shipped_alone_.push_back({arrive_ps, p->wire_bytes, p->corrupt != 0, p});
    return;
  }
  if (remote_ != nullptr) {
    // Shipped; its ring entry (kAlone) keeps the packet until it settles.
    remote_->ship(remote_->ctx, *this, static_cast<uint64_t>(arrive_ps),
                  reinterpret_cast<uint64_t>(p), true);
    shipped_alone_.push_back({arrive_ps, p->wire_bytes, p->corrupt != 0});
    return;
  }
  engine_->Schedule<&Port::OnArrival>(Picoseconds(arrive_ps), EventKind::kArrival, rx_component_,
                                      this, reinterpret_cast<uint64_t>(p));
}

void Port::OnArrival(void* obj, uint64_t arg) {
  Port* tx = static_cast<Port*>(obj);
  Packet* p = reinterpret_cast<Packet*>(arg);
  --tx->alone_.packets;
  tx->alone_.data -= p->wire_bytes - kCountedOffWire;
  tx->alone_.errors -= p->corrupt;
  tx->Deliver(p);
}

void Port::HoldShipped(uint64_t w0, uint64_t w1) {
  if (ship_deferred_) {
    HoldDeferred(w0, w1);
    return;
  }
  SettleShipped();
  const Held h{w0, w1};
  // Every entry, lost and delayed ones too: their arrivals are events
  // (OnRingArrival takes them off) wherever the far end is simulated.
  remote_->ship(remote_->ctx, *this, w0, w1, false);
  if (count_ == ring_mask_ + 1) Grow();
  ring_[(head_ + count_) & ring_mask_] = h;
  ++count_;
  if (buffered_) ++queued_;
}

void Port::SettleShipped() {
  // What OnRingArrival does at each arrival, without the delivery (the far
  // end's process delivers its copy): the entries arrived by now leave,
  // and their packets go back to the pool.
  const int64_t now = engine_->Now().ps();
  while (count_ > 0 && ring_[head_].arrive_ps() <= now) {
    const Held h = ring_[head_];
    if (count_ == queued_) Release(h);
    head_ = (head_ + 1) & ring_mask_;
    --count_;
    if (shipped_ > 0) --shipped_;
    if (h.pooled()) {
      pool_->Free(h.packet());
    } else {
      pool_->DropCompact();
    }
  }
  for (size_t i = 0; i < shipped_alone_.size();) {
    const ShippedAlone a = shipped_alone_[i];
    if (a.arrive_ps > now) {
      ++i;
      continue;
    }
    --alone_.packets;
    alone_.data -= a.bytes - kCountedOffWire;
    alone_.errors -= a.corrupt;
    shipped_alone_[i] = shipped_alone_.back();
    shipped_alone_.pop_back();
  }
}

void Port::ReceiveShipped(uint64_t w0, uint64_t w1, bool alone) {
  if (alone) {
    SendAlone(reinterpret_cast<Packet*>(w1), static_cast<int64_t>(w0));
    return;
  }
  HoldWords(w0, w1);
}

Port::Received Port::Delivered() const {
  if (mirror_) return Received{};  // the sending process counts
  // Everything sent arrived, but what the wire lost and what is still on
  // the way (in the ring, or on its own).
  Received r;
  r.packets = xmit_packets_ - lost_.packets - alone_.packets;
  r.data = xmit_data_ - lost_.data - alone_.data;
  r.errors = corrupted_ - alone_.errors;
  for (uint32_t i = 0; i < count_; ++i) {
    const Held& h = ring_[(head_ + i) & ring_mask_];
    if (h.skipped()) continue;  // counted in lost_ or alone_
    uint32_t bytes;
    uint8_t tc;
    SizeOf(h, &bytes, &tc);
    --r.packets;
    r.data -= bytes - kCountedOffWire;
    if (h.pooled()) r.errors -= h.packet()->corrupt;  // a compact entry is never corrupt
  }
  return r;
}

void Port::Deliver(Packet* p) {
  engine_->TraceMix(uint64_t{p->psn} | (uint64_t{static_cast<uint8_t>(p->opcode)} << 24) |
                    (uint64_t{p->dest_qpn} << 32));
  if (p->corrupt) {
    // The ICRC (and FCS) no longer match: the receiver discards the frame
    // (and counts it: Delivered()).
    Drop(p, DropReason::kBadIcrc);
    return;
  }
  if (rx_forwards_) {
    if (rx_forwards_ & kPicks) [[unlikely]] {
      if (ForwardPicked(p)) return;
    } else if (p->next_out != nullptr) {
      // Send, which takes a full-size packet (one a fault model or a tap
      // saw as a pool packet) back into a compact entry.
      p->next_out->Send(p);
      return;
    }
  }
  if (static_cast<uint8_t>(p->opcode) == kPauseOpcode) [[unlikely]] {
    // A PAUSE frame: the far end's egress toward us (our peer) obeys it.
    uint16_t quanta[kPriorities];
    for (int c = 0; c < kPriorities; ++c) {
      const uint64_t word = c < 4 ? p->ext().va : p->ext().compare;
      quanta[c] = static_cast<uint16_t>(word >> (16 * (c & 3)));
    }
    peer_->OnPauseFrame(static_cast<uint8_t>(p->psn), quanta);
    pool_->Free(p);
    return;
  }
  rx_fn_(rx_obj_, p, rx_index_);
}

void Port::DeliverCompact(uint64_t w0, uint64_t w1) {
  const QpFlow& flow = *FlowOf(w1);
  // The same fold as Deliver's: the digest does not see the entry's form.
  engine_->TraceMix((w1 & kPsnMask) | (((w0 >> kOpcodeShift) & 0xFF) << 24) |
                    (uint64_t{flow.dest_qpn} << 32));
  if (rx_forwards_) {
    if (rx_forwards_ & kPicks) [[unlikely]] {
      ForwardPickedCompact(w0, w1);
      return;
    }
    Port* out = NextHop(flow, static_cast<uint32_t>((w0 >> kHopsShift) & kHopsMax));
    if (out != nullptr) {
      out->SendCompact(w0, w1);
      return;
    }
  }
  // A CE-marked packet reaches the receiver whole (Packet::ecn_ce).
  if (rx_full_size_fn_ != nullptr && (w0 & kEcnCe) == 0 &&
      rx_full_size_fn_(rx_obj_, flow, static_cast<uint32_t>(w1 & kPsnMask),
                       static_cast<Opcode>(static_cast<uint8_t>(w0 >> kOpcodeShift)),
                       (w0 & kAckReq) != 0)) {
    pool_->DropCompact();  // received: no longer in flight
    return;
  }
  rx_fn_(rx_obj_, Materialize(w0, w1), rx_index_);
}

bool Port::ForwardPicked(Packet* p) {
  if (static_cast<uint8_t>(p->opcode) == kPauseOpcode) return false;
  // By the switch's current route, not the egress the previous hop read
  // (next_out): the route may have changed since.
  uint32_t hops = p->hops;
  Port* out = forwarding_->pick(forwarding_->ctx, *this, *p->flow, &hops);
  if (out == nullptr) {
    Drop(p, DropReason::kNoRoute);
    return true;
  }
  p->hops = static_cast<uint8_t>(hops);
  out->Send(p);
  return true;
}

void Port::ForwardPickedCompact(uint64_t w0, uint64_t w1) {
  uint32_t hops = static_cast<uint32_t>((w0 >> kHopsShift) & kHopsMax);
  Port* out = forwarding_->pick(forwarding_->ctx, *this, *FlowOf(w1), &hops);
  if (out == nullptr) {
    pool_->DropCompact();
    CountDrop(static_cast<uint32_t>(w1 & kPsnMask), DropReason::kNoRoute);
    return;
  }
  if (hops < kHopsMax) {
    out->SendCompact((w0 & ~(kHopsMax << kHopsShift)) | uint64_t{hops} << kHopsShift, w1);
    return;
  }
  // Past what a compact entry's hop count holds (off its route): as a pool
  // packet.
  Packet* p = Materialize(w0, w1);
  p->hops = static_cast<uint8_t>(hops);
  out->Send(p);
}

// PFC's paths (port_pfc.cc) reach the inline steps through these.
bool Port::AdmitDropTail(uint32_t bytes, uint8_t tc) {
  return Admit(bytes, tc, engine_->Now().ps());
}

void Port::Transmit(uint64_t w0, uint64_t w1, uint32_t bytes, bool seen) {
  const int64_t now = engine_->Now().ps();
  const int64_t start = Serialize(bytes, now);
  const int64_t arrive = busy_until_ps_ + latency_ps_;
  if ((w0 & Held::kPooled) != 0) {
    Packet* p = reinterpret_cast<Packet*>(w1 & ~uint64_t{Held::kTags});
    if (hooked_ && !seen) {
      SendImpaired(p, start, busy_until_ps_);
      return;
    }
    Leave(p);
    Hold(reinterpret_cast<uintptr_t>(p), arrive);
    return;
  }
  if (static_cast<uint64_t>(arrive) > kTimeMask) {
    Packet* p = Materialize(w0, w1);
    Leave(p);
    Hold(reinterpret_cast<uintptr_t>(p), arrive);
    return;
  }
  HoldWords(static_cast<uint64_t>(arrive) | ((w0 & ~kTimeMask) + (uint64_t{1} << kHopsShift)), w1);
}

}  // namespace fathom::sim
