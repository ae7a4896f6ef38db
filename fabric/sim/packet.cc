#include "fabric/sim/packet.h"

#include <cstddef>
#include <new>

namespace fathom::sim {

// A QpFlow's route is its first line (a hop fetches only it).
static_assert(offsetof(QpFlow, src_host) == 64 && sizeof(QpFlow) == 128 &&
              offsetof(QpFlow, dest_qpn) == 60);

uint32_t IpPacketBytes(Opcode opcode, uint32_t payload_bytes, bool ipv6) {
  constexpr uint32_t kFixed = wire::kUdpHeaderBytes + wire::kBthBytes + wire::kIcrcBytes;
  const uint32_t ip = ipv6 ? wire::kIpv6HeaderBytes : wire::kIpv4HeaderBytes;
  const uint32_t padded = (payload_bytes + 3u) & ~3u;
  return ip + kFixed + static_cast<uint32_t>(wire::ExtensionHeaderBytes(opcode)) + padded;
}

uint32_t IpPacketBytes(const Packet& p) {
  return IpPacketBytes(p.opcode, p.payload_bytes, p.flow->ipv6);
}

uint32_t FrameWireBytes(Opcode opcode, uint32_t payload_bytes, bool ipv6) {
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
