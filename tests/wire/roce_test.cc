// Header-by-header tests of the codec: exact byte layouts, extension headers
// per opcode, ICRC over IPv4 and IPv6, build/parse round trips.
#include "fabric/wire/roce.h"

#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "tests/wire/wire_test_util.h"

namespace fathom::wire {
namespace {

using testing::AllOpcodes;
using testing::MakeFrame;

// An IPv6 SEND_ONLY with 5 payload bytes (pad 3) and FECN set, built and its
// ICRC computed independently (Python: zlib.crc32 over 8 x 0xFF and the
// masked headers, as ROCEV2.md says).
constexpr std::array<uint8_t, 86> kIpv6SendOnly = {
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x86, 0xdd, 0x66,
    0xaa, 0xbc, 0xde, 0x00, 0x20, 0x11, 0x40, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0xc1, 0x23, 0x12, 0xb7, 0x00, 0x20,
    0x00, 0x00, 0x04, 0x70, 0xff, 0xff, 0x80, 0x00, 0x00, 0x12, 0x80, 0x12, 0x34, 0x56, 0x01,
    0x02, 0x03, 0x04, 0x05, 0x00, 0x00, 0x00, 0x2b, 0xe8, 0xdc, 0x42};

TEST(RoceParseTest, Ipv6HeadersAndBth) {
  const ParseResult r = Parse(kIpv6SendOnly);
  ASSERT_EQ(r.kind, ParseKind::kRoce) << r.message;
  const RoceFrame& f = r.frame;
  EXPECT_EQ(f.eth.dst, (MacAddress{2, 0, 0, 0, 0, 2}));
  EXPECT_EQ(f.eth.src, (MacAddress{2, 0, 0, 0, 0, 1}));
  EXPECT_FALSE(f.vlan.has_value());
  ASSERT_EQ(f.ip_version, IpVersion::kIpv6);
  EXPECT_EQ(f.ipv6.traffic_class, 0x6a);
  EXPECT_EQ(f.ipv6.flow_label, 0xabcdeu);
  EXPECT_EQ(f.ipv6.payload_length, 32);
  EXPECT_EQ(f.ipv6.hop_limit, 64);
  EXPECT_EQ(f.ipv6.src[15], 1);
  EXPECT_EQ(f.udp.src_port, 0xC123);
  EXPECT_EQ(f.udp.dst_port, 4791);
  EXPECT_EQ(f.udp.length, 32);
  EXPECT_EQ(f.bth.opcode, Opcode::kSendOnly);
  EXPECT_FALSE(f.bth.solicited_event);
  EXPECT_TRUE(f.bth.migration);
  EXPECT_EQ(f.bth.pad_count, 3);
  EXPECT_EQ(f.bth.pkey, 0xFFFF);
  EXPECT_TRUE(f.bth.fecn);
  EXPECT_FALSE(f.bth.becn);
  EXPECT_EQ(f.bth.dest_qpn, 0x12u);
  EXPECT_TRUE(f.bth.ack_request);
  EXPECT_EQ(f.bth.psn, 0x123456u);
  EXPECT_EQ(f.payload.size(), 5u);
  EXPECT_EQ(f.payload[4], 5);
  EXPECT_EQ(f.pad.size(), 3u);
  EXPECT_EQ(f.icrc, 0x42dce82bu);
  EXPECT_TRUE(f.trailer.empty());
}

TEST(RoceIcrcTest, Ipv6MatchesIndependentVector) {
  const ParseResult r = Parse(kIpv6SendOnly);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(ComputeIcrc(r), 0x42dce82bu);
  EXPECT_TRUE(IcrcOk(r));
}

TEST(RoceIcrcTest, Ipv6VariantFieldsAreMaskedOthersAreNot) {
  std::vector<uint8_t> f(kIpv6SendOnly.begin(), kIpv6SendOnly.end());
  f[15] ^= 0x0F;  // traffic class low nibble + flow label high nibble
  f[17] ^= 0xFF;  // flow label
  f[21] = 3;      // hop limit
  f[60] = 0x12;   // UDP checksum
  f[66] = 0x40;   // BTH FECN/BECN byte
  EXPECT_TRUE(IcrcOk(Parse(f)));
  f[14] ^= 0x01;  // traffic class high nibble (low nibble of the byte): masked too
  EXPECT_TRUE(IcrcOk(Parse(f)));
  f[73] ^= 1;  // PSN: covered
  EXPECT_FALSE(IcrcOk(Parse(f)));
}

TEST(RoceIcrcTest, Ipv4VariantFieldsAreMaskedOthersAreNot) {
  const std::vector<uint8_t> payload(64, 0xAB);
  RoceFrame spec = MakeFrame(Opcode::kRdmaWriteFirst, false, false, payload);
  std::vector<uint8_t> buf(256);
  auto n = Build(spec, buf);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  buf.resize(*n);
  const uint32_t icrc = Parse(buf).frame.icrc;

  // TOS (DSCP+ECN), TTL and the BTH FECN bit do not change the ICRC (so a
  // switch may mark ECN or decrement TTL); the IP checksum is recomputed.
  spec.ipv4.ecn = 3;
  spec.ipv4.dscp = 0;
  spec.ipv4.ttl = 1;
  spec.bth.fecn = true;
  std::vector<uint8_t> marked(256);
  ASSERT_TRUE(Build(spec, marked).ok());
  EXPECT_EQ(Parse(std::span(marked.data(), *n)).frame.icrc, icrc);

  spec.bth.psn += 1;
  ASSERT_TRUE(Build(spec, marked).ok());
  EXPECT_NE(Parse(std::span(marked.data(), *n)).frame.icrc, icrc);

  // A flipped payload bit is caught.
  buf[60] ^= 0x04;
  const ParseResult r = Parse(buf);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(IcrcOk(r));
}

TEST(RoceParseTest, Ipv4WithOptionsAndVlan) {
  const std::array<uint8_t, 8> options = {0x94, 0x04, 0x00, 0x00, 0x01, 0x01, 0x01, 0x00};
  const std::vector<uint8_t> payload(7, 0x5A);
  RoceFrame spec = MakeFrame(Opcode::kSendOnly, false, true, payload);
  spec.ipv4.options = options;
  spec.vlan = VlanTag{5, true, 0xABC};
  std::vector<uint8_t> buf(256);
  auto n = Build(spec, buf);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 14u + 4 + 28 + 8 + 12 + 8 + 4);
  // 802.1Q tag: TPID, then PCP 5, DEI 1, VID 0xABC.
  EXPECT_EQ(buf[12], 0x81);
  EXPECT_EQ(buf[13], 0x00);
  EXPECT_EQ(buf[14], 0xBA);
  EXPECT_EQ(buf[15], 0xBC);
  EXPECT_EQ(buf[18], 0x47);  // IPv4, IHL 7
  const ParseResult r = Parse(std::span(buf.data(), *n));
  ASSERT_TRUE(r.ok()) << r.message;
  ASSERT_TRUE(r.frame.vlan.has_value());
  EXPECT_EQ(r.frame.vlan->pcp, 5);
  EXPECT_TRUE(r.frame.vlan->dei);
  EXPECT_EQ(r.frame.vlan->vid, 0xABC);
  EXPECT_EQ(r.frame.ipv4.options.size(), 8u);
  EXPECT_EQ(r.frame.ipv4.options[0], 0x94);
  EXPECT_EQ(r.frame.ipv4.dscp, 26);
  EXPECT_EQ(r.frame.ipv4.total_length, 28 + 8 + 12 + 8 + 4);
  EXPECT_EQ(Ipv4Checksum(std::span(buf.data() + 18, 28)), 0);
  EXPECT_EQ(r.frame.bth.pad_count, 1);
  EXPECT_EQ(r.ip_header_bytes, 28u);
  EXPECT_TRUE(IcrcOk(r));
}

TEST(RoceParseTest, ExtensionHeadersCarryTheirFields) {
  const std::vector<uint8_t> payload(16, 1);
  std::vector<uint8_t> buf(512);
  for (Opcode op : AllOpcodes()) {
    SCOPED_TRACE(std::string(OpcodeName(op)));
    const RoceFrame spec = MakeFrame(op, false, false, payload, 9);
    auto n = Build(spec, buf);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    const ParseResult r = Parse(std::span(buf.data(), *n));
    ASSERT_TRUE(r.ok()) << r.message;
    const RoceFrame& f = r.frame;
    const OpcodeInfo& info = *FindOpcode(op);
    EXPECT_EQ(f.reth.has_value(), info.reth);
    if (f.reth) {
      EXPECT_EQ(f.reth->virtual_address, spec.reth->virtual_address);
      EXPECT_EQ(f.reth->rkey, spec.reth->rkey);
      EXPECT_EQ(f.reth->dma_length, 4096u);
    }
    EXPECT_EQ(f.aeth.has_value(), info.aeth);
    if (f.aeth) {
      EXPECT_EQ(f.aeth->syndrome, 0x1F);
      EXPECT_EQ(f.aeth->msn, 109u);
    }
    EXPECT_EQ(f.atomic_eth.has_value(), info.atomic_eth);
    if (f.atomic_eth) {
      EXPECT_EQ(f.atomic_eth->swap_add, 16u);
      EXPECT_EQ(f.atomic_eth->compare, 9u);
      EXPECT_EQ(f.atomic_eth->rkey, 0x55u);
    }
    EXPECT_EQ(f.atomic_ack_eth.has_value(), info.atomic_ack_eth);
    if (f.atomic_ack_eth) {
      EXPECT_EQ(*f.atomic_ack_eth, 0x0102030405060708ull);
    }
    EXPECT_EQ(f.immdt.has_value(), info.immdt);
    if (f.immdt) {
      EXPECT_EQ(*f.immdt, 0xCAFE0009u);
    }
    EXPECT_EQ(f.ieth.has_value(), info.ieth);
    if (f.ieth) {
      EXPECT_EQ(*f.ieth, 0xBEEFu + 9);
    }
    EXPECT_EQ(f.payload.size(), info.payload ? 16u : 0u);
    EXPECT_EQ(f.bth.psn, 0xFFFFF9u);
    EXPECT_EQ(f.bth.dest_qpn, 0x1Au);
    EXPECT_EQ(*n, FrameBytes(op, false, false, f.payload.size()));
    EXPECT_TRUE(IcrcOk(r));
  }
}

TEST(RoceParseTest, AethByteLayout) {
  RoceFrame spec = MakeFrame(Opcode::kAcknowledge, false, false, {});
  spec.aeth = Aeth{0x60 | 2, 0xABCDEF};  // NAK remote access error
  std::vector<uint8_t> buf(128);
  auto n = Build(spec, buf);
  ASSERT_TRUE(n.ok());
  ASSERT_EQ(*n, 62u);
  EXPECT_EQ(buf[54], 0x62);
  EXPECT_EQ(buf[55], 0xAB);
  EXPECT_EQ(buf[57], 0xEF);
  const ParseResult r = Parse(std::span(buf.data(), *n));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.frame.aeth->kind(), AethKind::kNak);
  EXPECT_EQ(r.frame.aeth->code(), 2);
}

