#include "fabric/sim/packet.h"

#include <cstddef>
#include <new>

namespace fathom::sim {

// Every packet's fields in one line; a pool chunk's halves hold whole lines.
static_assert(offsetof(Packet, hops) < 64 && sizeof(PacketExt) <= sizeof(Packet) &&
              Packet::kExtOffset % sizeof(Packet) == 0);

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

uint32_t IpPacketBytes(const Packet& p) {
  const uint32_t ip = p.ipv6 ? 40 : 20;
  const uint32_t padded = (p.payload_bytes + 3u) & ~3u;
  return ip + 8 + 12 + static_cast<uint32_t>(ExtHeaderBytes(p.opcode)) + padded + 4;
}

uint32_t FrameWireBytes(const Packet& p) { return IpPacketBytes(p) + kEthernetWireOverhead; }

void PacketPool::Grow() {
  // Packets in the first half of the chunk, their extensions in the second
  // (Packet::kExtOffset).
  constexpr size_t kCount = Packet::kExtOffset / sizeof(Packet);
  char* chunk = static_cast<char*>(arena_.Allocate(2 * Packet::kExtOffset, alignof(Packet)));
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
