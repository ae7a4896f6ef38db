// The RoCEv2 codec. Field layouts: IEEE 802.1Q, RFC 791, RFC 8200, RFC 768,
// IBTA vol. 1 9.2-9.3 (BTH and extension headers), annex A17 (RoCEv2, ICRC).
#include "fabric/wire/roce.h"

#include <zlib.h>

#include <cstring>
#include <string>

namespace fathom::wire {
namespace {

uint16_t Load16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
uint32_t Load24(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) << 16 | static_cast<uint32_t>(p[1]) << 8 | p[2];
}
uint32_t Load32(const uint8_t* p) { return static_cast<uint32_t>(p[0]) << 24 | Load24(p + 1); }
uint64_t Load64(const uint8_t* p) { return static_cast<uint64_t>(Load32(p)) << 32 | Load32(p + 4); }

void Store16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
void Store24(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 16);
  p[1] = static_cast<uint8_t>(v >> 8);
  p[2] = static_cast<uint8_t>(v);
}
void Store32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  Store24(p + 1, v);
}
void Store64(uint8_t* p, uint64_t v) {
  Store32(p, static_cast<uint32_t>(v >> 32));
  Store32(p + 4, static_cast<uint32_t>(v));
}

std::string_view ErrorMessage(ParseError e) {
  switch (e) {
    case ParseError::kNone:
      return "";
    case ParseError::kNotIp:
      return "EtherType is not IPv4 or IPv6";
    case ParseError::kNotUdp:
      return "IP payload is not UDP";
    case ParseError::kNotRocePort:
      return "UDP destination port is not 4791";
    case ParseError::kIpFragment:
      return "IPv4 fragment";
    case ParseError::kTruncated:
      return "frame ends inside a header or before the ICRC";
    case ParseError::kBadIpVersion:
      return "IP version disagrees with the EtherType";
    case ParseError::kBadIpHeaderLength:
      return "IPv4 header length below 20 bytes";
    case ParseError::kBadIpChecksum:
      return "IPv4 header checksum does not verify";
    case ParseError::kBadIpLength:
      return "IP length field too small for the UDP header";
    case ParseError::kBadUdpLength:
      return "UDP length disagrees with the IP length";
    case ParseError::kBadTransportVersion:
      return "BTH transport version is not 0";
    case ParseError::kUnknownOpcode:
      return "BTH opcode is neither an RC opcode nor CNP";
    case ParseError::kBadPadCount:
      return "BTH pad count exceeds the payload";
    case ParseError::kUnexpectedPayload:
      return "payload on an opcode that carries none";
  }
  return "unknown parse error";
}

ParseResult Reject(ParseKind kind, ParseError error, size_t offset) {
  ParseResult r;
  r.kind = kind;
  r.error = error;
  r.message = ErrorMessage(error);
  r.error_offset = offset;
  return r;
}
ParseResult Malformed(ParseError e, size_t offset) {
  return Reject(ParseKind::kMalformed, e, offset);
}
ParseResult NotRoce(ParseError e, size_t offset) { return Reject(ParseKind::kNotRoce, e, offset); }

Status FieldError(std::string_view field, uint64_t value, uint64_t max) {
  return InvalidArgument("wire::Build: " + std::string(field) + "=" + std::to_string(value) +
                         " exceeds " + std::to_string(max));
}

}  // namespace

