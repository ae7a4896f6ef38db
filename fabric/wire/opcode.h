// RoCEv2 BTH opcodes: the RC opcodes and CNP, their names (as Wireshark and
// ROCEV2.md spell them) and which extension headers each one carries (IBTA
// vol. 1 9.2 and table 38; kernel rxe_opcode.c). Header sizes per opcode let
// the simulator charge exact wire bytes without building frames.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace fathom::wire {

enum class Opcode : uint8_t {
  kSendFirst = 0x00,
  kSendMiddle = 0x01,
  kSendLast = 0x02,
  kSendLastWithImmediate = 0x03,
  kSendOnly = 0x04,
  kSendOnlyWithImmediate = 0x05,
  kRdmaWriteFirst = 0x06,
  kRdmaWriteMiddle = 0x07,
  kRdmaWriteLast = 0x08,
  kRdmaWriteLastWithImmediate = 0x09,
  kRdmaWriteOnly = 0x0A,
  kRdmaWriteOnlyWithImmediate = 0x0B,
  kRdmaReadRequest = 0x0C,
  kRdmaReadResponseFirst = 0x0D,
  kRdmaReadResponseMiddle = 0x0E,
  kRdmaReadResponseLast = 0x0F,
  kRdmaReadResponseOnly = 0x10,
  kAcknowledge = 0x11,
  kAtomicAcknowledge = 0x12,
  kCompareSwap = 0x13,
  kFetchAdd = 0x14,
  kSendLastWithInvalidate = 0x16,
  kSendOnlyWithInvalidate = 0x17,
  kCnp = 0x81,  // RoCEv2 congestion notification packet (annex A17.9.2)
};

// Extension header sizes in bytes (IBTA vol. 1 9.3).
inline constexpr size_t kEthernetHeaderBytes = 14;
inline constexpr size_t kVlanTagBytes = 4;
inline constexpr size_t kIpv4HeaderBytes = 20;  // without options
inline constexpr size_t kIpv6HeaderBytes = 40;
inline constexpr size_t kUdpHeaderBytes = 8;
inline constexpr size_t kBthBytes = 12;
inline constexpr size_t kRethBytes = 16;
inline constexpr size_t kAethBytes = 4;
inline constexpr size_t kImmDtBytes = 4;
inline constexpr size_t kIethBytes = 4;
inline constexpr size_t kAtomicEthBytes = 28;
inline constexpr size_t kAtomicAckEthBytes = 8;
inline constexpr size_t kIcrcBytes = 4;
// A CNP carries 16 reserved bytes after the BTH (annex A17.9.2).
inline constexpr size_t kCnpReservedBytes = 16;
// On the wire but not in a capture: preamble + SFD (8), FCS (4) and the
// minimum inter-packet gap (12). The simulator adds these to serialization.
inline constexpr size_t kEthernetWireExtraBytes = 24;
// Of those, what a port's byte counters (port_xmit_data, as IB's
// PortXmitData) leave out: preamble + SFD and the gap; the FCS counts.
inline constexpr size_t kPreambleSfdGapBytes = 20;
inline constexpr uint16_t kRoceV2UdpPort = 4791;

// What an opcode's packet carries after the BTH. `payload` is false for
// opcodes whose packets never carry data (ACKs, read requests, atomics).
struct OpcodeInfo {
  std::string_view name;  // "SEND_FIRST", "RDMA_WRITE_ONLY", "CNP", ...
  bool reth = false;
  bool aeth = false;
  bool immdt = false;
  bool ieth = false;
  bool atomic_eth = false;
  bool atomic_ack_eth = false;
  bool payload = false;
};

// The table entry for `opcode`, or nullptr when fathom does not know it
// (UC/RD/UD opcodes and reserved values).
const OpcodeInfo* FindOpcode(uint8_t opcode);
inline const OpcodeInfo* FindOpcode(Opcode opcode) {
  return FindOpcode(static_cast<uint8_t>(opcode));
}

// "SEND_FIRST" etc.; "UNKNOWN" for an opcode not in the table.
std::string_view OpcodeName(uint8_t opcode);
inline std::string_view OpcodeName(Opcode opcode) {
  return OpcodeName(static_cast<uint8_t>(opcode));
}

// Bytes of extension headers after the BTH for `opcode` (0 for unknown):
// one load from a table made from the opcode table, since the simulator
// asks for every packet it sends.
namespace internal {
extern const std::array<uint8_t, 256> kExtensionHeaderBytes;
}  // namespace internal
inline size_t ExtensionHeaderBytes(Opcode opcode) {
  return internal::kExtensionHeaderBytes[static_cast<uint8_t>(opcode)];
}

// Bytes of everything in a captured frame except payload and pad: Ethernet
// (+ VLAN tag), IPv4 without options or IPv6, UDP, BTH, extension headers,
// ICRC. Excludes kEthernetWireExtraBytes.
size_t HeaderOverheadBytes(Opcode opcode, bool ipv6, bool vlan);

// The captured length of a frame with `payload_bytes` of payload: overhead +
// payload + pad to a multiple of 4.
size_t FrameBytes(Opcode opcode, bool ipv6, bool vlan, size_t payload_bytes);

// Bytes the frame occupies on the wire, including preamble, FCS and IPG,
// for serialization-time arithmetic.
inline size_t WireOverheadBytes(Opcode opcode, bool ipv6, bool vlan) {
  return HeaderOverheadBytes(opcode, ipv6, vlan) + kEthernetWireExtraBytes;
}

// AETH syndrome (IBTA vol. 1 9.3.5, table 42): bits 7..5 say what it is.
enum class AethKind : uint8_t { kAck, kRnrNak, kNak, kReserved };
inline constexpr AethKind AethKindOf(uint8_t syndrome) {
  switch (syndrome >> 5) {
    case 0b000:
      return AethKind::kAck;
    case 0b001:
      return AethKind::kRnrNak;
    case 0b011:
      return AethKind::kNak;
    default:
      return AethKind::kReserved;
  }
}
// NAK codes (low 5 bits of a NAK syndrome).
enum class NakCode : uint8_t {
  kPsnSequenceError = 0,
  kInvalidRequest = 1,
  kRemoteAccessError = 2,
  kRemoteOperationalError = 3,
  kInvalidRdRequest = 4,
};
inline constexpr uint8_t kAethCreditsUnlimited = 0x1F;
// Whole syndromes as a responder sends them.
inline constexpr uint8_t kAethAck = kAethCreditsUnlimited;  // ACK, unlimited credits
inline constexpr uint8_t kAethRnrNak = 0b001 << 5;          // | 5-bit RNR timer code
constexpr uint8_t AethNak(NakCode code) { return 0b011 << 5 | static_cast<uint8_t>(code); }
inline constexpr uint8_t kAethNakSeq = AethNak(NakCode::kPsnSequenceError);
inline constexpr uint8_t kAethNakInvalid = AethNak(NakCode::kInvalidRequest);
inline constexpr uint8_t kAethNakAccess = AethNak(NakCode::kRemoteAccessError);
inline constexpr uint8_t kAethNakOperational = AethNak(NakCode::kRemoteOperationalError);
// "PSN_SEQUENCE_ERROR", ...; "RESERVED" for codes 5..31.
std::string_view NakCodeName(uint8_t code);

}  // namespace fathom::wire
