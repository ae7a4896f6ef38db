// The simulator's packet: a POD carrying the real RoCEv2 header fields (BTH,
// RETH, AETH, ImmDt, AtomicETH, UDP source port, traffic class, ECN) but not
// the payload bytes — `data` points at the source memory when the NIC moves
// real bytes, and is null for modelled-only flows. Packets come from a
// PacketPool and go back to it when delivered or dropped; the pool owns them.
//
// Sizes follow the wire (ROCEV2.md "Frame"; the constants of
// fabric/wire/opcode.h): Ethernet header + FCS + preamble/SFD + inter-frame
// gap, IPv4 or IPv6, UDP, BTH, extension headers by opcode, payload padded
// to 4 bytes, ICRC.
#pragma once

#include <cstdint>
#include <cstring>
#include <utility>

#include "fabric/sim/arena.h"
#include "fabric/sim/engine.h"
#include "fabric/wire/opcode.h"
#include "fabric/wire/roce.h"

namespace fathom::sim {

// The BTH opcodes, AETH syndromes and header sizes are the wire's
// (fabric/wire/opcode.h); the NIC and the ports name opcodes as Opcode::k...
using wire::Opcode;

class Port;

// Paths are at most kPathMax links (a 3-tier fat-tree needs 6); see QpFlow.
inline constexpr uint8_t kPathMax = 7;

// What every packet of one QP shares: its 5-tuple and the rest of the IP
// and UDP header, the source QPN, and its route. The QP owns it (a NIC's
// QPs are never destroyed, so a packet in flight never outlives its flow);
// a packet points at it, which keeps the packet at half a line: at 1024
// hosts the packets in flight are the bulk of the memory a run streams
// through, and the fewer lines they take, the more of them stay in cache.
//
// The route (line 0) is fixed when the QP connects: entry h is the egress
// port the packet leaves by after crossing h links (entry 0 is the sending
// NIC's port). Routing is static (tables and an ECMP hash of the 5-tuple,
// which is constant per QP), so each switch on the way would pick the same
// port; with the route in hand, a hop reads one line the QP's packets share
// instead of the switch's tables, and the engine's fetch hint knows the
// next egress port ahead of the turn. A null entry means no route is known
// there: the switch looks the packet up in its table (and drops it when it
// has no route either). Entries past the last link are null.
//
// Line 0 also holds what every full-size packet of the QP has (a payload of
// the path MTU and no extension header: the middle of a message), so that a
// port can hold such a packet as its flow, PSN and opcode alone (Port's
// compact entries) and a hop read nothing else. The QP sets these.
struct alignas(128) QpFlow {
  // Line 0: what a hop reads.
  Port* path[kPathMax] = {};
  uint16_t full_wire_bytes = 0;  // FrameWireBytes of a full-size packet; 0: none
  uint16_t full_payload : 13 = 0;
  uint16_t buffer_class : 3 = 0;  // Packet::buffer_class
  uint32_t dest_qpn = 0;          // Packet::dest_qpn (the peer QP)
  // Line 1: the headers (the NIC, captures, fault models, table lookups).
  int32_t src_host = -1;  // host node ids of the topology
  int32_t dst_host = -1;
  uint32_t src_qpn = 0;  // not a header field: the QP that sends (control queue, tracing)
  uint16_t udp_sport = 0;
  uint8_t traffic_class = 0;  // IP DSCP/ECN byte as a verbs traffic_class
  bool ipv6 = false;
};

// What only some packets carry: the extension headers (RETH, ImmDt,
// AtomicETH, AtomicAckETH; valid only for the opcodes that carry them,
// ExtHeaderBytes), AETH's MSN (ACKs and READ responses) and the payload
// pointer (packets that move real bytes, Packet::has_data). A full-size packet
// of a modelled message never touches it. A pool packet's extension lives in
// a parallel region of its pool chunk (Packet::ext()), not beside the
// packet, so that the cold line is not fetched with the hot one.
struct PacketExt {
  uint64_t va;
  uint32_t rkey;
  uint32_t dma_len;
  uint32_t imm;
  uint32_t msn;       // AETH
  uint64_t swap_add;  // also AtomicAckETH's original value
  uint64_t compare;
  const uint8_t* data;  // source of payload bytes (requester or responder memory)
  // A CNP's IP DSCP/ECN byte (the CNP priority's, not its flow's).
  uint8_t cnp_traffic_class;
};

// Half a cache line: what a NIC reads and writes for every packet, and what
// a hop reads (the engine fetches it ahead of the arrival) of a packet that
// is not full-size (a port holds the others without it; see Port). The header
// fields all of a QP's packets share are in its QpFlow. Only packets from a
// PacketPool have an ext(); PacketPool::Alloc clears the packet, not the
// extension.
struct alignas(32) Packet {
  union {
    Packet* next;    // pool free list / the NIC's control queue
    Port* next_out;  // on the wire: the egress port at the far end, from the
                     // flow's path (null: none, or the far end looks it up)
  };
  // The sending QP's addressing and route; never null once sent.
  const QpFlow* flow;
  // BTH.
  uint32_t dest_qpn;
  uint32_t psn;
  uint16_t payload_bytes;
  uint16_t wire_bytes;  // cached FrameWireBytes()
  Opcode opcode;
  uint8_t aeth_syndrome;
  uint8_t hops;  // links crossed so far
  uint8_t ack_req : 1;
  uint8_t corrupt : 1;  // ICRC will not match: the receiver drops it
  uint8_t ecn_ce : 1;
  uint8_t has_data : 1;  // ext().data is the payload (else the bytes are modelled)
  // The top 3 bits of the flow's traffic_class: the buffer a port holds the
  // packet in, here so that a hop reads nothing else.
  uint8_t buffer_class : 3;