std::string_view ParseErrorName(ParseError e) {
  switch (e) {
    case ParseError::kNone:
      return "NONE";
    case ParseError::kNotIp:
      return "NOT_IP";
    case ParseError::kNotUdp:
      return "NOT_UDP";
    case ParseError::kNotRocePort:
      return "NOT_ROCE_PORT";
    case ParseError::kIpFragment:
      return "IP_FRAGMENT";
    case ParseError::kTruncated:
      return "TRUNCATED";
    case ParseError::kBadIpVersion:
      return "BAD_IP_VERSION";
    case ParseError::kBadIpHeaderLength:
      return "BAD_IP_HEADER_LENGTH";
    case ParseError::kBadIpChecksum:
      return "BAD_IP_CHECKSUM";
    case ParseError::kBadIpLength:
      return "BAD_IP_LENGTH";
    case ParseError::kBadUdpLength:
      return "BAD_UDP_LENGTH";
    case ParseError::kBadTransportVersion:
      return "BAD_TRANSPORT_VERSION";
    case ParseError::kUnknownOpcode:
      return "UNKNOWN_OPCODE";
    case ParseError::kBadPadCount:
      return "BAD_PAD_COUNT";
    case ParseError::kUnexpectedPayload:
      return "UNEXPECTED_PAYLOAD";
  }
  return "UNKNOWN";
}

