// Bad evidence (issue 28, "Bad input"): each unusable file is named with its
// reason and the rest of the bundle is still read; only a bundle that cannot
// be opened at all fails.
#include <gtest/gtest.h>

#include <cstdlib>

#include "replay/evidence.h"
#include "tests/replay/replay_test_util.h"

namespace fathom::replay {
namespace {

using testing::Source;
using testing::TempBundle;

TEST(BadInput, MissingBundleIsNotFound) {
  auto ev = ReadEvidence("/nonexistent/fathom/bundle");
  ASSERT_FALSE(ev.ok());
  EXPECT_EQ(ev.status().code(), StatusCode::kNotFound);
  EXPECT_NE(ev.status().message().find("/nonexistent/fathom/bundle"), std::string::npos);
}

TEST(BadInput, EmptyBundleAndPlainFileAreInvalid) {
  TempBundle b;
  auto empty = ReadEvidence(b.dir());
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(empty.status().message().find("holds no file"), std::string::npos);
  b.Write("notes.txt", "hello\n");
  auto plain = ReadEvidence(b.dir() + "/notes.txt");
  ASSERT_FALSE(plain.ok());
  EXPECT_EQ(plain.status().code(), StatusCode::kInvalidArgument);
}

TEST(BadInput, TarballThatIsNotOne) {
  TempBundle b;
  b.Write("bundle.tgz", "this is not gzip\n");
  auto ev = ReadEvidence(b.dir() + "/bundle.tgz");
  ASSERT_FALSE(ev.ok());
  EXPECT_EQ(ev.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(ev.status().message().find("not a readable tarball"), std::string::npos);
}

class BadFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    b_.CopyFixture();
    // A capture that is not one, an empty file, a log cut inside a
    // completion line, counters of a driver fathom does not know, a
    // neighbour table that puts h0 under leaf1, broken JSON counters, a
    // topology that cannot be built beside the good one.
    b_.Write("captures/leaf0.pcap", "tcpdump: eth9: No such device exists\n");
    b_.Write("h1/ethtool_S.txt", "");
    b_.Write("h3/nccl.log",
             "h3:5120:5120 [0] NCCL INFO comm 0x5611 rank 3 nranks 4 cudaDev 0 busId 1b000 - "
             "Init COMPLETE\n"
             "h3:5120:5133 [0] NCCL WARN NET/IB : Got completion from peer 10.0.0.1<4");
    b_.Write("h3/rdma_statistic.txt",
             "link bnxt_re0/1 rx_pkts 5120 tx_pkts 7180 to_retransmits 12 seq_err_naks_rcvd 3\n");
    b_.Write("fabric/neighbors.csv",
             "host,nic,switch,port\nh0,mlx5_0,leaf1,0\nh1,mlx5_0,leaf0,1\nh9,mlx5_0,leaf0,2\n");
    b_.Write("fabric/switch_counters.json", "[{\"port\": \"leaf0->spine0\", \"counter\": ");
    b_.Write("fabric/z_topology.yaml", "leaf_spine: {leaves: 0, hosts_per_leaf: 2}\n");
    // The corpus's ground truth: hidden, never read.
    b_.Write(".truth.json",
             "h0:1:1 [0] NCCL WARN NET/IB : Got completion from peer 10.9.9.9<1> with status=13 "
             "opcode=0 len=0 vendor err 0 (Send)\n");
    auto ev = ReadEvidence(b_.dir());
    ASSERT_TRUE(ev.ok()) << ev.status().ToString();
    ev_ = *ev;
  }
  TempBundle b_;
  Evidence ev_;
};

TEST_F(BadFiles, ACaptureThatIsNotACapture) {
  const SourceReport* s = Source(ev_, "captures/leaf0.pcap");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->kind, "capture");
  EXPECT_EQ(s->use, SourceReport::Use::kUnusable);
  EXPECT_NE(s->reason.find("not a capture"), std::string::npos) << s->reason;
}

TEST_F(BadFiles, EmptyFile) {
  const SourceReport* s = Source(ev_, "h1/ethtool_S.txt");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->use, SourceReport::Use::kUnusable);
  EXPECT_EQ(s->reason, "empty file");
}

TEST_F(BadFiles, LogCutInsideACompletionLine) {
  const SourceReport* s = Source(ev_, "h3/nccl.log");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->use, SourceReport::Use::kPartly);
  EXPECT_NE(s->reason.find("line 2: the log ends mid-line"), std::string::npos) << s->reason;
  EXPECT_EQ(s->lines_recognised, 1);
  for (const CompletionError& e : ev_.errors) EXPECT_NE(e.host, "h3");
  bool rank3 = false;
  for (const RankInfo& r : ev_.ranks) rank3 = rank3 || (r.rank == 3 && r.host == "h3");
  EXPECT_TRUE(rank3);
}

TEST_F(BadFiles, UnknownDriverCountersKeptNotTrusted) {
  const HostState& h3 = ev_.hosts.at("h3");
  // The per-counter rxe files still name the driver; the bnxt_re names are
  // kept and listed.
  EXPECT_EQ(h3.rdma_counters.at("to_retransmits"), 12u);
  EXPECT_EQ(h3.unknown_counters.size(), 4u);
  const SourceReport* s = Source(ev_, "h3/rdma_statistic.txt");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->use, SourceReport::Use::kPartly);
  EXPECT_NE(s->reason.find("4 counter(s) of an unknown driver"), std::string::npos) << s->reason;
}

TEST_F(BadFiles, NeighbourTableContradictsTopology) {
  const SourceReport* s = Source(ev_, "fabric/neighbors.csv");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->use, SourceReport::Use::kPartly);
  EXPECT_NE(s->reason.find("h0 -> leaf1 contradicts the topology"), std::string::npos) << s->reason;
  EXPECT_NE(s->reason.find("host h9 is not in the topology"), std::string::npos) << s->reason;
  EXPECT_NE(s->reason.find("2 of 3 rows"), std::string::npos) << s->reason;
  EXPECT_EQ(ev_.neighbors.size(), 3u);  // kept: the report shows them
}

TEST_F(BadFiles, BrokenJsonAndUnbuildableTopology) {
  const SourceReport* j = Source(ev_, "fabric/switch_counters.json");
  ASSERT_NE(j, nullptr);
  EXPECT_EQ(j->use, SourceReport::Use::kUnusable);
  EXPECT_NE(j->reason.find("not valid JSON"), std::string::npos) << j->reason;
  EXPECT_TRUE(ev_.switch_counters.empty());
  const SourceReport* t = Source(ev_, "fabric/z_topology.yaml");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->use, SourceReport::Use::kUnusable);
  EXPECT_NE(t->reason.find("not a topology fathom can build"), std::string::npos) << t->reason;
  EXPECT_EQ(ev_.topology, "leaf-spine:leaves=2,spines=1,hosts=2,gpus=1");
}

TEST_F(BadFiles, TheRestIsStillRead) {
  EXPECT_EQ(ev_.errors.size(), 3u);
  EXPECT_EQ(ev_.library.ib_timeout, 14);
  EXPECT_EQ(ev_.hosts.at("h0").netdev_mtu, 1500);
  EXPECT_EQ(ev_.link_events.size(), 2u);
}

TEST_F(BadFiles, HiddenTruthIsNeverRead) {
  for (const SourceReport& s : ev_.sources) {
    EXPECT_EQ(s.path.find("truth"), std::string::npos) << s.path;
  }
  for (const CompletionError& e : ev_.errors) EXPECT_NE(e.status_code, 13);
}

}  // namespace
}  // namespace fathom::replay
