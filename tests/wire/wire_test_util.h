// Helpers shared by the fabric/wire tests: the capture's frames, and a
// complete frame description for every opcode.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "fabric/wire/pcap.h"
#include "fabric/wire/roce.h"

namespace fathom::wire::testing {

inline std::string CapturePath() {
  return std::string(FATHOM_TESTDATA_DIR) + "/rxe-send-ipv4.pcap";
}

struct CapturedFrame {
  int64_t timestamp_ns;
  std::vector<uint8_t> bytes;
};

inline std::vector<CapturedFrame> ReadAll(const std::string& path) {
  std::vector<CapturedFrame> frames;
  auto reader = PcapReader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status().ToString();
  if (!reader.ok()) return frames;
  PcapRecord record;
  while (true) {
    auto more = (*reader)->Next(&record);
    EXPECT_TRUE(more.ok()) << more.status().ToString();
    if (!more.ok() || !*more) break;
    frames.push_back({record.timestamp_ns, {record.data.begin(), record.data.end()}});
  }
  return frames;
}

// Every opcode the codec knows.
inline std::vector<Opcode> AllOpcodes() {
  std::vector<Opcode> ops;
  for (int v = 0; v < 256; ++v) {
    if (FindOpcode(static_cast<uint8_t>(v)) != nullptr) ops.push_back(static_cast<Opcode>(v));
  }
  return ops;
}

// A frame of `opcode` with every header it needs filled with distinct values
// derived from `seed`, and `payload` when the opcode carries one.
inline RoceFrame MakeFrame(Opcode opcode, bool ipv6, bool vlan, std::span<const uint8_t> payload,
                           uint32_t seed = 1) {
  RoceFrame f;
  f.eth.dst = {0x02, 0, 0, 0, 0, static_cast<uint8_t>(seed)};
  f.eth.src = {0x02, 0, 0, 0, 1, static_cast<uint8_t>(seed)};
  if (vlan) f.vlan = VlanTag{3, false, static_cast<uint16_t>(100 + seed % 3000)};
  if (ipv6) {
    f.ip_version = IpVersion::kIpv6;
    f.ipv6.traffic_class = 0x68;
    f.ipv6.flow_label = 0x12345;
    f.ipv6.src = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    f.ipv6.dst = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
  } else {
    f.ipv4.dscp = 26;
    f.ipv4.identification = static_cast<uint16_t>(seed);
    f.ipv4.src = {192, 0, 2, 1};
    f.ipv4.dst = {192, 0, 2, 2};
  }
  f.udp.src_port = static_cast<uint16_t>(0xC000 | (seed & 0x3FFF));
  f.bth.opcode = opcode;
  f.bth.migration = true;
  f.bth.dest_qpn = 0x000011 + seed;
  f.bth.ack_request = true;
  f.bth.psn = (0xFFFFF0 + seed) & 0xFFFFFF;
  const OpcodeInfo* info = FindOpcode(opcode);
  if (info->reth) f.reth = Reth{0x7f0000001000ull + seed, 0x1234 + seed, 4096};
  if (info->atomic_eth) f.atomic_eth = AtomicEth{0x7f0000002000ull, 0x55, 7 + seed, 9};
  if (info->aeth) f.aeth = Aeth{0x1F, 100 + seed};
  if (info->atomic_ack_eth) f.atomic_ack_eth = 0x0102030405060708ull;
  if (info->immdt) f.immdt = 0xCAFE0000 + seed;
  if (info->ieth) f.ieth = 0xBEEF + seed;
  if (info->payload) f.payload = payload;
  return f;
}

}  // namespace fathom::wire::testing
