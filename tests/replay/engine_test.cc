// The replay engine on hand-built evidence (issue 28): for each staged
// fault, the evidence a field engineer would hold — NCCL errors, link
// events, counters, MTUs — and the engine must rank the true cause first,
// and its ablation (the fault removed) must make the symptom disappear.
#include "replay/engine.h"

#include <gtest/gtest.h>

#include <string>

#include "replay/hypotheses.h"
#include "replay/report.h"
#include "replay/signature.h"
#include "topologies/builders.h"

namespace fathom::replay {
namespace {

// A job on `preset` ("medium": 16 servers x 8 NICs; rank = host index),
// ib_timeout 14 (retry budget 8 x 67.1 ms = 536.9 ms) and its ring.
Evidence Job(const std::string& preset, int ranks) {
  Evidence ev;
  ev.root = "hand-built";
  ev.topology = preset;
  ev.library.library = "nccl";
  ev.library.ib_timeout = 14;
  ev.library.ib_retry_cnt = 7;
  ev.library.nranks = ranks;
  for (int r = 0; r < ranks; ++r) {
    ev.ranks.push_back(RankInfo{r, "h" + std::to_string(r), "mlx5_0", ""});
    ev.library.ring.push_back(r);
  }
  return ev;
}

HostState Host(const std::string& name, int mtu) {
  HostState h;
  h.host = name;
  h.driver = "mlx5";
  h.netdev_mtu = mtu;
  h.ethtool["tx_bytes_phy"] = 8u << 20;
  h.ethtool["link_down_events_phy"] = 0;
  h.ethtool["rx_crc_errors_phy"] = 0;
  h.rdma_counters["local_ack_timeout_err"] = 0;
  return h;
}

CompletionError Error12(const std::string& host, const std::string& peer, double t) {
  CompletionError e;
  e.host = host;
  e.peer_host = peer;
  e.peer = peer;
  e.status_code = 12;
  e.status = "IBV_WC_RETRY_EXC_ERR";
  e.vendor_err = 129;
  e.time_s = t;
  return e;
}

const double kBudget = 8 * 4.096e-6 * 16384;  // ib_timeout 14, retry_cnt 7

// h5's link to its leaf, as the medium preset names it.
std::string H5Link() {
  auto t = topo::BuildPreset("medium");
  EXPECT_TRUE(t.ok());
  return t->link(t->LinksOf(*t->FindNode("h5"))[0]).name;
}

ReplayOptions Options() {
  ReplayOptions o;
  o.top = 6;
  o.ablate = 1;
  return o;
}

void ExpectTop(const ReplayResult& r, const std::string& kind, const std::string& target) {
  ASSERT_FALSE(r.causes.empty()) << FormatText(r);
  EXPECT_TRUE(r.found) << FormatText(r);
  EXPECT_EQ(r.causes[0].hypothesis.kind, kind) << FormatText(r);
  EXPECT_EQ(r.causes[0].hypothesis.target, target) << FormatText(r);
  EXPECT_TRUE(r.causes[0].reproduces);
  // Ablation: without the fault the symptom goes.
  EXPECT_TRUE(r.causes[0].ablation_confirms) << FormatText(r);
  EXPECT_FALSE(r.causes[0].ablation.empty());
  EXPECT_EQ(ExitCode(r), kExitCauseFound);
}

TEST(ReplayEngine, MtuMismatchOnOneNicRanksFirst) {
  Evidence ev = Job("medium", 128);
  // h5 came back from a firmware reset at MTU 1500 (CASES.md 4); its two
  // ring connections (to h13, from h125) fail with error 12 one budget in.
  ev.hosts["h5"] = Host("h5", 1500);
  for (const char* h : {"h13", "h125", "h0", "h64"}) ev.hosts[h] = Host(h, 4200);
  ev.errors.push_back(Error12("h5", "h13", kBudget));
  ev.errors.push_back(Error12("h125", "h5", kBudget));
  // Each failed QP timed out retry_cnt + 1 times.
  ev.hosts["h5"].rdma_counters["local_ack_timeout_err"] = 8;
  ev.hosts["h125"].rdma_counters["local_ack_timeout_err"] = 8;
  auto r = Replay(ev, Options());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTop(*r, "mtu_mismatch", H5Link());
  EXPECT_EQ(r->causes[0].hypothesis.params.at("mtu_bytes"), "1500");
}

TEST(ReplayEngine, LinkDownPastTheBudgetRanksFirst) {
  Evidence ev = Job("medium", 128);
  const std::string link = H5Link();
  for (const char* h : {"h5", "h13", "h125", "h0"}) ev.hosts[h] = Host(h, 4200);
  ev.hosts["h5"].ethtool["link_down_events_phy"] = 1;
  ev.link_events.push_back(LinkEvent{link, false, 0.100});
  ev.link_events.push_back(LinkEvent{link, true, 1.000});
  ev.errors.push_back(Error12("h5", "h13", 0.100 + kBudget));
  ev.errors.push_back(Error12("h125", "h5", 0.100 + kBudget));
  ev.hosts["h5"].rdma_counters["local_ack_timeout_err"] = 8;
  ev.hosts["h125"].rdma_counters["local_ack_timeout_err"] = 8;
  auto r = Replay(ev, Options());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTop(*r, "link_down", link);
  EXPECT_EQ(r->causes[0].hypothesis.params.at("at_s"), "0.100000");
}

TEST(ReplayEngine, FlapShorterThanTheBudgetRanksFirst) {
  Evidence ev = Job("medium", 128);
  const std::string link = H5Link();
  for (const char* h : {"h5", "h13", "h125", "h0"}) ev.hosts[h] = Host(h, 4200);
  ev.hosts["h5"].ethtool["link_down_events_phy"] = 2;
  ev.hosts["h5"].rdma_counters["local_ack_timeout_err"] = 2;
  ev.hosts["h125"].rdma_counters["local_ack_timeout_err"] = 2;
  ev.link_events.push_back(LinkEvent{link, false, 0.0001});
  ev.link_events.push_back(LinkEvent{link, true, 0.0021});
  ev.link_events.push_back(LinkEvent{link, false, 0.2001});
  ev.link_events.push_back(LinkEvent{link, true, 0.2021});
  auto r = Replay(ev, Options());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTop(*r, "link_flap", link);
}

TEST(ReplayEngine, LossyLinkRanksFirst) {
  Evidence ev = Job("medium", 128);
  const std::string link = H5Link();
  for (const char* h : {"h5", "h13", "h125", "h0"}) ev.hosts[h] = Host(h, 4200);
  // Go-back-N resends after each lost frame; nothing fails (CASES.md 11).
  ev.hosts["h5"].rdma_counters["packet_seq_err"] = 40;
  ev.hosts["h5"].rdma_counters["out_of_sequence"] = 40;
  ev.hosts["h125"].rdma_counters["packet_seq_err"] = 40;
  ev.hosts["h13"].rdma_counters["out_of_sequence"] = 40;
  auto r = Replay(ev, Options());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTop(*r, "lossy_link", link);
}

TEST(ReplayEngine, NoSymptomIsExitOneWithAPlainMessage) {
  Evidence ev = Job("medium", 128);
  for (const char* h : {"h5", "h13"}) ev.hosts[h] = Host(h, 4200);
  auto r = Replay(ev, Options());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->found);
  EXPECT_TRUE(r->causes.empty());
  EXPECT_EQ(ExitCode(*r), kExitNoCause);
  EXPECT_NE(r->verdict.find("No symptom"), std::string::npos) << r->verdict;
  EXPECT_NE(FormatText(*r).find("No symptom"), std::string::npos);
}

TEST(ReplayEngine, NoTopologyAndNoHostIsUnusable) {
  Evidence ev;
  ev.root = "empty";
  auto r = Replay(ev, Options());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no topology"), std::string::npos) << r.status().message();
}

TEST(ReplayEngine, WorkerProcessesGiveTheSameRanking) {
  Evidence ev = Job("medium", 128);
  ev.hosts["h5"] = Host("h5", 1500);
  for (const char* h : {"h13", "h125"}) ev.hosts[h] = Host(h, 4200);
  ev.errors.push_back(Error12("h5", "h13", kBudget));
  ReplayOptions one = Options(), two = Options();
  two.jobs = 2;
  auto a = Replay(ev, one);
  auto b = Replay(ev, two);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->causes.size(), b->causes.size());
  for (size_t i = 0; i < a->causes.size(); ++i) {
    EXPECT_EQ(a->causes[i].hypothesis.kind, b->causes[i].hypothesis.kind);
    EXPECT_EQ(a->causes[i].hypothesis.target, b->causes[i].hypothesis.target);
    EXPECT_DOUBLE_EQ(a->causes[i].score, b->causes[i].score);
  }
}

