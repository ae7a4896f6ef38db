// Damaged frames: every truncation point of an RDMA_WRITE_FIRST, broken
// lengths, pads, versions and opcodes. Each gives its typed error, never reads
// past the buffer (the ASan build checks that: frames are copied into
// exactly-sized heap buffers) and never aborts.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <vector>

#include "fabric/wire/roce.h"
#include "tests/wire/wire_test_util.h"

namespace fathom::wire {
namespace {

constexpr size_t kIp = 14;    // IP header offset (no VLAN)
constexpr size_t kUdp4 = 34;  // UDP offset after IPv4
constexpr size_t kBth4 = 42;  // BTH offset after IPv4
constexpr size_t kUdp6 = 54;  // UDP offset after IPv6
constexpr size_t kBth6 = 62;

// A heap copy of a frame of exactly its size (so that any read past the end
// is an ASan report) and the parse of it, which points into the copy.
struct Exact {
  std::unique_ptr<uint8_t[]> bytes;
  ParseResult result;
};
Exact ParseExact(const std::vector<uint8_t>& frame) {
  Exact e;
  e.bytes.reset(new uint8_t[frame.size() + (frame.empty() ? 1 : 0)]);
  std::copy(frame.begin(), frame.end(), e.bytes.get());
  e.result = Parse(std::span<const uint8_t>(e.bytes.get(), frame.size()));
  return e;
}

std::vector<uint8_t> BuildOrDie(const RoceFrame& spec) {
  std::vector<uint8_t> buf(512);
  auto n = Build(spec, buf);
  EXPECT_TRUE(n.ok()) << n.status().ToString();
  buf.resize(n.ok() ? *n : 0);
  return buf;
}

const std::vector<uint8_t>& PayloadOf10() {
  static const std::vector<uint8_t> p = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  return p;
}

// IPv4 RDMA_WRITE_FIRST with 10 payload bytes (pad 2): 86 bytes.
std::vector<uint8_t> WriteFirstV4() {
  return BuildOrDie(testing::MakeFrame(Opcode::kRdmaWriteFirst, false, false, PayloadOf10()));
}
std::vector<uint8_t> WriteFirstV6() {
  return BuildOrDie(testing::MakeFrame(Opcode::kRdmaWriteFirst, true, false, PayloadOf10()));
}

void Set16(std::vector<uint8_t>& f, size_t at, uint16_t v) {
  f[at] = static_cast<uint8_t>(v >> 8);
  f[at + 1] = static_cast<uint8_t>(v);
}
uint16_t Get16(const std::vector<uint8_t>& f, size_t at) {
  return static_cast<uint16_t>(f[at] << 8 | f[at + 1]);
}
void FixIpv4Checksum(std::vector<uint8_t>& f) {
  const size_t hl = (f[kIp] & 0x0F) * 4u;
  Set16(f, kIp + 10, 0);
  Set16(f, kIp + 10, Ipv4Checksum(std::span(f.data() + kIp, hl)));
}

TEST(MalformedTest, EveryTruncationOfWriteFirst) {
  const std::vector<uint8_t> full = WriteFirstV4();
  ASSERT_EQ(full.size(), 86u);
  ASSERT_TRUE(ParseExact(full).result.ok());
  for (size_t len = 0; len < full.size(); ++len) {
    SCOPED_TRACE("length " + std::to_string(len));
    const std::vector<uint8_t> cut(full.begin(), full.begin() + len);
    const Exact e = ParseExact(cut);
    const ParseResult& r = e.result;
    EXPECT_EQ(r.kind, ParseKind::kMalformed);
    EXPECT_EQ(r.error, ParseError::kTruncated);
    EXPECT_LE(r.error_offset, len);
    EXPECT_FALSE(r.message.empty());
  }
}

// Truncated at every point but with the IP and UDP lengths (and checksum)
// rewritten to agree: the damage is then found inside the RoCE headers.
TEST(MalformedTest, EveryConsistentTruncationOfWriteFirst) {
  const std::vector<uint8_t> full = WriteFirstV4();
  for (size_t len = kBth4 - 8; len < full.size(); ++len) {
    SCOPED_TRACE("length " + std::to_string(len));
    std::vector<uint8_t> cut(full.begin(), full.begin() + len);
    Set16(cut, kIp + 2, static_cast<uint16_t>(len - kIp));
    FixIpv4Checksum(cut);
    if (len >= kUdp4 + 8) Set16(cut, kUdp4 + 4, static_cast<uint16_t>(len - kUdp4));
    const Exact e = ParseExact(cut);
    const ParseResult& r = e.result;
    // BTH 12 + RETH 16 + ICRC 4 after the UDP header; pad count 2.
    ParseError want = ParseError::kNone;
    if (len < kUdp4 + 8) {
      want = ParseError::kBadIpLength;
    } else if (len < kBth4 + 12 + 16 + 4) {
      want = ParseError::kTruncated;
    } else if (len < kBth4 + 12 + 16 + 4 + 2) {
      want = ParseError::kBadPadCount;
    }
    if (want == ParseError::kNone) {
      ASSERT_TRUE(r.ok()) << r.message;
      EXPECT_FALSE(IcrcOk(r));  // the ICRC is now read from payload bytes
    } else {
      EXPECT_EQ(r.kind, ParseKind::kMalformed);
      EXPECT_EQ(r.error, want) << ParseErrorName(r.error);
    }
  }
}

struct Damage {
  const char* name;
  std::function<std::vector<uint8_t>()> make;
  ParseKind kind;
  ParseError error;
};

std::vector<Damage> DamageTable() {
  std::vector<Damage> t;
  auto v4 = [](std::function<void(std::vector<uint8_t>&)> m) {
    return [m] {
      auto f = WriteFirstV4();
      m(f);
      return f;
    };
  };
  auto v6 = [](std::function<void(std::vector<uint8_t>&)> m) {
    return [m] {
      auto f = WriteFirstV6();
      m(f);
      return f;
    };
  };
  const ParseKind bad = ParseKind::kMalformed;
  const ParseKind other = ParseKind::kNotRoce;
  t.push_back({"empty frame", [] { return std::vector<uint8_t>{}; }, bad, ParseError::kTruncated});
  t.push_back({"ipv4 version 5", v4([](auto& f) {
                 f[kIp] = 0x55;
                 FixIpv4Checksum(f);
               }),
               bad, ParseError::kBadIpVersion});
  t.push_back({"ipv4 version 6 under EtherType IPv4", v4([](auto& f) { f[kIp] = 0x65; }), bad,
               ParseError::kBadIpVersion});
  t.push_back(
      {"ipv4 IHL 4", v4([](auto& f) { f[kIp] = 0x44; }), bad, ParseError::kBadIpHeaderLength});
  t.push_back(
      {"ipv4 IHL 0", v4([](auto& f) { f[kIp] = 0x40; }), bad, ParseError::kBadIpHeaderLength});
  t.push_back({"ipv4 bad header checksum", v4([](auto& f) { f[kIp + 10] ^= 0x01; }), bad,
               ParseError::kBadIpChecksum});
  t.push_back({"ipv4 total length past the frame", v4([](auto& f) {
                 Set16(f, kIp + 2, Get16(f, kIp + 2) + 4);
                 FixIpv4Checksum(f);
               }),
               bad, ParseError::kTruncated});
  t.push_back({"ipv4 total length below IP+UDP", v4([](auto& f) {
                 Set16(f, kIp + 2, 27);
                 FixIpv4Checksum(f);
               }),
               bad, ParseError::kBadIpLength});
  t.push_back({"ipv4 total length shorter than UDP says", v4([](auto& f) {
                 Set16(f, kIp + 2, Get16(f, kIp + 2) - 4);
                 FixIpv4Checksum(f);
               }),
               bad, ParseError::kBadUdpLength});
  t.push_back({"udp length + 1", v4([](auto& f) { Set16(f, kUdp4 + 4, Get16(f, kUdp4 + 4) + 1); }),
               bad, ParseError::kBadUdpLength});
  t.push_back({"udp length - 1", v4([](auto& f) { Set16(f, kUdp4 + 4, Get16(f, kUdp4 + 4) - 1); }),
               bad, ParseError::kBadUdpLength});
  t.push_back({"udp length 0", v4([](auto& f) { Set16(f, kUdp4 + 4, 0); }), bad,
               ParseError::kBadUdpLength});
  t.push_back({"BTH transport version 1", v4([](auto& f) { f[kBth4 + 1] |= 0x01; }), bad,
               ParseError::kBadTransportVersion});
  t.push_back({"reserved RC opcode 0x15", v4([](auto& f) { f[kBth4] = 0x15; }), bad,
               ParseError::kUnknownOpcode});
  t.push_back(
      {"UD SEND_ONLY 0x64", v4([](auto& f) { f[kBth4] = 0x64; }), bad, ParseError::kUnknownOpcode});
  t.push_back(
      {"opcode 0xFF", v4([](auto& f) { f[kBth4] = 0xFF; }), bad, ParseError::kUnknownOpcode});
  t.push_back({"ACKNOWLEDGE with payload", v4([](auto& f) { f[kBth4] = 0x11; }), bad,
               ParseError::kUnexpectedPayload});
  t.push_back({"pad count 3 on a READ_REQUEST",
               [] {
                 auto f =
                     BuildOrDie(testing::MakeFrame(Opcode::kRdmaReadRequest, false, false, {}));
                 f[kBth4 + 1] |= 0x30;
                 return f;
               },
               bad, ParseError::kBadPadCount});
  t.push_back({"pad count 3 on a 2-byte SEND_ONLY with its pad cut",
               [] {
                 const std::vector<uint8_t> p = {1};
                 auto f = BuildOrDie(testing::MakeFrame(Opcode::kSendOnly, false, false, p));
                 // 1 payload byte + 3 pad: drop the 3 pad bytes (lengths fixed).
                 f.erase(f.end() - 7, f.end() - 4);
                 Set16(f, kIp + 2, Get16(f, kIp + 2) - 3);
                 Set16(f, kUdp4 + 4, Get16(f, kUdp4 + 4) - 3);
                 FixIpv4Checksum(f);
                 return f;
               },
               bad, ParseError::kBadPadCount});
  t.push_back({"ipv6 version 4 under EtherType IPv6", v6([](auto& f) { f[kIp] = 0x46; }), bad,
               ParseError::kBadIpVersion});
  t.push_back({"ipv6 payload length past the frame",
               v6([](auto& f) { Set16(f, kIp + 4, Get16(f, kIp + 4) + 8); }), bad,
               ParseError::kTruncated});
  t.push_back({"ipv6 payload length 4", v6([](auto& f) { Set16(f, kIp + 4, 4); }), bad,
               ParseError::kBadIpLength});
  t.push_back({"ipv6 udp length - 4",
               v6([](auto& f) { Set16(f, kUdp6 + 4, Get16(f, kUdp6 + 4) - 4); }), bad,
               ParseError::kBadUdpLength});
  t.push_back({"ipv6 BTH transport version 15", v6([](auto& f) { f[kBth6 + 1] |= 0x0F; }), bad,
               ParseError::kBadTransportVersion});
  t.push_back({"ipv6 cut inside the header", v6([](auto& f) { f.resize(kIp + 30); }), bad,
               ParseError::kTruncated});
  t.push_back({"VLAN tag cut short", v4([](auto& f) {
                 f[12] = 0x81;
                 f[13] = 0;
                 f.resize(16);
               }),
               bad, ParseError::kTruncated});
  t.push_back({"two VLAN tags",
               [] {
                 auto f = BuildOrDie(testing::MakeFrame(Opcode::kSendOnly, false, true, {}));
                 f[16] = 0x81;
                 f[17] = 0x00;
                 return f;
               },
               other, ParseError::kNotIp});
  t.push_back({"ARP", v4([](auto& f) { Set16(f, 12, 0x0806); }), other, ParseError::kNotIp});
  t.push_back({"ipv4 TCP", v4([](auto& f) {
                 f[kIp + 9] = 6;
                 FixIpv4Checksum(f);
               }),
               other, ParseError::kNotUdp});
  t.push_back(
      {"ipv6 hop-by-hop header", v6([](auto& f) { f[kIp + 6] = 0; }), other, ParseError::kNotUdp});
  t.push_back({"udp port 4792", v4([](auto& f) { Set16(f, kUdp4 + 2, 4792); }), other,
               ParseError::kNotRocePort});
  t.push_back({"ipv4 fragment (MF)", v4([](auto& f) {
                 f[kIp + 6] |= 0x20;
                 FixIpv4Checksum(f);
               }),
               other, ParseError::kIpFragment});
  t.push_back({"ipv4 fragment (offset)", v4([](auto& f) {
                 f[kIp + 7] = 1;
                 FixIpv4Checksum(f);
               }),
               other, ParseError::kIpFragment});
  return t;
}

TEST(MalformedTest, DamageTable) {
  const auto table = DamageTable();
  ASSERT_GE(table.size(), 20u);
  for (const Damage& d : table) {
    SCOPED_TRACE(d.name);
    const std::vector<uint8_t> frame = d.make();
    const Exact e = ParseExact(frame);
    const ParseResult& r = e.result;
    EXPECT_EQ(r.kind, d.kind) << ParseErrorName(r.error);
    EXPECT_EQ(r.error, d.error) << ParseErrorName(r.error) << ": " << r.message;
    EXPECT_FALSE(r.message.empty());
    EXPECT_NE(ParseErrorName(r.error), "UNKNOWN");
  }
}

// Single-byte corruption anywhere in the capture's first SEND_FIRST: the
// parser classifies every variant without crashing, and the ICRC catches
// every change it covers.
TEST(MalformedTest, EveryByteFlipOfACapturedFrame) {
  const auto frames = testing::ReadAll(testing::CapturePath());
  const std::vector<uint8_t>* send_first = nullptr;
  for (const auto& f : frames) {
    const ParseResult r = Parse(f.bytes);
    if (r.ok() && r.frame.bth.opcode == Opcode::kSendFirst) {
      send_first = &f.bytes;
      break;
    }
  }
  ASSERT_NE(send_first, nullptr);
  for (size_t i = 0; i < send_first->size(); ++i) {
    std::vector<uint8_t> f = *send_first;
    f[i] ^= 0x01;
    const Exact e = ParseExact(f);
    const ParseResult& r = e.result;
    // Ethernet addresses are outside the ICRC and the UDP checksum and the
    // BTH FECN/BECN byte are masked (IPv4 TOS and TTL are masked too, but a
    // flip there breaks the IP header checksum); everything else is covered.
    const bool outside_icrc = i < 12 || i == kUdp4 + 6 || i == kUdp4 + 7 || i == kBth4 + 4;
    if (r.ok() && !outside_icrc) {
      EXPECT_FALSE(IcrcOk(r)) << "byte " << i;
    }
  }
}

}  // namespace
}  // namespace fathom::wire
