// The server tier in the simulator (issue 31): ranks are GPUs, peers on one
// server talk over NVLink (transport/intranode), servers over their rails,
// and the hierarchical rings and trees (schedule.h) give correct results on
// the three scale levels; the hierarchical ring's time follows its
// two-tier alpha-beta model (cost_model.h); NVLink-only collectives run at
// NVLink speed and inter-server ones at the rails'; bad server input is
// refused with what is wrong.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "topologies/builders.h"
#include "topologies/server.h"
#include "transport/collectives/nccl_tests.h"
#include "transport/collectives/report.h"
#include "transport/worlds/sim_world.h"

namespace fathom::transport::coll {
namespace {

using worlds::SimWorld;
using worlds::SimWorldOptions;

SimWorldOptions ServerOptions(int nranks, int channels = 8) {
  SimWorldOptions o;
  o.nranks = nranks;
  o.server = topo::ServerPreset("h100").value();
  o.comm.channels = channels;
  o.comm.chunk_bytes = 64 * 1024;
  return o;
}

std::unique_ptr<SimWorld> MakeWorld(const std::string& preset, const SimWorldOptions& o) {
  auto w = SimWorld::Create(topo::BuildPreset(preset).value(), o);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  return w.ok() ? std::move(w).value() : nullptr;
}

// Runs one collective with nccl-tests' data on every rank; returns the
// number of wrong elements over all ranks (and the time).
int64_t RunChecked(SimWorld& w, CollKind kind, Algorithm algo, uint64_t count,
                   double* time_us = nullptr, int root = 0) {
  const int n = w.nranks();
  std::vector<std::unique_ptr<RankBuffers>> bufs;
  std::vector<const void*> in;
  std::vector<void*> out;
  for (int r = 0; r < n; ++r) {
    bufs.push_back(std::make_unique<RankBuffers>(kind, n, r, DataType::kFloat32, count));
    bufs.back()->set_gpus_per_server(w.comm_options().gpus_per_server);
    bufs.back()->Fill(count, false);
    in.push_back(bufs.back()->in());
    out.push_back(bufs.back()->out());
  }
  CollSpec spec;
  spec.kind = kind;
  spec.algorithm = algo;
  spec.nranks = n;
  spec.count = count;
  spec.root = root;
  RunOutcome res = w.Run(spec, DataType::kFloat32, RedOp::kSum, in, out);
  EXPECT_TRUE(res.status.ok()) << res.status.ToString() << "\n" << res.report;
  if (time_us != nullptr) *time_us = (res.end - res.start).us();
  int64_t wrong = 0;
  for (const auto& b : bufs) wrong += b->CountWrong(count, RedOp::kSum, root);
  return wrong;
}

TEST(ServerSimTest, SmallLevelRuns16RanksOfEveryCollectiveCorrectly) {
  auto w = MakeWorld("small", ServerOptions(0));
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->nranks(), 16);
  // Odd counts: uneven segments, channels and chunks.
  for (uint64_t count : {uint64_t{1}, uint64_t{1000}, uint64_t{40001}}) {
    EXPECT_EQ(RunChecked(*w, CollKind::kAllReduce, Algorithm::kRing, count), 0) << count;
    EXPECT_EQ(RunChecked(*w, CollKind::kAllReduce, Algorithm::kTree, count), 0) << count;
    EXPECT_EQ(RunChecked(*w, CollKind::kAllGather, Algorithm::kRing, count), 0) << count;
    EXPECT_EQ(RunChecked(*w, CollKind::kReduceScatter, Algorithm::kRing, count), 0) << count;
    EXPECT_EQ(RunChecked(*w, CollKind::kBroadcast, Algorithm::kRing, count, nullptr, 11), 0)
        << count;
  }
  EXPECT_EQ(RunChecked(*w, CollKind::kBarrier, Algorithm::kTree, 0), 0);
  // Both tiers carried data: NVLink inside the servers, the rails between.
  EXPECT_GT(w->server()->counters(0).tx_bytes, 0u);
  EXPECT_GT(w->network().port(w->topology().hosts()[0], 0).counters().port_xmit_packets, 0u);
}

TEST(ServerSimTest, MediumAndLargeRunEightRanksPerServer) {
  // medium: 16 servers (128 GPUs); large: 8 of its 128 servers (64 GPUs).
  for (const auto& [preset, n] : {std::pair<std::string, int>{"medium", 0}, {"large", 64}}) {
    // Small staging slots: 128 ranks x 8 channels x their ring and tree
    // peers' slots stay a few hundred MiB.
    SimWorldOptions o = ServerOptions(n);
    o.comm.chunk_bytes = 4096;
    auto w = MakeWorld(preset, o);
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->nranks(), n == 0 ? 128 : n);
    EXPECT_EQ(RunChecked(*w, CollKind::kAllReduce, Algorithm::kRing, 2053), 0) << preset;
    EXPECT_EQ(RunChecked(*w, CollKind::kAllReduce, Algorithm::kTree, 2053), 0) << preset;
    EXPECT_EQ(RunChecked(*w, CollKind::kAllGather, Algorithm::kRing, 257), 0) << preset;
    EXPECT_EQ(RunChecked(*w, CollKind::kReduceScatter, Algorithm::kRing, 257), 0) << preset;
  }
}

