// Several RC QPs per connection (NCCL_IB_QPS_PER_CONNECTION,
// transport/collectives/multi_qp.h): NCCL's split and round-robin rules, the
// data still correct when a connection's QPs deliver out of order, and on
// the medium preset (leaf-spine, two servers per leaf, not rail-aligned) a
// ring allreduce whose single-QP flows collide on spine links runs
// measurably faster with 4 QPs per connection, each QP carrying its share.
// Virtual time only.
#include "transport/collectives/multi_qp.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "fabric/scenario/scenario.h"
#include "tests/cli_run.h"
#include "topologies/builders.h"
#include "topologies/server.h"
#include "transport/collectives/nccl_tests.h"
#include "transport/worlds/sim_world.h"

namespace fathom::transport::coll {
namespace {

using worlds::SimWorld;
using worlds::SimWorldOptions;

TEST(MultiQpRulesTest, SplitPartsFollowNccl) {
  // DIVUP(DIVUP(bytes, n), 128) * 128 per part, the last ones shorter or
  // empty (NVIDIA/nccl src/transport/net_ib/p2p.cc).
  EXPECT_EQ(SplitPartBytes(1000, 4), 256u);
  EXPECT_EQ(SplitPartLength(1000, 4, 0), 256u);
  EXPECT_EQ(SplitPartLength(1000, 4, 3), 232u);
  EXPECT_EQ(SplitPartOffset(1000, 4, 3), 768u);
  EXPECT_EQ(SplitPartLength(100, 4, 0), 100u);  // one aligned part holds it all
  EXPECT_EQ(SplitPartLength(100, 4, 1), 0u);
  EXPECT_EQ(SplitPartOffset(100, 4, 3), 100u);
  for (uint64_t bytes : {uint64_t{0}, uint64_t{1}, uint64_t{4096}, uint64_t{524289}}) {
    for (int n : {1, 2, 3, 4, 8}) {
      uint64_t sum = 0;
      for (int q = 0; q < n; ++q) {
        EXPECT_EQ(SplitPartOffset(bytes, n, q), sum) << bytes << " " << n << " " << q;
        sum += SplitPartLength(bytes, n, q);
      }
      EXPECT_EQ(sum, bytes) << bytes << " " << n;
    }
  }
}

TEST(MultiQpRulesTest, MessagesArriveInOrderOnly) {
  // Round-robin over 3 QPs: messages 0, 3, 6 on QP 0; 1, 4 on QP 1; ...
  EXPECT_EQ(MessagesArrived({0, 0, 0}, false), 0u);
  EXPECT_EQ(MessagesArrived({0, 1, 1}, false), 0u);  // 1 and 2 in, 0 missing
  EXPECT_EQ(MessagesArrived({1, 1, 0}, false), 2u);
  EXPECT_EQ(MessagesArrived({2, 1, 1}, false), 4u);
  EXPECT_EQ(MessagesArrived({2, 2, 1}, false), 5u);
  // Split: a message is in when every QP delivered its part.
  EXPECT_EQ(MessagesArrived({3, 2, 5}, true), 2u);
  EXPECT_EQ(MessagesArrived({7}, false), 7u);
}

TEST(MultiQpRulesTest, PeersOnOneServerKeepOneQp) {
  EXPECT_EQ(QpsForPeer(4, 8, 0, 7), 1);
  EXPECT_EQ(QpsForPeer(4, 8, 7, 8), 4);
  EXPECT_EQ(QpsForPeer(4, 0, 0, 1), 4);  // flat: every peer is across the network
  EXPECT_EQ(QpsForPeer(1, 0, 0, 1), 1);
}

// 32 ranks on the medium preset: 4 servers of 8 GPUs, servers 0-1 on leaf
// 0 and 2-3 on leaf 1, so two of the ring's four server hops cross the
// spines, 8 rails each, hashed over 16 uplinks per leaf.
SimWorldOptions MediumOptions(int qps, bool split, bool modelled, uint64_t chunk) {
  SimWorldOptions o;
  o.nranks = 32;
  o.server = topo::ServerPreset("h100").value();
  o.comm.channels = 8;
  o.comm.chunk_bytes = chunk;
  o.comm.modelled = modelled;
  o.comm.qps_per_connection = qps;
  o.comm.split_data_on_qps = split;
  return o;
}

std::unique_ptr<SimWorld> MakeMedium(const SimWorldOptions& o) {
  auto w = SimWorld::Create(topo::BuildPreset("medium").value(), o);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  return w.ok() ? std::move(w).value() : nullptr;
}

// Checked allreduce (nccl-tests' data); the number of wrong elements.
int64_t RunChecked(SimWorld& w, uint64_t count) {
  const int n = w.nranks();
  std::vector<std::unique_ptr<RankBuffers>> bufs;
  std::vector<const void*> in;
  std::vector<void*> out;
  for (int r = 0; r < n; ++r) {
    bufs.push_back(
        std::make_unique<RankBuffers>(CollKind::kAllReduce, n, r, DataType::kFloat32, count));
    bufs.back()->set_gpus_per_server(w.comm_options().gpus_per_server);
    bufs.back()->Fill(count, false);
    in.push_back(bufs.back()->in());
    out.push_back(bufs.back()->out());
  }
  CollSpec spec;
  spec.kind = CollKind::kAllReduce;
  spec.algorithm = Algorithm::kRing;
  spec.nranks = n;
  spec.count = count;
  RunOutcome res = w.Run(spec, DataType::kFloat32, RedOp::kSum, in, out);
  EXPECT_TRUE(res.status.ok()) << res.status.ToString() << "\n" << res.report;
  int64_t wrong = 0;
  for (const auto& b : bufs) wrong += b->CountWrong(count, RedOp::kSum, 0);
  return wrong;
}

TEST(MultiQpSimTest, DataStayCorrectOverSeveralQps) {
  // Small chunks: many messages per connection, so QPs overtake each other.
  for (bool split : {false, true}) {
    auto w = MakeMedium(MediumOptions(4, split, false, 4096));
    ASSERT_NE(w, nullptr);
    for (uint64_t count : {uint64_t{1}, uint64_t{40001}, uint64_t{262147}}) {
      EXPECT_EQ(RunChecked(*w, count), 0) << (split ? "split " : "round-robin ") << count;
    }
  }
}

// Modelled ring allreduce of `bytes`: its time in us.
double ModelledRingUs(SimWorld& w, uint64_t bytes) {
  CollSpec spec;
  spec.kind = CollKind::kAllReduce;
  spec.algorithm = Algorithm::kRing;
  spec.nranks = w.nranks();
  spec.count = bytes / 4;
  RunOutcome res = w.Run(spec, DataType::kFloat32, RedOp::kSum, {}, {});
  EXPECT_TRUE(res.status.ok()) << res.status.ToString() << "\n" << res.report;
  return (res.end - res.start).us();
}

TEST(MultiQpSimTest, FourQpsPerConnectionBeatEcmpCollisionsOnMedium) {
  constexpr uint64_t kBytes = uint64_t{16} << 20;
  auto one = MakeMedium(MediumOptions(1, false, true, 512 * 1024));
  auto four = MakeMedium(MediumOptions(4, false, true, 512 * 1024));
  ASSERT_NE(one, nullptr);
  ASSERT_NE(four, nullptr);
  const double t1 = ModelledRingUs(*one, kBytes);
  const double t4 = ModelledRingUs(*four, kBytes);
  // busbw is bytes x 2(n-1)/n over the time: the ratio of the times.
  EXPECT_GT(t1 / t4, 1.2) << "qps 1: " << t1 << " us, qps 4: " << t4 << " us";
  // The busiest connection across the network: its 4 QPs carried equal
  // shares within 10% of the mean share (round-robin moves whole messages:
  // the spread is one 64 KiB message of 1 MiB each here).
  Conn* conn = nullptr;
  int rank = -1;
  uint64_t total = 0;
  for (int r = 0; r < four->nranks(); ++r) {
    for (Conn* c : four->comm(r).conns()) {
      if (c->nqps() != 4) continue;
      uint64_t sum = 0;
      for (uint64_t b : c->qp_bytes) sum += b;
      if (sum > total) {
        conn = c;
        rank = r;
        total = sum;
      }
    }
  }
  ASSERT_NE(conn, nullptr);
  ASSERT_GT(total, 0u);
  const uint64_t lo = *std::min_element(conn->qp_bytes.begin(), conn->qp_bytes.end());
  const uint64_t hi = *std::max_element(conn->qp_bytes.begin(), conn->qp_bytes.end());
  EXPECT_LE(hi - lo, total / 4 / 10) << conn->qp_bytes[0] << " " << conn->qp_bytes[1] << " "
                                     << conn->qp_bytes[2] << " " << conn->qp_bytes[3];
  // What left the NIC on each QP (the emulated NIC's counters): at least
  // its data's packets at the 4096-byte path MTU; QPs 1-3 carry only data
  // (credits and their ACKs ride QP 0), so their counts agree within 10%.
  const int host = four->fabric().HostOf(rank);
  std::vector<uint64_t> pkts;
  for (int q = 0; q < 4; ++q) {
    pkts.push_back(
        four->network().nic(host).GetQpCounters(conn->qp_at(q).qp_num()).value().sent_pkts);
    EXPECT_GE(pkts.back(), conn->qp_bytes[static_cast<size_t>(q)] / 4096) << "QP " << q;
  }
  const uint64_t pmin = *std::min_element(pkts.begin() + 1, pkts.end());
  const uint64_t pmax = *std::max_element(pkts.begin() + 1, pkts.end());
  EXPECT_GT(pmin, 0u);
  EXPECT_LE(pmax - pmin, pmax / 10)
      << pkts[0] << " " << pkts[1] << " " << pkts[2] << " " << pkts[3];
}

// A black hole on h0's link with rxe's endless retries: the ring hangs, and
// the watchdog lists every QP of h0's connection that has sends stuck (each
// hashes onto a path of its own), not only the first.
TEST(MultiQpSimTest, WatchdogListsEveryStuckQpOfAConnection) {
  const std::string yaml = R"(name: multi-qp-black-hole
seed: 5
end_time_us: 10000
topology:
  preset: "leaf-spine:leaves=2,spines=1,hosts=2,gpus=1"
transport:
  ib_timeout: 8
  retry_cnt: 7
  rxe_infinite_retry: true
  qps_per_connection: 4
workload:
  pattern: flows
  flows:
    - {src: h0, dst: h2, bytes: 4096}
faults:
  - {kind: black_hole, link: h0-leaf0, from: h0}
)";
  auto sc = sim::LoadScenarioString(yaml, "multi_qp.yaml");
  ASSERT_TRUE(sc.ok()) << sc.status().ToString();
  SimWorldOptions opt;
  opt.comm.chunk_bytes = 4096;
  opt.watchdog = Picoseconds::FromSeconds(0.05);
  auto w = SimWorld::CreateFromScenario(sc.value(), opt);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ((*w)->comm_options().qps_per_connection, 4);
  CollSpec spec;
  spec.kind = CollKind::kAllReduce;
  spec.algorithm = Algorithm::kRing;
  spec.nranks = (*w)->nranks();
  spec.count = 16 * 1024;  // 64 KiB: 4 KiB messages on every QP
  std::vector<std::vector<float>> bufs(static_cast<size_t>(spec.nranks),
                                       std::vector<float>(spec.count, 1.0f));
  std::vector<const void*> in;
  std::vector<void*> out;
  for (auto& b : bufs) {
    in.push_back(b.data());
    out.push_back(b.data());
  }
  RunOutcome res = (*w)->Run(spec, DataType::kFloat32, RedOp::kSum, in, out);
  ASSERT_FALSE(res.status.ok());
  EXPECT_TRUE(res.hung) << res.report;
  int h0_stuck = 0;
  for (const StuckQp& q : res.stuck_qps) h0_stuck += q.rank == 0 && q.outstanding_sends > 0;
  EXPECT_GE(h0_stuck, 2) << res.report;
  EXPECT_NE(res.report.find("of its connection"), std::string::npos) << res.report;
}

// `fathom coll`: bad values of the flag (and of NCCL's variables behind it)
// exit 2 naming them; --help and the run's JSON carry them.
TEST(MultiQpCliTest, BadValuesExitTwoNamingTheFlag) {
  const std::string fathom = std::string(FATHOM_BINARY_DIR) + "/tools/fathom";
  const std::string run = " coll allreduce --server none --ranks 2 -b 4K -e 4K -n 1 -w 0";
  const std::pair<std::string, std::string> cases[] = {
      {fathom + run + " --qps-per-connection 0", "--qps-per-connection 0: expected 1..128"},
      {fathom + run + " --qps-per-connection 129", "--qps-per-connection 129: expected 1..128"},
      {fathom + run + " --split-data-on-qps 2", "--split-data-on-qps 2: expected 0"},
      {"NCCL_IB_QPS_PER_CONNECTION=0 " + fathom + run, "NCCL_IB_QPS_PER_CONNECTION='0'"},
      {"NCCL_IB_SPLIT_DATA_ON_QPS=yes " + fathom + run, "NCCL_IB_SPLIT_DATA_ON_QPS='yes'"},
  };
  for (const auto& [cmd, want] : cases) {
    auto r = test_util::RunCommand(cmd);
    EXPECT_EQ(r.exit_code, 2) << cmd << "\n" << r.out;
    EXPECT_NE(r.out.find(want), std::string::npos) << cmd << "\n" << r.out;
  }
  // The variable sets it; the typed flag wins over it.
  auto env = test_util::RunCommand("NCCL_IB_QPS_PER_CONNECTION=3 " + fathom + run);
  EXPECT_EQ(env.exit_code, 0) << env.out;
  EXPECT_NE(env.out.find("--qps-per-connection 3 from NCCL_IB_QPS_PER_CONNECTION"),
            std::string::npos)
      << env.out;
  auto typed = test_util::RunCommand("NCCL_IB_QPS_PER_CONNECTION=0 " + fathom + run +
                                     " --qps-per-connection 2");
  EXPECT_EQ(typed.exit_code, 0) << typed.out;
  auto help = test_util::RunCommand(fathom + " coll --help");
  EXPECT_NE(help.out.find("--qps-per-connection"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("--split-data-on-qps"), std::string::npos) << help.out;
}

}  // namespace
}  // namespace fathom::transport::coll
