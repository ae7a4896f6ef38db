// `fathom coll --scenario` honours every section of the scenario or refuses
// it (issue 27, one scenario model for sim and coll): the network block
// reaches the fabric (a small switch buffer drops, the default does not),
// the transport block reaches the QPs and the chunk, what coll cannot do is
// an error naming file:line and the field (exit 2), and each size row
// carries the fabric's counters (--json; text with --counters) and a failed
// run the virtual time of its error.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "fabric/scenario/scenario.h"
#include "tests/cli_run.h"
#include "tests/scratch_dir.h"
#include "transport/worlds/sim_world.h"

namespace fathom::transport::coll {
namespace {

using worlds::SimWorld;
using worlds::SimWorldOptions;

const std::string kFathom = std::string(FATHOM_BINARY_DIR) + "/tools/fathom";

const char* kBase = R"(name: coll-scenario
seed: 3
end_time_us: 10000
topology:
  preset: "leaf-spine:leaves=2,spines=1,hosts=4,gpus=1"
workload:
  pattern: permutation
  flow_bytes: 4096
)";

StatusOr<std::unique_ptr<SimWorld>> World(const std::string& yaml,
                                          std::vector<std::string>* notes = nullptr) {
  auto sc = sim::LoadScenarioString(yaml, "coll.yaml");
  if (!sc.ok()) return sc.status();
  return SimWorld::CreateFromScenario(sc.value(), SimWorldOptions{}, notes);
}

TEST(CollScenarioTest, TransportAndNetworkBlocksReachTheWorld) {
  std::vector<std::string> notes;
  auto w = World(std::string(kBase) + R"(transport:
  rnr_retry: 3
  min_rnr_timer: 5
  traffic_class: 106
  max_rd_atomic: 4
  message_bytes: 65536
network:
  switch_buffer_bytes: 20000
  ecmp_salt: false
  ipv6: true
)",
                 &notes);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  const CommOptions& c = w.value()->comm_options();
  EXPECT_EQ(c.qp.rnr_retry, 3);
  EXPECT_EQ(c.qp.min_rnr_timer, 5);
  EXPECT_EQ(c.qp.traffic_class, 106);
  EXPECT_EQ(c.qp.max_rd_atomic, 4);
  EXPECT_EQ(c.chunk_bytes, 65536u);
  const sim::NetworkConfig& nc = w.value()->network_config();
  EXPECT_EQ(nc.switch_buffer_bytes, 20000);
  EXPECT_FALSE(nc.ecmp_salt);
  EXPECT_TRUE(nc.ipv6);
  // What coll replaces is said, not silently dropped.
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("workload and end_time_us not used"), std::string::npos) << notes[0];
}

TEST(CollScenarioTest, WhatCollCannotHonourIsAnErrorNamingTheField) {
  test_util::ScratchDir tmp;
  struct Case {
    const char* extra;
    const char* where;
  };
  for (const Case& k :
       {Case{"transport:\n  opcode: read\n", "coll.yaml:10:11: transport.opcode"},
        Case{"transport:\n  message_bytes: 4\n", "coll.yaml:10:18: transport.message_bytes"}}) {
    SCOPED_TRACE(k.extra);
    auto w = World(std::string(kBase) + k.extra);
    ASSERT_FALSE(w.ok());
    EXPECT_NE(w.status().message().find(k.where), std::string::npos) << w.status().message();
  }
  const std::string path =
      tmp.Write("coll_read.yaml", std::string(kBase) + "transport:\n  opcode: read\n");
  auto r = test_util::RunCommand(kFathom + " coll allreduce --scenario " + path + " -b 4K -e 4K");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("coll_read.yaml:10:11: transport.opcode: 'read'"), std::string::npos)
      << r.out;
}

// The scenario's transport.nic_profile is the run's profile (its NIC
// timing and host reduction); --profile naming another one is refused.
TEST(CollScenarioTest, TheScenariosNicProfileIsTheRunsProfile) {
  test_util::ScratchDir tmp;
  const std::string path =
      tmp.Write("coll_cx6.yaml", std::string(kBase) + "transport:\n  nic_profile: cx6\n");
  auto r = test_util::RunCommand(kFathom + " coll allreduce --scenario " + path +
                                 " -b 1K -e 1K -n 1 -w 0");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("profile cx6"), std::string::npos) << r.out;
  auto bad = test_util::RunCommand(kFathom + " coll allreduce --profile cx7 --scenario " + path +
                                   " -b 1K -e 1K -n 1 -w 0");
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
  EXPECT_NE(bad.out.find("--profile cx7: the scenario"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("transport.nic_profile cx6"), std::string::npos) << bad.out;
}