TEST(ReplaySignature, CounterClassesAcrossDrivers) {
  EXPECT_EQ(CounterClass("local_ack_timeout_err"), "timeouts");
  EXPECT_EQ(CounterClass("completer_retry_err"), "timeouts");  // rxe
  EXPECT_EQ(CounterClass("out_of_seq_request"), "sequence");   // rxe
  EXPECT_EQ(CounterClass("rnr_nak_retry_err"), "rnr");         // mlx5
  EXPECT_EQ(CounterClass("tx_prio3_pause"), "pause");          // ethtool
  EXPECT_EQ(CounterClass("rx_fec_uncorrectable_blocks"), "phy_errors");
  EXPECT_EQ(CounterClass("rx_corrected_bits_phy"), "fec_corrected");
  EXPECT_EQ(CounterClass("LinkDownedCounter"), "link_down");  // IB port counters
  EXPECT_EQ(CounterClass("PortXmitDiscards"), "discards");
  EXPECT_EQ(CounterClass("mtu_discards"), "oversize");
  EXPECT_EQ(CounterClass("rx_packets_phy"), "");
}

TEST(ReplaySignature, ResolvesPortAndLinkNames) {
  auto t = topo::BuildPreset("medium");
  ASSERT_TRUE(t.ok());
  int32_t leaf_spine = *t->FindLink("leaf0-spine0");
  EXPECT_EQ(ResolveLink(*t, "leaf0-spine0"), leaf_spine);
  EXPECT_EQ(ResolveLink(*t, "leaf0->spine0"), leaf_spine);
  EXPECT_EQ(ResolveLink(*t, "spine0->leaf0"), leaf_spine);
  const auto& l = t->link(leaf_spine);
  EXPECT_EQ(ResolveLink(*t, "leaf0:" + std::to_string(l.a_port)), leaf_spine);
  EXPECT_EQ(ResolveLink(*t, "nowhere->leaf0"), -1);
}

}  // namespace
}  // namespace fathom::replay