uint16_t Ipv4Checksum(std::span<const uint8_t> header) {
  uint32_t sum = 0;
  size_t i = 0;
  for (; i + 1 < header.size(); i += 2) sum += Load16(&header[i]);
  if (i < header.size()) sum += static_cast<uint32_t>(header[i]) << 8;
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

ParseResult Parse(std::span<const uint8_t> bytes) {
  const uint8_t* p = bytes.data();
  const size_t n = bytes.size();
  if (n < kEthernetHeaderBytes) return Malformed(ParseError::kTruncated, n);

  ParseResult r;
  RoceFrame& f = r.frame;
  std::memcpy(f.eth.dst.data(), p, 6);
  std::memcpy(f.eth.src.data(), p + 6, 6);
  uint16_t ethertype = Load16(p + 12);
  size_t off = kEthernetHeaderBytes;
  if (ethertype == kEthertypeVlan) {
    if (n < off + kVlanTagBytes) return Malformed(ParseError::kTruncated, n);
    const uint16_t tci = Load16(p + off);
    f.vlan = VlanTag{static_cast<uint8_t>(tci >> 13), ((tci >> 12) & 1) != 0,
                     static_cast<uint16_t>(tci & 0x0FFF)};
    ethertype = Load16(p + off + 2);
    off += kVlanTagBytes;
  }

  size_t ip_header_bytes = 0;
  size_t ip_end = 0;
  const size_t ip = off;
  if (ethertype == kEthertypeIpv4) {
    if (n < ip + kIpv4HeaderBytes) return Malformed(ParseError::kTruncated, n);
    if ((p[ip] >> 4) != 4) return Malformed(ParseError::kBadIpVersion, ip);
    ip_header_bytes = static_cast<size_t>(p[ip] & 0x0F) * 4;
    if (ip_header_bytes < kIpv4HeaderBytes) return Malformed(ParseError::kBadIpHeaderLength, ip);
    if (n < ip + ip_header_bytes) return Malformed(ParseError::kTruncated, n);
    Ipv4Header& h = f.ipv4;
    f.ip_version = IpVersion::kIpv4;
    h.dscp = p[ip + 1] >> 2;
    h.ecn = p[ip + 1] & 3;
    h.total_length = Load16(p + ip + 2);
    h.identification = Load16(p + ip + 4);
    h.flags = p[ip + 6] >> 5;
    h.fragment_offset = Load16(p + ip + 6) & 0x1FFF;
    h.ttl = p[ip + 8];
    h.protocol = p[ip + 9];
    h.header_checksum = Load16(p + ip + 10);
    std::memcpy(h.src.data(), p + ip + 12, 4);
    std::memcpy(h.dst.data(), p + ip + 16, 4);
    h.options = bytes.subspan(ip + kIpv4HeaderBytes, ip_header_bytes - kIpv4HeaderBytes);
    if (h.protocol != kIpProtocolUdp) return NotRoce(ParseError::kNotUdp, ip + 9);
    if ((h.flags & 1) != 0 || h.fragment_offset != 0) {
      return NotRoce(ParseError::kIpFragment, ip + 6);
    }
    if (h.total_length < ip_header_bytes + kUdpHeaderBytes) {
      return Malformed(ParseError::kBadIpLength, ip + 2);
    }
    ip_end = ip + h.total_length;
  } else if (ethertype == kEthertypeIpv6) {
    if (n < ip + kIpv6HeaderBytes) return Malformed(ParseError::kTruncated, n);
    if ((p[ip] >> 4) != 6) return Malformed(ParseError::kBadIpVersion, ip);
    ip_header_bytes = kIpv6HeaderBytes;
    Ipv6Header& h = f.ipv6;
    f.ip_version = IpVersion::kIpv6;
    const uint32_t word = Load32(p + ip);
    h.traffic_class = static_cast<uint8_t>(word >> 20);
    h.flow_label = word & 0xFFFFF;
    h.payload_length = Load16(p + ip + 4);
    h.next_header = p[ip + 6];
    h.hop_limit = p[ip + 7];
    std::memcpy(h.src.data(), p + ip + 8, 16);
    std::memcpy(h.dst.data(), p + ip + 24, 16);
    // Extension headers (hop-by-hop etc.) never precede RoCEv2's UDP.
    if (h.next_header != kIpProtocolUdp) return NotRoce(ParseError::kNotUdp, ip + 6);
    if (h.payload_length < kUdpHeaderBytes) return Malformed(ParseError::kBadIpLength, ip + 4);
    ip_end = ip + kIpv6HeaderBytes + h.payload_length;
  } else {
    return NotRoce(ParseError::kNotIp, off - 2);
  }
  if (ip_end > n) return Malformed(ParseError::kTruncated, n);

  const size_t udp = ip + ip_header_bytes;
  f.udp.src_port = Load16(p + udp);
  f.udp.dst_port = Load16(p + udp + 2);
  f.udp.length = Load16(p + udp + 4);
  f.udp.checksum = Load16(p + udp + 6);
  if (f.udp.dst_port != kRoceV2UdpPort) return NotRoce(ParseError::kNotRocePort, udp + 2);
  if (f.ip_version == IpVersion::kIpv4 && Ipv4Checksum(bytes.subspan(ip, ip_header_bytes)) != 0) {
    return Malformed(ParseError::kBadIpChecksum, ip + 10);
  }
  if (f.udp.length != ip_end - udp) return Malformed(ParseError::kBadUdpLength, udp + 4);

  const size_t bth = udp + kUdpHeaderBytes;
  if (bth + kBthBytes + kIcrcBytes > ip_end) return Malformed(ParseError::kTruncated, ip_end);
  const OpcodeInfo* info = FindOpcode(p[bth]);
  if (info == nullptr) return Malformed(ParseError::kUnknownOpcode, bth);
  Bth& b = f.bth;
  b.opcode = static_cast<Opcode>(p[bth]);
  b.solicited_event = (p[bth + 1] & 0x80) != 0;
  b.migration = (p[bth + 1] & 0x40) != 0;
  b.pad_count = (p[bth + 1] >> 4) & 3;
  b.transport_version = p[bth + 1] & 0x0F;
  if (b.transport_version != 0) return Malformed(ParseError::kBadTransportVersion, bth + 1);
  b.pkey = Load16(p + bth + 2);
  b.fecn = (p[bth + 4] & 0x80) != 0;
  b.becn = (p[bth + 4] & 0x40) != 0;
  b.reserved6 = p[bth + 4] & 0x3F;
  b.dest_qpn = Load24(p + bth + 5);
  b.ack_request = (p[bth + 8] & 0x80) != 0;
  b.reserved7 = p[bth + 8] & 0x7F;
  b.psn = Load24(p + bth + 9);

  const size_t icrc_at = ip_end - kIcrcBytes;
  size_t e = bth + kBthBytes;
  if (e + ExtensionHeaderBytes(b.opcode) > icrc_at) return Malformed(ParseError::kTruncated, e);
  // Order of extension headers: IBTA vol. 1 9.2 / rxe_opcode.c offsets.
  if (info->reth) {
    f.reth = Reth{Load64(p + e), Load32(p + e + 8), Load32(p + e + 12)};
    e += kRethBytes;
  }
  if (info->atomic_eth) {
    f.atomic_eth =
        AtomicEth{Load64(p + e), Load32(p + e + 8), Load64(p + e + 12), Load64(p + e + 20)};
    e += kAtomicEthBytes;
  }
  if (info->aeth) {
    f.aeth = Aeth{p[e], Load24(p + e + 1)};
    e += kAethBytes;
  }
  if (info->atomic_ack_eth) {
    f.atomic_ack_eth = Load64(p + e);
    e += kAtomicAckEthBytes;
  }
  if (info->immdt) {
    f.immdt = Load32(p + e);
    e += kImmDtBytes;
  }
  if (info->ieth) {
    f.ieth = Load32(p + e);
    e += kIethBytes;
  }

  const size_t data_bytes = icrc_at - e;
  if (!info->payload && data_bytes != 0) return Malformed(ParseError::kUnexpectedPayload, e);
  if (b.pad_count > data_bytes) return Malformed(ParseError::kBadPadCount, bth + 1);
  f.payload = bytes.subspan(e, data_bytes - b.pad_count);
  f.pad = bytes.subspan(e + data_bytes - b.pad_count, b.pad_count);
  f.icrc = static_cast<uint32_t>(p[icrc_at]) | static_cast<uint32_t>(p[icrc_at + 1]) << 8 |
           static_cast<uint32_t>(p[icrc_at + 2]) << 16 |
           static_cast<uint32_t>(p[icrc_at + 3]) << 24;
  f.trailer = bytes.subspan(ip_end);
  f.keep = RoceFrame::Keep{true, true, true, true};

  r.kind = ParseKind::kRoce;
  r.icrc_region = bytes.subspan(ip, icrc_at - ip);
  r.ip_header_bytes = ip_header_bytes;
  return r;
}

uint32_t ComputeIcrc(IpVersion ip_version, std::span<const uint8_t> region,
                     size_t ip_header_bytes) {
  // Bounds: the masked copies below need the whole IP header, UDP and BTH.
  if (ip_header_bytes > 60 || region.size() < ip_header_bytes + kUdpHeaderBytes + kBthBytes) {
    return 0;
  }
  static constexpr uint8_t kLrhOnes[8] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, kLrhOnes, sizeof(kLrhOnes));

  // Variant fields masked to ones (IBTA annex A17.3.3; rxe_icrc.c).
  uint8_t head[60 + kUdpHeaderBytes + kBthBytes];
  const size_t head_bytes = ip_header_bytes + kUdpHeaderBytes + kBthBytes;
  std::memcpy(head, region.data(), head_bytes);
  if (ip_version == IpVersion::kIpv4) {
    head[1] = 0xFF;              // TOS: DSCP and ECN
    head[8] = 0xFF;              // TTL
    head[10] = head[11] = 0xFF;  // header checksum
  } else {
    head[0] |= 0x0F;                     // traffic class, high nibble
    head[1] = head[2] = head[3] = 0xFF;  // traffic class low nibble + flow label
    head[7] = 0xFF;                      // hop limit
  }
  uint8_t* udp = head + ip_header_bytes;
  udp[6] = udp[7] = 0xFF;           // UDP checksum
  udp[kUdpHeaderBytes + 4] = 0xFF;  // BTH FECN, BECN, resv6
  crc = crc32(crc, head, static_cast<uInt>(head_bytes));
  const std::span<const uint8_t> rest = region.subspan(head_bytes);
  crc = crc32(crc, rest.data(), static_cast<uInt>(rest.size()));
  return static_cast<uint32_t>(crc);
}

