// The packet pool: half-line packets and their extensions in a parallel
// region (Packet::ext()), across more than one chunk.
#include "fabric/sim/packet.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace fathom::sim {
namespace {

// Every packet and every extension written with its own values, over two
// chunks: nothing one write touches belongs to another packet, extensions
// never land among the packets, and what comes back after a free is a
// zeroed packet.
TEST(PacketPoolTest, ExtensionsAreDistinctAndOutsideThePackets) {
  PacketPool pool;
  constexpr size_t kPerChunk = Packet::kPacketRegion / sizeof(Packet);
  const size_t n = kPerChunk + kPerChunk / 2;
  std::vector<Packet*> packets;
  packets.reserve(n);
  QpFlow flow;
  for (size_t i = 0; i < n; ++i) {
    Packet* p = pool.Alloc();
    ASSERT_EQ(reinterpret_cast<uintptr_t>(p) % alignof(Packet), 0u);
    p->flow = &flow;
    p->psn = static_cast<uint32_t>(i);
    p->dest_qpn = static_cast<uint32_t>(~i);
    p->ext().va = i * 3;
    p->ext().msn = static_cast<uint32_t>(i * 5);
    p->set_data(reinterpret_cast<const uint8_t*>(i * 7 + 1));
    packets.push_back(p);
  }
  EXPECT_EQ(pool.in_use(), n);
  for (size_t i = 0; i < n; ++i) {
    const Packet* p = packets[i];
    ASSERT_EQ(p->psn, static_cast<uint32_t>(i)) << i;
    ASSERT_EQ(p->dest_qpn, static_cast<uint32_t>(~i)) << i;
    ASSERT_EQ(p->flow, &flow) << i;
    ASSERT_EQ(p->ext().va, i * 3) << i;
    ASSERT_EQ(p->ext().msn, static_cast<uint32_t>(i * 5)) << i;
    ASSERT_EQ(p->data(), reinterpret_cast<const uint8_t*>(i * 7 + 1)) << i;
    // The extension is past the packets of its chunk.
    const uintptr_t ext = reinterpret_cast<uintptr_t>(&p->ext());
    const uintptr_t base = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{Packet::kPacketRegion - 1};
    ASSERT_GE(ext, base + Packet::kPacketRegion) << i;
  }
  for (Packet* p : packets) pool.Free(p);
  EXPECT_EQ(pool.in_use(), 0u);
  EXPECT_EQ(pool.peak_in_use(), n);
  Packet* again = pool.Alloc();
  EXPECT_EQ(again->psn, 0u);
  EXPECT_EQ(again->flow, nullptr);
  EXPECT_EQ(again->data(), nullptr);  // has_data cleared, whatever the extension holds
  pool.Free(again);
}

// A packet without a payload pointer moves modelled bytes.
TEST(PacketPoolTest, DataIsNullUntilSet) {
  PacketPool pool;
  Packet* p = pool.Alloc();
  EXPECT_FALSE(p->has_data);
  EXPECT_EQ(p->data(), nullptr);
  const uint8_t bytes[4] = {1, 2, 3, 4};
  p->set_data(bytes);
  EXPECT_TRUE(p->has_data);
  EXPECT_EQ(p->data(), bytes);
  pool.Free(p);
}

TEST(PacketTest, WireBytesCountEveryHeader) {
  // A 4096-byte WRITE middle over IPv4: Ethernet 14 + FCS 4 + preamble 8 +
  // IFG 12, IPv4 20, UDP 8, BTH 12, ICRC 4.
  EXPECT_EQ(FrameWireBytes(Opcode::kRdmaWriteMiddle, 4096, false), 4096u + 38 + 20 + 8 + 12 + 4);
  // WRITE first: RETH 16; IPv6 40.
  EXPECT_EQ(FrameWireBytes(Opcode::kRdmaWriteFirst, 4096, true), 4096u + 38 + 40 + 8 + 12 + 16 + 4);
  // A packet's form reads its flow's IP version.
  QpFlow v6;
  v6.ipv6 = true;
  Packet p{};
  p.flow = &v6;
  p.opcode = Opcode::kAcknowledge;
  EXPECT_EQ(FrameWireBytes(p), 38u + 40 + 8 + 12 + 4 + 4);
  EXPECT_EQ(IpPacketBytes(p), 40u + 8 + 12 + 4 + 4);
}

// The opcodes a compact entry may hold are exactly those without extension
// headers, as the wire's opcode table says.
TEST(PacketTest, ExtHeaderOpcodeMaskMatchesTheOpcodeTable) {
  for (int op = 0; op < 32; ++op) {
    EXPECT_EQ(((kExtHeaderOpcodes >> op) & 1) != 0,
              wire::ExtensionHeaderBytes(static_cast<Opcode>(op)) > 0)
        << op;
  }
}

// A full-size packet is one its flow, PSN, opcode, hop count and flags
// describe whole; any other field that differs makes it a pool packet.
TEST(PacketTest, FullSizeNeedsEveryOtherFieldToBeTheFlows) {
  QpFlow flow;
  flow.full_wire_bytes = 4200;
  flow.full_payload = 4096;
  flow.buffer_class = 3;
  flow.dest_qpn = 0x1234;
  auto full = [&flow] {
    Packet p{};
    p.flow = &flow;
    p.wire_bytes = 4200;
    p.payload_bytes = 4096;
    p.buffer_class = 3;
    p.dest_qpn = 0x1234;
    p.opcode = Opcode::kRdmaWriteMiddle;
    p.psn = 0xFFFFFF;
    p.ack_req = 1;
    p.ecn_ce = 1;
    p.hops = 5;
    return p;
  };
  EXPECT_TRUE(IsFullSize(full()));
  const std::vector<std::pair<const char*, void (*)(Packet&)>> changes = {
      {"opcode with a RETH", [](Packet& p) { p.opcode = Opcode::kRdmaWriteFirst; }},
      {"payload", [](Packet& p) { p.payload_bytes = 4092; }},
      {"wire bytes", [](Packet& p) { p.wire_bytes = 4196; }},
      {"buffer class", [](Packet& p) { p.buffer_class = 0; }},
      {"dest QPN", [](Packet& p) { p.dest_qpn = 0x1235; }},
      {"PSN past 24 bits", [](Packet& p) { p.psn = 0x1000000; }},
      {"AETH", [](Packet& p) { p.aeth_syndrome = wire::kAethAck; }},
      {"corrupt", [](Packet& p) { p.corrupt = 1; }},
      {"payload bytes", [](Packet& p) { p.has_data = 1; }},
  };
  for (const auto& [what, change] : changes) {
    Packet p = full();
    change(p);
    EXPECT_FALSE(IsFullSize(p)) << what;
  }
  flow.full_wire_bytes = 0;  // a flow without full-size packets
  EXPECT_FALSE(IsFullSize(full()));
}

}  // namespace
}  // namespace fathom::sim