TEST(RoceParseTest, RethAndImmDtByteLayout) {
  RoceFrame spec = MakeFrame(Opcode::kRdmaWriteOnlyWithImmediate, false, false, {});
  spec.reth = Reth{0x0102030405060708ull, 0x11223344, 0x55667788};
  spec.immdt = 0xA1B2C3D4;
  std::vector<uint8_t> buf(128);
  auto n = Build(spec, buf);
  ASSERT_TRUE(n.ok());
  const size_t e = 14 + 20 + 8 + 12;
  EXPECT_EQ(buf[e], 0x01);
  EXPECT_EQ(buf[e + 7], 0x08);
  EXPECT_EQ(buf[e + 8], 0x11);
  EXPECT_EQ(buf[e + 15], 0x88);
  EXPECT_EQ(buf[e + 16], 0xA1);
  EXPECT_EQ(buf[e + 19], 0xD4);
}

TEST(RoceParseTest, BthBitsRoundTrip) {
  RoceFrame spec = MakeFrame(Opcode::kSendMiddle, false, false, {});
  spec.bth.solicited_event = true;
  spec.bth.migration = false;
  spec.bth.pkey = 0x8001;
  spec.bth.becn = true;
  spec.bth.reserved6 = 0x15;
  spec.bth.reserved7 = 0x33;
  spec.bth.ack_request = false;
  std::vector<uint8_t> buf(128);
  auto n = Build(spec, buf);
  ASSERT_TRUE(n.ok());
  const uint8_t* b = buf.data() + 42;
  EXPECT_EQ(b[0], 0x01);
  EXPECT_EQ(b[1], 0x80);  // SE, no M, pad 0, TVer 0
  EXPECT_EQ(b[2], 0x80);
  EXPECT_EQ(b[3], 0x01);
  EXPECT_EQ(b[4], 0x40 | 0x15);
  EXPECT_EQ(b[8], 0x33);
  const ParseResult r = Parse(std::span(buf.data(), *n));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.frame.bth.solicited_event);
  EXPECT_TRUE(r.frame.bth.becn);
  EXPECT_EQ(r.frame.bth.reserved6, 0x15);
  EXPECT_EQ(r.frame.bth.reserved7, 0x33);
  EXPECT_EQ(r.frame.bth.pkey, 0x8001);
}

