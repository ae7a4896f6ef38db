// The bundle writer round trip (issue 28): a simulator run written as
// evidence and read back by ReadEvidence gives the run's own figures; and the
// synthetic corpus's scenarios load, run and hide their truth.
#include "replay/bundle.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "fabric/scenario/scenario.h"
#include "replay/corpus.h"
#include "replay/evidence.h"
#include "tests/replay/replay_test_util.h"

namespace fathom::replay {
namespace {

using testing::TempBundle;

// h0's own link goes down for longer than the retry budget (8 x 4.096 us x
// 2^10 = 33.6 ms): its QPs fail with error 12, the async events show on h0
// and leaf0's side has no host.
constexpr const char* kScenario = R"(
name: bundle-roundtrip
seed: 3
end_time_us: 200000
topology: {preset: "leaf-spine:leaves=2,spines=1,hosts=2,gpus=1"}
transport: {ib_timeout: 10, retry_cnt: 7, message_bytes: 65536, traffic_class: 104, qps_per_connection: 2}
workload:
  pattern: flows
  flow_bytes: 262144
  flows:
    - {src: h0, dst: h2}
    - {src: h1, dst: h3}
    - {src: h2, dst: h0}
    - {src: h3, dst: h1}
faults:
  - {kind: link_down, link: h0-leaf0, start_us: 20, duration_us: 100000}
  - {kind: mtu, link: h3-leaf1, mtu_bytes: 2200}
)";

struct SimRun {
  sim::LoadedScenario scenario;
  sim::RunReport report;
};

SimRun RunIt(const std::string& yaml) {
  auto sc = sim::LoadScenarioString(yaml, "roundtrip.yaml");
  EXPECT_TRUE(sc.ok()) << sc.status().ToString();
  auto rep = sim::RunScenario(*sc, {});
  EXPECT_TRUE(rep.ok()) << rep.status().ToString();
  return {*sc, *rep};
}

TEST(Bundle, RoundTripGivesTheRunsFigures) {
  SimRun run = RunIt(kScenario);
  ASSERT_GT(run.report.flows_failed, 0);
  TempBundle b;
  ASSERT_TRUE(WriteBundle(run.scenario, run.report, b.dir()).ok());
  auto ev = ReadEvidence(b.dir());
  ASSERT_TRUE(ev.ok()) << ev.status().ToString();
  for (const SourceReport& s : ev->sources) {
    EXPECT_EQ(s.use, SourceReport::Use::kUsed) << s.path << ": " << s.reason;
  }
  // Transport settings and ranks.
  EXPECT_EQ(ev->library.ib_timeout, 10);
  EXPECT_EQ(ev->library.ib_retry_cnt, 7);
  EXPECT_EQ(ev->library.ib_tc, 104);
  EXPECT_EQ(ev->library.qps_per_connection, 2);
  EXPECT_EQ(ev->library.nranks, 4);
  EXPECT_EQ(ev->library.ring, (std::vector<int>{0, 1, 2, 3}));
  ASSERT_EQ(ev->ranks.size(), 4u);
  // Every failed QP's first error, at its virtual time, with its peer.
  std::multiset<std::tuple<std::string, std::string, std::string, long long>> want, got;
  for (const sim::FlowReport& f : run.report.flow_table) {
    for (const sim::QpReport& q : f.qps) {
      if (!q.first_error.empty()) {
        want.insert({q.host, q.peer_host, q.first_error, std::llround(q.first_error_ns / 1e3)});
      }
    }
  }
  for (const CompletionError& e : ev->errors) {
    got.insert({e.host, e.peer_host, e.status, std::llround(e.time_s * 1e6)});
    EXPECT_EQ(e.vendor_err, e.status_code == 12 ? 129 : 0);
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(ev->origin_wall_s, BundleOptions{}.epoch_s);
  // Counters: the NICs' local ACK timeouts add up to the run's.
  uint64_t timeouts = 0;
  for (const auto& [name, h] : ev->hosts) {
    EXPECT_EQ(h.driver, "mlx5") << name;
    timeouts += h.rdma_counters.at("local_ack_timeout_err");
    EXPECT_EQ(h.gids.size(), 4u);
  }
  EXPECT_EQ(timeouts, run.report.local_ack_timeout_err);
  // The MTU fault is h3's NIC MTU; 2200 gives active_mtu 2048 (CASES.md 4).
  EXPECT_EQ(ev->hosts.at("h3").netdev_mtu, 2200);
  EXPECT_EQ(ev->hosts.at("h3").active_mtu, 2048);
  EXPECT_EQ(ev->hosts.at("h1").netdev_mtu, 4200);
  EXPECT_EQ(ev->hosts.at("h1").active_mtu, 4096);
  // The outage: link events and h0's async events at 20 us and 100.02 ms.
  ASSERT_EQ(ev->link_events.size(), 2u);
  EXPECT_EQ(ev->link_events[0].link, "h0-leaf0");
  EXPECT_NEAR(ev->link_events[0].time_s, 20e-6, 1e-6);
  EXPECT_NEAR(ev->link_events[1].time_s, 0.10002, 1e-6);
  int port_errors = 0;
  for (const RankEvent& e : ev->rank_events) {
    if (e.kind == "async_event" && e.detail == "port error") {
      ++port_errors;
      EXPECT_EQ(e.host, "h0");
      EXPECT_EQ(e.rank, 0);
    }
  }
  EXPECT_EQ(port_errors, 1);
  // Neighbours agree with the topology written.
  EXPECT_EQ(ev->neighbors.size(), 4u);
  EXPECT_FALSE(ev->topology.empty());
}

TEST(Bundle, RxeProfileWritesRxeNames) {
  std::string yaml = kScenario;
  yaml.replace(yaml.find("traffic_class: 104"), 18, "nic_profile: rxe, traffic_class: 104");
  SimRun run = RunIt(yaml);
  TempBundle b;
  ASSERT_TRUE(WriteBundle(run.scenario, run.report, b.dir()).ok());
  auto ev = ReadEvidence(b.dir());
  ASSERT_TRUE(ev.ok()) << ev.status().ToString();
  for (const auto& [name, h] : ev->hosts) {
    EXPECT_EQ(h.driver, "rxe") << name;
    EXPECT_EQ(h.device, "rxe0") << name;
    EXPECT_TRUE(h.rdma_counters.count("completer_retry_err")) << name;
    EXPECT_TRUE(h.unknown_counters.empty()) << name;
  }
  for (const CompletionError& e : ev->errors) EXPECT_EQ(e.vendor_err, 0);
}

TEST(Corpus, EveryKindLoadsOnMediumAndLarge) {
  for (const char* preset : {"medium", "large"}) {
    std::set<std::string> kinds;
    for (int i = 0; i < static_cast<int>(CorpusKinds().size()); ++i) {
      const CorpusTruth t = CorpusScenario(preset, 7, i);
      auto sc = sim::LoadScenarioString(t.scenario_yaml, "corpus.yaml");
      EXPECT_TRUE(sc.ok()) << preset << " " << i << ": " << sc.status().ToString() << "\n"
                           << t.scenario_yaml.substr(0, 600);
      EXPECT_FALSE(t.target.empty());
      kinds.insert(t.kind);
    }
    EXPECT_EQ(kinds.size(), 8u) << preset;  // link_down comes longer and shorter
  }
  // Seeded: the same seed gives the same scenario, another seed another.
  EXPECT_EQ(CorpusScenario("medium", 7, 3).scenario_yaml,
            CorpusScenario("medium", 7, 3).scenario_yaml);
  EXPECT_NE(CorpusScenario("medium", 7, 3).scenario_yaml,
            CorpusScenario("medium", 8, 3).scenario_yaml);
}

TEST(Corpus, BundlesHideTheirTruth) {
  TempBundle out;
  CorpusOptions opt;
  opt.dir = out.dir();
  opt.count = 2;  // mtu_mismatch and link_down
  opt.seed = 5;
  opt.preset = "small";
  auto truths = MakeCorpus(opt);
  ASSERT_TRUE(truths.ok()) << truths.status().ToString();
  ASSERT_EQ(truths->size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const std::string dir = out.dir() + (i == 0 ? "/000" : "/001");
    ASSERT_TRUE(std::filesystem::exists(dir + "/.truth.json"));
    auto t = ReadCorpusTruth(dir);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ(t->kind, (*truths)[i].kind);
    EXPECT_EQ(t->target, (*truths)[i].target);
    auto ev = ReadEvidence(dir);
    ASSERT_TRUE(ev.ok()) << ev.status().ToString();
    for (const SourceReport& s : ev->sources) {
      EXPECT_EQ(s.path.find("truth"), std::string::npos) << s.path;
      EXPECT_EQ(s.use, SourceReport::Use::kUsed) << s.path << ": " << s.reason;
    }
    EXPECT_EQ(ev->ranks.size(), 16u);
  }
  // The MTU fault shows as the victim's NIC MTU.
  auto ev = ReadEvidence(out.dir() + "/000");
  ASSERT_TRUE(ev.ok());
  const std::string victim = (*truths)[0].target.substr(0, (*truths)[0].target.find('-'));
  EXPECT_EQ(ev->hosts.at(victim).netdev_mtu, 1500);
}

}  // namespace
}  // namespace fathom::replay
