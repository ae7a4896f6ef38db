// Priority flow control (IEEE 802.1Qbb) for the simulator: the traffic
// classes' configuration (QosConfig, part of NetworkConfig), the PAUSE frame
// as the ports carry it, and each port's PFC state (PortPfc) with its
// counters. The mechanics live in the Port (port.h: Pause/Resume/EmitPause,
// port_pfc.cc); the per-switch ingress accounting in PfcSwitch (pfc.cc).
//
// The port's buffer policy is chosen per traffic class: drop-tail (every
// class by default: the lossy fabric, and the hot path as it was) or
// lossless with PFC. A port tests one byte (Port::policy_mask_: a bit per
// class whose sends take the policy path, out of line) before its drop-tail
// admission; with no lossless class and nothing paused the byte is zero and
// the fast path is unchanged. A further policy (IB credit-based flow
// control, say) is a new file beside this one and another bit's meaning.
//
// Model, in one paragraph. A switch accounts, per (ingress port, priority),
// the bytes it received on that port and still holds (not yet fully
// serialized out of its egress port). The account lives in the UPSTREAM
// sending port, whose far end the switch is (Port::Account::held); a packet's
// route (QpFlow::path and its hop count) names that port when the packet
// is admitted at the switch's egress and again when it is released, so the
// account needs no per-packet state. Crossing XOFF (static xoff_bytes, or
// dynamic: alpha x (shared buffer - used), as merchant silicon does), the
// switch sends PAUSE (quanta 0xFFFF) to the upstream over the reverse
// direction, refreshed at half the pause time, and XON (quanta 0) once the
// account falls below xon_bytes. A paused egress lets the frame in progress
// finish; frames queued behind it that have not started are pulled back,
// those of the paused class wait in a per-class FIFO, the others are
// re-sent at once (re-timed). Between classes, frames leave in the order
// they are (re-)sent: FIFO across classes, no strict priority or DWRR.
// Past XOFF the upstream keeps sending for a round trip: the headroom
// absorbs it; a lossless class is never tail-dropped while the account is
// within XOFF + headroom, and is dropped (DropReason::kPfcHeadroom, counted
// per port) past it.
//
// API for the PFC watchdog, storms and deadlock detection (stable):
// (a) Port::EmitPause(classes, duration): this port sends PAUSE (XOFF,
//     0xFFFF quanta) to its far end for `classes` (a bit mask) for
//     `duration`, then XON; a zero duration: until Port::ReleasePause
//     (refreshed at half the pause time). A NIC's port (Network::port(host
//     node, 0)) and a switch port alike. Port::SendPause(classes, quanta)
//     sends one frame.
// (b) Port::pfc() (null when the port has no PFC state) -> PortPfc:
//     `paused` (classes), `paused_since_ps[c]`, `paused_until_ps[c]`,
//     `paused_by` (the far end's port that sent the PAUSE: peer()),
//     `emitting` (classes this port asserts XOFF for) and its counters;
//     Port::paused_classes(), Port::waiting_bytes(c), Port::pfc_counters().
// (c) Watchdog: Port::DropWaiting(c) drops the class's waiting frames
//     (DropReason::kPfcWatchdog, counted; their bytes leave the ingress
//     accounts, which may send XON upstream), Port::ForwardWaiting(c) sends
//     them despite the pause, Port::IgnorePause(c, until) ends a pause in
//     force and counts but ignores PAUSE frames for c until `until`.
// (d) Cycles: a port U whose far end is a switch is paused by the switch's
//     account on class c iff U->account().xoff has bit c (the switch's
//     port U->peer() then has it in by_account/emitting); U->account().held[c]
//     are the bytes of c U delivered that the switch still holds, and
//     Network::pfc_switch(node)->EgressHolding(U, c) lists the switch's
//     egress ports holding them (queued or waiting).
// Events of this model run as EventKind::kUser on the port's component
// (node * 1024 + port index).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace fathom::sim {

class Port;

inline constexpr int kPriorities = 8;

// One priority's buffer policy.
struct PfcClassConfig {
  bool lossless = false;
  // Static thresholds, per (ingress port, priority), in bytes; used when
  // QosConfig::dynamic_alpha is 0. XON must be below XOFF.
  int64_t xoff_bytes = 0;
  int64_t xon_bytes = 0;
};

