// PFC (fabric/sim/pfc.h): pause and resume of a port's egress class (the
// frame in progress goes on, queued frames wait, order is kept, other
// classes pass), PAUSE frames on the wire with their quanta and refresh,
// and a 16:1 incast on a lossless class across two switch tiers: no drop,
// pause on every hop toward the senders, the bottleneck kept busy.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "fabric/scenario/capture.h"
#include "fabric/scenario/scenario.h"
#include "fabric/scenario/workload.h"
#include "fabric/sim/network.h"
#include "fabric/sim/port.h"
#include "tests/scratch_dir.h"
#include "topologies/builders.h"

namespace fathom::sim {
namespace {

// Runs fn at virtual time `at`.
struct Later {
  std::function<void()> fn;
  static void Run(void* obj, uint64_t) {
    auto* self = static_cast<Later*>(obj);
    self->fn();
  }
};
void At(Engine& e, std::vector<std::unique_ptr<Later>>& keep, int64_t at_ps,
        std::function<void()> fn) {
  keep.push_back(std::make_unique<Later>(Later{std::move(fn)}));
  e.Schedule<&Later::Run>(Picoseconds(at_ps), EventKind::kUser, 0, keep.back().get(), 0);
}

struct Sink {
  PacketPool* pool;
  Engine* engine;
  std::vector<int64_t> arrivals;
  std::vector<uint32_t> psns;
  static void Receive(void* obj, Packet* p, int32_t) {
    auto* s = static_cast<Sink*>(obj);
    s->arrivals.push_back(s->engine->Now().ps());
    s->psns.push_back(p->psn);
    s->pool->Free(p);
  }
};

// 10 Gb/s (800 ps a byte): a 1000-byte frame takes 800 ns; cable 1 ns.
struct Rig {
  Engine engine;
  PacketPool pool;
  HugePageArena arena;
  DropStats drops;
  Port tx;
  Port rx;
  Sink sink{&pool, &engine, {}, {}};
  QpFlow flow0;  // class 0
  QpFlow flow3;  // class 3
  std::vector<std::unique_ptr<Later>> later;
  Rig()
      : tx(&engine, &pool, &arena, &drops, Config(0, 1 << 20)),
        rx(&engine, &pool, &arena, &drops, Config(1, 0)) {
    tx.Connect(&rx, &Sink::Receive, &sink);
    rx.Connect(&tx, &Sink::Receive, &sink);
    flow3.buffer_class = 3;
  }
  static PortConfig Config(int node, int64_t buffer_bytes) {
    PortConfig c;
    c.node = node;
    c.index = 0;
    c.rate = BitsPerSecond::Gbps(10);
    c.latency = Picoseconds(1000);
    c.buffer_bytes = buffer_bytes;
    return c;
  }
  void Send(int cls, uint32_t psn) {
    Packet* p = pool.Alloc();
    p->flow = cls == 3 ? &flow3 : &flow0;
    p->buffer_class = static_cast<uint8_t>(cls);
    p->psn = psn;
    p->wire_bytes = 1000;
    tx.Send(p);
  }
  void PauseTx(uint8_t classes, uint16_t quanta) {
    uint16_t q[kPriorities];
    for (uint16_t& v : q) v = quanta;
    tx.OnPauseFrame(classes, q);
  }
};

constexpr int64_t kNs = 1000;

TEST(PfcPort, PauseLetsTheFrameInProgressGoAndHoldsQueuedOnesInOrder) {
  Rig rig;
  for (uint32_t i = 1; i <= 4; ++i) rig.Send(3, i);  // start at 0, 800, 1600, 2400 ns
  At(rig.engine, rig.later, 100 * kNs, [&] { rig.PauseTx(1u << 3, 0xFFFF); });
  // While paused: class 3 waits behind its queue, class 0 passes.
  At(rig.engine, rig.later, 200 * kNs, [&] {
    rig.Send(3, 5);
    rig.Send(0, 100);
  });
  At(rig.engine, rig.later, 5000 * kNs, [&] {
    EXPECT_EQ(rig.tx.paused_classes(), 1u << 3);
    EXPECT_EQ(rig.tx.waiting_bytes(3), 4000);
    rig.PauseTx(1u << 3, 0);  // XON
  });
  rig.engine.Run();
  ASSERT_EQ(rig.sink.psns.size(), 6u);
  // Frame 1 was in progress: it arrives at 800 ns + 1 ns. Class 0's frame
  // follows it at once; frames 2..5 go from the XON on, in order.
  EXPECT_EQ(rig.sink.psns, (std::vector<uint32_t>{1, 100, 2, 3, 4, 5}));
  EXPECT_EQ(rig.sink.arrivals[0], 801 * kNs);
  EXPECT_EQ(rig.sink.arrivals[1], 1601 * kNs);
  EXPECT_EQ(rig.sink.arrivals[2], 5801 * kNs);
  EXPECT_EQ(rig.sink.arrivals[5], 8201 * kNs);
  EXPECT_EQ(rig.tx.paused_classes(), 0);
  EXPECT_EQ(rig.tx.pfc()->counters.rx_pause[3], 2u);
  EXPECT_EQ(rig.tx.pfc()->counters.rx_pause_duration_ps[3], 4900 * kNs);
  EXPECT_EQ(rig.tx.counters().port_xmit_packets, 6u);
  EXPECT_EQ(rig.tx.queued_bytes(3), 0);
  EXPECT_EQ(rig.drops.total(), 0u);
}

TEST(PfcPort, PauseQuantaExpire) {
  Rig rig;
  rig.PauseTx(1u << 3, 100);  // 100 x 512 bits at 10 Gb/s = 5.12 us
  rig.Send(3, 1);
  rig.engine.Run();
  ASSERT_EQ(rig.sink.arrivals.size(), 1u);
  EXPECT_EQ(rig.sink.arrivals[0], 5120 * kNs + 800 * kNs + 1 * kNs);
}

TEST(PfcPort, RefreshedPauseEndsAtTheLastFramesQuantaWithOneExpiryPending) {
  // 100 quanta = 5.12 us at 10 Gb/s. A frame every 1 us for 20 us: the
  // pause ends 5.12 us after the last (at 19 us), not at an earlier
  // frame's expiry; each refresh only moves the expiry, and the one
  // pending event re-arms itself, so the run dispatches a few expiry
  // events rather than one per frame.
  Rig rig;
  for (int i = 0; i < 20; ++i) {
    At(rig.engine, rig.later, i * 1000 * kNs, [&] { rig.PauseTx(1u << 3, 100); });
  }
  At(rig.engine, rig.later, 1 * kNs, [&] { rig.Send(3, 1); });
  const uint64_t events = rig.engine.Run();
  ASSERT_EQ(rig.sink.arrivals.size(), 1u);
  EXPECT_EQ(rig.sink.arrivals[0], 19000 * kNs + 5120 * kNs + 800 * kNs + 1 * kNs);
  EXPECT_EQ(rig.tx.pfc()->counters.rx_pause[3], 20u);
  EXPECT_EQ(rig.tx.pfc()->counters.rx_pause_duration_ps[3], 24120 * kNs);
  // 20 frames, the send, its arrival, and 5 expiries: at 5.12 us (the
  // first frame's), re-armed at 9.12, 14.12 and 19.12 us (the quanta of
  // the last frame before each), and at 24.12 us the one that resumes.
  // One event per frame would be 20 expiries.
  EXPECT_EQ(events, 20u + 1u + 1u + 5u);
}

TEST(PfcPort, AShorterPauseEndsBeforeTheLongerOnePending) {
  // 0xFFFF quanta (3.36 ms at 10 Gb/s), then 100 quanta from 1 us: the
  // last frame's quanta rule (802.1Qbb), so the pause ends at 6.12 us and
  // the longer pending expiry finds nothing to do.
  Rig rig;
  rig.PauseTx(1u << 3, 0xFFFF);
  At(rig.engine, rig.later, 1000 * kNs, [&] { rig.PauseTx(1u << 3, 100); });
  rig.Send(3, 1);
  rig.engine.Run();
  ASSERT_EQ(rig.sink.arrivals.size(), 1u);
  EXPECT_EQ(rig.sink.arrivals[0], 1000 * kNs + 5120 * kNs + 800 * kNs + 1 * kNs);
  EXPECT_EQ(rig.tx.paused_classes(), 0);
  EXPECT_EQ(rig.tx.pfc()->counters.rx_pause_duration_ps[3], 6120 * kNs);
}

TEST(PfcPort, PauseFramesCrossTheWireAndRefreshUntilReleased) {
  Rig rig;
  // rx asserts XOFF on class 3 toward tx (its far end) until released.
  rig.rx.EmitPause(1u << 3, Picoseconds(0));
  for (uint32_t i = 1; i <= 2; ++i) rig.Send(3, i);
  rig.Send(0, 100);
  // The PAUSE frame: 84 wire bytes at 10 Gb/s = 67.2 ns, + 1 ns of cable.
  At(rig.engine, rig.later, 69 * kNs, [&] { EXPECT_EQ(rig.tx.paused_classes(), 1u << 3); });
  // 0xFFFF quanta at 10 Gb/s last 3.355 ms: refreshed every 1.68 ms, the
  // pause holds for 10 ms.
  At(rig.engine, rig.later, 10000000 * kNs, [&] {
    EXPECT_EQ(rig.tx.paused_classes(), 1u << 3);
    EXPECT_EQ(rig.sink.psns, (std::vector<uint32_t>{1, 100}));
    rig.rx.ReleasePause(1u << 3);
  });
  rig.engine.Run();
  EXPECT_EQ(rig.sink.psns, (std::vector<uint32_t>{1, 100, 2}));
  const PfcCounters& rx = rig.rx.pfc()->counters;
  const PfcCounters& tx = rig.tx.pfc()->counters;
  // XOFF at 0, refreshes at 1.68, 3.36, ... 8.39 ms (5), XON at 10 ms.
  EXPECT_EQ(rx.tx_pause[3], 7u);
  EXPECT_EQ(tx.rx_pause[3], 7u);
  EXPECT_EQ(rx.tx_pause[0], 0u);
  EXPECT_EQ(rx.tx_pause_duration_ps[3], 10000000 * kNs);
  // Paused from the XOFF's arrival to the XON's.
  EXPECT_EQ(tx.rx_pause_duration_ps[3], 10000000 * kNs);
}

TEST(PfcPort, MacControlGoesAheadOfQueuedData) {
  Rig rig;
  // tx has 3 frames queued; a PAUSE it sends goes right after the first.
  for (uint32_t i = 1; i <= 3; ++i) rig.Send(0, i);
  At(rig.engine, rig.later, 100 * kNs, [&] { rig.tx.SendPause(1u << 3, 0xFFFF); });
  rig.engine.Run();
  // The PAUSE took 67.2 ns after frame 1 (800 ns): frame 2 ends at 1667.2.
  ASSERT_EQ(rig.sink.arrivals.size(), 3u);
  EXPECT_EQ(rig.sink.arrivals[1], 1667200 + 1000);
  // The far end's egress (rx) obeyed it, until its 0xFFFF quanta ran out.
  EXPECT_EQ(rig.rx.pfc()->counters.rx_pause[3], 1u);
  EXPECT_EQ(rig.tx.pfc()->counters.tx_pause[3], 1u);
  EXPECT_EQ(rig.rx.pfc()->counters.rx_pause_duration_ps[3], 3355392 * kNs);
}

TEST(PfcPort, WatchdogHooksDropOrForwardWaitingFrames) {
  Rig rig;
  rig.PauseTx(1u << 3, 0xFFFF);
  for (uint32_t i = 1; i <= 3; ++i) rig.Send(3, i);
  At(rig.engine, rig.later, 10 * kNs, [&] {
    rig.tx.DropWaiting(3);
    rig.Send(3, 4);
    rig.tx.ForwardWaiting(3);
    rig.tx.IgnorePause(3, Picoseconds(1000000 * kNs));
    rig.PauseTx(1u << 3, 0xFFFF);  // ignored
    rig.Send(3, 5);
  });
  rig.engine.Run();
  EXPECT_EQ(rig.sink.psns, (std::vector<uint32_t>{4, 5}));
  EXPECT_EQ(rig.tx.pfc()->counters.watchdog_dropped[3], 3u);
  EXPECT_EQ(rig.tx.pfc()->counters.watchdog_forwarded[3], 1u);
  EXPECT_EQ(rig.drops.by_reason[static_cast<size_t>(DropReason::kPfcWatchdog)], 3u);
  EXPECT_EQ(rig.tx.queued_bytes(3), 0);
}

// The 16:1 incast: 3 leaves of 8 hosts, 2 spines, 400 Gb/s; h1..h16 write
// to h0 on DSCP 26 (priority 3). Senders h1..h7 share h0's leaf; h8..h15 sit
// behind leaf1 and h16 behind leaf2, two switch hops further.
struct Incast {
  Engine engine{1};
  topo::Topology topo;
  std::unique_ptr<Network> net;
  std::unique_ptr<FlowDriver> driver;
  static constexpr uint64_t kFlowBytes = 256 * 1024;

