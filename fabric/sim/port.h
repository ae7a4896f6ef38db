// Port: one direction of a full-duplex link — the egress queue of a node's
// port, its serializer, and the cable to the far end. The Network owns every
// Port; a Port knows its peer (the reverse direction) and who receives at the
// far end.
//
// Model: a FIFO served at line rate. Because service is FIFO at a fixed rate,
// a packet's departure and its arrival at the far end are known when it is
// queued: one event per packet per hop. Arrivals of one port come in the
// order packets were sent, so the port keeps every packet it holds (queued,
// serializing or propagating) in one ring, oldest first, and only the oldest
// one's arrival sits in the engine's event list. The list then holds one
// event per busy link rather than one per packet in flight, small enough to
// stay in cache at 1024 hosts; the ring gives the next arrival time without
// touching the packet. A full-size packet (the middle of a message: most of
// them) is held as its flow, PSN and opcode alone, with no pool packet (see
// Held). A packet a fault delays goes through the event list
// on its own (its entry in the ring only holds its buffer space), so the
// ring stays in arrival order. Occupancy for tail drop is the bytes not yet
// fully serialized, per traffic class (buffer_bytes each). Counters carry
// the IB port counter names (ROCEV2.md "Counters users look at"); data
// counters are in bytes, not the 4-byte words of the IB PMA.
//
// ECN: an optional EcnMarker (ecn.h; switch ports, when NetworkConfig::ecn
// is on) marks CE the ECN-capable packets it admits by RED on its class's
// queue; off = one branch.
//
// Faults: an optional Impairment (null when no fault is attached, so the
// fault-free path pays one branch) sees each packet as it leaves and decides
// pass / drop / corrupt / delay. Capture: an optional PacketTap sees each
// transmitted packet (pcap through the wire codec; off = one branch).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "base/units.h"
#include "fabric/sim/arena.h"
#include "fabric/sim/ecn.h"
#include "fabric/sim/engine.h"
#include "fabric/sim/packet.h"
#include "fabric/sim/pfc.h"
#include "faults/frame.h"

namespace fathom::sim {

// Why a packet vanished (one list for the fabric and the fault models).
using faults::DropReason;
using faults::DropReasonName;

// Drops across the whole network, by reason.
struct DropStats {
  std::array<uint64_t, static_cast<size_t>(DropReason::kCount)> by_reason{};
  void Add(DropReason r) { ++by_reason[static_cast<size_t>(r)]; }
  uint64_t total() const;
};

struct PortCounters {
  uint64_t port_xmit_data = 0;  // bytes (frame without preamble/IFG)
  uint64_t port_xmit_packets = 0;
  uint64_t port_rcv_data = 0;
  uint64_t port_rcv_packets = 0;
  uint64_t port_xmit_discards = 0;  // tail drops
  uint64_t port_rcv_errors = 0;     // bad ICRC/FCS on arrival
  uint64_t mtu_discards = 0;        // frames over the link MTU, dropped silently
  uint64_t port_xmit_wait_ps = 0;   // time packets waited behind others
};

// A fault model's decision for one packet (faults/ implements these).
struct ImpairmentVerdict {
  enum Action : uint8_t { kPass, kDrop, kCorrupt, kDelay } action = kPass;
  Picoseconds extra_delay;  // for kDelay
};
struct Impairment {
  ImpairmentVerdict (*decide)(void* ctx, const Packet& p, uint32_t wire_bytes, Picoseconds at);
  void* ctx;
};

// Sees packets a port transmits (capture). `at` is the start of transmission.
struct PacketTap {
  void (*on_packet)(void* ctx, const Packet& p, Picoseconds at);
  void* ctx;
};

// Who receives at a port: fn(obj, packet, port index at that node).
using ReceiveFn = void (*)(void* obj, Packet* p, int32_t in_port);
// The receiver's fetch hint for a packet about to arrive, by the QP it is
// for: the first of the lines its ReceiveFn will reach through pointers.
// Reads only.
using ReceivePrefetchFn = void (*)(const void* obj, uint32_t dest_qpn, bool full_size);
// A receiver's entry for a full-size packet (IsFullSize: the middle of a
// message) that a port holds as a compact entry: its flow, PSN, opcode and
// AckReq (its payload, size and destination QP are the flow's). Returns
// false, having done nothing, for a packet it wants whole: the port then
// builds a pool packet and calls the ReceiveFn.
using ReceiveFullSizeFn = bool (*)(void* obj, const QpFlow& flow, uint32_t psn, Opcode opcode,
                                   bool ack_req);

// A link whose far end another process simulates (fabric/parallel/): the
// sending port ships each packet it puts on the cable there, with its
// arrival time, instead of delivering it. `w0`/`w1` are a held entry's words
// (Port's Held: a compact entry's flow is this process's address; a pool
// packet's is the Packet*); `alone`: a packet a fault delayed, w0 its
// arrival time and w1 the Packet*. The callee copies what it needs.
struct RemoteLink {
  void (*ship)(void* ctx, const class Port& port, uint64_t w0, uint64_t w1, bool alone);
  void* ctx;
};

// How a switch forwards once routes have changed under packets in flight
// (a link_down's reroute_via; fabric/scenario/reroute.h): a packet reads
// its egress from its flow's route by hop count, and the route may now
// name another switch's port there. `pick` returns the egress port of the
// switch at the far end of `in` (never another node's) for a packet of
// `flow` that has crossed `*hops` links, and may set `*hops` to where the
// packet now is on its route; null: no route (the packet is dropped).
struct Forwarding {
  class Port* (*pick)(void* ctx, const class Port& in, const QpFlow& flow, uint32_t* hops);
  void* ctx;
};

struct PortConfig {
  int32_t node = -1;
  int32_t index = -1;  // port index at the node
  int32_t link = -1;   // topology link id
  BitsPerSecond rate;
  Picoseconds latency;
  int32_t mtu_bytes = 0;     // IP MTU in this direction; 0 = unlimited
  int64_t buffer_bytes = 0;  // per traffic class; 0 = unlimited (over 2 GiB: 2 GiB)
};

class Port {
 public:
  // The ring lives in `arena`, which must outlive the port.
  Port(Engine* engine, PacketPool* pool, HugePageArena* arena, DropStats* drops,
       const PortConfig& config);
  Port(const Port&) = delete;
  Port& operator=(const Port&) = delete;

