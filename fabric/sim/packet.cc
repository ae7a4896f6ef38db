#include "fabric/sim/packet.h"

#include <cstddef>
#include <new>

namespace fathom::sim {

// Every packet's fields in the first line, the by-opcode ones in the second.
static_assert(offsetof(Packet, hops) < 64 && offsetof(Packet, va) == 64 && sizeof(Packet) == 128);

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
  constexpr size_t kCount = HugePageArena::kBlockBytes / sizeof(Packet);
  Packet* chunk =
      static_cast<Packet*>(arena_.Allocate(HugePageArena::kBlockBytes, alignof(Packet)));
  // Linked so that Alloc hands them out in address order.
  for (size_t i = kCount; i-- > 0;) {
    Packet* p = new (&chunk[i]) Packet{};
    p->next = free_;
    free_ = p;
  }
}

}  // namespace fathom::sim