// Build(Parse(f).frame) == f for every opcode, IP version and VLAN choice,
// including a trailer (Ethernet padding) and odd payload sizes.
TEST(RoceRoundTripTest, EveryOpcodeIpVersionAndVlan) {
  std::vector<uint8_t> payload(37);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 7);
  const std::array<uint8_t, 3> trailer = {0, 0, 0};
  for (Opcode op : AllOpcodes()) {
    for (bool ipv6 : {false, true}) {
      for (bool vlan : {false, true}) {
        SCOPED_TRACE(std::string(OpcodeName(op)) + (ipv6 ? " v6" : " v4") + (vlan ? " vlan" : ""));
        RoceFrame spec = MakeFrame(op, ipv6, vlan, payload);
        spec.trailer = trailer;
        std::vector<uint8_t> a(512), b(512);
        auto n = Build(spec, a);
        ASSERT_TRUE(n.ok()) << n.status().ToString();
        EXPECT_EQ(*n, BuiltSize(spec));
        const ParseResult r = Parse(std::span(a.data(), *n));
        ASSERT_TRUE(r.ok()) << r.message;
        EXPECT_EQ(r.frame.trailer.size(), 3u);
        auto m = Build(r.frame, b);
        ASSERT_TRUE(m.ok());
        ASSERT_EQ(*m, *n);
        EXPECT_TRUE(std::equal(a.begin(), a.begin() + *n, b.begin()));
        EXPECT_TRUE(IcrcOk(r));
      }
    }
  }
}