  // Wires the far end: the reverse-direction port and who receives there.
  // The sending port delivers (and counts what its far end receives) by
  // itself, so a hop touches one Port, not two. A far end that `forwards`
  // (a switch) is not called for a packet that carries its egress port
  // (next_out, from its flow's route): the packet goes straight to that port, the
  // port the switch would pick; `receive` gets the others.
  void Connect(Port* peer, ReceiveFn receive, void* receiver, ReceivePrefetchFn prefetch = nullptr,
               bool forwards = false, ReceiveFullSizeFn receive_full_size = nullptr) {
    peer_ = peer;
    rx_fn_ = receive;
    rx_full_size_fn_ = receive_full_size;
    rx_obj_ = receiver;
    rx_prefetch_ = prefetch;
    rx_index_ = static_cast<int16_t>(peer->config_.index);
    rx_forwards_ =
        static_cast<uint8_t>((forwards ? kForwards : 0) | (rx_forwards_ & (kAccounted | kPicks)));
    rx_component_ = peer->component_;
  }

  // Queues a packet for transmission (takes ownership). Drops it (and frees
  // it) when the buffer of its traffic class is full or it exceeds the MTU.
  // The packet's wire_bytes must be set (FrameWireBytes).
  void Send(Packet* p);
  // Whether SendFullSize takes packets of `flow` (no fault model or tap
  // here, and a flow address a compact entry holds).
  bool TakesFullSize(const QpFlow& flow) const {
    return !hooked_ && reinterpret_cast<uint64_t>(&flow) >> 47 == 0;
  }
  // Send for a full-size packet of `flow` (IsFullSize) that a NIC has not
  // built as a pool packet: the same as Send of a pool packet with these
  // fields, no hops yet and no ECN mark. Its size and class are the flow's
  // (given, so that the flow's line is not read). Needs TakesFullSize(flow),
  // and the caller to count the packet in the port's pool first
  // (PacketPool::AddCompact), which the caller's lines reach.
  void SendFullSize(const QpFlow& flow, uint32_t wire_bytes, uint8_t tc, Opcode opcode,
                    uint32_t psn, bool ack_req);

  // Time the serializer is busy until (a NIC sends when this is <= Now()).
  Picoseconds busy_until() const { return Picoseconds(busy_until_ps_); }
  // Bytes of traffic class `tc` held against the buffer (not yet fully
  // serialized). A port without a buffer limit keeps no account: 0.
  int64_t queued_bytes(int tc) const;

  const PortConfig& config() const { return config_; }
  // This port's counters: what it transmitted, and what it received over the
  // reverse direction (counted by the peer port that delivers it).
  PortCounters counters() const;
  Port* peer() const { return peer_; }
  void set_impairment(const Impairment* i) {
    impairment_ = i;
    hooked_ = impairment_ != nullptr || tap_ != nullptr;
  }
  // ECN marking of this port's egress queue (null: none). Set before the
  // port sends; a port without a buffer limit then keeps its account (as
  // if its buffer were 2 GiB), which marking reads.
  void set_ecn(EcnMarker* m);
  const EcnMarker* ecn() const { return ecn_marker_; }
  void set_tap(const PacketTap* t) {
    tap_ = t;
    hooked_ = impairment_ != nullptr || tap_ != nullptr;
  }