  // The extension (pool packets only; see PacketExt).
  PacketExt& ext() { return const_cast<PacketExt&>(std::as_const(*this).ext()); }
  const PacketExt& ext() const {
    const uintptr_t at = reinterpret_cast<uintptr_t>(this);
    const uintptr_t base = at & ~uintptr_t{kPacketRegion - 1};
    return *reinterpret_cast<const PacketExt*>(base + kPacketRegion +
                                               (at - base) * (kExtStride / sizeof(Packet)));
  }
  // The payload's source, or null when the bytes are modelled.
  const uint8_t* data() const { return has_data ? ext().data : nullptr; }
  void set_data(const uint8_t* d) {
    has_data = d != nullptr;
    ext().data = d;
  }

  // A pool chunk holds packets in its first kPacketRegion bytes (aligned to
  // them) and then their extensions, kExtStride bytes each, in the same order.
  static constexpr size_t kPacketRegion = HugePageArena::kBlockBytes;
  static constexpr size_t kExtStride = 64;
};
static_assert(sizeof(Packet) == 32 && sizeof(PacketExt) <= Packet::kExtStride);

// The ECMP hash of a RoCEv2 flow's 5-tuple (source and destination host,
// UDP source port; the destination port 4791 and protocol 17 are fixed):
// what the sender computes once per QP and switches hash on.
constexpr uint32_t FlowHash(int32_t src_host, int32_t dst_host, uint16_t udp_sport) {
  return static_cast<uint32_t>(
      Mix64((static_cast<uint64_t>(static_cast<uint32_t>(src_host)) << 40) ^
            (static_cast<uint64_t>(static_cast<uint32_t>(dst_host)) << 16) ^ udp_sport ^
            (uint64_t{wire::kRoceV2UdpPort} << 56) ^ (uint64_t{wire::kIpProtocolUdp} << 58)));
}

// The opcodes below 32 that carry extension headers
// (wire::ExtensionHeaderBytes > 0), a bit each: what IsFullSize tests
// without a load.
constexpr uint32_t OpcodeBit(Opcode op) { return 1u << static_cast<uint8_t>(op); }
inline constexpr uint32_t kExtHeaderOpcodes =
    OpcodeBit(Opcode::kSendLastWithImmediate) | OpcodeBit(Opcode::kSendOnlyWithImmediate) |
    OpcodeBit(Opcode::kRdmaWriteFirst) | OpcodeBit(Opcode::kRdmaWriteLastWithImmediate) |
    OpcodeBit(Opcode::kRdmaWriteOnly) | OpcodeBit(Opcode::kRdmaWriteOnlyWithImmediate) |
    OpcodeBit(Opcode::kRdmaReadRequest) | OpcodeBit(Opcode::kRdmaReadResponseFirst) |
    OpcodeBit(Opcode::kRdmaReadResponseLast) | OpcodeBit(Opcode::kRdmaReadResponseOnly) |
    OpcodeBit(Opcode::kAcknowledge) | OpcodeBit(Opcode::kAtomicAcknowledge) |
    OpcodeBit(Opcode::kCompareSwap) | OpcodeBit(Opcode::kFetchAdd) |
    OpcodeBit(Opcode::kSendLastWithInvalidate) | OpcodeBit(Opcode::kSendOnlyWithInvalidate);

// The egress port a packet that has crossed `hops` links leaves by, from
// its flow's route; null when the route does not say.
inline Port* NextHop(const QpFlow& flow, uint32_t hops) {
  return hops < kPathMax ? flow.path[hops] : nullptr;
}

// Whether `p` is a full-size packet of its flow (see QpFlow), which carries
// nothing its flow, PSN, opcode, hop count and flags do not give.
inline bool IsFullSize(const Packet& p) {
  const QpFlow& f = *p.flow;
  return f.full_wire_bytes != 0 && p.wire_bytes == f.full_wire_bytes &&
         p.payload_bytes == f.full_payload && p.buffer_class == f.buffer_class &&
         p.dest_qpn == f.dest_qpn && p.psn <= 0xFFFFFF && p.aeth_syndrome == 0 && !p.corrupt &&
         !p.has_data &&
         (static_cast<uint8_t>(p.opcode) >= 32 ||
          ((kExtHeaderOpcodes >> static_cast<uint8_t>(p.opcode)) & 1) == 0);
}
// IP packet length: IP + UDP + BTH + ext + payload + pad + ICRC (what a link
// MTU limits). The Packet forms read the flow's IP version.
uint32_t IpPacketBytes(Opcode opcode, uint32_t payload_bytes, bool ipv6);
uint32_t IpPacketBytes(const Packet& p);
// Bytes a frame occupies on the wire, including preamble, SFD, FCS and IFG:
// what serialization time is computed from.
uint32_t FrameWireBytes(Opcode opcode, uint32_t payload_bytes, bool ipv6);
uint32_t FrameWireBytes(const Packet& p);
// What a frame adds to its IP packet on the wire: the Ethernet header, and
// the FCS, preamble, SFD and inter-frame gap.
inline constexpr uint32_t kEthernetWireOverhead =
    wire::kEthernetHeaderBytes + wire::kEthernetWireExtraBytes;

// Free-list packet pool: grows in 6 MiB chunks, 2 MiB of packets and 4 MiB
// of their extensions (huge pages where the kernel offers them: at 1024
// hosts the packets in flight span tens of MiB, and small pages would cost a
// TLB miss per hop), never frees until destroyed; Alloc returns a zeroed
// packet, its extension as the last user left it (see PacketExt). Not
// thread-safe (one engine, one thread).
class PacketPool {
 public:
  PacketPool() = default;
  PacketPool(const PacketPool&) = delete;
  PacketPool& operator=(const PacketPool&) = delete;

