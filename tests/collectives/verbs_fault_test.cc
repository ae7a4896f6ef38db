// Verbs-level faults (transport/faulty) under a collective on the sim
// backend: an error the library swallows (CASES.md 20) turns a failure into
// a hang with no error status, which only the watchdog finds — and it must
// name the rank and QP; a failed post aborts with the post's exact status;
// a delayed completion delays the collective by at least its delay, in
// virtual time. Also the scenario form (verbs_faults) and its errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fabric/scenario/scenario.h"
#include "topologies/builders.h"
#include "transport/worlds/sim_world.h"

namespace fathom::transport::coll {
namespace {

using worlds::SimWorld;
using worlds::SimWorldOptions;

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
  return world.Run(spec, DataType::kFloat32, RedOp::kSum, in, out);
}

std::unique_ptr<SimWorld> FromScenario(const std::string& path, SimWorldOptions opt = {}) {
  auto sc = sim::LoadScenario(path);
  EXPECT_TRUE(sc.ok()) << sc.status().ToString();
  if (!sc.ok()) return nullptr;
  opt.watchdog = Picoseconds::FromMilliseconds(200);
  auto w = SimWorld::CreateFromScenario(sc.value(), opt);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  return w.ok() ? std::move(w).value() : nullptr;
}

const std::string kHang =
    std::string(FATHOM_SOURCE_DIR) + "/scenarios/coll/swallowed_error_hang.yaml";

// scenarios/coll/swallowed_error_hang.yaml: rank 3's only error completion
// (IBV_WC_RETRY_EXC_ERR on its QP to rank 0) is swallowed. No error status:
// the run hangs, and the watchdog's report names rank 3's QP to rank 0 —
// in ERR, its WRs outstanding — its retry_exceeded_err, and the swallow.
TEST(VerbsFaultCollTest, SwallowedErrorHangsAndTheWatchdogNamesTheQp) {
  auto world = FromScenario(kHang);
  ASSERT_NE(world, nullptr);
  const RunOutcome res = RunAllreduce(*world, 1 << 18);
  ASSERT_TRUE(res.hung) << res.status.ToString();
  EXPECT_EQ(res.status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(res.report.find("IBV_WC_RETRY_EXC_ERR ("), std::string::npos)
      << "the error must not surface as a completion:\n"
      << res.report;
  // The stuck QP the watchdog lists: rank 3 -> rank 0, in ERR, sends pending.
  const StuckQp* culprit = nullptr;
  for (const StuckQp& q : res.stuck_qps) {
    if (q.rank == 3 && q.peer == 0) culprit = &q;
  }
  ASSERT_NE(culprit, nullptr) << res.report;
  EXPECT_GT(culprit->outstanding_sends, 0);
  const std::string qpn = Hex(culprit->qpn);
  EXPECT_NE(res.report.find("qp to rank 0 channel 0 qpn " + qpn + " state IBV_QPS_ERR"),
            std::string::npos)
      << res.report;
  EXPECT_NE(res.report.find("rank 3 -> rank 0 qpn " + qpn + ": no completion for"),
            std::string::npos)
      << res.report;
  // The one nobody waits behind: rank 3's QP, whose error was swallowed.
  EXPECT_NE(res.report.find("watchdog: culprit rank 3 -> rank 0 qpn " + qpn), std::string::npos)
      << res.report;
  EXPECT_NE(res.report.find("fabric: rank 3 -> rank 0 qpn " + qpn), std::string::npos)
      << res.report;
  EXPECT_NE(res.report.find("retry_exceeded_err 1"), std::string::npos) << res.report;
  EXPECT_NE(res.report.find("verbs fault swallow_error:rank=3: acted"), std::string::npos)
      << res.report;
  EXPECT_NE(res.report.find("swallowed IBV_WC_RETRY_EXC_ERR of rank 3 qpn " + qpn),
            std::string::npos)
      << res.report;
  // No other rank's QP is in ERR: rank 3's was the only error.
  for (const StuckQp& q : res.stuck_qps) {
    if (q.rank != 3) {
      EXPECT_FALSE(q.have_last && q.last_status != WcStatus::kSuccess);
    }
  }
  // The swallow acted on the retry error first, at (retry_cnt + 1) = 8 local
  // ACK timeouts of 4.096 us x 2^10 (4.19 ms) after the data stopped.
  const auto& stats = world->verbs_faults()->stats();
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_GE(stats[0].first, Picoseconds::FromMicroseconds(8 * 4194));
}

// Mutation check: without the swallow the same fabric fault fails the run
// with rank 3's error 12 (the scenario's fault is what makes it a hang).
TEST(VerbsFaultCollTest, WithoutTheSwallowTheErrorSurfaces) {
  auto sc = sim::LoadScenario(kHang);
  ASSERT_TRUE(sc.ok()) << sc.status().ToString();
  sc->spec.clear_verbs_faults();
  SimWorldOptions opt;
  opt.watchdog = Picoseconds::FromMilliseconds(200);
  auto world = SimWorld::CreateFromScenario(sc.value(), opt).value();
  const RunOutcome res = RunAllreduce(*world, 1 << 18);
  EXPECT_FALSE(res.hung) << res.report;
  EXPECT_EQ(res.status.code(), StatusCode::kAborted);
  EXPECT_NE(res.status.message().find("IBV_WC_RETRY_EXC_ERR"), std::string::npos)
      << res.status.message();
}

topo::Topology Fabric() {
  topo::LeafSpineOptions o;
  o.leaves = 2;
  o.spines = 1;
  o.hosts_per_leaf = 2;
  o.gpus_per_server = 1;
  return topo::BuildLeafSpine(o).value();
}

// A failed post stops the collective with that post's status, as NCCL stops
// on "ibv_post_send failed".
TEST(VerbsFaultCollTest, FailedPostAbortsWithItsStatus) {
  SimWorldOptions opt;
  opt.verbs_faults = faulty::ParseVerbsFaults("fail_post:rank=2,peer=3,after=1").value();
  auto world = SimWorld::Create(Fabric(), opt).value();
  const RunOutcome res = RunAllreduce(*world, 1 << 16);
  EXPECT_FALSE(res.hung);
  EXPECT_EQ(res.status.code(), StatusCode::kAborted) << res.status.ToString();
  EXPECT_EQ(res.status.message().rfind("rank 2: ibv_post_send qpn=0x", 0), 0u)
      << res.status.message();
  EXPECT_NE(res.status.message().find("peer_rank=3"), std::string::npos) << res.status.message();
  EXPECT_NE(res.status.message().find("(injected: fail_post:rank=2,peer=3,after=1,count=1,"
                                      "error=ENOMEM): Cannot allocate memory"),
            std::string::npos)
      << res.status.message();
  EXPECT_EQ(world->verbs_faults()->stats()[0].acted, 1u);
}

// A delayed completion (rank 0's first, 1 ms) holds rank 0's CQ: the
// collective ends no sooner than 1 ms of virtual time after it started,
// and correct.
TEST(VerbsFaultCollTest, DelayedCompletionDelaysTheCollective) {
  auto base = SimWorld::Create(Fabric(), SimWorldOptions{}).value();
  const RunOutcome fast = RunAllreduce(*base, 1 << 10);
  ASSERT_TRUE(fast.status.ok()) << fast.status.ToString();
  ASSERT_LT(fast.end - fast.start, Picoseconds::FromMilliseconds(1));
  SimWorldOptions opt;
  opt.verbs_faults = faulty::ParseVerbsFaults("delay_completions:rank=0,count=1,delay=1ms").value();
  auto world = SimWorld::Create(Fabric(), opt).value();
  const RunOutcome slow = RunAllreduce(*world, 1 << 10);
  ASSERT_TRUE(slow.status.ok()) << slow.status.ToString();
  EXPECT_GE(slow.end - slow.start, Picoseconds::FromMilliseconds(1));
  EXPECT_EQ(world->verbs_faults()->stats()[0].acted, 1u);
}

// A QP moved to ERR mid-run (rank 1's QP to rank 2 at 20 us): the flush
// surfaces and aborts the collective, naming the QP's status.
TEST(VerbsFaultCollTest, QpErrorAtATimeFlushesAndAborts) {
  SimWorldOptions opt;
  opt.verbs_faults = faulty::ParseVerbsFaults("qp_error:rank=1,peer=2,at=20us").value();
  auto world = SimWorld::Create(Fabric(), opt).value();
  const RunOutcome res = RunAllreduce(*world, 1 << 18);
  EXPECT_EQ(res.status.code(), StatusCode::kAborted) << res.status.ToString();
  EXPECT_NE(res.status.message().find("IBV_WC_WR_FLUSH_ERR"), std::string::npos)
      << res.status.message();
  EXPECT_EQ(world->verbs_faults()->stats()[0].first, Picoseconds::FromMicroseconds(20));
}

// A scenario's verbs_faults are checked like the rest of the file: a bad
// value names file:line and the field; a rank outside the world too.
TEST(VerbsFaultCollTest, BadScenarioFaultsNameFileLineAndField) {
  const std::string head =
      "name: t\nend_time_us: 1000\ntopology: {preset: \"leaf-spine:leaves=2,spines=1,hosts=2,"
      "gpus=1\"}\nworkload: {pattern: permutation, flow_bytes: 4096}\nverbs_faults:\n";
  const std::pair<std::string, std::string> cases[] = {
      {"  - {kind: swallow, rank: 1}\n",
       "t.yaml:6:12: verbs_faults[0].kind: 'swallow' is not one of"},
      {"  - {kind: swallow_error, rank: 9}\n", "verbs_faults[0].rank: rank outside 0..3"},
      {"  - {kind: fail_post, rank: 1, error: EBUSY}\n", "verbs_faults[0].error: one of ENOMEM"},
      {"  - {kind: delay_completions, rank: 1}\n",
       "verbs_faults[0].delay_us: delay_completions needs delay=T > 0"},
      {"  - {kind: qp_error, rank: 1, at_us: -5}\n", "verbs_faults[0].at_us: a time is"},
  };
  for (const auto& [fault, want] : cases) {
    auto sc = sim::LoadScenarioString(head + fault, "t.yaml");
    ASSERT_TRUE(sc.ok()) << sc.status().ToString();
    auto w = SimWorld::CreateFromScenario(sc.value(), SimWorldOptions{});
    ASSERT_FALSE(w.ok()) << fault;
    EXPECT_EQ(w.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(w.status().message().find(want), std::string::npos)
        << fault << " -> " << w.status().message();
  }
}

}  // namespace
}  // namespace fathom::transport::coll