  // PFC (pfc.h; port_pfc.cc). Null when the port has no PFC state.
  const PortPfc* pfc() const { return pfc_.get(); }
  // Makes the PFC state (idempotent). `lossless` are the classes whose
  // sends this port accounts against its upstream's ingress account (a
  // switch's egress port); `far_switch` is the switch at the far end (null:
  // a NIC), which accounts what this port delivers.
  PortPfc& EnablePfc(uint8_t lossless, PfcSwitch* far_switch, const QosConfig* qos,
                     int64_t headroom_bytes);
  // Classes the egress sends nothing of (paused, and not forwarded by the
  // watchdog). 0 without PFC.
  uint8_t paused_classes() const { return pfc_ ? pfc_->paused : 0; }
  // Classes whose sends take the policy path (lossless or paused): a NIC's
  // pump tests this (line 2) before it looks further.
  uint8_t policy_classes() const { return policy_mask_; }
  // Calls fn(obj) when a class resumes (a NIC's pump).
  void set_on_resume(void (*fn)(void*), void* obj) {
    on_resume_ = fn;
    on_resume_obj_ = obj;
  }
  // The far end pauses (PAUSE received): for `quanta` 512-bit times, 0 = XON.
  void OnPauseFrame(uint8_t class_enable, const uint16_t* quanta);
  // Sends a PAUSE frame for `classes` with `quanta` (each class alike) to
  // the far end, ahead of queued data (after the frame in progress).
  void SendPause(uint8_t classes, uint16_t quanta);
  // This port asserts XOFF toward its far end for `classes`: for
  // `duration` (then XON), or until ReleasePause when it is zero
  // (refreshed at half the pause time). A NIC's or a switch's port.
  void EmitPause(uint8_t classes, Picoseconds duration);
  void ReleasePause(uint8_t classes);
  // Watchdog hooks: drop / forward (send despite the pause) the waiting
  // frames of class `c`; ignore PAUSE for `c` until `until` (ending a pause
  // in force).
  void DropWaiting(int c);
  void ForwardWaiting(int c);
  void IgnorePause(int c, Picoseconds until);
  // The watchdog's drop action (pfc_watchdog.h): while on, every frame of
  // lossless class `c` sent to this port is dropped (counted in
  // watchdog_dropped, DropReason::kPfcWatchdog).
  void WatchdogDrop(int c, bool on);
  // For a port whose far end is a switch (PfcSwitch): the switch sends XON
  // for the classes whose ingress account fell to XON; true while any is
  // XOFF.
  bool CheckXon();
  // Whether this port holds (queued or waiting) bytes of class `c` that
  // `upstream` delivered (cycle detection; walks the queue).
  bool HoldsFrom(const Port* upstream, int c) const;
  Engine* engine() const { return engine_; }
  // The PFC counters with the pauses in force counted up to now; none when
  // the port has no PFC state or nothing to count (no PAUSE sent or
  // received, no lossless drop).
  std::optional<PfcCounters> pfc_counters() const;
  // Bytes of class `tc` held in the per-class waiting FIFO (paused).
  int64_t waiting_bytes(int tc) const;

  // Distributed runs (fabric/parallel/). set_remote: the far end is
  // simulated elsewhere; the port keeps its entries for its buffer account
  // and counters only (settled without events), and ships each one through
  // `remote`. set_mirror: the sending end is simulated elsewhere; this copy
  // only delivers what is shipped to it (ReceiveShipped) and counts nothing
  // (Delivered() is the sending process's). Off: one branch per hold.
  void set_remote(const RemoteLink* remote) {
    remote_ = remote;
    flags_ = static_cast<uint8_t>(remote != nullptr ? flags_ | kRemote : flags_ & ~kRemote);
  }
  void set_mirror(bool on) {
    mirror_ = on;
    // A mirror never sends, so it keeps no buffer account: its arrivals
    // release nothing (the sending process's copy does, and a lossless
    // release moves a switch's ingress account, which that process owns).
    if (on) {
      buffered_ = false;
      queued_ = 0;
    }
  }
  bool remote() const { return remote_ != nullptr; }
  // Re-routes (Forwarding; not owned, null: off): from now on the switch
  // at the far end forwards what this port delivers by `f` rather than by
  // the route's entry alone. Set once the first route changes, on every
  // port whose far end forwards; off costs a test of a bit on line 1.
  void set_forwarding(const Forwarding* f) {
    forwarding_ = f;
    rx_forwards_ = static_cast<uint8_t>((rx_forwards_ & ~kPicks) |
                                        (f != nullptr && (rx_forwards_ & kForwards) ? kPicks : 0));
  }
  // Frames this port took to send (serialized, or dropped at admission or
  // over the MTU), without counters()'s walk of the far end's ring: a
  // distributed run checks that a port it does not simulate took none.
  uint64_t send_attempts() const {
    return xmit_packets_ + counters_.port_xmit_discards + counters_.mtu_discards;
  }
  // A shipped entry: Held words (a compact entry's flow in this process,
  // counted in the pool by the caller; a pool packet's next_out set), or a
  // delayed pool packet arriving at `w0` on its own (`alone`).
  void ReceiveShipped(uint64_t w0, uint64_t w1, bool alone);
  // Takes the entries that have arrived by now off a remote port's ring.
  void SettleShipped();
  // PFC across processes (fabric/parallel/pfc_cross.h). A PAUSE pulls back
  // the queued entries that have not started serializing (PullBack), so a
  // deferred remote port ships an entry only once it started, by `until`
  // (ShipStarted, at the end of each window: what starts in a window
  // arrives in a later one). And its entries leave the buffer account (and
  // a lossless one the switch's ingress account, which may send XON) at
  // their arrival times, as OnRingArrival's do in one process: by events of
  // their own with the arrival's time, kind and component, which deliver
  // nothing. Their digests and count (settle_digest(), settle_events())
  // belong to no event of the one-process run: the caller takes them out.
  void set_ship_deferred(bool on) { ship_deferred_ = on; }
  void ShipStarted(int64_t until_ps);
  // When the oldest entry not yet shipped starts serializing (INT64_MAX:
  // none): the run must end a window at or after it, even a window with no
  // event, before that entry arrives.
  int64_t next_ship_ps() const;
  uint64_t settle_digest() const { return settle_digest_; }
  uint64_t settle_events() const { return settle_events_; }
  // Held's tags, for a RemoteLink's callee.
  static constexpr uint64_t kHeldPooled = uint64_t{1} << 63;
  static constexpr uint64_t kHeldTimeMask = (uint64_t{1} << 48) - 1;
  static constexpr uintptr_t kHeldTags = alignof(Packet) - 1;
  static const QpFlow* CompactFlow(uint64_t w1) {
    return reinterpret_cast<const QpFlow*>((w1 >> 24) << 7);
  }
  static uint64_t CompactWithFlow(uint64_t w1, const QpFlow* flow) {
    return (w1 & ((uint64_t{1} << 24) - 1)) | (reinterpret_cast<uint64_t>(flow) >> 7) << 24;
  }