struct QosConfig {
  // DSCP -> priority (the buffer class a port holds a packet in). Default:
  // priority = DSCP >> 3 (the DSCP's class selector bits, RFC 2474 4.2.2.2:
  // the mapping switches apply by default), which is what the ports did
  // before (traffic_class >> 5). It puts RoCE's common DSCP 26 on priority 3
  // and CNPs' DSCP 48 on priority 6, the deployment the mlx5 guides
  // describe (RoCE lossless on 3, CNP on 6).
  std::array<uint8_t, 64> dscp_to_priority = DefaultDscpMap();
  std::array<PfcClassConfig, kPriorities> classes{};
  // Dynamic thresholds: a (port, priority) goes XOFF when its account
  // exceeds alpha x (shared_buffer_bytes - bytes the switch holds on all its
  // lossless accounts), the dynamic threshold of Choudhury and Hahne (1998)
  // that Broadcom and Mellanox (Spectrum "alpha") switches apply to PFC.
  // 0: static thresholds. XON then when the account falls to the class's
  // xon_bytes if set, else to half the account XOFF was sent at.
  double dynamic_alpha = 0;
  int64_t shared_buffer_bytes = 0;  // per switch, for dynamic thresholds
  // Per (ingress port, lossless priority); 0: auto, from the link
  // (PfcHeadroomBytes).
  int64_t headroom_bytes = 0;

  static constexpr std::array<uint8_t, 64> DefaultDscpMap() {
    std::array<uint8_t, 64> m{};
    for (int d = 0; d < 64; ++d) m[static_cast<size_t>(d)] = static_cast<uint8_t>(d >> 3);
    return m;
  }
  uint8_t lossless_mask() const {
    uint8_t m = 0;
    for (int c = 0; c < kPriorities; ++c) {
      if (classes[static_cast<size_t>(c)].lossless) m |= static_cast<uint8_t>(1u << c);
    }
    return m;
  }
};

// RoCE's usual lossless deployment: priority 3 (DSCP 26, the traffic class
// NVIDIA's RoCE configuration guides use) lossless, every other priority
// lossy. The static thresholds are a choice, not a measured switch's: XOFF
// at 64 KiB per (ingress port, priority), well under the default 1 MiB
// egress buffer, XON at half; headroom auto from each link (PfcHeadroomBytes).
// A scenario's network.qos sets a real switch's values.
inline QosConfig LosslessRoceQos() {
  QosConfig q;
  q.classes[3].lossless = true;
  q.classes[3].xoff_bytes = 64 * 1024;
  q.classes[3].xon_bytes = 32 * 1024;
  return q;
}
// The IP TOS byte of RoCE on that class: DSCP 26, ECN ECT(0).
inline constexpr int kLosslessRoceTrafficClass = 26 << 2 | 2;

// PAUSE frames (IEEE 802.1Qbb clause 36 / 802.3 Annex 31D): MAC control,
// ethertype 0x8808, opcode 0x0101, a class-enable vector and eight 16-bit
// pause times in quanta of 512 bit times at the link rate; the minimum
// frame, 64 bytes with FCS, plus preamble/SFD and inter-frame gap on the
// wire. In the simulator a PAUSE frame is a pool packet with this opcode
// (outside the BTH opcode space: no RoCE packet has it), its class-enable
// vector in `psn` and its quanta in the extension (PausePacketQuanta).
inline constexpr uint8_t kPauseOpcode = 0xFE;
inline constexpr uint16_t kMacControlEthertype = 0x8808;
inline constexpr uint16_t kPfcMacControlOpcode = 0x0101;
inline constexpr uint32_t kPauseFrameBytes = 64;      // with FCS
inline constexpr uint32_t kPauseWireBytes = 64 + 20;  // + preamble, SFD, IFG
inline constexpr uint16_t kPauseQuantaXoff = 0xFFFF;
inline constexpr int kBitsPerQuantum = 512;

// A port's PFC counters, per priority, with the mlx5 ethtool names
// (Documentation/networking/device_drivers/ethernet/mellanox/mlx5/counters.rst:
// rx_prio[p]_pause, tx_prio[p]_pause, rx_prio[p]_pause_duration,
// tx_prio[p]_pause_duration; durations in microseconds there, picoseconds
// here). A switch port carries the same, as SONiC's PFC{p} Rx/Tx counters.
struct PfcCounters {
  // PAUSE frames (XOFF or XON) received / sent with the class enabled.
  std::array<uint64_t, kPriorities> rx_pause{};
  std::array<uint64_t, kPriorities> tx_pause{};
  // Time this port's egress was paused (rx) / this port asserted XOFF (tx).
  std::array<int64_t, kPriorities> rx_pause_duration_ps{};
  std::array<int64_t, kPriorities> tx_pause_duration_ps{};
  // Lossless frames dropped past the headroom (at the switch egress that
  // admitted them; kPfcHeadroom).
  std::array<uint64_t, kPriorities> headroom_drops{};
  // Waiting frames the watchdog dropped / forwarded (DropWaiting,
  // ForwardWaiting).
  std::array<uint64_t, kPriorities> watchdog_dropped{};
  std::array<uint64_t, kPriorities> watchdog_forwarded{};
};

