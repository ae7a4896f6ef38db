// The simulator's packet: a POD carrying the real RoCEv2 header fields (BTH,
// RETH, AETH, ImmDt, AtomicETH, UDP source port, traffic class, ECN) but not
// the payload bytes — `data` points at the source memory when the NIC moves
// real bytes, and is null for modelled-only flows. Packets come from a
// PacketPool and go back to it when delivered or dropped; the pool owns them.
//
// Sizes follow the wire (ROCEV2.md "Frame"): Ethernet header 14 + FCS 4 +
// preamble/SFD 8 + inter-frame gap 12, IPv4 20 or IPv6 40, UDP 8, BTH 12,
// extension headers by opcode, payload padded to 4 bytes, ICRC 4.
#pragma once

#include <cstdint>
#include <cstring>

#include "fabric/sim/arena.h"
#include "fabric/sim/engine.h"

namespace fathom::sim {

// BTH opcodes of the RC transport (IBTA 9.2, table 38; ROCEV2.md).
namespace op {
inline constexpr uint8_t kSendFirst = 0x00;
inline constexpr uint8_t kSendMiddle = 0x01;
inline constexpr uint8_t kSendLast = 0x02;
inline constexpr uint8_t kSendLastImm = 0x03;
inline constexpr uint8_t kSendOnly = 0x04;
inline constexpr uint8_t kSendOnlyImm = 0x05;
inline constexpr uint8_t kWriteFirst = 0x06;
inline constexpr uint8_t kWriteMiddle = 0x07;
inline constexpr uint8_t kWriteLast = 0x08;
inline constexpr uint8_t kWriteLastImm = 0x09;
inline constexpr uint8_t kWriteOnly = 0x0A;
inline constexpr uint8_t kWriteOnlyImm = 0x0B;
inline constexpr uint8_t kReadRequest = 0x0C;
inline constexpr uint8_t kReadRespFirst = 0x0D;
inline constexpr uint8_t kReadRespMiddle = 0x0E;
inline constexpr uint8_t kReadRespLast = 0x0F;
inline constexpr uint8_t kReadRespOnly = 0x10;
inline constexpr uint8_t kAck = 0x11;
inline constexpr uint8_t kAtomicAck = 0x12;
inline constexpr uint8_t kCompareSwap = 0x13;
inline constexpr uint8_t kFetchAdd = 0x14;
}  // namespace op

// AETH syndromes (IBTA 9.7.5.1.2; ROCEV2.md "Extension headers").
inline constexpr uint8_t kAethAck = 0x1F;     // ACK, unlimited credits
inline constexpr uint8_t kAethRnrNak = 0x20;  // | 5-bit RNR timer code
inline constexpr uint8_t kAethNakSeq = 0x60;
inline constexpr uint8_t kAethNakInvalid = 0x61;
inline constexpr uint8_t kAethNakAccess = 0x62;
inline constexpr uint8_t kAethNakOperational = 0x63;

inline constexpr uint16_t kRoceUdpPort = 4791;

class Port;

// A flow's route through the fabric, fixed when its QP connects: entry h is
// the egress port the packet leaves by after crossing h links (entry 0 is the
// sending NIC's port). Routing is static (tables and an ECMP hash of the
// 5-tuple, which is constant per QP), so each switch on the way would pick
// the same port; with the path in hand, a hop reads one line the QP's
// packets share instead of the switch's tables, and the engine's fetch hint
// knows the next egress port ahead of the turn. Paths are at most kPathMax
// links (a 3-tier fat-tree needs 6) and live in kPathMax-entry arrays, so an
// entry is always in bounds; null entries past the end are never read, and a
// null entry on the way means the switch there had no route.
inline constexpr uint8_t kPathMax = 8;

// The extension headers only some opcodes carry (RETH, ImmDt, AtomicETH,
// AtomicAckETH): valid only for the opcodes that carry them (ExtHeaderBytes),
// and read only for those, so a middle packet of a message never touches
// them. A pool packet's extension lives in a parallel region of its pool
// chunk (Packet::ext()), not beside the packet: at 1024 hosts the packets
// in flight are the bulk of the simulator's memory traffic, and a packet of
// one line keeps its cold neighbour line from being fetched with it.
struct PacketExt {
  uint64_t va;
  uint32_t rkey;
  uint32_t dma_len;
  uint32_t imm;
  uint64_t swap_add;  // also AtomicAckETH's original value
  uint64_t compare;
};

// One cache line: every field each packet needs, what a hop reads (it is
// fetched ahead of the arrival) and what a NIC reads and writes for any
// packet, the payload pointer included. Only packets from a PacketPool have
// an ext(); PacketPool::Alloc clears the line, not the extension.
struct alignas(64) Packet {
  union {
    Packet* next;    // pool free list / the NIC's control queue
    Port* next_out;  // on the wire: the egress port at the far end, from the
                     // path (null: none, or the far end looks it up)
  };
  // Not a header field: the sender's fixed route (see kPathMax), or null,
  // when each switch looks the packet up in its table instead.
  Port* const* path;
  // Source of payload bytes (requester or responder memory), null if modelled.
  const uint8_t* data;
  // Addressing: host node ids of the topology, IPv4 or IPv6.
  int32_t src_host;
  int32_t dst_host;
  // BTH.
  uint32_t dest_qpn;
  uint32_t src_qpn;  // not a BTH field: where the packet came from (for tracing)
  uint32_t psn;
  uint32_t msn;  // AETH
  uint32_t payload_bytes;
  uint32_t wire_bytes;  // cached FrameWireBytes()
  uint16_t udp_sport;
  uint8_t traffic_class;  // IP DSCP/ECN byte as a verbs traffic_class
  uint8_t ipv6 : 1;
  uint8_t corrupt : 1;  // ICRC will not match: the receiver drops it
  uint8_t ecn_ce : 1;
  uint8_t opcode;
  uint8_t ack_req;
  uint8_t aeth_syndrome;
  uint8_t hops;  // links crossed so far