  // The engine's fetch hint for arrival events (Engine::set_prefetcher):
  // the ring's head, and where the packet goes next: for a packet that
  // crosses a forwarding far end by its route, the egress port's lines and
  // the route's (Deliver); otherwise the receiver's hint. The event's
  // argument is the arriving packet's pool packet, or for a compact entry
  // its flow tagged with kCompactHint and the entry's hop count (the
  // engine fetches either a few events before).
  static void PrefetchArrival(const void* obj, uint64_t arg);

 private:
  struct Held;  // below
  // Fetches the lines a Send reads (traffic classes 0 and 1).
  void PrefetchSendLines() const {
    const char* lines = reinterpret_cast<const char*>(this);
    __builtin_prefetch(lines);
    __builtin_prefetch(lines + 64);
  }
  // And the lines a lossless send's admission reads besides (SendPolicy):
  // this egress's line 3 and the account of `up`, the port delivering.
  void PrefetchPolicyLines(const Port* up) const {
    __builtin_prefetch(reinterpret_cast<const char*>(this) + 128);
    __builtin_prefetch(&up->account_);
  }
  // The oldest packet of the ring arrives (obj: this sending port).
  static void OnRingArrival(void* obj, uint64_t arg);
  // A packet scheduled on its own arrives (obj: this sending port).
  static void OnArrival(void* obj, uint64_t arg);
  // Sends a packet that would overtake the ring's newest on its own.
  [[gnu::cold, gnu::noinline]] void SendAlone(Packet* p, int64_t arrive_ps);
  // Hands a packet to the far end's receiver (or drops it: bad ICRC).
  // The per-packet steps are forced inline: each is called once per hop,
  // and a call costs more than their bodies' common path.
  [[gnu::always_inline]] inline void Deliver(Packet* p);
  [[gnu::always_inline]] inline void SendInline(Packet* p);
  // The same for a compact entry's packet (see Held): to the egress port its
  // route names, or to the receiver as a pool packet.
  [[gnu::always_inline]] inline void DeliverCompact(uint64_t w0, uint64_t w1);
  // Deliver and DeliverCompact at a switch that forwards by forwarding_
  // (kPicks), out of line. ForwardPicked returns false, having done
  // nothing, for a PAUSE frame (link-local: not forwarded).
  [[gnu::cold, gnu::noinline]] bool ForwardPicked(Packet* p);
  [[gnu::cold, gnu::noinline]] void ForwardPickedCompact(uint64_t w0, uint64_t w1);
  // Queues a full-size packet given as a compact entry's words (its hop
  // count not yet raised for this link).
  [[gnu::always_inline]] inline void SendCompact(uint64_t w0, uint64_t w1);
  // SendCompact with the flow's full-size wire bytes and class given.
  [[gnu::always_inline]] inline void SendCompactSized(uint64_t w0, uint64_t w1, uint32_t bytes,
                                                      uint8_t tc);
  // A pool packet with a compact entry's fields (hop count as in w0).
  Packet* Materialize(uint64_t w0, uint64_t w1);
  // The buffer takes `bytes` of class `tc` (false: it is full).
  [[gnu::always_inline]] inline bool Admit(uint32_t bytes, uint8_t tc, int64_t now);
  // The serializer sends `bytes` (counted): returns when they start; they
  // end at busy_until_ps_.
  [[gnu::always_inline]] inline int64_t Serialize(uint32_t bytes, int64_t now);
  [[gnu::always_inline]] inline void ScheduleOldest();
  // The packet crosses this link: count the hop and look up, in its flow's
  // route, where the far end will send it (at a switch, the fetch hint
  // brought the route's line in; at a NIC, the QP's packets share it). The
  // far end then reads only the packet.
  [[gnu::always_inline]] static void Leave(Packet* p) {
    ++p->hops;
    p->next_out = NextHop(*p->flow, p->hops);
  }
  // Appends a pool packet's entry (a Held's `w1`) arriving at arrive_ps.
  [[gnu::always_inline]] inline void Hold(uintptr_t tagged, int64_t arrive_ps);
  // Appends an entry as it is (Held's words).
  [[gnu::always_inline]] inline void HoldWords(uint64_t w0, uint64_t w1);
  // The traffic class a packet is buffered in.
  static uint8_t ClassOf(const Packet& p) { return p.buffer_class; }
  // Whether a packet of `bytes` just admitted into class `tc` is marked
  // CE (ecn.h): called only when kEcn is set.
  [[gnu::cold, gnu::noinline]] bool EcnMarks(uint32_t bytes, uint8_t tc, int64_t now,
                                             const QpFlow& flow, Opcode opcode);
  // PFC's policy path (port_pfc.cc), out of line: takes an entry (Held
  // words, not yet left: the hop count as the sender gave it) of class
  // `tc`; true: the caller admits and sends it as usual (not lossless here,
  // not paused); false: taken (waiting, or sent, or dropped).
  [[gnu::cold, gnu::noinline]] bool SendPolicy(uint64_t w0, uint64_t w1, uint32_t bytes,
                                               uint8_t tc);
  // SendPolicy's common case, inline: a frame of a lossless class, neither
  // paused nor watchdog-dropped here, whose upstream's account has a static
  // XOFF level and stays within it (or, XOFF already, within its headroom):
  // the account and the buffer take it, and true. False, having done
  // nothing: SendPolicy decides (the same way it would have). `hops`: links
  // the frame crossed before this one.
  [[gnu::always_inline]] bool AdmitLossless(const QpFlow& flow, uint32_t hops, uint32_t bytes,
                                            uint8_t tc) {
    if (((lossless_mask_ & ~(pfc_paused_ | pfc_watchdog_drop_)) >> tc & 1) == 0 || hops == 0) {
      return false;
    }
    Port* up = NextHop(flow, hops - 1);
    if (up == nullptr) return false;
    Account& u = up->account_;
    if (u.far_switch == nullptr || u.static_xoff < 0) return false;
    const int64_t held = u.held[tc] + bytes;
    if ((u.xoff >> tc) & 1) {
      if (held > u.limit[tc]) return false;  // past the headroom: dropped
    } else if (held > u.static_xoff) {
      return false;  // goes XOFF
    }
    u.held[tc] = held;
    if (buffered_) occupancy_[tc] += static_cast<int32_t>(bytes);
    return true;
  }
  // Serializes and holds an entry already admitted (Held words, not yet
  // left); `seen`: a tap saw it already.
  void Transmit(uint64_t w0, uint64_t w1, uint32_t bytes, bool seen);
  // Admit, out of line.
  bool AdmitDropTail(uint32_t bytes, uint8_t tc);
  // Takes the entries that have not started serializing (but the ring's
  // oldest, whose arrival is in the engine) off the ring's tail, newest
  // last in `out`, not yet left; the serializer is free from the first's
  // start.
  void PullBack(std::vector<std::array<uint64_t, 2>>* out);
  // Re-sends pulled-back entries: paused classes to their FIFO.
  void Requeue(const std::vector<std::array<uint64_t, 2>>& pulled);
  void Resume(int c);
  // Inline (once per lossless hop): the account's common case is one
  // subtraction; ReleaseRest does the shared count and the XON check.
  [[gnu::always_inline]] void ReleaseLossless(const Held& h, uint32_t bytes, uint8_t tc) {
    // Held entries have crossed this link too: the upstream is two back.
    uint32_t hops;
    const QpFlow* flow;
    if (h.pooled()) {
      const Packet* p = h.packet();
      flow = p->flow;
      hops = p->hops;
    } else {
      flow = FlowOf(h.w1);
      hops = static_cast<uint32_t>((h.w0 >> kHopsShift) & kHopsMax);
    }
    Port* up = hops >= 2 ? NextHop(*flow, hops - 2) : nullptr;
    if (up == nullptr || up->account_.far_switch == nullptr) return;
    ReleaseAccount(up, tc, bytes);
  }
  // Takes `bytes` of class `tc` out of the ingress account `up` holds at
  // its far-end switch (a frame left, or was dropped there), and schedules
  // the XON check when the account is XOFF and fell to its XON level.
  [[gnu::always_inline]] void ReleaseAccount(Port* up, uint8_t tc, uint32_t bytes) {
    Account& u = up->account_;
    u.held[tc] -= bytes;
    if (u.static_xoff < 0 || ((u.xoff >> tc) & 1)) [[unlikely]]
      ReleaseRest(up, tc, bytes);
  }
  // ReleaseAccount's rare part: the switch's shared count (kept unless the
  // XOFF level is static) and, while XOFF, the XON check.
  [[gnu::cold, gnu::noinline]] void ReleaseRest(Port* up, uint8_t tc, uint32_t bytes);
  static void OnPauseExpiry(void* obj, uint64_t arg);
  // Schedules class `c`'s one pending pause expiry (PortPfc::expiry_at_ps).
  void ArmPauseExpiry(int c, int64_t at_ps);
  static void OnXonCheck(void* obj, uint64_t arg);
  static void OnRefresh(void* obj, uint64_t arg);
  void ScheduleTimer(int64_t at_ps);
  PortPfc& EnsurePfc();
  // Recomputes what this port asserts toward its far end (PortPfc::
  // emitting) and sends XOFF / XON for what changed.
  void UpdateEmit();
  // The time `quanta` pause quanta last at this port's rate.
  int64_t QuantaPs(uint32_t quanta) const;
  int64_t SerializationPs(uint32_t bytes) const {
    return ps_per_byte_ > 0 ? int64_t{ps_per_byte_} * bytes
                            : config_.rate.SerializationTime(bytes).ps();
  }
  // The rare cases of Send, out of line.
  [[gnu::cold, gnu::noinline]] void SendImpaired(Packet* p, int64_t start, int64_t end);
  [[gnu::cold, gnu::noinline]] void DropOnSend(Packet* p, DropReason r);
  void Grow();
  void Drain(int64_t now_ps);
  [[gnu::cold]] void Drop(Packet* p, DropReason r);
  // Counts and traces a drop of the packet with this PSN (Drop without
  // freeing the packet).
  void CountDrop(uint32_t psn, DropReason r);

