// The opcode table: IBTA vol. 1 table 38 for RC, annex A17.9.2 for CNP,
// cross-checked with the kernel's rxe_opcode.c (which headers each carries).
#include "fabric/wire/opcode.h"

#include <array>

namespace fathom::wire {
namespace {

struct Entry {
  bool known = false;
  OpcodeInfo info;
};

constexpr OpcodeInfo Info(std::string_view name, bool payload) {
  OpcodeInfo i;
  i.name = name;
  i.payload = payload;
  return i;
}

constexpr std::array<Entry, 256> MakeTable() {
  std::array<Entry, 256> t{};
  auto set = [&t](Opcode op, OpcodeInfo info) { t[static_cast<uint8_t>(op)] = Entry{true, info}; };
  OpcodeInfo i;
  set(Opcode::kSendFirst, Info("SEND_FIRST", true));
  set(Opcode::kSendMiddle, Info("SEND_MIDDLE", true));
  set(Opcode::kSendLast, Info("SEND_LAST", true));
  i = Info("SEND_LAST_WITH_IMMEDIATE", true);
  i.immdt = true;
  set(Opcode::kSendLastWithImmediate, i);
  set(Opcode::kSendOnly, Info("SEND_ONLY", true));
  i = Info("SEND_ONLY_WITH_IMMEDIATE", true);
  i.immdt = true;
  set(Opcode::kSendOnlyWithImmediate, i);
  i = Info("RDMA_WRITE_FIRST", true);
  i.reth = true;
  set(Opcode::kRdmaWriteFirst, i);
  set(Opcode::kRdmaWriteMiddle, Info("RDMA_WRITE_MIDDLE", true));
  set(Opcode::kRdmaWriteLast, Info("RDMA_WRITE_LAST", true));
  i = Info("RDMA_WRITE_LAST_WITH_IMMEDIATE", true);
  i.immdt = true;
  set(Opcode::kRdmaWriteLastWithImmediate, i);
  i = Info("RDMA_WRITE_ONLY", true);
  i.reth = true;
  set(Opcode::kRdmaWriteOnly, i);
  i = Info("RDMA_WRITE_ONLY_WITH_IMMEDIATE", true);
  i.reth = true;
  i.immdt = true;
  set(Opcode::kRdmaWriteOnlyWithImmediate, i);
  i = Info("RDMA_READ_REQUEST", false);
  i.reth = true;
  set(Opcode::kRdmaReadRequest, i);
  i = Info("RDMA_READ_RESPONSE_FIRST", true);
  i.aeth = true;
  set(Opcode::kRdmaReadResponseFirst, i);
  set(Opcode::kRdmaReadResponseMiddle, Info("RDMA_READ_RESPONSE_MIDDLE", true));
  i = Info("RDMA_READ_RESPONSE_LAST", true);
  i.aeth = true;
  set(Opcode::kRdmaReadResponseLast, i);
  i = Info("RDMA_READ_RESPONSE_ONLY", true);
  i.aeth = true;
  set(Opcode::kRdmaReadResponseOnly, i);
  i = Info("ACKNOWLEDGE", false);
  i.aeth = true;
  set(Opcode::kAcknowledge, i);
  i = Info("ATOMIC_ACKNOWLEDGE", false);
  i.aeth = true;
  i.atomic_ack_eth = true;
  set(Opcode::kAtomicAcknowledge, i);
  i = Info("COMPARE_SWAP", false);
  i.atomic_eth = true;
  set(Opcode::kCompareSwap, i);
  i = Info("FETCH_ADD", false);
  i.atomic_eth = true;
  set(Opcode::kFetchAdd, i);
  i = Info("SEND_LAST_WITH_INVALIDATE", true);
  i.ieth = true;
  set(Opcode::kSendLastWithInvalidate, i);
  i = Info("SEND_ONLY_WITH_INVALIDATE", true);
  i.ieth = true;
  set(Opcode::kSendOnlyWithInvalidate, i);
  // The CNP's 16 reserved bytes are carried as its payload.
  set(Opcode::kCnp, Info("CNP", true));
  return t;
}

constexpr std::array<Entry, 256> kTable = MakeTable();

constexpr std::array<uint8_t, 256> MakeExtensionBytes() {
  std::array<uint8_t, 256> t{};
  for (size_t op = 0; op < t.size(); ++op) {
    const Entry& e = kTable[op];
    if (!e.known) continue;
    const OpcodeInfo& i = e.info;
    t[op] = static_cast<uint8_t>((i.reth ? kRethBytes : 0) + (i.aeth ? kAethBytes : 0) +
                                 (i.immdt ? kImmDtBytes : 0) + (i.ieth ? kIethBytes : 0) +
                                 (i.atomic_eth ? kAtomicEthBytes : 0) +
                                 (i.atomic_ack_eth ? kAtomicAckEthBytes : 0));
  }
  return t;
}

}  // namespace

namespace internal {
constexpr std::array<uint8_t, 256> kExtensionHeaderBytes = MakeExtensionBytes();
}  // namespace internal

const OpcodeInfo* FindOpcode(uint8_t opcode) {
  const Entry& e = kTable[opcode];
  return e.known ? &e.info : nullptr;
}

std::string_view OpcodeName(uint8_t opcode) {
  const OpcodeInfo* info = FindOpcode(opcode);
  return info ? info->name : std::string_view("UNKNOWN");
}

size_t HeaderOverheadBytes(Opcode opcode, bool ipv6, bool vlan) {
  return kEthernetHeaderBytes + (vlan ? kVlanTagBytes : 0) +
         (ipv6 ? kIpv6HeaderBytes : kIpv4HeaderBytes) + kUdpHeaderBytes + kBthBytes +
         ExtensionHeaderBytes(opcode) + kIcrcBytes;
}

size_t FrameBytes(Opcode opcode, bool ipv6, bool vlan, size_t payload_bytes) {
  const size_t padded = (payload_bytes + 3) & ~size_t{3};
  return HeaderOverheadBytes(opcode, ipv6, vlan) + padded;
}

std::string_view NakCodeName(uint8_t code) {
  switch (code) {
    case 0:
      return "PSN_SEQUENCE_ERROR";
    case 1:
      return "INVALID_REQUEST";
    case 2:
      return "REMOTE_ACCESS_ERROR";
    case 3:
      return "REMOTE_OPERATIONAL_ERROR";
    case 4:
      return "INVALID_RD_REQUEST";
    default:
      return "RESERVED";
  }
}

}  // namespace fathom::wire