  Packet* Alloc() {
    if (free_ == nullptr) Grow();
    Packet* p = free_;
    free_ = p->next;
    // The packet, not its extension (see PacketExt).
    std::memset(static_cast<void*>(p), 0, sizeof(Packet));
    ++in_use_;
    if (in_use_ > peak_in_use_) peak_in_use_ = in_use_;
    return p;
  }
  void Free(Packet* p) {
    // A packet carrying a live frame (fabric/live) gives the frame back,
    // whatever ended it (delivered, dropped, lost): one predictable branch
    // when no hook is set.
    if (on_free_data_ != nullptr && p->has_data) [[unlikely]]
      on_free_data_(on_free_ctx_, p);
    p->next = free_;
    free_ = p;
    --in_use_;
  }
  // A packet that lives on without its pool packet (a port's compact
  // entry; see Port): Compact returns the storage, Expand takes storage for
  // it again (not cleared: the caller writes every field), DropCompact ends
  // it (dropped, or received as it is). It stays in use throughout, so
  // that in_use() counts every packet in flight.
  void Compact(Packet* p) {
    p->next = free_;
    free_ = p;
  }
  Packet* Expand() {
    if (free_ == nullptr) Grow();
    Packet* p = free_;
    free_ = p->next;
    return p;
  }
  void DropCompact() { --in_use_; }
  // A packet that starts as a compact entry (Port::SendFullSize): in use,
  // as if allocated and compacted.
  void AddCompact() {
    ++in_use_;
    if (in_use_ > peak_in_use_) peak_in_use_ = in_use_;
  }
  size_t in_use() const { return in_use_; }
  size_t peak_in_use() const { return peak_in_use_; }
  // Calls fn(ctx, p) for each packet with data (has_data) that Free takes,
  // before it goes back: the live emulator's frames (fabric/live/frame.h)
  // follow their packets this way. Null: none (the simulator).
  void set_on_free_data(void (*fn)(void* ctx, Packet* p), void* ctx) {
    on_free_data_ = fn;
    on_free_ctx_ = ctx;
  }

 private:
  void Grow();
  void (*on_free_data_)(void* ctx, Packet* p) = nullptr;
  void* on_free_ctx_ = nullptr;
  HugePageArena arena_;
  Packet* free_ = nullptr;
  size_t in_use_ = 0;
  size_t peak_in_use_ = 0;
};

}  // namespace fathom::sim
