// Frames built by the codec (every opcode; IPv4 and IPv6; with and without
// a VLAN tag) are written to a pcap and dissected by Wireshark's tshark,
// field by field: an independent check of the byte layout. Skips when tshark
// is not installed (scripts/setup.sh installs it in CI).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "fabric/wire/pcap.h"
#include "fabric/wire/roce.h"
#include "tests/scratch_dir.h"
#include "tests/wire/wire_test_util.h"

namespace fathom::wire {
namespace {

bool HaveTshark() { return std::system("tshark --version >/dev/null 2>&1") == 0; }

std::vector<std::string> Split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, sep)) out.push_back(cell);
  if (!line.empty() && line.back() == sep) out.emplace_back();
  return out;
}

uint64_t Num(const std::string& s) { return std::strtoull(s.c_str(), nullptr, 0); }
// ImmDt and IETH are shown as bare hex bytes ("cafe000d").
uint64_t Hex(const std::string& s) { return std::strtoull(s.c_str(), nullptr, 16); }

// The fields compared, in order.
const char* const kFields[] = {
    "vlan.id",                            // 0
    "vlan.priority",                      // 1
    "ip.src",                             // 2
    "ipv6.src",                           // 3
    "udp.dstport",                        // 4
    "infiniband.bth.opcode",              // 5
    "infiniband.bth.destqp",              // 6
    "infiniband.bth.psn",                 // 7
    "infiniband.bth.a",                   // 8
    "infiniband.bth.padcnt",              // 9
    "infiniband.bth.m",                   // 10
    "infiniband.bth.p_key",               // 11
    "infiniband.reth.va",                 // 12
    "infiniband.reth.r_key",              // 13
    "infiniband.reth.dmalen",             // 14
    "infiniband.aeth.syndrome",           // 15
    "infiniband.aeth.msn",                // 16
    "infiniband.immdt",                   // 17
    "infiniband.ieth",                    // 18
    "infiniband.atomiceth.swapdt",        // 19
    "infiniband.atomiceth.cmpdt",         // 20
    "infiniband.atomicacketh.origremdt",  // 21
};

TEST(TsharkTest, CodecFramesDissectFieldByField) {
  if (!HaveTshark()) GTEST_SKIP() << "tshark not installed (scripts/setup.sh installs it)";
  test_util::ScratchDir tmp;
  const std::string pcap = tmp.File("tshark.pcap");
  const std::string out = pcap + ".txt";

  std::vector<uint8_t> payload(33);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i);
  std::vector<RoceFrame> specs;
  {
    auto writer = PcapWriter::Open(pcap, /*nanosecond=*/true);
    ASSERT_TRUE(writer.ok()) << writer.status().ToString();
    std::vector<uint8_t> buf(512);
    uint32_t seed = 1;
    for (Opcode op : testing::AllOpcodes()) {
      for (bool ipv6 : {false, true}) {
        for (bool vlan : {false, true}) {
          specs.push_back(testing::MakeFrame(op, ipv6, vlan, payload, seed++));
          auto n = Build(specs.back(), buf);
          ASSERT_TRUE(n.ok()) << n.status().ToString();
          ASSERT_TRUE((*writer)->Write(std::span(buf.data(), *n), 1000 * seed).ok());
        }
      }
    }
  }
  // tshark refuses nothing as root here, but its Lua console can warn; -n
  // avoids name resolution, and decoding UDP 4791 as RoCE is the default.
  std::string cmd = "tshark -n -r " + pcap + " -T fields -E separator=/t -E occurrence=f";
  for (const char* f : kFields) cmd += std::string(" -e ") + f;
  cmd += " > " + out + " 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;

  FILE* file = std::fopen(out.c_str(), "r");
  ASSERT_NE(file, nullptr);
  std::vector<std::string> lines;
  char line[4096];
  while (std::fgets(line, sizeof(line), file) != nullptr) {
    std::string s(line);
    if (!s.empty() && s.back() == '\n') s.pop_back();
    lines.push_back(s);
  }
  std::fclose(file);
  ASSERT_EQ(lines.size(), specs.size());

  for (size_t i = 0; i < specs.size(); ++i) {
    const RoceFrame& f = specs[i];
    SCOPED_TRACE("frame " + std::to_string(i + 1) + " " + std::string(OpcodeName(f.bth.opcode)) +
                 ": " + lines[i]);
    const auto c = Split(lines[i], '\t');
    ASSERT_EQ(c.size(), std::size(kFields));
    if (f.vlan) {
      EXPECT_EQ(Num(c[0]), f.vlan->vid);
      EXPECT_EQ(Num(c[1]), f.vlan->pcp);
    } else {
      EXPECT_EQ(c[0], "");
    }
    if (f.ip_version == IpVersion::kIpv4) {
      EXPECT_EQ(c[2], "192.0.2.1");
    } else {
      EXPECT_EQ(c[3], "fe80::1");
    }
    EXPECT_EQ(Num(c[4]), 4791u);
    EXPECT_EQ(Num(c[5]), static_cast<uint64_t>(f.bth.opcode));
    EXPECT_EQ(Num(c[6]), f.bth.dest_qpn);
    EXPECT_EQ(Num(c[7]), f.bth.psn);
    EXPECT_EQ(Num(c[8]), f.bth.ack_request ? 1u : 0u);
    const OpcodeInfo& info = *FindOpcode(f.bth.opcode);
    EXPECT_EQ(Num(c[9]), info.payload ? 3u : 0u);  // 33 bytes of payload -> pad 3
    EXPECT_EQ(Num(c[10]), f.bth.migration ? 1u : 0u);
    EXPECT_EQ(Num(c[11]), f.bth.pkey);
    if (info.reth) {
      EXPECT_EQ(Num(c[12]), f.reth->virtual_address);
      EXPECT_EQ(Num(c[13]), f.reth->rkey);
      EXPECT_EQ(Num(c[14]), f.reth->dma_length);
    } else if (info.atomic_eth) {
      // Wireshark files the AtomicETH's VA and R_Key under the RETH fields.
      EXPECT_EQ(Num(c[12]), f.atomic_eth->virtual_address);
      EXPECT_EQ(Num(c[13]), f.atomic_eth->rkey);
    } else {
      EXPECT_EQ(c[12], "");
    }
    if (info.aeth) {
      EXPECT_EQ(Num(c[15]), f.aeth->syndrome);
      EXPECT_EQ(Num(c[16]), f.aeth->msn);
    } else {
      EXPECT_EQ(c[15], "");
    }
    if (info.immdt) {
      EXPECT_EQ(Hex(c[17]), *f.immdt);
    }
    if (info.ieth) {
      EXPECT_EQ(Hex(c[18]), *f.ieth);
    }
    if (info.atomic_eth) {
      EXPECT_EQ(Num(c[19]), f.atomic_eth->swap_add);
      EXPECT_EQ(Num(c[20]), f.atomic_eth->compare);
    }
    if (info.atomic_ack_eth) {
      EXPECT_EQ(Num(c[21]), *f.atomic_ack_eth);
    }
  }
}

}  // namespace
}  // namespace fathom::wire