uint32_t ComputeIcrc(const ParseResult& parsed) {
  return ComputeIcrc(parsed.frame.ip_version, parsed.icrc_region, parsed.ip_header_bytes);
}

bool IcrcOk(const ParseResult& parsed) {
  return parsed.ok() && ComputeIcrc(parsed) == parsed.frame.icrc;
}

namespace {

size_t PadCount(const RoceFrame& f) {
  return f.keep.pad ? f.bth.pad_count : (4 - f.payload.size() % 4) % 4;
}
size_t IpHeaderBytes(const RoceFrame& f) {
  return f.ip_version == IpVersion::kIpv4 ? kIpv4HeaderBytes + f.ipv4.options.size()
                                          : kIpv6HeaderBytes;
}
size_t UdpBytes(const RoceFrame& f) {
  return kUdpHeaderBytes + kBthBytes + ExtensionHeaderBytes(f.bth.opcode) + f.payload.size() +
         PadCount(f) + kIcrcBytes;
}

Status CheckFields(const RoceFrame& f, const OpcodeInfo& info) {
  if (f.vlan) {
    if (f.vlan->pcp > 7) return FieldError("vlan.pcp", f.vlan->pcp, 7);
    if (f.vlan->vid > 0xFFF) return FieldError("vlan.vid", f.vlan->vid, 0xFFF);
  }
  if (f.ip_version == IpVersion::kIpv4) {
    const Ipv4Header& h = f.ipv4;
    if (h.dscp > 63) return FieldError("ipv4.dscp", h.dscp, 63);
    if (h.ecn > 3) return FieldError("ipv4.ecn", h.ecn, 3);
    if (h.flags > 7) return FieldError("ipv4.flags", h.flags, 7);
    if (h.fragment_offset > 0x1FFF)
      return FieldError("ipv4.fragment_offset", h.fragment_offset, 0x1FFF);
    if (h.options.size() > 40 || h.options.size() % 4 != 0) {
      return InvalidArgument("wire::Build: ipv4.options is " + std::to_string(h.options.size()) +
                             " bytes; must be a multiple of 4 up to 40");
    }
  } else if (f.ip_version == IpVersion::kIpv6) {
    if (f.ipv6.flow_label > 0xFFFFF)
      return FieldError("ipv6.flow_label", f.ipv6.flow_label, 0xFFFFF);
  } else {
    return InvalidArgument("wire::Build: ip_version=" +
                           std::to_string(static_cast<int>(f.ip_version)) + " is not 4 or 6");
  }
  const Bth& b = f.bth;
  if (b.pad_count > 3) return FieldError("bth.pad_count", b.pad_count, 3);
  if (b.transport_version > 15) return FieldError("bth.transport_version", b.transport_version, 15);
  if (b.reserved6 > 63) return FieldError("bth.reserved6", b.reserved6, 63);
  if (b.dest_qpn > 0xFFFFFF) return FieldError("bth.dest_qpn", b.dest_qpn, 0xFFFFFF);
  if (b.reserved7 > 127) return FieldError("bth.reserved7", b.reserved7, 127);
  if (b.psn > 0xFFFFFF) return FieldError("bth.psn", b.psn, 0xFFFFFF);
  if (f.keep.pad && f.pad.size() != b.pad_count) {
    return InvalidArgument(
        "wire::Build: keep.pad with bth.pad_count=" + std::to_string(b.pad_count) + " but pad is " +
        std::to_string(f.pad.size()) + " bytes");
  }
  auto missing = [&](std::string_view header) {
    return InvalidArgument("wire::Build: opcode " + std::string(info.name) + " needs " +
                           std::string(header));
  };
  if (info.reth && !f.reth) return missing("reth");
  if (info.atomic_eth && !f.atomic_eth) return missing("atomic_eth");
  if (info.aeth && !f.aeth) return missing("aeth");
  if (info.aeth && f.aeth->msn > 0xFFFFFF) return FieldError("aeth.msn", f.aeth->msn, 0xFFFFFF);
  if (info.atomic_ack_eth && !f.atomic_ack_eth) return missing("atomic_ack_eth");
  if (info.immdt && !f.immdt) return missing("immdt");
  if (info.ieth && !f.ieth) return missing("ieth");
  if (!info.payload && !f.payload.empty()) {
    return InvalidArgument("wire::Build: opcode " + std::string(info.name) +
                           " carries no payload but payload is " +
                           std::to_string(f.payload.size()) + " bytes");
  }
  if (UdpBytes(f) > 0xFFFF - IpHeaderBytes(f)) {
    return InvalidArgument("wire::Build: payload of " + std::to_string(f.payload.size()) +
                           " bytes does not fit an IP datagram");
  }
  return Status::Ok();
}

}  // namespace

