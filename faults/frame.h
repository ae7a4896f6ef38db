// What a fault model sees and what it decides. A model sees one frame (or
// packet) descriptor — its size on the wire, its time, and the few header
// fields filters need — and returns a verdict. The descriptor is filled by
// whoever carries frames (the simulator's ports today, the live emulator's
// real frames later), so faults/ knows nothing of either (DESIGN.md layers).
// All plain values: no ownership, no allocation.
#pragma once

#include <cstdint>
#include <limits>

#include "base/units.h"

namespace fathom::faults {

// One frame crossing one link direction.
struct Frame {
  Picoseconds at;         // transmission starts (first bit leaves the port)
  Picoseconds end;        // last bit reaches the far end; <= at means "at only"
  uint32_t wire_bytes;    // bytes on the wire (what FEC codewords and bit errors cover)
  uint32_t ip_bytes;      // IP packet length (what an MTU limits); 0 = wire_bytes
  uint32_t dest_qpn;      // BTH DestQP
  uint8_t opcode;         // BTH opcode
  uint8_t traffic_class;  // IP DSCP/ECN byte
  uint16_t udp_sport;     // the ECMP entropy of a RoCEv2 flow (ROCEV2.md "Frame")
  int32_t src_host;       // topology host ids; -1 when unknown
  int32_t dst_host;
};

// Why a frame vanished, wherever that happened: the one list of reasons for
// the fabric that carries frames (the simulator's ports and NICs count
// these by reason for the run summary) and for the fault models below
// (Verdict::reason). Names follow the counters users look at.
enum class DropReason : uint8_t {
  // Dropped by the fabric. The simulator mixes these values into its trace
  // digest: renumbering them changes every golden trace.
  kTailDrop = 0,  // egress buffer full (port_xmit_discards)
  kMtuExceeded,   // frame larger than the link MTU: dropped silently (CASES.md 4)
  kNoRoute,       // a switch has no next hop (rail-only wiring, CASES.md 8)
  kImpairment,    // a fault model dropped it on the wire (any reason below)
  kBadIcrc,       // corrupted on the wire: receiver drops it (port_rcv_errors)
  kQpNotReady,    // the destination QP does not exist or cannot receive
  kHostCrashed,   // the destination host has crashed (its NIC is dead)
  // Dropped by a fault model (the fabric counts each as kImpairment).
  kLoss,       // random loss (Bernoulli, Gilbert-Elliott)
  kOversize,   // longer than the egress MTU: dropped silently (CASES.md 4)
  kLinkDown,   // link down or flapping: in flight or queued
  kBlackHole,  // a black-holed flow / QP / next hop
  kHostDown,   // the source or destination host crashed
  kNone,       // not dropped (a Verdict that passes the frame)
  // Dropped by the fabric's lossless classes (fabric/sim/pfc.h), after kNone
  // so that no earlier number moves.
  kPfcHeadroom,  // a lossless class past XOFF + headroom (pfc_headroom_drops)
  kPfcWatchdog,  // a stormed queue's frames, dropped by the PFC watchdog
  kCount,
};
const char* DropReasonName(DropReason r);

// The combined decision for one frame. Delay adds up across models; a drop
// ends evaluation (a dropped frame is not on the wire for later models);
// corrupt means the receiver will see a bad FCS/ICRC and drop it.
struct Verdict {
  enum class Action : uint8_t { kPass = 0, kDrop, kCorrupt };
  Action action = Action::kPass;
  DropReason reason = DropReason::kNone;
  Picoseconds extra_delay;

  bool dropped() const { return action == Action::kDrop; }
  bool corrupted() const { return action == Action::kCorrupt; }
};

// Which frames a model applies to. An empty filter matches everything.
// Checked per frame, so it is a bitmask of set fields and plain compares.
struct Filter {
  enum Field : uint32_t {
    kQpn = 1u << 0,
    kOpcode = 1u << 1,
    kUdpSport = 1u << 2,
    kSrcHost = 1u << 3,
    kDstHost = 1u << 4,
    kTrafficClass = 1u << 5,
    kSize = 1u << 6,
  };
  uint32_t fields = 0;
  uint32_t qpn = 0;
  uint8_t opcode = 0;
  uint8_t traffic_class = 0;
  uint16_t udp_sport = 0;
  int32_t src_host = -1;
  int32_t dst_host = -1;
  uint32_t min_bytes = 0;  // inclusive, on wire_bytes
  uint32_t max_bytes = std::numeric_limits<uint32_t>::max();