class PfcSwitch;

// One port's PFC state; owned by its Port (Port::pfc()), made when PFC is
// configured or a PAUSE is first sent or received.
struct PortPfc {
  // The ingress account itself (the bytes held, XOFF by account, the
  // static XOFF level and the pending XON check) is on the Port's own line
  // 4 (Port::Account), not here: admission and release then reach it in
  // one line through the route, not through this object. What stays here
  // is read when XOFF is decided or on PAUSE frames.
  // Egress side: what the far end asked of this port (the Port mirrors it
  // and watchdog_drop on its own line 3, where its sends read them).
  uint8_t paused = 0;                             // classes paused now
  uint8_t watchdog_drop = 0;                      // classes dropped on send (Port::WatchdogDrop)
  std::array<int64_t, kPriorities> xoff_level{};  // the account when XOFF was sent
  std::array<int64_t, kPriorities> paused_since_ps{};
  std::array<int64_t, kPriorities> paused_until_ps{};  // quanta expiry
  // The one pending expiry event per class (Port::OnPauseExpiry), -1: none.
  // A refresh only moves paused_until_ps: the pending event, due no later,
  // re-arms itself then, so a pause refreshed n times costs one event per
  // pause time rather than n events in the far heap (and an XON leaves at
  // most one stale event, not one per XOFF).
  std::array<int64_t, kPriorities> expiry_at_ps{-1, -1, -1, -1, -1, -1, -1, -1};
  std::array<int64_t, kPriorities> ignore_until_ps{};  // watchdog: PAUSE ignored before
  const Port* paused_by = nullptr;                     // the far end's port (peer)
  // Frames of paused classes, oldest first (Held words, not yet left):
  // appended while paused, sent whole on resume.
  std::array<std::vector<std::array<uint64_t, 2>>, kPriorities> waiting;
  std::vector<std::array<uint64_t, 2>> scratch;  // Port::PullBack's
  // Sending side: classes this port asserts XOFF for toward its far end,
  // and why (a switch's ingress account, or EmitPause).
  uint8_t emitting = 0;
  uint8_t by_account = 0;
  uint8_t by_request = 0;
  std::array<int64_t, kPriorities> emitting_since_ps{};
  std::array<int64_t, kPriorities> request_until_ps{};  // 0: until ReleasePause
  int64_t next_refresh_ps = 0;                          // the next XOFF refresh
  int64_t timer_at_ps = -1;                             // the live refresh/expiry event; -1: none
  PfcCounters counters;
};

// A switch's lossless accounting: its shared buffer (dynamic thresholds)
// and its egress ports. XON needs no polling: an account is released when
// its entry leaves the egress buffer, lazily (Port::Drain) but at the latest
// when the frame reaches the far end, so an XON goes out at most one cable
// delay after the account fell to XON (Port::Account::xon_pending defers it to an
// event of its own: a release happens inside another port's send).
class PfcSwitch {
 public:
  PfcSwitch(const QosConfig* qos, std::vector<Port*> egress)
      : qos_(qos), egress_(std::move(egress)) {}
  // The XOFF threshold of an account of class `c` now.
  int64_t XoffLevel(int c) const;
  int64_t XonLevel(int c, int64_t xoff_level) const;
  // Bytes held on all its lossless accounts, kept only under dynamic
  // thresholds or per-class static ones (Port::Account::static_xoff -1).
  int64_t used() const { return used_; }
  void Add(int64_t bytes) { used_ += bytes; }
  // The switch's egress ports holding bytes of class `c` from `upstream`.
  std::vector<Port*> EgressHolding(const Port* upstream, int c) const;
  const std::vector<Port*>& egress() const { return egress_; }

 private:
  const QosConfig* qos_;
  std::vector<Port*> egress_;
  int64_t used_ = 0;
};

// The auto headroom of a lossless (ingress port, priority), in bytes: what
// the upstream can still send after the switch decides XOFF, after the
// worst-case delay model of IEEE 802.1Qbb Annex O (as Cisco's PFC white
// paper c11-542809 and "Ethernet storage networks" ch. 7.3 lay it out): a
// maximum frame the switch is sending ahead of the PAUSE, the PAUSE frame,
// the cable both ways, and a maximum frame the upstream has just started;
// interface and response delays are 0 here (the model's ports react at
// once). `max_frame_wire_bytes` includes preamble/SFD/IFG.
int64_t PfcHeadroomBytes(int64_t rate_bps, int64_t cable_ps, int64_t max_frame_wire_bytes);

}  // namespace fathom::sim