  // A packet the port holds, 16 bytes, so that the rings of the packets in
  // flight (the bulk of the memory a 1024-host run streams through) stay
  // small. It is on the cable until its arrival time and counts against
  // the buffer until its last bit is serialized, latency_ps_ earlier. Two
  // forms, told apart by w0's top bit:
  // - a pool packet (kPooled): w0 is the arrival time | kPooled, w1 the
  //   Packet*, whose size and class are the entry's. The low bits of w1 (a
  //   Packet* is 32-byte aligned) say when the packet is not delivered from
  //   here: kLost, lost on the wire (freed when its turn comes), or kAlone,
  //   delayed by a fault and travelling on its own (SendAlone; it arrives
  //   after this entry leaves, so the packet outlives the entry);
  // - compact: a full-size packet of its flow (IsFullSize), which needs no
  //   pool packet: w0 is the arrival time (48 bits: 281 s of virtual time),
  //   the opcode, the hop count (3 bits) and the ack_req and ecn_ce flags;
  //   w1 the PSN (24 bits) and the flow's address (128-byte aligned, below
  //   2^47: 40 bits). Its size, class, payload and destination QPN are the
  //   flow's (line 0, which the hop reads for the route anyway), so a hop
  //   reads no packet and a packet in flight takes 16 bytes, not 48: at
  //   1024 hosts the bench's 158,632 packets in flight at its peak take
  //   2.4 MiB, where they took 7.3 of the run's 9 MiB, more than the shared
  //   L3 leaves a core here (bench/mem_bench). A port with an impairment
  //   or a tap takes pool packets only (Materialize), and so does an entry
  //   arriving past 2^48 ps or having crossed more than 7 links.
  struct Held {
    static constexpr uint64_t kPooled = uint64_t{1} << 63;
    static constexpr uintptr_t kLost = 1;
    static constexpr uintptr_t kAlone = 2;
    static constexpr uintptr_t kTags = alignof(Packet) - 1;
    uint64_t w0;
    uint64_t w1;
    bool pooled() const { return (w0 & kPooled) != 0; }
    // Not delivered from here (kLost or kAlone).
    bool skipped() const { return pooled() && (w1 & kTags) != 0; }
    Packet* packet() const { return reinterpret_cast<Packet*>(w1 & ~kTags); }
    int64_t arrive_ps() const {
      return static_cast<int64_t>(w0 & (pooled() ? ~kPooled : kTimeMask));
    }
  };
  static_assert(sizeof(Held) == 16 && alignof(Packet) > Held::kTags);
  // Compact w0: time | opcode << 48 | hops << 56 | ack_req << 59 | ecn_ce << 60.
  static constexpr uint64_t kTimeMask = (uint64_t{1} << 48) - 1;
  static constexpr int kOpcodeShift = 48;
  static constexpr int kHopsShift = 56;
  static constexpr uint64_t kHopsMax = 7;
  static constexpr uint64_t kAckReq = uint64_t{1} << 59;
  static constexpr uint64_t kEcnCe = uint64_t{1} << 60;
  // Compact w1: psn | (flow >> 7) << 24.
  static constexpr uint64_t kPsnMask = (uint64_t{1} << 24) - 1;
  static const QpFlow* FlowOf(uint64_t w1) {
    return reinterpret_cast<const QpFlow*>((w1 >> 24) << 7);
  }
  // The fetch hint's argument for a compact entry: its flow | kCompactHint
  // | its hop count (a pool packet's address has this bit clear).
  static constexpr uint64_t kCompactHint = 8;
  static_assert(alignof(QpFlow) == 128 && alignof(Packet) > kCompactHint);
  // An entry's size on the wire and traffic class.
  static void SizeOf(const Held& h, uint32_t* bytes, uint8_t* tc) {
    if (h.pooled()) {
      const Packet& p = *h.packet();
      *bytes = p.wire_bytes;
      *tc = ClassOf(p);
    } else {
      const QpFlow& f = *FlowOf(h.w1);
      *bytes = f.full_wire_bytes;
      *tc = f.buffer_class;
    }
  }
  // The oldest entry still counted in the buffer has been serialized: its
  // bytes leave the buffer.
  void Release(const Held& h) {
    uint32_t bytes;
    uint8_t tc;
    SizeOf(h, &bytes, &tc);
    occupancy_[tc] -= static_cast<int32_t>(bytes);
    --queued_;
    if ((lossless_mask_ >> tc) & 1) [[unlikely]]
      ReleaseLossless(h, bytes, tc);
  }