  bool empty() const { return fields == 0; }
  bool Matches(const Frame& f) const {
    if (fields == 0) return true;
    if ((fields & kQpn) && f.dest_qpn != qpn) return false;
    if ((fields & kOpcode) && f.opcode != opcode) return false;
    if ((fields & kUdpSport) && f.udp_sport != udp_sport) return false;
    if ((fields & kSrcHost) && f.src_host != src_host) return false;
    if ((fields & kDstHost) && f.dst_host != dst_host) return false;
    if ((fields & kTrafficClass) && f.traffic_class != traffic_class) return false;
    if ((fields & kSize) && (f.wire_bytes < min_bytes || f.wire_bytes > max_bytes)) return false;
    return true;
  }
};

// When a model is active: [start, end). Every fault in a timeline has one.
struct Window {
  Picoseconds start;
  Picoseconds end = Picoseconds::Max();
  bool Contains(Picoseconds t) const { return t >= start && t < end; }
};

// Counters a model moves. One struct for every kind (a kind moves the ones
// that apply to it; the rest stay zero), named as the counters users look
// at (ROCEV2.md "Counters users look at", IEEE 802.3 clause 91 for FEC).
struct Counters {
  uint64_t frames_seen = 0;  // frames the model was asked about (in window, filter matched)
  uint64_t frames_dropped = 0;
  uint64_t frames_corrupted = 0;
  uint64_t frames_delayed = 0;
  uint64_t port_xmit_discards = 0;  // oversize drops at the egress (MTU)
  uint64_t port_rcv_errors = 0;     // frames the receiver drops on bad FCS/ICRC
  uint64_t link_downed = 0;         // up -> down transitions so far
  uint64_t fec_codewords = 0;
  uint64_t fec_corrected_blocks = 0;      // codewords with 1..t symbol errors
  uint64_t fec_uncorrectable_blocks = 0;  // codewords with > t symbol errors
  uint64_t fec_symbol_errors = 0;         // symbol errors in corrected codewords
  uint64_t symbol_error = 0;              // IB SymbolErrorCounter: one per uncorrectable codeword
  uint64_t bit_flips = 0;                 // corruption model: bits flipped

  Counters& operator+=(const Counters& o) {
    frames_seen += o.frames_seen;
    frames_dropped += o.frames_dropped;
    frames_corrupted += o.frames_corrupted;
    frames_delayed += o.frames_delayed;
    port_xmit_discards += o.port_xmit_discards;
    port_rcv_errors += o.port_rcv_errors;
    link_downed += o.link_downed;
    fec_codewords += o.fec_codewords;
    fec_corrected_blocks += o.fec_corrected_blocks;
    fec_uncorrectable_blocks += o.fec_uncorrectable_blocks;
    fec_symbol_errors += o.fec_symbol_errors;
    symbol_error += o.symbol_error;
    bit_flips += o.bit_flips;
    return *this;
  }

  // Calls fn(name, value) for each counter, in a fixed order.
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    fn("frames_seen", frames_seen);
    fn("frames_dropped", frames_dropped);
    fn("frames_corrupted", frames_corrupted);
    fn("frames_delayed", frames_delayed);
    fn("port_xmit_discards", port_xmit_discards);
    fn("port_rcv_errors", port_rcv_errors);
    fn("link_downed", link_downed);
    fn("fec_codewords", fec_codewords);
    fn("fec_corrected_blocks", fec_corrected_blocks);
    fn("fec_uncorrectable_blocks", fec_uncorrectable_blocks);
    fn("fec_symbol_errors", fec_symbol_errors);
    fn("symbol_error", symbol_error);
    fn("bit_flips", bit_flips);
  }
};

}  // namespace fathom::faults
