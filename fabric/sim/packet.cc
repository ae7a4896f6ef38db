#include "fabric/sim/packet.h"

#include <cstddef>
#include <new>

namespace fathom::sim {

// A QpFlow's route is its first line (a hop fetches only it).
static_assert(offsetof(QpFlow, src_host) == 64 && sizeof(QpFlow) == 128 &&
              offsetof(QpFlow, dest_qpn) == 60);

int ExtHeaderBytes(uint8_t opcode) {
  switch (opcode) {
    case op::kWriteFirst:
    case op::kWriteOnly:
    case op::kReadRequest:
      return 16;  // RETH
    case op::kWriteOnlyImm:
      return 16 + 4;  // RETH + ImmDt
    case op::kSendLastImm:
    case op::kSendOnlyImm:
    case op::kWriteLastImm:
      return 4;  // ImmDt
    case op::kReadRespFirst:
    case op::kReadRespLast:
    case op::kReadRespOnly:
    case op::kAck:
      return 4;  // AETH
    case op::kAtomicAck:
      return 4 + 8;  // AETH + AtomicAckETH
    case op::kCompareSwap:
    case op::kFetchAdd:
      return 28;  // AtomicETH
    default:
      return 0;
  }
}

uint32_t IpPacketBytes(uint8_t opcode, uint32_t payload_bytes, bool ipv6) {
  const uint32_t ip = ipv6 ? 40 : 20;
  const uint32_t padded = (payload_bytes + 3u) & ~3u;
  return ip + 8 + 12 + static_cast<uint32_t>(ExtHeaderBytes(opcode)) + padded + 4;
}

uint32_t IpPacketBytes(const Packet& p) {
  return IpPacketBytes(p.opcode, p.payload_bytes, p.flow->ipv6);
}

uint32_t FrameWireBytes(uint8_t opcode, uint32_t payload_bytes, bool ipv6) {
  return IpPacketBytes(opcode, payload_bytes, ipv6) + kEthernetWireOverhead;
}

uint32_t FrameWireBytes(const Packet& p) { return IpPacketBytes(p) + kEthernetWireOverhead; }

void PacketPool::Grow() {
  // Packets in the chunk's first region, their extensions after it
  // (Packet::ext()). A request this large gets blocks of its own, aligned
  // to a block: the region's alignment.
  static_assert(Packet::kPacketRegion == HugePageArena::kBlockBytes);
  constexpr size_t kCount = Packet::kPacketRegion / sizeof(Packet);
  char* chunk = static_cast<char*>(arena_.Allocate(
      Packet::kPacketRegion + kCount * Packet::kExtStride, HugePageArena::kBlockBytes));
  Packet* packets = reinterpret_cast<Packet*>(chunk);
  // Linked so that Alloc hands them out in address order.
  for (size_t i = kCount; i-- > 0;) {
    Packet* p = new (&packets[i]) Packet{};
    new (&p->ext()) PacketExt{};
    p->next = free_;
    free_ = p;
  }
}

}  // namespace fathom::sim
