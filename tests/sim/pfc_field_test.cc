// The PFC field cases on a simulated fabric (CASES.md 16-17), built in C++:
// a NIC's PFC storm spreads pause toward the senders and stalls unrelated
// flows until the watchdog drops the stormed queue; an incast on a lossless
// class pauses but never deadlocks. Virtual times and counters only.
#include "fabric/scenario/pfc_field.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "fabric/scenario/scenario.h"
#include "fabric/scenario/workload.h"
#include "fabric/sim/network.h"
#include "topologies/builders.h"

namespace fathom::sim {
namespace {

Picoseconds Ms(int64_t ms) { return Picoseconds::FromMilliseconds(ms); }
Picoseconds Us(int64_t us) { return Picoseconds::FromMicroseconds(us); }

// 3 leaves x 4 hosts, 2 spines, 100 Gb/s; priority 3 lossless with static
// thresholds (as pfc_test's incast).
struct Fabric {
  Engine engine{7};
  topo::Topology topo;
  std::unique_ptr<Network> net;
  std::unique_ptr<FlowDriver> driver;
  std::unique_ptr<PfcField> pfc;

  Fabric(std::vector<Flow> flows, const PfcFieldOptions& field) {
    topo::LeafSpineOptions o;
    o.leaves = 3;
    o.spines = 2;
    o.hosts_per_leaf = 4;
    o.gpus_per_server = 4;
    o.host_link =
        o.fabric_link = {BitsPerSecond::Gbps(100), Picoseconds::FromNanoseconds(100), 4200};
    topo = topo::BuildLeafSpine(o).value();
    NetworkConfig nc;
    nc.switch_buffer_bytes = 1 << 20;
    nc.qos.classes[3].lossless = true;
    nc.qos.classes[3].xoff_bytes = 64 * 1024;
    nc.qos.classes[3].xon_bytes = 32 * 1024;
    net = std::make_unique<Network>(&engine, &topo, nc);
    PfcFieldOptions f = field;
    f.lossless = nc.qos.lossless_mask();
    pfc = std::make_unique<PfcField>(net.get(), f);
    FlowOptions fo;
    fo.qp.traffic_class = 26 << 2;  // DSCP 26 -> priority 3
    fo.qp.timeout = 17;             // 537 ms
    driver = std::make_unique<FlowDriver>(net.get(), std::move(flows), fo);
    EXPECT_TRUE(driver->Setup().ok());
  }
  const FlowResult& result(size_t i) const { return driver->results()[i]; }
};

TEST(PfcStormTest, StallsUnrelatedFlowsUntilTheWatchdogActs) {
  // h0 (leaf0) storms from 50 us. Flows into leaf0 (to h0 and to h1)
  // and one between leaf1 and leaf2 that shares the paused uplinks.
  const uint64_t kBytes = 4 << 20;
  std::vector<Flow> flows = {
      {4, 0, kBytes, Us(0)},  {8, 0, kBytes, Us(0)},   // into the storm
      {5, 1, kBytes, Us(0)},  {9, 2, kBytes, Us(0)},   // unrelated, into leaf0
      {6, 10, kBytes, Us(0)}, {11, 7, kBytes, Us(0)},  // unrelated, leaf1 <-> leaf2
  };
  PfcFieldOptions f;
  f.watchdog = PfcWatchdogConfig{};  // SONiC's 200 ms detection and restoration
  Fabric run(flows, f);
  run.pfc->Storm(0, 3, Us(50), Ms(400));
  run.pfc->Start();
  run.engine.Run(Ms(1500));
  run.pfc->Finish();
  std::printf("%s", run.pfc->Summary().c_str());
  // Pause spread from the storming NIC through every tier.
  for (const PfcField::TierPause& t : run.pfc->PauseByTier()) {
    EXPECT_GT(t.tx_pause, 0u) << "tier " << t.tier;
  }
  // The leaf's port to h0 stormed at the first 100 ms poll at or after
  // 50 us + 200 ms, and was restored after the NIC stopped (400 ms) plus
  // the restoration time, within a poll.
  const PfcWatchdog& wd = *run.pfc->watchdog();
  const int32_t leaf0 = run.topo.FindNode("leaf0").value();
  bool found = false;
  for (const PfcWatchdog::Event& e : wd.events()) {
    if (e.port != &run.net->port(leaf0, 0)) continue;
    if (e.detected) {
      found = true;
      EXPECT_EQ(e.at, Ms(300));
      EXPECT_LT(e.at - (e.paused_since + Ms(200)), Ms(100));
    } else {
      EXPECT_GE(e.at, Ms(600));
      EXPECT_LE(e.at, Ms(700));
    }
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(wd.storms_detected(), wd.storms_restored());
  // The unrelated flows that share the paused queues stalled until the
  // watchdog dropped (then recovered by retransmission); the one on the
  // other spine did not.
  for (size_t i : {3u, 4u, 5u}) {
    EXPECT_EQ(run.result(i).state, FlowState::kDone) << i;
    EXPECT_GT(run.result(i).end, Ms(300)) << i;
  }
  EXPECT_EQ(run.result(2).state, FlowState::kDone);
  EXPECT_LT(run.result(2).end, Ms(1));
  EXPECT_GT(run.net->TotalQpCounters().retransmitted_packets, 0u);
  EXPECT_GT(run.net->drops().by_reason[static_cast<size_t>(DropReason::kPfcWatchdog)], 0u);
  EXPECT_FALSE(run.pfc->deadlock()->deadlocked());
}

// The watchdog's drop action on a stormed queue: its waiting frames are
// dropped, and with them go the ingress accounts they held at the switch,
// so the XOFF the switch asserted upstream is released and pause unwinds
// hop by hop back to the sender. (Port::DropWaiting once left the
// upstream's account in XOFF: the spine's port into leaf0 stayed paused for
// good.)
TEST(PfcWatchdogDropTest, DroppingTheWaitingFramesReleasesThePauseUpstream) {
  // h4 (leaf1) writes to h0 (leaf0), which storms from the start.
  std::vector<Flow> flows = {{4, 0, 4 << 20, Us(0)}};
  PfcFieldOptions f;
  f.detect_deadlock = false;
  Fabric run(flows, f);
  run.pfc->Storm(0, 3, Us(0), Picoseconds::Max());
  run.pfc->Start();
  run.engine.Run(Ms(2));
  const int32_t leaf0 = run.topo.FindNode("leaf0").value();
  Port& stormed = run.net->port(leaf0, 0);
  ASSERT_EQ(run.topo.node(stormed.peer()->config().node).name, "h0");
  ASSERT_EQ(stormed.paused_classes(), 1u << 3);
  ASSERT_GT(stormed.waiting_bytes(3), 0);
  // Pause spread: some port into leaf0 (a spine's) is held XOFF by leaf0's
  // ingress account, and the sender's NIC is paused.
  auto paused_ports = [&] {
    std::vector<std::string> out;
    for (Port* p : run.net->ports()) {
      if (p == &stormed || (p->paused_classes() & (1u << 3)) == 0) continue;
      out.push_back(run.topo.node(p->config().node).name + ":" + std::to_string(p->config().index));
    }
    return out;
  };
  ASSERT_FALSE(paused_ports().empty());
  // The watchdog's drop action, as PfcField applies it.
  const uint64_t waiting_frames_dropped_before =
      run.net->drops().by_reason[static_cast<size_t>(DropReason::kPfcWatchdog)];
  stormed.WatchdogDrop(3, true);
  stormed.DropWaiting(3);
  stormed.IgnorePause(3, Picoseconds::Max());
  EXPECT_EQ(stormed.waiting_bytes(3), 0);
  EXPECT_GT(run.net->drops().by_reason[static_cast<size_t>(DropReason::kPfcWatchdog)],
            waiting_frames_dropped_before);
  run.engine.Run(Ms(3));
  // Nothing in the fabric is paused any more: every account into leaf0 went
  // back below XON (its XOFF released) and the spines' and leaf1's queues
  // drained into the drop.
  EXPECT_EQ(paused_ports(), std::vector<std::string>{});
  for (Port* p : run.net->ports()) {
    const PortPfc* pfc = p->pfc();
    if (pfc == nullptr) continue;
    EXPECT_EQ(p->account().xoff & (1u << 3), 0)
        << run.topo.node(p->config().node).name << ":" << p->config().index;
  }
}

TEST(PfcIncastTest, AnIncastPausesButIsNoDeadlock) {
  // 8 senders on leaf1 and leaf2 into h0: pause trees toward the senders,
  // no cycle.
  std::vector<Flow> flows;
  for (int32_t src : {4, 5, 6, 7, 8, 9, 10, 11}) flows.push_back({src, 0, 1 << 20, Us(0)});
  PfcFieldOptions f;
  Fabric run(flows, f);
  run.pfc->Start();
  run.engine.Run(Ms(50));
  run.pfc->Finish();
  EXPECT_EQ(run.driver->completed(), 8);
  uint64_t pauses = 0;
  for (const PfcField::TierPause& t : run.pfc->PauseByTier()) pauses += t.tx_pause;
  EXPECT_GT(pauses, 0u);
  EXPECT_GT(run.pfc->deadlock()->checks(), 0u);
  EXPECT_FALSE(run.pfc->deadlock()->deadlocked());
  EXPECT_EQ(run.pfc->CycleName(), "");
}

TEST(PfcStormScenarioTest, TheExampleScenarioMeetsItsExpectations) {
  auto sc = LoadScenario(std::string(FATHOM_SOURCE_DIR) + "/scenarios/faults/pfc_storm.yaml");
  ASSERT_TRUE(sc.ok()) << sc.status().ToString();
  auto r = RunScenario(*sc, RunOptions{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(CheckExpectations(sc->spec, *r).empty());
  EXPECT_EQ(r->flows_completed, 6);
  EXPECT_EQ(r->pfc_watchdog_storms, 4u);
  EXPECT_EQ(r->pfc_watchdog_restored, 4u);
  EXPECT_FALSE(r->pfc_deadlock);
  EXPECT_NE(r->pfc_field_summary.find("storm detected"), std::string::npos);
}

TEST(PfcDeadlockScenarioTest, ReroutedFlowsCloseACycleOfPauses) {
  auto sc = LoadScenario(std::string(FATHOM_SOURCE_DIR) + "/scenarios/faults/pfc_deadlock.yaml");
  ASSERT_TRUE(sc.ok()) << sc.status().ToString();
  auto r = RunScenario(*sc, RunOptions{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(CheckExpectations(sc->spec, *r).empty());
  EXPECT_TRUE(r->pfc_deadlock);
  // The ring spine0 -> leaf1 -> spine1 -> leaf2 -> spine0, by egress port.
  EXPECT_EQ(r->pfc_deadlock_cycle, "leaf1:3 -> spine1:2 -> leaf2:2 -> spine0:1 -> leaf1:3");
  EXPECT_EQ(r->flows_stalled, 6);
  EXPECT_NE(r->pfc_field_summary.find("PFC deadlock"), std::string::npos);
  // Without the bounces (plain link failures, no reroute) there is no
  // cycle: the same flows are not deadlocked.
  proto::Scenario plain = sc->spec;
  for (proto::FaultSpec& f : *plain.mutable_faults()) f.clear_reroute_via();
  LoadedScenario sc2 = *sc;
  sc2.spec = plain;
  auto r2 = RunScenario(sc2, RunOptions{});
  ASSERT_TRUE(r2.ok());
  EXPECT_FALSE(r2->pfc_deadlock);
}

// Bad input names the file, the line and the field.
void ExpectBad(const std::string& qos_extra, const std::string& faults, const std::string& field) {
  const std::string text = R"(name: bad
end_time_us: 1000
topology: {leaf_spine: {leaves: 2, spines: 1, hosts_per_leaf: 2, gpus_per_server: 2}}
network:
  qos:
    classes:
      - {priority: 3, lossless: true, xoff_bytes: 65536, xon_bytes: 32768}
)" + qos_extra + R"(workload: {pattern: permutation, flow_bytes: 4096}
)" + faults;
  auto sc = LoadScenarioString(text, "bad.yaml");
  ASSERT_FALSE(sc.ok()) << field;
  EXPECT_NE(sc.status().message().find("bad.yaml:"), std::string::npos) << sc.status().message();
  EXPECT_NE(sc.status().message().find(field), std::string::npos) << sc.status().message();
}

TEST(PfcFieldBadInputTest, NamesTheField) {
  ExpectBad("    pfc_watchdog: {detection_time_ms: 6000}\n", "",
            "network.qos.pfc_watchdog.detection_time_ms");
  ExpectBad("    pfc_watchdog: {detection_time_ms: 0}\n", "",
            "network.qos.pfc_watchdog.detection_time_ms");
  ExpectBad("    pfc_watchdog: {restoration_time_ms: -1}\n", "",
            "network.qos.pfc_watchdog.restoration_time_ms");
  ExpectBad("    pfc_watchdog: {detection_time_ms: 100, poll_interval_ms: 150}\n", "",
            "network.qos.pfc_watchdog.poll_interval_ms");
  ExpectBad("    pfc_watchdog: {action: alert}\n", "", "network.qos.pfc_watchdog.action");
  ExpectBad("", "faults:\n  - {kind: pfc_storm, host: h0, priority: 4}\n", "faults[0].priority");
  ExpectBad("", "faults:\n  - {kind: pfc_storm, host: h0, priority: 9}\n", "faults[0].priority");
  ExpectBad("", "faults:\n  - {kind: pfc_storm, link: leaf0-spine0}\n", "faults[0]");
  ExpectBad("", "faults:\n  - {kind: loss, link: leaf0-spine0, priority: 3}\n",
            "faults[0].priority");
}

}  // namespace
}  // namespace fathom::sim