// The snake ring: every hop inside a server, or between two servers on one
// rail; each NIC sends exactly one channel when channels = GPUs per server.
TEST(ServerSimTest, HierarchicalRingsStayOnTheirRails) {
  const int g = 8, n = 32;
  std::vector<int> sends_per_nic(n, 0);
  for (int c = 0; c < g; ++c) {
    const RingOrder ring(n, g, c);
    std::vector<bool> seen(n, false);
    for (int pos = 0; pos < n; ++pos) {
      const int a = ring.RankAt(pos), b = ring.RankAt(pos + 1);
      EXPECT_EQ(ring.PosOf(a), pos);
      seen[static_cast<size_t>(a)] = true;
      if (a / g != b / g) {
        EXPECT_EQ(a % g, b % g) << "channel " << c << " pos " << pos;  // same rail
        ++sends_per_nic[static_cast<size_t>(a)];
      }
    }
    for (bool s : seen) EXPECT_TRUE(s);
  }
  for (int r = 0; r < n; ++r) EXPECT_EQ(sends_per_nic[static_cast<size_t>(r)], 1) << r;
}

// Accuracy: a large hierarchical ring allreduce takes what the two-tier
// alpha-beta model (cost_model.h) says, within 5%.
TEST(ServerSimTest, HierarchicalRingFollowsItsTwoTierModel) {
  for (const std::string preset : {"small", "medium"}) {
    SimWorldOptions o = ServerOptions(16);
    o.comm.modelled = true;
    o.comm.chunk_bytes = 512 * 1024;
    auto w = MakeWorld(preset, o);
    ASSERT_NE(w, nullptr);
    const uint64_t bytes = uint64_t{256} << 20;
    CollSpec spec;
    spec.kind = CollKind::kAllReduce;
    spec.algorithm = Algorithm::kRing;
    spec.nranks = 16;
    spec.count = bytes / 4;
    RunOutcome res = w->Run(spec, DataType::kFloat32, RedOp::kSum, {}, {});
    ASSERT_TRUE(res.status.ok()) << res.report;
    const double sim = (res.end - res.start).seconds();
    const double model =
        EstimateAllreduce(Algorithm::kRing, bytes, 16, w->alpha_beta(), o.comm.chunk_bytes)
            .seconds();
    EXPECT_NEAR(sim / model, 1.0, 0.05) << preset << ": sim " << sim << " s, model " << model;
  }
}

// One server: NVLink speed (busbw near a GPU's NVLink rate); two servers on
// one channel: the rail's speed (one NIC carries the ring; the NVLink hops
// are 9x faster).
TEST(ServerSimTest, NvlinkOnlyRunsAtNvlinkSpeedAndCrossServerAtRailSpeed) {
  const uint64_t bytes = uint64_t{64} << 20;
  auto busbw = [&](int n, int channels) {
    SimWorldOptions o = ServerOptions(n, channels);
    o.comm.modelled = true;
    o.comm.chunk_bytes = 512 * 1024;
    auto w = MakeWorld("small", o);
    CollSpec spec;
    spec.kind = CollKind::kAllReduce;
    spec.algorithm = Algorithm::kRing;
    spec.nranks = n;
    spec.count = bytes / 4;
    RunOutcome res = w->Run(spec, DataType::kFloat32, RedOp::kSum, {}, {});
    EXPECT_TRUE(res.status.ok()) << res.report;
    return Measure(CollKind::kAllReduce, n, bytes, (res.end - res.start).us(), 0).busbw_gbs;
  };
  const double nvlink_gbs = 450;                    // h100, one way
  const double rail_gbs = 400 / 8.0 * 4096 / 4174;  // 400 Gb/s at the 4096-byte payload share
  // Eight channels (one per NIC, the default): each GPU's NVLink carries
  // eight transfers at once, which hides the 0.47 us per transfer.
  const double intra = busbw(8, 8);
  EXPECT_GT(intra, 0.90 * nvlink_gbs) << intra;
  EXPECT_LT(intra, nvlink_gbs) << intra;
  const double inter = busbw(16, 1);
  EXPECT_GT(inter, 0.90 * rail_gbs) << inter;
  EXPECT_LT(inter, 1.0 * 400 / 8) << inter;
}