TEST(RoceBuildTest, RejectsBadSpecsNamingTheField) {
  std::vector<uint8_t> buf(256);
  const std::vector<uint8_t> payload(8, 0);
  RoceFrame spec = MakeFrame(Opcode::kRdmaWriteFirst, false, false, payload);
  spec.reth.reset();
  auto r = Build(spec, buf);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("reth"), std::string::npos);

  spec = MakeFrame(Opcode::kAcknowledge, false, false, {});
  spec.payload = payload;
  r = Build(spec, buf);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("ACKNOWLEDGE"), std::string::npos);

  spec = MakeFrame(Opcode::kSendOnly, false, false, payload);
  spec.bth.psn = 0x1000000;
  r = Build(spec, buf);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("bth.psn=16777216"), std::string::npos);

  spec = MakeFrame(Opcode::kSendOnly, false, false, payload);
  r = Build(spec, std::span(buf.data(), 40));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("buffer has 40"), std::string::npos);

  spec.bth.opcode = static_cast<Opcode>(0x15);
  EXPECT_FALSE(Build(spec, buf).ok());
}

TEST(RoceBuildTest, KeptValuesAreWrittenAsGiven) {
  std::vector<uint8_t> buf(256);
  const std::vector<uint8_t> payload(6, 0);
  const std::array<uint8_t, 2> pad = {0xEE, 0xEE};
  RoceFrame spec = MakeFrame(Opcode::kSendOnly, false, false, payload);
  spec.keep.icrc = true;
  spec.icrc = 0xDEADBEEF;
  spec.keep.pad = true;
  spec.bth.pad_count = 2;
  spec.pad = pad;
  auto n = Build(spec, buf);
  ASSERT_TRUE(n.ok());
  const ParseResult r = Parse(std::span(buf.data(), *n));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.frame.icrc, 0xDEADBEEFu);
  EXPECT_EQ(r.frame.pad[1], 0xEE);
  EXPECT_FALSE(IcrcOk(r));
  // A kept IP checksum that is wrong makes the frame malformed.
  spec.keep.ip_checksum = true;
  spec.ipv4.header_checksum = 0x1234;
  n = Build(spec, buf);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(Parse(std::span(buf.data(), *n)).error, ParseError::kBadIpChecksum);
}

TEST(RoceParseTest, NonRoceFrames) {
  RoceFrame spec = MakeFrame(Opcode::kSendOnly, false, false, {});
  std::vector<uint8_t> buf(128);
  auto n = Build(spec, buf);
  ASSERT_TRUE(n.ok());
  std::vector<uint8_t> f(buf.begin(), buf.begin() + *n);

  auto other_port = f;
  other_port[36] = 0x12;  // UDP destination port 4791 (0x12B7) -> 4792
  other_port[37] = 0xB8;
  EXPECT_EQ(Parse(other_port).kind, ParseKind::kNotRoce);
  EXPECT_EQ(Parse(other_port).error, ParseError::kNotRocePort);

  auto arp = f;
  arp[12] = 0x08;
  arp[13] = 0x06;
  EXPECT_EQ(Parse(arp).error, ParseError::kNotIp);
  EXPECT_EQ(Parse(arp).kind, ParseKind::kNotRoce);

  auto tcp = f;
  tcp[23] = 6;
  EXPECT_EQ(Parse(tcp).error, ParseError::kNotUdp);

  auto fragment = f;
  fragment[20] = 0x20;  // MF
  EXPECT_EQ(Parse(fragment).error, ParseError::kIpFragment);
}

}  // namespace
}  // namespace fathom::wire