size_t BuiltSize(const RoceFrame& f) {
  return kEthernetHeaderBytes + (f.vlan ? kVlanTagBytes : 0) + IpHeaderBytes(f) + UdpBytes(f) +
         f.trailer.size();
}

StatusOr<size_t> Build(const RoceFrame& f, std::span<uint8_t> out) {
  const OpcodeInfo* info = FindOpcode(f.bth.opcode);
  if (info == nullptr) {
    return InvalidArgument("wire::Build: bth.opcode=" +
                           std::to_string(static_cast<int>(f.bth.opcode)) + " is unknown");
  }
  FATHOM_RETURN_IF_ERROR(CheckFields(f, *info));
  const size_t total = BuiltSize(f);
  if (out.size() < total) {
    return InvalidArgument("wire::Build: frame needs " + std::to_string(total) +
                           " bytes, buffer has " + std::to_string(out.size()));
  }
  uint8_t* p = out.data();
  std::memcpy(p, f.eth.dst.data(), 6);
  std::memcpy(p + 6, f.eth.src.data(), 6);
  size_t off = 12;
  if (f.vlan) {
    Store16(p + off, kEthertypeVlan);
    Store16(p + off + 2,
            static_cast<uint16_t>(f.vlan->pcp << 13 | (f.vlan->dei ? 1 : 0) << 12 | f.vlan->vid));
    off += kVlanTagBytes;
  }
  const bool v4 = f.ip_version == IpVersion::kIpv4;
  Store16(p + off, v4 ? kEthertypeIpv4 : kEthertypeIpv6);
  off += 2;

  const size_t ip = off;
  const size_t ip_header_bytes = IpHeaderBytes(f);
  const size_t udp_bytes = UdpBytes(f);
  if (v4) {
    const Ipv4Header& h = f.ipv4;
    p[ip] = static_cast<uint8_t>(0x40 | ip_header_bytes / 4);
    p[ip + 1] = static_cast<uint8_t>(h.dscp << 2 | h.ecn);
    Store16(p + ip + 2,
            f.keep.lengths ? h.total_length : static_cast<uint16_t>(ip_header_bytes + udp_bytes));
    Store16(p + ip + 4, h.identification);
    Store16(p + ip + 6, static_cast<uint16_t>(h.flags << 13 | h.fragment_offset));
    p[ip + 8] = h.ttl;
    p[ip + 9] = h.protocol;
    Store16(p + ip + 10, 0);
    std::memcpy(p + ip + 12, h.src.data(), 4);
    std::memcpy(p + ip + 16, h.dst.data(), 4);
    if (!h.options.empty()) std::memcpy(p + ip + 20, h.options.data(), h.options.size());
    const uint16_t sum = f.keep.ip_checksum
                             ? h.header_checksum
                             : Ipv4Checksum(std::span<const uint8_t>(p + ip, ip_header_bytes));
    Store16(p + ip + 10, sum);
  } else {
    const Ipv6Header& h = f.ipv6;
    Store32(p + ip, 6u << 28 | static_cast<uint32_t>(h.traffic_class) << 20 | h.flow_label);
    Store16(p + ip + 4, f.keep.lengths ? h.payload_length : static_cast<uint16_t>(udp_bytes));
    p[ip + 6] = h.next_header;
    p[ip + 7] = h.hop_limit;
    std::memcpy(p + ip + 8, h.src.data(), 16);
    std::memcpy(p + ip + 24, h.dst.data(), 16);
  }

  const size_t udp = ip + ip_header_bytes;
  Store16(p + udp, f.udp.src_port);
  Store16(p + udp + 2, f.udp.dst_port);
  Store16(p + udp + 4, f.keep.lengths ? f.udp.length : static_cast<uint16_t>(udp_bytes));
  Store16(p + udp + 6, f.udp.checksum);

  const Bth& b = f.bth;
  const size_t pad = PadCount(f);
  uint8_t* t = p + udp + kUdpHeaderBytes;
  t[0] = static_cast<uint8_t>(b.opcode);
  t[1] = static_cast<uint8_t>((b.solicited_event ? 0x80 : 0) | (b.migration ? 0x40 : 0) | pad << 4 |
                              b.transport_version);
  Store16(t + 2, b.pkey);
  t[4] = static_cast<uint8_t>((b.fecn ? 0x80 : 0) | (b.becn ? 0x40 : 0) | b.reserved6);
  Store24(t + 5, b.dest_qpn);
  t[8] = static_cast<uint8_t>((b.ack_request ? 0x80 : 0) | b.reserved7);
  Store24(t + 9, b.psn);
  size_t e = kBthBytes;
  if (info->reth) {
    Store64(t + e, f.reth->virtual_address);
    Store32(t + e + 8, f.reth->rkey);
    Store32(t + e + 12, f.reth->dma_length);
    e += kRethBytes;
  }
  if (info->atomic_eth) {
    Store64(t + e, f.atomic_eth->virtual_address);
    Store32(t + e + 8, f.atomic_eth->rkey);
    Store64(t + e + 12, f.atomic_eth->swap_add);
    Store64(t + e + 20, f.atomic_eth->compare);
    e += kAtomicEthBytes;
  }
  if (info->aeth) {
    t[e] = f.aeth->syndrome;
    Store24(t + e + 1, f.aeth->msn);
    e += kAethBytes;
  }
  if (info->atomic_ack_eth) {
    Store64(t + e, *f.atomic_ack_eth);
    e += kAtomicAckEthBytes;
  }
  if (info->immdt) {
    Store32(t + e, *f.immdt);
    e += kImmDtBytes;
  }
  if (info->ieth) {
    Store32(t + e, *f.ieth);
    e += kIethBytes;
  }
  if (!f.payload.empty()) std::memcpy(t + e, f.payload.data(), f.payload.size());
  e += f.payload.size();
  if (f.keep.pad) {
    if (pad != 0) std::memcpy(t + e, f.pad.data(), pad);
  } else {
    std::memset(t + e, 0, pad);
  }
  e += pad;

  const size_t icrc_at = udp + kUdpHeaderBytes + e;
  const uint32_t icrc =
      f.keep.icrc ? f.icrc
                  : ComputeIcrc(f.ip_version, std::span<const uint8_t>(p + ip, icrc_at - ip),
                                ip_header_bytes);
  p[icrc_at] = static_cast<uint8_t>(icrc);
  p[icrc_at + 1] = static_cast<uint8_t>(icrc >> 8);
  p[icrc_at + 2] = static_cast<uint8_t>(icrc >> 16);
  p[icrc_at + 3] = static_cast<uint8_t>(icrc >> 24);
  const size_t end = icrc_at + kIcrcBytes;
  if (!f.trailer.empty()) std::memcpy(p + end, f.trailer.data(), f.trailer.size());
  return end + f.trailer.size();
}

}  // namespace fathom::wire