TEST(ServerSimTest, GpudirectOffBouncesThroughHostMemoryAndIsSlower) {
  double on_us = 0, off_us = 0;
  auto w = MakeWorld("small", ServerOptions(16));
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(RunChecked(*w, CollKind::kAllReduce, Algorithm::kRing, 1 << 18, &on_us), 0);
  SimWorldOptions o = ServerOptions(16);
  o.server->gpudirect_rdma = false;
  auto bounce = MakeWorld("small", o);
  ASSERT_NE(bounce, nullptr);
  EXPECT_EQ(RunChecked(*bounce, CollKind::kAllReduce, Algorithm::kRing, 1 << 18, &off_us), 0);
  EXPECT_GT(off_us, 1.2 * on_us) << on_us << " vs " << off_us;
}

TEST(ServerSimTest, BadServerInputIsRefusedNamingTheProblem) {
  auto small = [] { return topo::BuildPreset("small").value(); };
  // More ranks than GPUs.
  auto w = SimWorld::Create(small(), ServerOptions(17));
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("16 GPUs"), std::string::npos) << w.status().message();
  // Not whole servers.
  w = SimWorld::Create(small(), ServerOptions(12));
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("multiple of 8"), std::string::npos);
  // A GPU without a NIC.
  SimWorldOptions o = ServerOptions(0);
  o.server->nic_of_gpu = {0, 1, 2, 3, 4, 5, 6, -1};
  w = SimWorld::Create(small(), o);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("GPU 7 has no NIC"), std::string::npos)
      << w.status().message();
  // Servers with fewer NICs than GPUs.
  w = SimWorld::Create(topo::BuildPreset("back-to-back:gpus=4").value(), ServerOptions(0));
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("GPU 4 has no NIC"), std::string::npos);
  // NVLink rate 0.
  o = ServerOptions(0);
  o.server->nvlink_rate = BitsPerSecond(0);
  w = SimWorld::Create(small(), o);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("NVLink needs a positive rate"), std::string::npos);
}

}  // namespace
}  // namespace fathom::transport::coll

namespace fathom::transport::coll {
namespace {

// nccl-tests' alltoall_perf, sendrecv_perf, reduce_perf, gather_perf and
// scatter_perf, on two servers of the medium level (switched: every pair of
// NICs reaches each other) and on one server (NVLink only).
TEST(ServerSimTest, NcclTestsPointToPointAndRootedCollectivesAreCorrect) {
  for (int n : {16, 8}) {
    SimWorldOptions o = ServerOptions(n);
    o.comm.all_pairs = true;
    auto w = MakeWorld("medium", o);
    ASSERT_NE(w, nullptr);
    for (CollKind k : {CollKind::kAllToAll, CollKind::kSendRecv, CollKind::kReduce,
                       CollKind::kGather, CollKind::kScatter}) {
      for (uint64_t count : {uint64_t{1}, uint64_t{3001}}) {
        for (int root : {0, 5}) {
          EXPECT_EQ(RunChecked(*w, k, Algorithm::kRing, count, nullptr, root), 0)
              << CollKindName(k) << " n " << n << " count " << count << " root " << root;
        }
      }
    }
  }
  EXPECT_DOUBLE_EQ(BusBwFactor(CollKind::kAllToAll, 16), 15.0 / 16);
  EXPECT_DOUBLE_EQ(BusBwFactor(CollKind::kGather, 16), 15.0 / 16);
  EXPECT_DOUBLE_EQ(BusBwFactor(CollKind::kScatter, 16), 15.0 / 16);
  EXPECT_DOUBLE_EQ(BusBwFactor(CollKind::kSendRecv, 16), 1.0);
  EXPECT_DOUBLE_EQ(BusBwFactor(CollKind::kReduce, 16), 1.0);
}

// Rail-only wiring (small) has no path between NICs of different rails, so
// alltoall across servers (which NCCL routes through PXN, not modelled) is
// refused when the world is built, naming the pair.
TEST(ServerSimTest, AllToAllOnRailOnlyWiringIsRefusedNamingThePair) {
  SimWorldOptions o = ServerOptions(16);
  o.comm.all_pairs = true;
  auto w = SimWorld::Create(topo::BuildPreset("small").value(), o);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("has no path between their NICs"), std::string::npos)
      << w.status().message();
}

}  // namespace
}  // namespace fathom::transport::coll