  // Hot fields in three cache lines (the object is 64-byte aligned), so that
  // at 1024 hosts, where every hop finds its ports cold, a hop fetches few
  // lines: an arrival reads line 1 (and 2 when it settles the buffer), a
  // send lines 1 and 2 (and 3 for traffic classes 2 to 7 under a buffer
  // limit).
  // Line 1: the ring and the far end (arrivals, and the engine's fetch hint).
  alignas(64) Engine* engine_;
  Held* ring_;  // in arena_, oldest first; capacity a power of two
  uint32_t ring_mask_;
  uint32_t head_ = 0;          // oldest held packet (next to arrive)
  uint32_t count_ = 0;         // packets held
  uint32_t queued_ = 0;        // of those, the newest ones not yet fully serialized
                               // (counted only when buffered_)
  ReceiveFn rx_fn_ = nullptr;  // the far end's receiver
  void* rx_obj_ = nullptr;
  ReceivePrefetchFn rx_prefetch_ = nullptr;
  int16_t rx_index_ = -1;  // port index at the far end
  // Nonzero: the far end forwards (kForwards), and its switch accounts
  // this port's deliveries of lossless classes (| kAccounted: the fetch
  // hint then fetches account_ and the egress's class line too), and
  // forwards by forwarding_ (| kPicks: routes have changed).
  uint8_t rx_forwards_ = 0;
  static constexpr uint8_t kForwards = 1;
  static constexpr uint8_t kAccounted = 2;
  static constexpr uint8_t kPicks = 4;
  // In line 1's padding, which every send reads: kEcn, ecn_marker_ is
  // set; kRemote, remote_ is (HoldWords tests it at every send, and
  // remote_ itself is on a cold line).
  uint8_t flags_ = 0;
  static constexpr uint8_t kEcn = 1;
  static constexpr uint8_t kRemote = 2;
  uint32_t rx_component_ = 0;
  // Line 2: the serializer and what it counts.
  int64_t busy_until_ps_ = 0;
  int64_t latency_ps_;
  uint64_t xmit_packets_ = 0;
  uint64_t xmit_data_ = 0;
  uint64_t xmit_wait_ps_ = 0;
  uint32_t ps_per_byte_ = 0;  // exact serialization cost when the rate allows
  int32_t buffer_bytes_;      // per traffic class; 0 = unlimited (2 GiB at most)
  uint32_t max_frame_bytes_;  // the IP MTU as wire bytes (a frame's); no MTU: UINT32_MAX
  bool buffered_;             // has a buffer limit: occupancy is tracked for tail drop
  bool hooked_ = false;       // an impairment or a tap is set (SendImpaired)
  // PFC (pfc.h): classes under the lossless policy here (a switch egress:
  // ingress accounting on send and release), and those whose sends take
  // SendPolicy (lossless or paused). 0 and 0 without PFC: one test of a
  // byte on this line per send.
  uint8_t lossless_mask_ = 0;
  uint8_t policy_mask_ = 0;
  // Buffer occupancy by traffic class (at most buffer_bytes_ each): classes
  // 0 and 1 end line 2, the others start line 3, so that the usual run (one
  // class, 0) reads no third line.
  std::array<int32_t, 8> occupancy_{};
  // Line 3 also holds what a drop and a delivery to a receiver (a compact
  // entry, or its pool packet) need.
  ReceiveFullSizeFn rx_full_size_fn_ = nullptr;
  PacketPool* pool_;
  DropStats* drops_;
  // PFC state (pfc.h), null without: on line 3, which a lossless frame's
  // admission and release read through the upstream port.
  std::unique_ptr<PortPfc> pfc_;
  // What a send reads of the PFC and ECN state, here on line 3 beside the
  // class's occupancy rather than on lines of their own (each a miss per
  // hop at scale): mirrors of pfc_->paused and pfc_->watchdog_drop (kept
  // by port_pfc.cc, their only writer), and the lowest Kmin of the marker's
  // classes (ecn.h: a packet that finds less of its class queued is never
  // marked, so the marker is not called; INT32_MAX: no class marks).
  uint8_t pfc_paused_ = 0;
  uint8_t pfc_watchdog_drop_ = 0;
  int32_t ecn_kmin_ = INT32_MAX;
  // Line 4: the ingress account the far-end switch keeps of what this port
  // delivers (pfc.h; per class), in the port itself rather than behind
  // pfc_, so that a lossless frame's admission and release at that switch,
  // which find this port through the frame's route, read one line of it
  // (two when the account is XOFF), not line 3 and then PortPfc's (k=16:
  // each a miss in the L2 at most hops). Untouched without PFC.
 public:
  struct Account {
    PfcSwitch* far_switch = nullptr;  // the switch that accounts (null: none)
    // The far-end switch's XOFF level when it is static and the same for
    // every lossless class (QosConfig: no dynamic_alpha; the usual one
    // lossless class), so that admission reads no line of the switch or of
    // the QosConfig, and the switch's shared count (PfcSwitch::used, which
    // only dynamic thresholds read) is not kept. -1: ask the switch.
    int32_t static_xoff = -1;
    uint8_t xoff = 0;          // classes XOFF by this account
    bool xon_pending = false;  // an XON check is scheduled (Port::OnXonCheck)
    // Bytes of this port's deliveries the switch still holds; classes 0
    // to 5 on the first line.
    std::array<int64_t, kPriorities> held{};
    // Set when the class goes XOFF (read only while it is): the most the
    // account may hold (PortPfc::xoff_level + the headroom) and its XON
    // level (PfcSwitch::XonLevel of that xoff_level, which is fixed until
    // XON).
    std::array<int64_t, kPriorities> limit{};
    std::array<int64_t, kPriorities> xon{};
  };
  const Account& account() const { return account_; }

