// network.ecn and transport.dcqcn in scenarios: bad input names file, line
// and field; the example scenario meets its expectations; a capture shows
// CE-marked RoCE frames and CNPs that decode (and tshark agrees, when it is
// installed).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "fabric/scenario/scenario.h"
#include "fabric/wire/pcap.h"
#include "fabric/wire/roce.h"
#include "tests/scratch_dir.h"

namespace fathom::sim {
namespace {

using ::testing::HasSubstr;

// Two senders into h0 through one leaf, ECN on priority 3 (TOS 106) and
// DCQCN on. Lines are numbered for the bad-input cases.
const char kBase[] =
    "seed: 1\n"                                                                     // 1
    "end_time_us: 5000\n"                                                           // 2
    "topology:\n"                                                                   // 3
    "  leaf_spine: {leaves: 1, spines: 1, hosts_per_leaf: 8,\n"                     // 4
    "               host_link: {rate_gbps: 100}, fabric_link: {rate_gbps: 400}}\n"  // 5
    "network:\n"                                                                    // 6
    "  ecn:\n"                                                                      // 7
    "    classes:\n"                                                                // 8
    "      - priority: 3\n"                                                         // 9
    "        kmin_bytes: 0\n"                                                       // 10
    "        kmax_bytes: 10000\n"                                                   // 11
    "        pmax: 1\n"                                                             // 12
    "transport:\n"                                                                  // 13
    "  traffic_class: 106\n"                                                        // 14
    "  dcqcn:\n"                                                                    // 15
    "    rpg_byte_reset_bytes: 10000000\n"                                          // 16
    "workload:\n"                                                                   // 17
    "  pattern: flows\n"                                                            // 18
    "  flows: [{src: h1, dst: h0, bytes: 2000000}, {src: h2, dst: h0, bytes: 2000000}]\n";

std::string With(const std::string& from, const std::string& to) {
  std::string s = kBase;
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

struct BadCase {
  const char* name;
  std::string yaml;
  int line;
  const char* field;
  const char* says;
};

class BadCongestionTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadCongestionTest, ErrorNamesFileLineAndField) {
  const BadCase& c = GetParam();
  auto sc = LoadScenarioString(c.yaml, "bad.yaml");
  ASSERT_FALSE(sc.ok()) << c.name;
  EXPECT_EQ(sc.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(sc.status().message(), HasSubstr("bad.yaml:" + std::to_string(c.line) + ":"));
  EXPECT_THAT(sc.status().message(), HasSubstr(c.field));
  EXPECT_THAT(sc.status().message(), HasSubstr(c.says));
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, BadCongestionTest,
    ::testing::Values(
        BadCase{"kmin above kmax", With("kmin_bytes: 0", "kmin_bytes: 20000"), 10,
                "network.ecn.classes[0].kmin_bytes", "is above kmax_bytes 10000"},
        BadCase{"pmax zero", With("pmax: 1", "pmax: 0"), 12, "network.ecn.classes[0].pmax",
                "is not in (0, 1]"},
        BadCase{"pmax above one", With("pmax: 1", "pmax: 1.5"), 12, "network.ecn.classes[0].pmax",
                "is not in (0, 1]"},
        BadCase{"unknown priority", With("priority: 3", "priority: 9"), 9,
                "network.ecn.classes[0].priority", "unknown priority 9"},
        BadCase{"no class",
                With("    classes:\n      - priority: 3\n        kmin_bytes: 0\n"
                     "        kmax_bytes: 10000\n        pmax: 1\n",
                     "    enabled: true\n"),
                8, "network.ecn.classes", "no class is marked"},
        BadCase{"dcqcn rate above line rate",
                With("rpg_byte_reset_bytes: 10000000", "rpg_ai_rate_mbps: 200000"), 16,
                "transport.dcqcn.rpg_ai_rate_mbps", "above the hosts' line rate (100000 Mb/s)"},
        BadCase{"first-cnp rate above line rate",
                With("rpg_byte_reset_bytes: 10000000", "rate_to_set_on_first_cnp_mbps: 100001"), 16,
                "transport.dcqcn.rate_to_set_on_first_cnp_mbps", "above the hosts' line rate"},
        BadCase{"alpha gain out of range",
                With("rpg_byte_reset_bytes: 10000000", "dce_tcp_g: 1024"), 16,
                "transport.dcqcn.dce_tcp_g", "out of range 0..1023"},
        BadCase{"cnp priority out of range",
                With("rpg_byte_reset_bytes: 10000000", "cnp_802p_prio: 8"), 16,
                "transport.dcqcn.cnp_802p_prio", "out of range 0..7"}),
    [](const ::testing::TestParamInfo<BadCase>& i) {
      std::string n = i.param.name;
      for (char& ch : n) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
      return n;
    });

TEST(DcqcnScenarioTest, ExampleMeetsItsExpectationsWithoutDrops) {
  auto sc = LoadScenario(std::string(FATHOM_SOURCE_DIR) + "/scenarios/dcqcn_incast.yaml");
  ASSERT_TRUE(sc.ok()) << sc.status().ToString();
  auto r = RunScenario(*sc, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_THAT(CheckExpectations(sc->spec, *r), ::testing::IsEmpty()) << FormatSummary(*r);
  EXPECT_TRUE(r->drops.empty()) << FormatSummary(*r);
  EXPECT_GT(r->ecn_marked_packets, 0u);
  EXPECT_GT(r->dcqcn.np_cnp_sent, 0u);
  EXPECT_EQ(r->dcqcn.rp_cnp_handled, r->dcqcn.np_cnp_sent);
  EXPECT_THAT(FormatJson(*r), HasSubstr("\"np_cnp_sent\": "));
  EXPECT_THAT(FormatSummary(*r), HasSubstr("rp_cnp_handled"));
  // Each sender's rate limiter, per QP, in the text and the JSON.
  ASSERT_EQ(r->flow_table.size(), 2u);
  for (const FlowReport& f : r->flow_table) {
    ASSERT_EQ(f.qps.size(), 1u);
    const QpReport& q = f.qps[0];
    EXPECT_TRUE(q.dcqcn) << f.index;
    EXPECT_GT(q.dcqcn_cuts, 0u) << f.index;
    EXPECT_GT(q.dcqcn_min_gbps, 0) << f.index;
    EXPECT_LE(q.dcqcn_min_gbps, q.dcqcn_mean_gbps) << f.index;
    EXPECT_LE(q.dcqcn_mean_gbps, 100.0) << f.index;
    EXPECT_LE(q.dcqcn_rate_gbps, 100.0) << f.index;
  }
  EXPECT_THAT(FormatSummary(*r), HasSubstr("dcqcn rate flow 0 qp 0 h1 -> h0: now "));
  EXPECT_THAT(FormatSummary(*r), HasSubstr("dcqcn rate flow 1 qp 0 h2 -> h0: now "));
  EXPECT_THAT(FormatJson(*r), HasSubstr("\"mean_gbps\": "));
}

// The leaf's port to h0 marks (every packet above 10 KB of queue); h0's
// NIC sends CNPs back over the same link. Both show in a capture of it.
TEST(DcqcnScenarioTest, CaptureShowsCeMarksAndCnps) {
  auto sc = LoadScenarioString(kBase, "cap.yaml");
  ASSERT_TRUE(sc.ok()) << sc.status().ToString();
  test_util::ScratchDir tmp;
  const std::string path = tmp.File("dcqcn_capture.pcap");
  RunOptions opts;
  opts.captures = {{"h0-leaf0", path}};
  auto r = RunScenario(*sc, opts);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->flows_completed, 2);
  auto reader = wire::PcapReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  wire::PcapRecord rec;
  int ce = 0, ect = 0, cnps = 0;
  while (true) {
    auto more = (*reader)->Next(&rec);
    ASSERT_TRUE(more.ok());
    if (!*more) break;
    wire::ParseResult p = wire::Parse(rec.data);
    ASSERT_TRUE(p.ok()) << wire::ParseErrorName(p.error);
    EXPECT_TRUE(wire::IcrcOk(p));
    if (p.frame.bth.opcode == wire::Opcode::kCnp) {
      ++cnps;
      EXPECT_EQ(p.frame.ipv4.dscp, 48);  // the CNP class (cnp_dscp), not ECN-capable
      EXPECT_EQ(p.frame.ipv4.ecn, 0);
      continue;
    }
    EXPECT_EQ(p.frame.ipv4.dscp, 26);
    if (p.frame.ipv4.ecn == 3) ++ce;
    if (p.frame.ipv4.ecn == 2) ++ect;
  }
  EXPECT_GT(ce, 0);
  EXPECT_GT(ect, 0);  // ACKs towards the leaf are not marked there
  EXPECT_EQ(static_cast<uint64_t>(cnps), r->dcqcn.np_cnp_sent);
  // tshark, when installed, reads the same marks and opcodes.
  if (std::system("command -v tshark >/dev/null 2>&1") == 0) {
    const std::string out = tmp.File("dcqcn_tshark.txt");
    const std::string cmd = "tshark -r " + path +
                            " -T fields -e ip.dsfield.ecn -e infiniband.bth.opcode > " + out +
                            " 2>/dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    FILE* f = std::fopen(out.c_str(), "r");
    ASSERT_NE(f, nullptr);
    char line[256];
    int t_ce = 0, t_cnp = 0;
    while (std::fgets(line, sizeof line, f) != nullptr) {
      int ecn = -1, op = -1;
      if (std::sscanf(line, "%d\t%d", &ecn, &op) >= 1) {
        if (ecn == 3) ++t_ce;
        if (op == 129) ++t_cnp;
      }
    }
    std::fclose(f);
    EXPECT_EQ(t_ce, ce);
    EXPECT_EQ(t_cnp, cnps);
  } else {
    std::printf("tshark not installed: its check skipped\n");
  }
}

}  // namespace
}  // namespace fathom::sim