  explicit Incast(bool lossless, const std::string& pcap_link = "", const std::string& pcap = "",
                  int64_t headroom_bytes = 0) {
    topo::LeafSpineOptions o;
    o.leaves = 3;
    o.spines = 2;
    o.hosts_per_leaf = 8;
    o.gpus_per_server = 8;
    topo = topo::BuildLeafSpine(o).value();
    NetworkConfig nc;
    nc.switch_buffer_bytes = 256 * 1024;
    if (lossless) {
      nc.qos.classes[3].lossless = true;
      nc.qos.classes[3].xoff_bytes = 32 * 1024;
      nc.qos.classes[3].xon_bytes = 16 * 1024;
      nc.qos.headroom_bytes = headroom_bytes;
    }
    net = std::make_unique<Network>(&engine, &topo, nc);
    FlowOptions fo;
    fo.qp.traffic_class = 26 << 2;
    fo.qp.timeout = 14;
    driver = std::make_unique<FlowDriver>(
        net.get(), IncastFlows(net->host_count(), 0, 16, kFlowBytes, Picoseconds(0)), fo);
    EXPECT_TRUE(driver->Setup().ok());
    std::unique_ptr<PortCapture> cap;
    if (!pcap.empty()) {
      cap = PortCapture::Open(topo, pcap_link, pcap).value();
      cap->Attach(net.get());
    }
    engine.Run(Picoseconds::FromMicroseconds(2000));
    if (cap) {
      EXPECT_TRUE(cap->Flush().ok());
      cap->Detach();
    }
  }
  Port& PortTo(const char* from, const char* to) const {
    const int32_t a = topo.FindNode(from).value();
    const int32_t b = topo.FindNode(to).value();
    for (int32_t i = 0; i < topo.PortCount(a); ++i) {
      if (topo.Peer(a, i).node == b) return net->port(a, i);
    }
    ADD_FAILURE() << "no port " << from << " -> " << to;
    return net->port(a, 0);
  }
  // PAUSE frames on class 3 sent from `from` toward `to`.
  uint64_t PausesSent(const char* from, const char* to) const {
    const PortPfc* p = PortTo(from, to).pfc();
    return p == nullptr ? 0 : p->counters.tx_pause[3];
  }
  uint64_t PausesReceived(const char* at, const char* from) const {
    const PortPfc* p = PortTo(at, from).pfc();
    return p == nullptr ? 0 : p->counters.rx_pause[3];
  }
};

TEST(PfcIncast, LosslessClassDropsNothingAndPausePropagatesToTheSenders) {
  Incast run(true);
  EXPECT_EQ(run.driver->completed(), 16);
  EXPECT_EQ(run.net->drops().total(), 0u);
  // Hop by hop toward the senders: h0's leaf pauses its local senders and
  // the spines; the spines pause leaf1 and leaf2; those pause their hosts.
  EXPECT_GT(run.PausesSent("leaf0", "h1"), 0u);
  EXPECT_GT(run.PausesReceived("h1", "leaf0"), 0u);
  EXPECT_GT(run.PausesSent("leaf0", "spine0") + run.PausesSent("leaf0", "spine1"), 0u);
  EXPECT_GT(run.PausesSent("spine0", "leaf1") + run.PausesSent("spine1", "leaf1"), 0u);
  EXPECT_GT(run.PausesSent("leaf1", "h8"), 0u);
  EXPECT_GT(run.PausesReceived("h8", "leaf1"), 0u);
  // The receiver asserts nothing.
  EXPECT_EQ(run.PausesSent("h0", "leaf0"), 0u);
  // Goodput at the bottleneck (leaf0 -> h0): its wire time busy over the
  // incast's span, from the start to the last completion.
  Picoseconds last;
  for (const FlowResult& r : run.driver->results()) last = std::max(last, r.end);
  const PortCounters c = run.PortTo("leaf0", "h0").counters();
  const uint64_t wire_bytes = c.port_xmit_data + c.port_xmit_packets * wire::kPreambleSfdGapBytes;
  const double busy_ps = static_cast<double>(wire_bytes) * 8 / 400e9 * 1e12;
  const double utilization = busy_ps / static_cast<double>(last.ps());
  std::printf("incast 16:1 lossless: %.2f us, bottleneck busy %.2f%%, payload %.2f Gb/s\n",
              static_cast<double>(last.ps()) / 1e6, utilization * 100,
              16.0 * Incast::kFlowBytes * 8 / (static_cast<double>(last.ps()) / 1e12) / 1e9);
  EXPECT_GT(utilization, 0.98);
}

TEST(PfcIncast, PastTheHeadroomALosslessClassDropsAndCountsIt) {
  // A headroom of one byte cannot hold the round trip after XOFF.
  Incast run(true, "", "", 1);
  const uint64_t drops = run.net->drops().by_reason[static_cast<size_t>(DropReason::kPfcHeadroom)];
  EXPECT_GT(drops, 0u);
  EXPECT_EQ(run.net->drops().total(), drops);
  uint64_t counted = 0;
  for (Port* p : run.net->ports()) {
    if (p->pfc() != nullptr) counted += p->pfc()->counters.headroom_drops[3];
  }
  EXPECT_EQ(counted, drops);
}

TEST(PfcIncast, TheSameIncastLossyDrops) {
  Incast run(false);
  EXPECT_GT(run.net->drops().by_reason[static_cast<size_t>(DropReason::kTailDrop)], 0u);
  EXPECT_EQ(run.PausesSent("leaf0", "h1"), 0u);
}

// The PAUSE frames a capture of h1-leaf0 holds decode in Wireshark as MAC
// control "Class Based Flow Control" (opcode 0x0101): XOFF with 0xFFFF
// quanta on priority 3, and XON with 0.
TEST(PfcCapture, PauseFramesDecodeAsPfcInTshark) {
  if (std::system("tshark --version >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "tshark not installed (scripts/setup.sh installs it)";
  }
  test_util::ScratchDir tmp;
  const std::string pcap = tmp.File("pfc.pcap");
  const std::string out = pcap + ".txt";
  {
    Incast run(true, "h1-leaf0", pcap);
    EXPECT_EQ(run.net->drops().total(), 0u);
  }
  const std::string cmd =
      "tshark -r " + pcap +
      " -Y 'macc.opcode == 0x0101' -T fields -E separator=, -e eth.dst"
      " -e macc.cbfc.enbv.c3 -e macc.cbfc.enbv.c0 -e macc.cbfc.pause_time.c3 > " +
      out + " 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream in(out);
  std::string line;
  int xoff = 0, xon = 0, other = 0;
  while (std::getline(in, line)) {
    if (line == "01:80:c2:00:00:01,True,False,65535" || line == "01:80:c2:00:00:01,1,0,65535") {
      ++xoff;
    } else if (line == "01:80:c2:00:00:01,True,False,0" || line == "01:80:c2:00:00:01,1,0,0") {
      ++xon;
    } else {
      ++other;
      ADD_FAILURE() << "unexpected tshark line: " << line;
    }
  }
  std::printf("h1-leaf0 capture: %d PFC XOFF, %d PFC XON frames (tshark)\n", xoff, xon);
  EXPECT_GT(xoff, 0);
  EXPECT_GT(xon, 0);
  EXPECT_EQ(other, 0);
}

// Bad qos input: the loader names file:line and the field.
constexpr const char* kQosBase =
    "name: t\n"
    "seed: 1\n"
    "end_time_us: 1000\n"
    "topology:\n"
    "  preset: \"fat-tree:k=4\"\n"
    "workload:\n"
    "  pattern: permutation\n"
    "  flow_bytes: 65536\n"
    "network:\n"
    "  qos:\n"
    "    classes:\n";
struct BadQos {
  const char* name;
  std::string tail;  // after kQosBase
  int line;
  const char* field;
};
class BadQosTest : public ::testing::TestWithParam<BadQos> {};

TEST_P(BadQosTest, ErrorNamesFileLineAndField) {
  const BadQos& c = GetParam();
  auto sc = LoadScenarioString(std::string(kQosBase) + c.tail, "bad.yaml");
  ASSERT_FALSE(sc.ok()) << c.name;
  EXPECT_EQ(sc.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(sc.status().message().find("bad.yaml:" + std::to_string(c.line) + ":"),
            std::string::npos)
      << sc.status().message();
  EXPECT_NE(sc.status().message().find(c.field), std::string::npos) << sc.status().message();
}

constexpr const char* kGoodClass =
    "      - {priority: 3, lossless: true, xoff_bytes: 65536, xon_bytes: 32768}\n";

INSTANTIATE_TEST_SUITE_P(
    Kinds, BadQosTest,
    ::testing::Values(
        BadQos{"LosslessWithoutThresholds", "      - {priority: 3, lossless: true}\n", 12,
               "network.qos.classes[0].xoff_bytes"},
        BadQos{"XonAboveXoff",
               "      - {priority: 3, lossless: true, xoff_bytes: 65536, xon_bytes: 70000}\n", 12,
               "network.qos.classes[0].xon_bytes"},
        BadQos{"UnknownPriority",
               "      - {priority: 9, lossless: true, xoff_bytes: 65536, xon_bytes: 1}\n", 12,
               "network.qos.classes[0].priority"},
        BadQos{"PriorityTwice", std::string(kGoodClass) + kGoodClass, 13,
               "network.qos.classes[1].priority"},
        BadQos{"ThresholdsOnALossyClass", "      - {priority: 0, xoff_bytes: 65536}\n", 12,
               "network.qos.classes[0].xoff_bytes"},
        BadQos{"HeadroomBelowOneMtuRoundTrip",
               std::string(kGoodClass) + "    headroom_bytes: 1000\n", 13,
               "network.qos.headroom_bytes"},
        BadQos{"DynamicWithoutSharedBuffer", std::string(kGoodClass) + "    dynamic_alpha: 1\n", 13,
               "network.qos.dynamic_alpha"},
        BadQos{"NegativeAlpha", std::string(kGoodClass) + "    dynamic_alpha: -1\n", 13,
               "network.qos.dynamic_alpha"},
        BadQos{"UnknownDscp",
               std::string(kGoodClass) + "    dscp_to_priority: [{dscp: 64, priority: 3}]\n", 13,
               "network.qos.dscp_to_priority[0].dscp"},
        BadQos{"DscpToUnknownPriority",
               std::string(kGoodClass) + "    dscp_to_priority: [{dscp: 26, priority: 8}]\n", 13,
               "network.qos.dscp_to_priority[0].priority"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(PfcScenario, DynamicThresholdsAndADscpMapRunLossless) {
  // DSCP 10 mapped to priority 3 (lossless, dynamic thresholds); the
  // example incast's shape, smaller.
  auto sc = LoadScenarioString(
      "name: t\nseed: 1\nend_time_us: 5000\n"
      "topology:\n  leaf_spine: {leaves: 3, spines: 2, hosts_per_leaf: 8}\n"
      "network:\n  switch_buffer_bytes: 262144\n  qos:\n"
      "    classes: [{priority: 3, lossless: true}]\n"
      "    dscp_to_priority: [{dscp: 10, priority: 3}]\n"
      "    dynamic_alpha: 0.5\n    shared_buffer_bytes: 1048576\n"
      "transport: {traffic_class: 40}\n"
      "workload: {pattern: incast, incast_senders: 16, flow_bytes: 262144}\n",
      "dyn.yaml");
  ASSERT_TRUE(sc.ok()) << sc.status().ToString();
  auto r = RunScenario(*sc, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->flows_completed, 16);
  EXPECT_TRUE(r->drops.empty());
  uint64_t sent = 0;
  for (const auto& [port, c] : r->port_pfc) sent += c.tx_pause[3];
  EXPECT_GT(sent, 0u);
}

}  // namespace
}  // namespace fathom::sim
