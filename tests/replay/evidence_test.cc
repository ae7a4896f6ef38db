// ReadEvidence on the fixture bundle (testdata/replay/field, see its
// README): every format's fields, hosts, ranks, peers and times.
#include "replay/evidence.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "tests/replay/replay_test_util.h"

namespace fathom::replay {
namespace {

using testing::Source;
using testing::TempBundle;

class FieldBundle : public ::testing::Test {
 protected:
  void SetUp() override {
    bundle_.CopyFixture();
    bundle_.Write("h0/capture.pcap", "");
    std::filesystem::copy_file(std::string(FATHOM_TESTDATA_DIR) + "/rxe-send-ipv4.pcap",
                               bundle_.dir() + "/h0/capture.pcap",
                               std::filesystem::copy_options::overwrite_existing);
    auto ev = ReadEvidence(bundle_.dir());
    ASSERT_TRUE(ev.ok()) << ev.status().ToString();
    ev_ = *ev;
  }
  TempBundle bundle_;
  Evidence ev_;
};

TEST_F(FieldBundle, LibrarySettingsFromInitLines) {
  EXPECT_EQ(ev_.library.library, "nccl");
  EXPECT_EQ(ev_.library.version, "2.21.5+cuda12.4");
  EXPECT_EQ(ev_.library.ib_timeout, 14);
  EXPECT_EQ(ev_.library.ib_retry_cnt, 7);
  EXPECT_EQ(ev_.library.ib_gid_index, 3);
  EXPECT_EQ(ev_.library.ib_tc, 106);
  EXPECT_EQ(ev_.library.qps_per_connection, 2);
  EXPECT_EQ(ev_.library.nranks, 4);
  EXPECT_EQ(ev_.library.ring, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(ev_.library.algorithm, "ring");
}

TEST_F(FieldBundle, RanksMapToHostsFromThePrefix) {
  ASSERT_EQ(ev_.ranks.size(), 3u);
  std::map<int, std::string> got;
  for (const RankInfo& r : ev_.ranks) got[r.rank] = r.host;
  EXPECT_EQ(got[0], "h0");
  EXPECT_EQ(got[1], "h1");
  EXPECT_EQ(got[2], "h2");
  for (const RankInfo& r : ev_.ranks) EXPECT_EQ(r.device, "mlx5_0") << r.rank;
}

TEST_F(FieldBundle, CompletionErrorsInAllThreeFormats) {
  ASSERT_EQ(ev_.errors.size(), 3u);
  // Sorted by time; h2's log has no timestamps.
  const CompletionError& old = ev_.errors[0];
  EXPECT_EQ(old.host, "h2");
  EXPECT_EQ(old.rank, 2);
  EXPECT_EQ(old.status_code, 12);
  EXPECT_EQ(old.status, "IBV_WC_RETRY_EXC_ERR");
  EXPECT_EQ(old.vendor_err, 129);
  EXPECT_EQ(old.peer, "10.0.0.4<48211>");
  EXPECT_EQ(old.peer_host, "");  // h3 shows no address
  EXPECT_EQ(old.time_s, -1);

  const CompletionError& e0 = ev_.errors[1];
  EXPECT_EQ(e0.host, "h0");
  EXPECT_EQ(e0.rank, 0);
  EXPECT_EQ(e0.status, "IBV_WC_RETRY_EXC_ERR");
  EXPECT_EQ(e0.opcode, "0");
  EXPECT_EQ(e0.peer_host, "h1");
  EXPECT_EQ(e0.local_gid, "::ffff:10.0.0.1");
  EXPECT_EQ(e0.remote_gid, "::ffff:10.0.0.2");
  EXPECT_NEAR(e0.time_s, 3.790335 - 2.118233, 1e-6);

  const CompletionError& e1 = ev_.errors[2];
  EXPECT_EQ(e1.host, "h1");
  EXPECT_EQ(e1.rank, 1);
  EXPECT_EQ(e1.status_code, 12);
  EXPECT_EQ(e1.opcode, "128");
  EXPECT_EQ(e1.vendor_err, 129);
  EXPECT_EQ(e1.peer_host, "h0");
  EXPECT_NEAR(e1.time_s, 4.0 - 2.118233, 1e-6);
}

TEST(ReadEvidence, TimeOriginIsTheEarliestTimestamp) {
  TempBundle b;
  b.CopyFixture();
  auto ev = ReadEvidence(b.dir());
  ASSERT_TRUE(ev.ok()) << ev.status().ToString();
  // 2025-11-20 09:14:02.118233 UTC; the latest: h1's error.
  EXPECT_NEAR(ev->origin_wall_s, 1763630042.118233, 1e-5);
  EXPECT_NEAR(ev->last_s, 4.0 - 2.118233, 1e-6);
}

TEST_F(FieldBundle, CaptureClockCountsForLastTime) {
  // The capture was taken on another day (its own clock): it still moves
  // last_s, the origin stays the NCCL logs' earliest line.
  EXPECT_NEAR(ev_.origin_wall_s, 1763630042.118233, 1e-5);
  EXPECT_GT(ev_.last_s, 1e6);
}

TEST_F(FieldBundle, AsyncEventsAndWatchdogs) {
  ASSERT_EQ(ev_.rank_events.size(), 2u);
  const RankEvent& t = ev_.rank_events[0];  // no time: first
  EXPECT_EQ(t.kind, "timeout");
  EXPECT_EQ(t.host, "h2");
  EXPECT_EQ(t.rank, 2);
  const RankEvent& a = ev_.rank_events[1];
  EXPECT_EQ(a.kind, "async_event");
  EXPECT_EQ(a.detail, "port error");
  EXPECT_EQ(a.host, "h0");
  EXPECT_EQ(a.rank, 0);
  EXPECT_NEAR(a.time_s, 3.253117 - 2.118233, 1e-6);
}

TEST_F(FieldBundle, HostStateFromEachTool) {
  const HostState& h0 = ev_.hosts.at("h0");
  EXPECT_EQ(h0.driver, "mlx5");
  EXPECT_EQ(h0.device, "mlx5_0");
  EXPECT_EQ(h0.rdma_counters.at("local_ack_timeout_err"), 8u);
  EXPECT_EQ(h0.rdma_counters.at("out_of_sequence"), 12u);
  EXPECT_EQ(h0.rdma_counters.at("roce_adp_retrans"), 11u);
  EXPECT_EQ(h0.active_mtu, 1024);
  EXPECT_EQ(h0.port_state, "PORT_ACTIVE");
  EXPECT_EQ(h0.netdev_mtu, 1500);
  ASSERT_EQ(h0.gids.size(), 4u);
  EXPECT_EQ(h0.gids[3].gid, "::ffff:10.0.0.1");
  EXPECT_EQ(h0.gids[3].type, "RoCE v2");
  EXPECT_EQ(h0.ethtool.at("rx_prio3_pause"), 1204u);
  EXPECT_EQ(h0.ethtool.at("rx_corrected_bits_phy"), 1382u);
  EXPECT_TRUE(h0.unknown_counters.empty());

  const HostState& h1 = ev_.hosts.at("h1");
  EXPECT_EQ(h1.netdev_mtu, 9000);
  ASSERT_EQ(h1.gids.size(), 4u);
  EXPECT_EQ(h1.gids[3].netdev, "enp1s0f0np0");
  EXPECT_EQ(h1.gids[3].type, "RoCE v2");

  const HostState& h3 = ev_.hosts.at("h3");  // one file per counter
  EXPECT_EQ(h3.driver, "rxe");
  EXPECT_EQ(h3.device, "rxe0");
  EXPECT_EQ(h3.rdma_counters.at("sent_pkts"), 884213u);
  EXPECT_EQ(h3.rdma_counters.at("completer_retry_err"), 96u);
}

TEST_F(FieldBundle, UnknownCountersAreKeptAndNamed) {
  const HostState& h2 = ev_.hosts.at("h2");
  EXPECT_EQ(h2.driver, "mlx5");
  EXPECT_EQ(h2.rdma_counters.at("vendor_magic_stall_cnt"), 17u);
  EXPECT_EQ(h2.unknown_counters, std::vector<std::string>{"vendor_magic_stall_cnt"});
  const SourceReport* s = Source(ev_, "h2/hw_counters.txt");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->use, SourceReport::Use::kPartly);
  EXPECT_NE(s->reason.find("vendor_magic_stall_cnt"), std::string::npos) << s->reason;
  EXPECT_EQ(s->lines_recognised, 5);
}

TEST_F(FieldBundle, TruncatedLogIsPartlyUsed) {
  const SourceReport* s = Source(ev_, "h2/nccl.log");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->kind, "nccl_log");
  EXPECT_EQ(s->host, "h2");
  EXPECT_EQ(s->use, SourceReport::Use::kPartly);
  EXPECT_NE(s->reason.find("line 5: completion line without"), std::string::npos) << s->reason;
  EXPECT_NE(s->reason.find("line 6: the log ends mid-line"), std::string::npos) << s->reason;
}

TEST_F(FieldBundle, FabricFiles) {
  EXPECT_EQ(ev_.topology, "leaf-spine:leaves=2,spines=1,hosts=2,gpus=1");
  EXPECT_EQ(ev_.topology_path, "fabric/topology.txt");
  ASSERT_EQ(ev_.neighbors.size(), 4u);
  EXPECT_EQ(ev_.neighbors[3].host, "h3");
  EXPECT_EQ(ev_.neighbors[3].switch_name, "leaf1");
  const SourceReport* n = Source(ev_, "fabric/neighbors.csv");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->use, SourceReport::Use::kUsed) << n->reason;
  ASSERT_EQ(ev_.switch_counters.size(), 3u);
  EXPECT_EQ(ev_.switch_counters[0].port, "leaf0->spine0");
  EXPECT_EQ(ev_.switch_counters[0].counter, "port_xmit_discards");
  EXPECT_EQ(ev_.switch_counters[0].value, 2846u);
  ASSERT_EQ(ev_.link_events.size(), 2u);
  EXPECT_EQ(ev_.link_events[0].link, "h0-leaf0");
  EXPECT_FALSE(ev_.link_events[0].up);
  EXPECT_NEAR(ev_.link_events[0].time_s, 3.25 - 2.118233, 1e-6);
  EXPECT_TRUE(ev_.link_events[1].up);
}

