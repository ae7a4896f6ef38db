// The RoCEv2 frame codec: Ethernet [802.1Q] / IPv4 | IPv6 / UDP 4791 / BTH /
// extension headers / payload / pad / ICRC (ROCEV2.md, IBTA annex A17).
//
// Parse() is zero-copy: the RoceFrame it fills points into the caller's
// bytes (payload, pad, IPv4 options, Ethernet trailer), which must outlive
// it. Build() writes into the caller's buffer. Neither allocates, throws or
// reads past the span it is given, so both sit on the simulator's and the
// live emulator's per-packet paths.
//
// The same RoceFrame describes a frame to build. Build() computes the IP and
// UDP lengths, the IPv4 header checksum, the pad and the ICRC itself, unless
// the frame's `keep` flags say to write the given values — Parse() sets all of
// them, so Build(Parse(f).frame) reproduces f byte for byte.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "base/status.h"
#include "fabric/wire/opcode.h"

namespace fathom::wire {

using MacAddress = std::array<uint8_t, 6>;
using Ipv4Address = std::array<uint8_t, 4>;
using Ipv6Address = std::array<uint8_t, 16>;

inline constexpr uint16_t kEthertypeIpv4 = 0x0800;
inline constexpr uint16_t kEthertypeIpv6 = 0x86DD;
inline constexpr uint16_t kEthertypeVlan = 0x8100;
inline constexpr uint8_t kIpProtocolUdp = 17;

struct EthernetHeader {
  MacAddress dst{};
  MacAddress src{};
  // The EtherType after the (optional) VLAN tag is implied by the IP version.
};

// One IEEE 802.1Q tag (TPID 0x8100). PCP is the priority PFC acts on.
struct VlanTag {
  uint8_t pcp = 0;  // 3 bits
  bool dei = false;
  uint16_t vid = 0;  // 12 bits
};

enum class IpVersion : uint8_t { kIpv4 = 4, kIpv6 = 6 };

struct Ipv4Header {
  uint8_t dscp = 0;           // 6 bits
  uint8_t ecn = 0;            // 2 bits; 0b11 = congestion experienced
  uint16_t total_length = 0;  // computed by Build unless keep.lengths
  uint16_t identification = 0;
  uint8_t flags = 0b010;         // 3 bits; rxe sets DF
  uint16_t fragment_offset = 0;  // 13 bits, in 8-byte units
  uint8_t ttl = 64;
  uint8_t protocol = kIpProtocolUdp;
  uint16_t header_checksum = 0;  // computed by Build unless keep.ip_checksum
  Ipv4Address src{};
  Ipv4Address dst{};
  std::span<const uint8_t> options;  // 0..40 bytes, a multiple of 4
};

struct Ipv6Header {
  uint8_t traffic_class = 0;    // DSCP << 2 | ECN
  uint32_t flow_label = 0;      // 20 bits
  uint16_t payload_length = 0;  // computed by Build unless keep.lengths
  uint8_t next_header = kIpProtocolUdp;
  uint8_t hop_limit = 64;
  Ipv6Address src{};
  Ipv6Address dst{};
};

struct UdpHeader {
  uint16_t src_port = 0xC000;  // rxe: 0xC000 + a 14-bit hash of the QPN
  uint16_t dst_port = kRoceV2UdpPort;
  uint16_t length = 0;  // computed by Build unless keep.lengths
  // Written as given: RoCEv2 senders (rxe included) send 0 and receivers
  // ignore it; the ICRC protects the datagram.
  uint16_t checksum = 0;
};

// Base Transport Header (IBTA vol. 1 9.2), 12 bytes.
struct Bth {
  Opcode opcode = Opcode::kSendOnly;
  bool solicited_event = false;
  bool migration = false;         // "M"; rxe sets it
  uint8_t pad_count = 0;          // 2 bits; computed by Build unless keep.pad
  uint8_t transport_version = 0;  // 4 bits; must be 0
  uint16_t pkey = 0xFFFF;
  bool fecn = false;
  bool becn = false;      // RoCEv2 marks congestion in IP ECN, not here
  uint8_t reserved6 = 0;  // 6 bits after FECN/BECN
  uint32_t dest_qpn = 0;  // 24 bits
  bool ack_request = false;
  uint8_t reserved7 = 0;  // 7 bits after AckReq
  uint32_t psn = 0;       // 24 bits
};

struct Reth {  // RDMA extended transport header (9.3.3)
  uint64_t virtual_address = 0;
  uint32_t rkey = 0;
  uint32_t dma_length = 0;
};

struct Aeth {  // ACK extended transport header (9.3.5)
  uint8_t syndrome = 0;
  uint32_t msn = 0;  // 24 bits
  AethKind kind() const { return AethKindOf(syndrome); }
  uint8_t code() const { return syndrome & 0x1F; }  // credits / RNR timer / NAK code
};

struct AtomicEth {  // atomic extended transport header (9.3.6)
  uint64_t virtual_address = 0;
  uint32_t rkey = 0;
  uint64_t swap_add = 0;
  uint64_t compare = 0;
};

struct RoceFrame {
  EthernetHeader eth;
  std::optional<VlanTag> vlan;
  IpVersion ip_version = IpVersion::kIpv4;
  Ipv4Header ipv4;  // meaningful when ip_version == kIpv4
  Ipv6Header ipv6;  // meaningful when ip_version == kIpv6
  UdpHeader udp;
  Bth bth;
  // Extension headers: Build writes exactly those the opcode carries (see
  // FindOpcode) and fails when one the opcode needs is absent.
  std::optional<Reth> reth;
  std::optional<Aeth> aeth;
  std::optional<uint32_t> immdt;  // immediate data, host order
  std::optional<uint32_t> ieth;   // R_Key to invalidate
  std::optional<AtomicEth> atomic_eth;
  std::optional<uint64_t> atomic_ack_eth;  // original remote data
  std::span<const uint8_t> payload;
  std::span<const uint8_t> pad;  // written when keep.pad (bth.pad_count bytes)
  uint32_t icrc = 0;             // as a number; on the wire least significant byte first
  // Bytes after the IP datagram (Ethernet minimum-size padding), written as given.
  std::span<const uint8_t> trailer;