  // The extension headers (pool packets only; see PacketExt).
  PacketExt& ext() {
    return *reinterpret_cast<PacketExt*>(reinterpret_cast<char*>(this) + kExtOffset);
  }
  const PacketExt& ext() const {
    return *reinterpret_cast<const PacketExt*>(reinterpret_cast<const char*>(this) + kExtOffset);
  }
  // A pool chunk holds packets in its first half and their extensions, one
  // line each, at the same place in its second half.
  static constexpr size_t kExtOffset = HugePageArena::kBlockBytes;
};
static_assert(sizeof(Packet) == 64);

// The ECMP hash of a RoCEv2 flow's 5-tuple (source and destination host,
// UDP source port; the destination port 4791 and protocol 17 are fixed):
// what the sender computes once per QP and switches hash on.
constexpr uint32_t FlowHash(int32_t src_host, int32_t dst_host, uint16_t udp_sport) {
  return static_cast<uint32_t>(
      Mix64((static_cast<uint64_t>(static_cast<uint32_t>(src_host)) << 40) ^
            (static_cast<uint64_t>(static_cast<uint32_t>(dst_host)) << 16) ^ udp_sport ^
            (uint64_t{kRoceUdpPort} << 56) ^ (uint64_t{17} << 58)));
}

// Extension header bytes carried by a BTH opcode.
int ExtHeaderBytes(uint8_t opcode);
// IP packet length: IP + UDP + BTH + ext + payload + pad + ICRC (what a link
// MTU limits).
uint32_t IpPacketBytes(const Packet& p);
// Bytes a frame occupies on the wire, including preamble, SFD, FCS and IFG:
// what serialization time is computed from.
uint32_t FrameWireBytes(const Packet& p);
inline constexpr uint32_t kEthernetWireOverhead = 14 + 4 + 8 + 12;

// Free-list packet pool: grows in 4 MiB chunks, 2 MiB of packets and 2 MiB
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
    // The packet's line, not its extension (see PacketExt).
    std::memset(static_cast<void*>(p), 0, sizeof(Packet));
    ++in_use_;
    if (in_use_ > peak_in_use_) peak_in_use_ = in_use_;
    return p;
  }
  void Free(Packet* p) {
    p->next = free_;
    free_ = p;
    --in_use_;
  }
  size_t in_use() const { return in_use_; }
  size_t peak_in_use() const { return peak_in_use_; }

 private:
  void Grow();
  HugePageArena arena_;
  Packet* free_ = nullptr;
  size_t in_use_ = 0;
  size_t peak_in_use_ = 0;
};

}  // namespace fathom::sim