TEST_F(FieldBundle, CaptureConversations) {
  ASSERT_EQ(ev_.captures.size(), 3u);
  const CaptureFinding& c = ev_.captures[0];
  EXPECT_EQ(c.path, "h0/capture.pcap");
  EXPECT_EQ(c.src, "192.0.2.2");
  EXPECT_EQ(c.dst, "192.0.2.1");
  EXPECT_EQ(c.dest_qp, 0x11u);
  EXPECT_EQ(c.frames, 40u);
  EXPECT_EQ(c.psn_gaps, 0u);
  EXPECT_EQ(c.retransmissions, 0u);
  EXPECT_EQ(c.naks, 0u);
  EXPECT_EQ(c.oversize_frames, 0u);  // 256-byte payloads under the 1500 MTU
  EXPECT_GT(c.max_frame, 256u);
  EXPECT_GE(c.last_s, c.first_s);
  const SourceReport* s = Source(ev_, "h0/capture.pcap");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->kind, "capture");
  EXPECT_EQ(s->use, SourceReport::Use::kUsed);
  EXPECT_EQ(s->lines_recognised, 560);
  EXPECT_EQ(s->lines_ignored, 40);
}

TEST_F(FieldBundle, EveryFileHasAReport) {
  // 21 fixture files + the capture; README.md is not evidence.
  EXPECT_EQ(ev_.sources.size(), 22u);
  const SourceReport* readme = Source(ev_, "README.md");
  ASSERT_NE(readme, nullptr);
  EXPECT_EQ(readme->use, SourceReport::Use::kIgnored);
  EXPECT_EQ(readme->kind, "unknown");
  for (const SourceReport& s : ev_.sources) {
    EXPECT_NE(s.use, SourceReport::Use::kUnusable) << s.path << ": " << s.reason;
  }
}

TEST(ReadEvidence, TarballGivesWhatTheDirectoryGives) {
  TempBundle b;
  b.CopyFixture();
  TempBundle out;
  const std::string tgz = out.dir() + "/bundle.tgz";
  ASSERT_EQ(std::system(("tar -czf " + tgz + " -C " + b.dir() + " .").c_str()), 0);
  auto dir = ReadEvidence(b.dir());
  auto tar = ReadEvidence(tgz);
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  ASSERT_TRUE(tar.ok()) << tar.status().ToString();
  EXPECT_EQ(tar->sources.size(), dir->sources.size());
  EXPECT_EQ(tar->errors.size(), dir->errors.size());
  EXPECT_EQ(tar->hosts.size(), dir->hosts.size());
  EXPECT_EQ(tar->library.ring, dir->library.ring);
  EXPECT_EQ(tar->root, tgz);
}

}  // namespace
}  // namespace fathom::replay