  // Which computed fields Build writes as given instead (all false: compute).
  struct Keep {
    bool lengths = false;      // ipv4.total_length / ipv6.payload_length, udp.length
    bool ip_checksum = false;  // ipv4.header_checksum
    bool pad = false;          // bth.pad_count and `pad`
    bool icrc = false;         // icrc
  } keep;
};
using FrameSpec = RoceFrame;

enum class ParseKind : uint8_t {
  kRoce,       // a RoCEv2 frame; `frame` is filled
  kNotRoce,    // a well-formed frame that is not RoCEv2 (ARP, TCP, other UDP)
  kMalformed,  // claims to be RoCEv2 (or IP) but is damaged
};

enum class ParseError : uint8_t {
  kNone,
  // not RoCE
  kNotIp,        // EtherType is not IPv4/IPv6 (after at most one VLAN tag)
  kNotUdp,       // IP protocol / next header is not UDP
  kNotRocePort,  // UDP destination port is not 4791
  kIpFragment,   // an IPv4 fragment: RoCEv2 is never fragmented
  // malformed
  kTruncated,            // the frame ends inside a header, or before the ICRC
  kBadIpVersion,         // version nibble disagrees with the EtherType
  kBadIpHeaderLength,    // IPv4 IHL < 5
  kBadIpChecksum,        // IPv4 header checksum does not verify
  kBadIpLength,          // IP length field disagrees with the frame
  kBadUdpLength,         // UDP length disagrees with the IP length
  kBadTransportVersion,  // BTH TVer is not 0
  kUnknownOpcode,        // not an RC opcode nor CNP
  kBadPadCount,          // pad count exceeds the payload
  kUnexpectedPayload,    // payload on an opcode that carries none
};
std::string_view ParseErrorName(ParseError e);  // "TRUNCATED", ...

struct ParseResult {
  ParseKind kind = ParseKind::kMalformed;
  ParseError error = ParseError::kNone;
  std::string_view message;  // static text describing `error`; empty for kRoce
  size_t error_offset = 0;   // byte offset in the frame where the problem is
  RoceFrame frame;           // complete only for kRoce
  // For kRoce: the frame's bytes from the IP header through the pad (what
  // the ICRC covers) and the IP header's length.
  std::span<const uint8_t> icrc_region;
  size_t ip_header_bytes = 0;

  bool ok() const { return kind == ParseKind::kRoce; }
};

// Parses one Ethernet frame (as captured: no FCS). Never fails in any other
// way than through the result's kind.
ParseResult Parse(std::span<const uint8_t> bytes);

// The ICRC over `icrc_region` (IP header through pad) whose IP header is
// `ip_header_bytes` long: CRC-32 (zlib) over 8 bytes of 0xFF and the region
// with the variant fields masked to ones (ROCEV2.md "ICRC").
uint32_t ComputeIcrc(IpVersion ip_version, std::span<const uint8_t> icrc_region,
                     size_t ip_header_bytes);
// The ICRC a parsed RoCE frame should carry, and whether it does.
uint32_t ComputeIcrc(const ParseResult& parsed);
bool IcrcOk(const ParseResult& parsed);

// The captured size Build would produce for `frame`.
size_t BuiltSize(const RoceFrame& frame);

// Writes `frame` into `out` and returns the number of bytes written.
// InvalidArgument when `out` is too small, an extension header the opcode
// needs is missing, a field is out of range, or a kept length is
// inconsistent; the message names the field and values.
StatusOr<size_t> Build(const RoceFrame& frame, std::span<uint8_t> out);

// The IPv4 header checksum (RFC 1071) of `header` with its checksum field
// counted as given; a correct header sums to 0.
uint16_t Ipv4Checksum(std::span<const uint8_t> header);

}  // namespace fathom::wire
