// The hangs of issue 6, reproduced in the simulator with fault timelines, each
// asserting its signature: which flows complete, which stall or fail, the
// completion status and when, which counters move (CASES.md 4, 9, 11, 12, 15,
// 18). Small leaf-spine fabrics keep them fast; every run is seeded.
#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "fabric/scenario/fault_attach.h"
#include "fabric/scenario/workload.h"
#include "fabric/sim/engine.h"
#include "fabric/sim/network.h"
#include "proto/faults.pb.h"
#include "proto/yaml_loader.h"
#include "topologies/builders.h"

namespace fathom::sim {
namespace {

constexpr BitsPerSecond k100G = BitsPerSecond::Gbps(100);

// 4 leaves x 4 spines, 4 hosts per leaf, 100 Gb/s everywhere, MTU 4200.
topo::Topology Fabric() {
  topo::LeafSpineOptions o;
  o.leaves = 4;
  o.spines = 4;
  o.hosts_per_leaf = 4;
  o.gpus_per_server = 1;
  o.host_link = topo::LinkParams{k100G, Picoseconds::FromNanoseconds(100), 4200};
  o.fabric_link = topo::LinkParams{k100G, Picoseconds::FromNanoseconds(300), 4200};
  return topo::BuildLeafSpine(o).value();
}

// The leaf a host rank hangs off.
std::string LeafOf(const topo::Topology& t, int32_t rank) {
  const int32_t node = t.hosts()[static_cast<size_t>(rank)];
  const topo::Link& l = t.link(t.LinksOf(node)[0]);
  return t.node(l.a == node ? l.b : l.a).name;
}

struct SimRun {
  std::vector<Flow> flows;
  std::vector<FlowResult> results;
  QpCounters qp;
  std::vector<FaultAttachment::FaultReport> faults;
  std::string summary;
  std::set<int> completed, failed, stalled;
  uint64_t status_count(WcStatus s) const { return statuses[static_cast<size_t>(s)]; }
  std::array<uint64_t, 32> statuses{};
  // What each host's NIC saw: port events, and whether it crashed.
  std::vector<std::vector<Nic::PortEvent>> port_events;
  std::vector<bool> crashed;
};

SimRun Simulate(const topo::Topology& topo, const std::string& faults_yaml, std::vector<Flow> flows,
                const FlowOptions& options, Picoseconds until, uint64_t seed = 1) {
  SimRun run;
  Engine engine(seed);
  Network net(&engine, &topo, NetworkConfig{});
  proto::FaultTimeline timeline;
  config::SourceMap map("hang_test.yaml");
  config::YamlLoadOptions lo;
  lo.source_map = &map;
  const Status loaded = config::LoadYamlString(faults_yaml, "hang_test.yaml", &timeline, lo);
  EXPECT_TRUE(loaded.ok()) << loaded.ToString();
  auto attached = FaultAttachment::Attach(&net, timeline.faults(), seed, map);
  EXPECT_TRUE(attached.ok()) << attached.status().ToString();
  FlowDriver driver(&net, flows, options);
  const Status setup = driver.Setup();
  EXPECT_TRUE(setup.ok()) << setup.ToString();
  engine.Run(until);
  run.flows = driver.flows();
  run.results = driver.results();
  run.qp = net.TotalQpCounters();
  run.statuses = driver.status_counts();
  for (int32_t r = 0; r < net.host_count(); ++r) {
    run.port_events.push_back(net.nic(r).TakePortEvents());
    run.crashed.push_back(net.nic(r).crashed());
  }
  if (attached.ok()) {
    run.faults = (*attached)->Report(engine.Now());
    run.summary = (*attached)->Summary(engine.Now());
  }
  for (size_t i = 0; i < run.results.size(); ++i) {
    const int f = static_cast<int>(i);
    switch (run.results[i].state) {
      case FlowState::kDone:
        run.completed.insert(f);
        break;
      case FlowState::kFailed:
        run.failed.insert(f);
        break;
      case FlowState::kPending:
        run.stalled.insert(f);
        break;
    }
  }
  return run;
}

// Flows between leaf0's hosts and every other leaf's hosts, both ways, plus
// flows among the other leaves (which never touch a leaf0 link).
std::vector<Flow> CrossFlows(const topo::Topology& t, uint64_t bytes) {
  std::vector<Flow> flows;
  const int32_t hosts = static_cast<int32_t>(t.hosts().size());
  for (int32_t a = 0; a < hosts; ++a) {
    for (int32_t b = 0; b < hosts; ++b) {
      if (a == b || LeafOf(t, a) == LeafOf(t, b)) continue;
      if ((a + b) % 3 != 0) continue;  // a sample keeps the test quick
      flows.push_back(Flow{a, b, bytes, Picoseconds()});
    }
  }
  return flows;
}

bool TouchesLeaf0(const topo::Topology& t, const Flow& f) {
  return LeafOf(t, f.src) == "leaf0" || LeafOf(t, f.dst) == "leaf0";
}

Picoseconds AckTimeout(int timeout) { return Picoseconds(4096 * 1000LL << timeout); }

// 1. MTU mismatch: leaf0-spine0 carries at most 1500-byte IP packets, the
// QPs use MTU 4096 (CASES.md 3, 4).
TEST(Hang, MtuMismatchStallsOnlyLargeMessagesThroughTheLink) {
  const topo::Topology t = Fabric();
  const std::string faults = "faults:\n  - {kind: mtu, link: leaf0-spine0, mtu_bytes: 1500}\n";
  FlowOptions o;
  o.qp.timeout = 8;  // 1.05 ms
  o.qp.retry_cnt = 3;
  const Picoseconds until = Picoseconds::FromMilliseconds(20);

  // Small messages pass everywhere.
  SimRun small = Simulate(t, faults, CrossFlows(t, 1000), o, until);
  EXPECT_EQ(small.completed.size(), small.flows.size());
  EXPECT_EQ(small.faults[0].counters.port_xmit_discards, 0u);

  // Large ones through the link fail with IBV_WC_RETRY_EXC_ERR after
  // (retry_cnt + 1) local ACK timeouts; the rest complete.
  SimRun big = Simulate(t, faults, CrossFlows(t, 64 * 1024), o, until);
  EXPECT_GT(big.failed.size(), 0u);
  EXPECT_GT(big.completed.size(), big.failed.size());
  EXPECT_TRUE(big.stalled.empty());
  bool leaf0_flow_completed = false;
  for (int f : big.failed) {
    EXPECT_TRUE(TouchesLeaf0(t, big.flows[f])) << "flow " << f;
    EXPECT_EQ(big.results[f].first_error, WcStatus::kRetryExcErr);
    const Picoseconds budget = AckTimeout(8) * 4;
    EXPECT_GE(big.results[f].end, budget);
    EXPECT_LT(big.results[f].end, budget + AckTimeout(8));
  }
  for (int f : big.completed) leaf0_flow_completed |= TouchesLeaf0(t, big.flows[f]);
  EXPECT_TRUE(leaf0_flow_completed) << "ECMP paths avoiding leaf0-spine0 must complete";
  EXPECT_GT(big.faults[0].counters.port_xmit_discards, 0u);
  EXPECT_EQ(big.status_count(WcStatus::kRetryExcErr), big.failed.size());
  EXPECT_GT(big.qp.retry_exceeded_err, 0u);

  // rxe semantics (retry_cnt 7 = infinite): the same flows never complete,
  // nothing fails, and retransmissions keep climbing.
  o.qp.retry_cnt = 7;
  o.qp.rxe_infinite_retry = true;
  SimRun rxe = Simulate(t, faults, CrossFlows(t, 64 * 1024), o, until);
  EXPECT_TRUE(rxe.failed.empty());
  EXPECT_EQ(rxe.stalled, big.failed);
  EXPECT_GT(rxe.qp.retransmitted_packets, big.qp.retransmitted_packets);
  std::printf("%s", big.summary.c_str());
}

// 2. A flap shorter than the retry budget costs retransmissions; a longer
// outage fails the QPs using the link with error 12 (CASES.md 9, 12).
TEST(Hang, ShortFlapRetransmitsLongOutageFailsWithRetryExceeded) {
  const topo::Topology t = Fabric();
  FlowOptions o;
  o.qp.timeout = 6;    // 262 us
  o.qp.retry_cnt = 2;  // budget ~ 3 x 262 us = 786 us
  const Picoseconds until = Picoseconds::FromMilliseconds(20);
  std::vector<Flow> flows = {{0, 4, 1 << 20, Picoseconds()},
                             {1, 8, 1 << 20, Picoseconds()},
                             {2, 12, 1 << 20, Picoseconds()},
                             {5, 9, 1 << 20, Picoseconds()}};
  // Every leaf0 uplink flaps: 100 us down every 2 ms, from t = 20 us.
  SimRun flap = Simulate(t,
                         "faults:\n  - {kind: link_flap, link: \"leaf0-*\", start_us: 20, "
                         "duration_us: 100, period_us: 2000}\n",
                         flows, o, until);
  EXPECT_EQ(flap.completed.size(), flows.size());
  EXPECT_GT(flap.qp.retransmitted_packets, 0u);
  EXPECT_GT(flap.faults[0].counters.frames_dropped, 0u);
  EXPECT_GE(flap.faults[0].counters.link_downed, 1u);

  SimRun down = Simulate(t,
                         "faults:\n  - {kind: link_down, link: \"leaf0-*\", start_us: 20, "
                         "duration_us: 5000}\n",
                         flows, o, until);
  for (size_t f = 0; f < flows.size(); ++f) {
    if (TouchesLeaf0(t, flows[f])) {
      EXPECT_EQ(down.results[f].state, FlowState::kFailed) << f;
      EXPECT_EQ(down.results[f].first_error, WcStatus::kRetryExcErr) << f;
      EXPECT_LT(down.results[f].end, Picoseconds::FromMicroseconds(5020));
    } else {
      EXPECT_EQ(down.results[f].state, FlowState::kDone) << f;
    }
  }
}

// A flapping host link reaches the host's NIC as port events at each
// transition (CASES.md 9: "Got async event : port error"); hosts whose links
// do not flap see none.
TEST(Hang, HostLinkFlapRaisesPortEventsAtEachTransition) {
  const topo::Topology t = Fabric();
  FlowOptions o;
  o.qp.timeout = 6;
  o.qp.retry_cnt = 7;
  const std::string host0 = t.node(t.hosts()[0]).name;
  // Down 20-120 us and 520-620 us (period 500 us, no outage from 1000 us).
  const std::string faults =
      "faults:\n  - {kind: link_flap, host: \"" + host0 +
      "\", start_us: 20, duration_us: 100, period_us: 500, until_us: 1000}\n";
  SimRun r = Simulate(t, faults, {{0, 4, 16 << 20, Picoseconds()}, {5, 9, 1 << 20, Picoseconds()}},
                      o, Picoseconds::FromMilliseconds(5));
  const std::vector<Nic::PortEvent>& ev = r.port_events[0];
  ASSERT_EQ(ev.size(), 4u);
  const int64_t us[] = {20, 120, 520, 620};
  for (size_t i = 0; i < ev.size(); ++i) {
    EXPECT_EQ(ev[i].at, Picoseconds::FromMicroseconds(us[i])) << i;
    EXPECT_EQ(ev[i].up, i % 2 == 1) << i;
  }
  for (size_t h = 1; h < r.port_events.size(); ++h) EXPECT_TRUE(r.port_events[h].empty()) << h;
  // The flow survives the two short outages (retry budget is infinite-ish).
  EXPECT_EQ(r.completed.size(), 2u);
}

// A crashed host's NIC goes silent: its peer's QP exhausts its retries with
// IBV_WC_RETRY_EXC_ERR, while the crashed side reports nothing at all (its
// flow neither completes nor fails), and flows elsewhere complete.
TEST(Hang, HostCrashSilencesTheNicAndItsPeersFailWithRetryExceeded) {
  const topo::Topology t = Fabric();
  FlowOptions o;
  o.qp.timeout = 6;    // 262 us
  o.qp.retry_cnt = 2;  // fails ~786 us after the last progress
  const std::string host4 = t.node(t.hosts()[4]).name;
  SimRun r = Simulate(t, "faults:\n  - {kind: host_crash, host: \"" + host4 + "\", start_us: 30}\n",
                      {{0, 4, 8 << 20, Picoseconds()},
                       {4, 0, 8 << 20, Picoseconds()},
                       {5, 9, 1 << 20, Picoseconds()}},
                      o, Picoseconds::FromMilliseconds(20));
  EXPECT_TRUE(r.crashed[4]);
  EXPECT_FALSE(r.crashed[0]);
  EXPECT_EQ(r.results[0].state, FlowState::kFailed);
  EXPECT_EQ(r.results[0].first_error, WcStatus::kRetryExcErr);
  // (retry_cnt + 1) local ACK timeouts after the last ACK, which came
  // before the crash.
  EXPECT_GT(r.results[0].end, Picoseconds::FromMicroseconds(3 * 262));
  EXPECT_LT(r.results[0].end, Picoseconds::FromMicroseconds(30 + 3 * 262 + 10));
  EXPECT_EQ(r.results[1].state, FlowState::kPending);  // the dead host says nothing
  EXPECT_EQ(r.results[2].state, FlowState::kDone);
}

// Goodput of a set of flows: bytes of completed flows over the latest end.
double GoodputGbps(const SimRun& r) {
  uint64_t bytes = 0;
  Picoseconds last;
  for (size_t i = 0; i < r.results.size(); ++i) {
    if (r.results[i].state != FlowState::kDone) continue;
    bytes += r.flows[i].bytes;
    last = std::max(last, r.results[i].end - r.flows[i].start);
  }
  return last.ps() > 0 ? static_cast<double>(bytes) * 8 / last.seconds() / 1e9 : 0;
}

// 3. FEC cliff: sweeping the pre-FEC BER across KP4's limit (CASES.md 18).
TEST(Hang, FecCliffCorrectedThenUncorrectable) {
  const topo::Topology t = Fabric();
  FlowOptions o;
  o.qp.timeout = 6;
  o.qp.retry_cnt = 7;
  const std::vector<Flow> flows = {{0, 4, 4 << 20, Picoseconds()}};
  const Picoseconds until = Picoseconds::FromMilliseconds(30);
  std::vector<double> goodput;
  std::vector<uint64_t> corrected, uncorrectable;
  for (double ber : {0.0, 1e-5, 1e-4, 1e-3, 3e-3, 6e-3}) {
    char yaml[160];
    std::snprintf(yaml, sizeof(yaml),
                  "faults:\n  - {kind: fec, link: h0-leaf0, fec_mode: kp4, pre_fec_ber: %g}\n",
                  ber);
    SimRun r = Simulate(t, yaml, flows, o, until);
    goodput.push_back(GoodputGbps(r));
    corrected.push_back(r.faults[0].counters.fec_corrected_blocks);
    uncorrectable.push_back(r.faults[0].counters.fec_uncorrectable_blocks);
    std::printf("fec kp4 ber=%g goodput=%.2f Gb/s corrected=%llu uncorrectable=%llu\n", ber,
                goodput.back(), static_cast<unsigned long long>(corrected.back()),
                static_cast<unsigned long long>(uncorrectable.back()));
  }
  EXPECT_GT(goodput[0], 80);  // near line rate on a clean 100G link
  EXPECT_GT(goodput[1], 0.97 * goodput[0]);
  EXPECT_GT(goodput[2], 0.97 * goodput[0]);
  EXPECT_GT(corrected[2], 0u);
  EXPECT_EQ(uncorrectable[2], 0u);          // corrected blocks first...
  EXPECT_GT(uncorrectable[4], 0u);          // ...uncorrectable after
  EXPECT_LT(goodput[5], 0.1 * goodput[0]);  // the cliff
}

// 4. Random loss on one link: go-back-N goodput collapse, quantified.
TEST(Hang, RandomLossCollapsesGoBackNGoodput) {
  const topo::Topology t = Fabric();
  FlowOptions o;
  o.qp.timeout = 6;
  o.qp.retry_cnt = 7;
  o.qp.rxe_infinite_retry = true;
  const std::vector<Flow> flows = {{0, 4, 32 << 20, Picoseconds()}};
  const Picoseconds until = Picoseconds::FromMilliseconds(500);
  std::vector<double> goodput;
  for (double rate : {0.0, 0.001, 0.01, 0.05}) {
    char yaml[128];
    std::snprintf(yaml, sizeof(yaml), "faults:\n  - {kind: loss, link: h0-leaf0, rate: %g}\n",
                  rate);
    SimRun r = Simulate(t, yaml, flows, o, until);
    goodput.push_back(GoodputGbps(r));
    std::printf("loss %.1f%%: goodput %.2f Gb/s, retransmitted %llu, dropped %llu\n", rate * 100,
                goodput.back(), static_cast<unsigned long long>(r.qp.retransmitted_packets),
                static_cast<unsigned long long>(r.faults[0].counters.frames_dropped));
    if (rate > 0) {
      EXPECT_GT(r.qp.retransmitted_packets, 0u);
    }
  }
  EXPECT_GT(goodput[0], goodput[1]);
  EXPECT_GT(goodput[1], goodput[2]);
  EXPECT_GT(goodput[2], goodput[3]);
  EXPECT_LT(goodput[3], 0.5 * goodput[0]);
}

// 5. A black-holed ECMP next hop: only the flows hashed onto it stall; more
// QPs per connection change which (CASES.md 15).
TEST(Hang, BlackHoledNextHopStallsOnlyFlowsHashedOntoIt) {
  const topo::Topology t = Fabric();
  const std::string faults = "faults:\n  - {kind: black_hole, link: leaf0-spine0, from: leaf0}\n";
  FlowOptions o;
  o.qp.timeout = 8;
  o.qp.retry_cnt = 3;
  const Picoseconds until = Picoseconds::FromMilliseconds(20);
  SimRun one = Simulate(t, faults, CrossFlows(t, 64 * 1024), o, until);
  EXPECT_GT(one.failed.size(), 0u);
  EXPECT_GT(one.completed.size(), 0u);
  for (int f : one.failed) {
    // Data from leaf0, or ACKs back from leaf0, hashed onto the dark uplink.
    EXPECT_TRUE(TouchesLeaf0(t, one.flows[f])) << "flow " << f;
    EXPECT_EQ(one.results[f].first_error, WcStatus::kRetryExcErr);
  }
  EXPECT_GT(one.faults[0].counters.frames_dropped, 0u);
  o.qps_per_connection = 4;
  SimRun four = Simulate(t, faults, CrossFlows(t, 64 * 1024), o, until);
  EXPECT_NE(four.failed, one.failed);
  // With 4 QPs a flow fails if any of its QPs hashes onto spine0.
  EXPECT_GE(four.failed.size(), one.failed.size());
}

}  // namespace
}  // namespace fathom::sim