 private:
  alignas(64) Account account_;
  // Cold. What the far end received (the peer's rcv counters) is derived
  // from what was sent (Delivered()), so an arrival writes no counter.
  struct Received {
    uint64_t packets = 0;
    uint64_t data = 0;  // bytes, as port_xmit_data
    uint64_t errors = 0;
  };
  Received Delivered() const;
  Received lost_;           // dropped on the wire (a fault); errors unused
  Received alone_;          // on their way outside the ring (SendAlone)
  uint64_t corrupted_ = 0;  // sent with a bad ICRC
  const Impairment* impairment_ = nullptr;
  const PacketTap* tap_ = nullptr;
  EcnMarker* ecn_marker_ = nullptr;  // owned by the Network
  PortCounters counters_;            // the rare counters (discards); see counters()
  uint32_t component_;
  Port* peer_ = nullptr;
  void (*on_resume_)(void*) = nullptr;
  void* on_resume_obj_ = nullptr;
  const QosConfig* qos_ = nullptr;
  int64_t headroom_bytes_ = 0;
  PortConfig config_;
  HugePageArena* arena_;
  // Distributed runs (set_remote, set_mirror): cold.
  const RemoteLink* remote_ = nullptr;
  bool mirror_ = false;
  const Forwarding* forwarding_ = nullptr;  // set_forwarding
  struct ShippedAlone {
    int64_t arrive_ps;
    uint32_t bytes;
    bool corrupt;
    const Packet* packet = nullptr;  // deferred: shipped with its ring entry
  };
  std::vector<ShippedAlone> shipped_alone_;
  [[gnu::cold, gnu::noinline]] void HoldShipped(uint64_t w0, uint64_t w1);
  // Deferred shipping (set_ship_deferred; port_remote.cc).
  bool ship_deferred_ = false;
  uint32_t shipped_ = 0;  // ring entries from the oldest on already shipped
  uint64_t settle_digest_ = 0;
  uint64_t settle_events_ = 0;
  void HoldDeferred(uint64_t w0, uint64_t w1);
  void ScheduleSettle();
  static void OnRemoteSettle(void* obj, uint64_t arg);
  // Unused: pads the port to an odd number of lines (port.cc asserts it).
  // The Network's arena holds each port and then its first ring (16
  // entries, 4 lines), so the ports' line 1 lie one stride apart; a stride
  // of a power of two lines (768 + 256 bytes) would put them all in 1/16
  // of the sets of the L2 (8-way, 1 MiB; callgrind --LL=1048576,8,64,
  // lossless k=16: 11.3 L2 misses per hop, 9.9 padded), an odd one spreads
  // them over every set.
  std::array<uint64_t, 8> stride_pad_{};
};

}  // namespace fathom::sim
