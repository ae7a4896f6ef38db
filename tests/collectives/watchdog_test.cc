// The hang, explained: a leaf-spine fabric whose switch links carry 1500-byte
// frames while the hosts negotiate a 4096-byte path MTU (CASES.md 4: "a
// switch port with a smaller MTU than the frame drops it silently"). Small
// allreduces pass; large ones hang with rxe semantics (retry forever) and the
// watchdog names the ranks, QPs and the link; with a finite retry count the
// run ends with IBV_WC_RETRY_EXC_ERR (12) naming the QP. Also the accuracy of
// the simulated ring against the alpha-beta model.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "fabric/sim/packet.h"
#include "topologies/builders.h"
#include "transport/worlds/sim_world.h"

namespace fathom::transport::coll {
namespace {

using worlds::SimWorld;
using worlds::SimWorldOptions;

topo::Topology MtuMismatchFabric() {
  topo::LeafSpineOptions o;
  o.leaves = 2;
  o.spines = 1;
  o.hosts_per_leaf = 2;
  o.gpus_per_server = 1;
  o.fabric_link.mtu_bytes = 1500;  // leaf-spine links: Ethernet MTU 1500
  return topo::BuildLeafSpine(o).value();
}

RunOutcome RunAllreduce(SimWorld& world, uint64_t count) {
  const int n = world.nranks();
  std::vector<std::vector<float>> bufs(n, std::vector<float>(count, 1.0f));
  std::vector<const void*> in;
  std::vector<void*> out;
  for (auto& b : bufs) {
    in.push_back(b.data());
    out.push_back(b.data());
  }
  CollSpec spec;
  spec.kind = CollKind::kAllReduce;
  spec.algorithm = Algorithm::kRing;
  spec.nranks = n;
  spec.count = count;
  RunOutcome res = world.Run(spec, DataType::kFloat32, RedOp::kSum, in, out);
  if (res.status.ok()) {
    for (auto& b : bufs) {
      for (float v : b) EXPECT_EQ(v, static_cast<float>(n));
    }
  }
  return res;
}

SimWorldOptions HangOptions(bool rxe) {
  SimWorldOptions opt;
  opt.comm.chunk_bytes = 64 * 1024;
  opt.comm.qp.timeout = 8;  // 1.05 ms per retry: short virtual runs
  opt.emulated.rxe_infinite_retry = rxe;
  opt.watchdog = Picoseconds::FromMilliseconds(50);
  return opt;
}

TEST(WatchdogTest, SmallAllreducePassesOverTheMtuMismatch) {
  auto world = SimWorld::Create(MtuMismatchFabric(), HangOptions(true)).value();
  // 4 ranks x 64 floats: every chunk is 64 bytes, far below 1500.
  RunOutcome res = RunAllreduce(*world, 256);
  EXPECT_TRUE(res.status.ok()) << res.status.ToString();
}

// A port event the NIC raised (a link fault on a host's link) is part of
// the hang's explanation: the report says it, the way NCCL logs "NET/IB :
// Got async event : port error".
TEST(WatchdogTest, TheReportNamesAsyncPortEvents) {
  auto world = SimWorld::Create(MtuMismatchFabric(), HangOptions(true)).value();
  world->network().nic(1).SetPortState(false);
  RunOutcome res = RunAllreduce(*world, 1 << 16);
  ASSERT_TRUE(res.hung) << res.status.ToString();
  EXPECT_NE(res.report.find("rank 1: async event IBV_EVENT_PORT_ERR"), std::string::npos)
      << res.report;
  EXPECT_EQ(res.report.find("rank 0: async event"), std::string::npos) << res.report;
}

TEST(WatchdogTest, LargeAllreduceHangsAndTheWatchdogNamesTheLink) {
  auto world = SimWorld::Create(MtuMismatchFabric(), HangOptions(true)).value();
  RunOutcome res = RunAllreduce(*world, 1 << 16);  // 64 KiB per rank chunks
  ASSERT_FALSE(res.status.ok());
  EXPECT_TRUE(res.hung);
  EXPECT_EQ(res.status.code(), StatusCode::kDeadlineExceeded);
  // Who is stuck, on what, waiting for whom.
  EXPECT_NE(res.report.find("allreduce(ring) stream 0 step"), std::string::npos) << res.report;
  EXPECT_NE(res.report.find("waiting for data from rank"), std::string::npos) << res.report;
  // One NCCL-like line per stuck QP.
  EXPECT_NE(res.report.find("no completion for"), std::string::npos) << res.report;
  EXPECT_NE(res.report.find("last status"), std::string::npos) << res.report;
  // The fabric evidence: the leaf-spine link and its MTU drops.
  EXPECT_NE(res.report.find("fabric: link leaf"), std::string::npos) << res.report;
  EXPECT_NE(res.report.find("mtu 1500"), std::string::npos) << res.report;
  EXPECT_NE(res.report.find("mtu_discards"), std::string::npos) << res.report;
  EXPECT_FALSE(res.stuck_qps.empty());
}

TEST(WatchdogTest, FiniteRetryEndsWithRetryExceededNamingTheQp) {
  auto world = SimWorld::Create(MtuMismatchFabric(), HangOptions(false)).value();
  RunOutcome res = RunAllreduce(*world, 1 << 16);
  ASSERT_FALSE(res.status.ok());
  EXPECT_FALSE(res.hung);
  EXPECT_EQ(res.status.code(), StatusCode::kAborted);
  EXPECT_NE(res.report.find("IBV_WC_RETRY_EXC_ERR (12"), std::string::npos) << res.report;
  EXPECT_NE(res.report.find("qpn 0x"), std::string::npos) << res.report;
  EXPECT_NE(res.report.find("aborted on all 4 ranks"), std::string::npos) << res.report;
}

// Ring allreduce on a fault-free, non-blocking k=4 fat-tree against
// T = 2(n-1)/n * S/B + 2(n-1) * alpha, with B the payload rate of a link
// (line rate x 4096 / wire bytes of a full packet) and alpha the one-way
// latency of the longest ring hop: 6 links of propagation plus 5
// store-and-forward serializations of a full packet at the switches.
TEST(AccuracyTest, RingAllreduceWithinTwoPercentOfAlphaBeta) {
  topo::Topology topology = topo::BuildPreset("fat-tree:k=4,gpus=4").value();
  const topo::Link& host_link = topology.link(topology.LinkAt(topology.hosts()[0], 0));
  SimWorldOptions opt;
  opt.comm.modelled = true;
  opt.comm.chunk_bytes = 512 * 1024;
  auto world = SimWorld::Create(std::move(topology), opt).value();
  const int n = world->nranks();
  ASSERT_EQ(n, 16);
  const uint64_t bytes = uint64_t{64} << 20;
  CollSpec spec;
  spec.kind = CollKind::kAllReduce;
  spec.algorithm = Algorithm::kRing;
  spec.nranks = n;
  spec.count = bytes / 4;
  RunOutcome res = world->Run(spec, DataType::kFloat32, RedOp::kSum, {}, {});
  ASSERT_TRUE(res.status.ok()) << res.status.ToString();
  const double t = (res.end - res.start).seconds();

  const double wire = sim::FrameWireBytes(sim::Opcode::kRdmaWriteMiddle, 4096, /*ipv6=*/false);
  const double rate = static_cast<double>(host_link.rate.bps()) / 8.0;  // bytes/s
  const double b = rate * 4096.0 / wire;
  const double alpha = 6 * host_link.latency.seconds() + 5 * wire / rate;
  const double model = 2.0 * (n - 1) / n * static_cast<double>(bytes) / b + 2.0 * (n - 1) * alpha;
  RecordProperty("sim_us", std::to_string(t * 1e6));
  RecordProperty("model_us", std::to_string(model * 1e6));
  RecordProperty("alpha_ns", std::to_string(alpha * 1e9));
  EXPECT_NEAR(t / model, 1.0, 0.02)
      << "sim " << t * 1e6 << " us, model " << model * 1e6 << " us, alpha " << alpha * 1e9 << " ns";
}

// Issue 27: the sim watchdog's default is the transport's retry budget,
// (retry_cnt + 1) x 4.096 us x 2^timeout, doubled, and at least 1 s.
TEST(WatchdogDefaultTest, DerivesFromTheRetryBudget) {
  QpOptions qp;
  qp.timeout = 20;
  qp.retry_cnt = 7;
  // 2 x 8 x 4.294967296 s: NCCL's defaults give error 12 at 34.4 s first.
  EXPECT_EQ(worlds::DefaultWatchdog(qp), Picoseconds::FromNanoseconds(4096) * (1 << 20) * 16);
  qp.retry_cnt = 0;
  EXPECT_EQ(worlds::DefaultWatchdog(qp), Picoseconds::FromNanoseconds(4096) * (1 << 20) * 2);
  qp.timeout = 8;  // 2 x 1.05 ms: the 1 s floor
  EXPECT_EQ(worlds::DefaultWatchdog(qp), Picoseconds::FromSeconds(1.0));
  qp.timeout = 0;  // no ACK timer: NCCL's 20
  qp.retry_cnt = 7;
  EXPECT_EQ(worlds::DefaultWatchdog(qp), Picoseconds::FromNanoseconds(4096) * (1 << 20) * 16);
}

sim::LoadedScenario FlapScenario(const std::string& faults) {
  const std::string text =
      "name: flap\nend_time_us: 1000\n"
      "topology: {preset: \"leaf-spine:leaves=2,spines=1,hosts=2,gpus=1\"}\n"
      "transport: {ib_timeout: 20, retry_cnt: 7}\n"
      "workload: {pattern: flows, flows: [{src: h0, dst: h2, bytes: 4096}]}\n"
      "faults:\n" +
      faults;
  auto sc = sim::LoadScenarioString(text, "flap.yaml");
  EXPECT_TRUE(sc.ok()) << sc.status().ToString();
  return std::move(sc).value();
}

// A 5 s outage at NCCL's timeout 20 is ordinary recovery (one 4.29 s local
// ACK timeout, then go-back-N): the old 1 s default called it a hang.
TEST(WatchdogDefaultTest, RecoveryWithinTheRetryBudgetIsNotAHang) {
  const auto sc = FlapScenario(
      "  - {kind: link_down, link: leaf0-spine0, start_us: 1, duration_us: 5000000}\n");
  SimWorldOptions opt;
  opt.comm.chunk_bytes = 64 * 1024;
  auto world = SimWorld::CreateFromScenario(sc, opt).value();
  RunOutcome res = RunAllreduce(*world, 1 << 16);
  EXPECT_TRUE(res.status.ok()) << res.status.ToString() << res.report;
  EXPECT_GT((res.end - res.start).seconds(), 4.29);

  opt.watchdog = Picoseconds::FromSeconds(1.0);  // the former default
  auto hasty = SimWorld::CreateFromScenario(sc, opt).value();
  EXPECT_TRUE(RunAllreduce(*hasty, 1 << 16).hung);
}

// The hang report names the culprit (the QP nobody waits behind), its hosts,
// and for drops of a fault model the link and the fault.
TEST(WatchdogDefaultTest, TheReportNamesTheCulpritAndTheFault) {
  auto sc = FlapScenario("  - {kind: black_hole, link: leaf0-spine0, from: leaf0}\n");
  sc.spec.mutable_transport()->set_ib_timeout(8);
  SimWorldOptions opt;
  opt.comm.chunk_bytes = 64 * 1024;
  opt.emulated.rxe_infinite_retry = true;  // retry forever: the watchdog must end it
  auto world = SimWorld::CreateFromScenario(sc, opt).value();
  RunOutcome res = RunAllreduce(*world, 1 << 16);
  ASSERT_TRUE(res.hung) << res.status.ToString();
  // Default watchdog at timeout 8: the 1 s floor.
  EXPECT_GE((res.end - res.start).seconds(), 1.0);
  EXPECT_NE(res.report.find("watchdog: culprit rank "), std::string::npos) << res.report;
  EXPECT_NE(res.report.find("the other stuck ranks wait behind it"), std::string::npos)
      << res.report;
  EXPECT_NE(res.report.find("fabric: the culprit's QP runs from host h"), std::string::npos)
      << res.report;
  EXPECT_NE(res.report.find("fabric: link leaf0-spine0 (leaf0 -> spine0): fault black_hole#0 "
                            "frames_seen"),
            std::string::npos)
      << res.report;
  int culprits = 0;
  for (const StuckQp& q : res.stuck_qps) {
    if (!q.culprit) continue;
    ++culprits;
    EXPECT_GT(q.outstanding_sends, 0);
    // Its data or its ACKs cross leaf0 -> spine0: one end on leaf0 (h0, h1 =
    // ranks 0, 1), the other on leaf1.
    EXPECT_NE(q.rank < 2, q.peer < 2) << q.rank << " -> " << q.peer;
  }
  EXPECT_EQ(culprits, 1);
}

}  // namespace
}  // namespace fathom::transport::coll