uint64_t Counter(const std::string& json, const std::string& name) {
  const size_t at = json.find("\"" + name + "\":");
  if (at == std::string::npos) return ~uint64_t{0};
  return std::strtoull(json.c_str() + at + name.size() + 3, nullptr, 10);
}

// A tree allreduce's incast on 8 ranks: a 9216-byte switch buffer (one
// jumbo frame) tail-drops, the default 1 MiB does not; the counters of the
// size row say so, in --json and, with --counters, in the text.
TEST(CollScenarioTest, SwitchBufferIsHonouredAndTheRowCarriesTheCounters) {
  test_util::ScratchDir tmp;
  const std::string small = tmp.Write(
      "coll_small.yaml",
      std::string(kBase) + "transport:\n  ib_timeout: 6\nnetwork:\n  switch_buffer_bytes: 9216\n");
  const std::string big =
      tmp.Write("coll_big.yaml", std::string(kBase) + "transport:\n  ib_timeout: 6\n");
  const std::string args = " -b 256K -e 256K -n 2 -w 1 --algo tree";
  auto s = test_util::RunCommand(kFathom + " coll allreduce --json --scenario " + small + args,
                                 /*merge_stderr=*/false);
  auto b = test_util::RunCommand(kFathom + " coll allreduce --json --scenario " + big + args,
                                 /*merge_stderr=*/false);
  ASSERT_EQ(s.exit_code, 0) << s.out;
  ASSERT_EQ(b.exit_code, 0) << b.out;
  EXPECT_GT(Counter(s.out, "drops_tail_drop"), 0u) << s.out;
  EXPECT_GT(Counter(s.out, "retransmitted_packets"), 0u) << s.out;
  EXPECT_EQ(Counter(b.out, "drops_tail_drop"), 0u) << b.out;
  EXPECT_EQ(Counter(b.out, "retransmitted_packets"), 0u) << b.out;
  EXPECT_GT(Counter(b.out, "port_xmit_packets"), 0u) << b.out;
  auto t = test_util::RunCommand(kFathom + " coll allreduce --counters --scenario " + small + args);
  ASSERT_EQ(t.exit_code, 0) << t.out;
  EXPECT_NE(t.out.find("#  counters: drops_tail_drop "), std::string::npos) << t.out;
}

// A black hole on h0's link from 50 us: the QP's retries (ib_timeout 8:
// 4.096 us x 2^8 = 1048.576 us, retry_cnt 2: three timeouts) end in
// IBV_WC_RETRY_EXC_ERR near 50 + 3 x 1048.576 us; the run says when.
TEST(CollScenarioTest, AFailedRunReportsTheTimeOfItsError) {
  test_util::ScratchDir tmp;
  const std::string path = tmp.Write(
      "coll_hole.yaml", std::string(kBase) +
                            "transport:\n  ib_timeout: 8\n  retry_cnt: 2\nfaults:\n"
                            "  - {kind: black_hole, link: h0-leaf0, from: h0, start_us: 50}\n");
  auto j = test_util::RunCommand(
      kFathom + " coll allreduce --json -b 64K -e 1M -f 16 -n 2 -w 1 --scenario " + path,
      /*merge_stderr=*/false);
  EXPECT_EQ(j.exit_code, 1) << j.out;
  EXPECT_NE(j.out.find("\"status\":\"failed\""), std::string::npos) << j.out;
  const size_t at = j.out.find("\"error_time_us\":");
  ASSERT_NE(at, std::string::npos) << j.out;
  const double t = std::atof(j.out.c_str() + at + 16);
  EXPECT_NEAR(t, 50 + 3 * 1048.576, 0.01 * 3195.7) << j.out;
  // The counters of the size that failed.
  const size_t ec = j.out.find("\"error_counters\":");
  ASSERT_NE(ec, std::string::npos) << j.out;
  EXPECT_EQ(Counter(j.out.substr(ec), "retry_exceeded_err"), 1u) << j.out;
  EXPECT_GT(Counter(j.out.substr(ec), "drops_impairment"), 0u) << j.out;
  auto text = test_util::RunCommand(kFathom + " coll allreduce -b 64K -e 1M -f 16 -n 2 -w 1 " +
                                    "--scenario " + path);
  EXPECT_EQ(text.exit_code, 1) << text.out;
  EXPECT_NE(text.out.find("# FAILED: run stopped; error at t="), std::string::npos) << text.out;
}

}  // namespace
}  // namespace fathom::transport::coll
