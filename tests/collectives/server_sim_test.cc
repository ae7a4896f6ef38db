// The server tier in the simulator (issue 31): ranks are GPUs, peers on one
// server talk over NVLink (transport/intranode), servers over their rails,
// and the hierarchical rings and trees (schedule.h) give correct results on
// the three scale levels; the hierarchical ring's time follows its
// two-tier alpha-beta model (cost_model.h); NVLink-only collectives run at
// NVLink speed and inter-server ones at the rails'; bad server input is
// refused with what is wrong.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "fabric/sim/pfc.h"
#include "tests/scratch_dir.h"
#include "topologies/builders.h"
#include "topologies/server.h"
#include "transport/collectives/nccl_tests.h"
#include "transport/collectives/report.h"
#include "transport/collectives/size_matrix.h"
#include "transport/worlds/hot_links.h"
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
                   double* time_us = nullptr, int root = 0, bool in_place = false) {
  const int n = w.nranks();
  std::vector<std::unique_ptr<RankBuffers>> bufs;
  std::vector<const void*> in;
  std::vector<void*> out;
  for (int r = 0; r < n; ++r) {
    bufs.push_back(std::make_unique<RankBuffers>(kind, n, r, DataType::kFloat32, count));
    bufs.back()->set_gpus_per_server(w.comm_options().gpus_per_server);
    bufs.back()->Fill(count, in_place);
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

// nccl-tests' in-place columns: one buffer per rank, laid out as nccl-tests
// does (alltoall, sendrecv, reduce: the same buffer; gather: the input is
// the rank's slice of the output; scatter: the output is the rank's slice
// of the input). Small chunks and few slots make many chunks per block, so
// a receive that overwrote a block before its send was staged would show.
TEST(ServerSimTest, InPlaceVariantsOfTheNcclTestsCollectivesAreCorrect) {
  for (int n : {16, 8}) {
    SimWorldOptions o = ServerOptions(n);
    o.comm.all_pairs = true;
    o.comm.chunk_bytes = 1024;
    o.comm.slots = 2;
    auto w = MakeWorld("medium", o);
    ASSERT_NE(w, nullptr);
    for (CollKind k : {CollKind::kAllToAll, CollKind::kSendRecv, CollKind::kReduce,
                       CollKind::kGather, CollKind::kScatter}) {
      for (uint64_t count : {uint64_t{1}, uint64_t{3001}}) {
        EXPECT_EQ(RunChecked(*w, k, Algorithm::kRing, count, nullptr, 5, true), 0)
            << CollKindName(k) << " n " << n << " count " << count;
      }
    }
  }
  // The layout really shares memory (else the test proves nothing).
  for (CollKind k : {CollKind::kAllToAll, CollKind::kSendRecv, CollKind::kGather,
                     CollKind::kScatter, CollKind::kReduce}) {
    RankBuffers b(k, 4, 2, DataType::kFloat32, 16);
    b.Fill(16, true);
    const auto* in = static_cast<const uint8_t*>(b.in());
    const auto* out = static_cast<const uint8_t*>(b.out());
    const std::ptrdiff_t want = k == CollKind::kGather    ? 2 * 16 * 4
                                : k == CollKind::kScatter ? -2 * 16 * 4
                                                          : 0;
    EXPECT_EQ(in - out, want) << CollKindName(k);
  }
}

// Without the ordering an in-place alltoall is wrong: the plan's receive of
// a block from a peer waits for the staged send of that block to it.
TEST(ServerSimTest, InPlaceAllToAllReceivesAfterTheSendOfTheSameBlock) {
  CollSpec spec;
  spec.kind = CollKind::kAllToAll;
  spec.algorithm = Algorithm::kRing;
  spec.nranks = 4;
  spec.count = 10;
  spec.chunk_elems = 4;
  spec.in_place = true;
  auto plan = BuildPlan(spec, 1);
  ASSERT_TRUE(plan.ok());
  for (size_t si = 0; si < plan->streams.size(); ++si) {
    const Stream& st = *plan->streams[si];
    for (uint64_t i = 0; i < st.size(); ++i) {
      const Step s = st.At(i);
      if (s.recv[0] < 0) continue;
      ASSERT_GE(s.after_stream, 0);
      const Step send = plan->streams[static_cast<size_t>(s.after_stream)]->At(s.after_step);
      EXPECT_EQ(send.send[0], s.recv[0]);
      EXPECT_TRUE(send.stage);
      EXPECT_EQ(send.in_offset, s.out_offset);
      EXPECT_EQ(send.count, s.count);
    }
  }
}

// Rail-only wiring (small) has no path between NICs of different rails:
// alltoall across servers goes through PXN (NCCL's PCI x NVLink): over
// NVLink to the GPU on the destination's rail, then over that rail. Every
// GPU's NVLink then carries its 7 same-server blocks and the 7 blocks it
// sends to the other server's other rails; it receives as many (7 from its
// server's GPUs, 7 that it relays for them onto its own rail).
TEST(ServerSimTest, AllToAllOnRailOnlyWiringGoesThroughPxn) {
  for (bool in_place : {false, true}) {
    SimWorldOptions o = ServerOptions(16);
    o.comm.all_pairs = true;
    auto w = MakeWorld("small", o);
    ASSERT_NE(w, nullptr);
    const uint64_t count = 20000;  // a block: 80000 bytes, two chunks
    EXPECT_EQ(RunChecked(*w, CollKind::kAllToAll, Algorithm::kRing, count, nullptr, 0, in_place),
              0);
    for (CollKind k : {CollKind::kGather, CollKind::kScatter}) {
      EXPECT_EQ(RunChecked(*w, k, Algorithm::kRing, 3001, nullptr, 3, in_place), 0)
          << CollKindName(k);
    }
  }
  SimWorldOptions o = ServerOptions(16);
  o.comm.all_pairs = true;
  auto w = MakeWorld("small", o);
  ASSERT_NE(w, nullptr);
  const uint64_t count = 20000, block = count * 4;
  ASSERT_EQ(RunChecked(*w, CollKind::kAllToAll, Algorithm::kRing, count), 0);
  for (int r = 0; r < 16; ++r) {
    EXPECT_EQ(w->server()->counters(r).tx_bytes, 14 * block) << r;
    EXPECT_EQ(w->server()->counters(r).rx_bytes, 14 * block) << r;
  }
}

// All-to-allv: a skewed (mixture-of-experts-like) matrix with some empty
// pairs runs with correct results across servers and inside one, and the
// skew generator keeps every row's total and is reproducible by its seed.
TEST(ServerSimTest, AllToAllVWithASkewedMatrixIsCorrect) {
  const int n = 16;
  SizeMatrix m = SkewMatrix(n, 200000, 7, 1.2, 4);
  m.bytes[3] = 0;           // rank 0 sends rank 3 nothing
  m.bytes[5 * n + 5] = 0;   // rank 5 keeps nothing
  m.bytes[9 * n + 1] = 12;  // three floats
  EXPECT_EQ(SkewMatrix(n, 200000, 7, 1.2, 4).bytes, SkewMatrix(n, 200000, 7, 1.2, 4).bytes);
  EXPECT_NE(SkewMatrix(n, 200000, 7, 1.2, 4).bytes, SkewMatrix(n, 200000, 8, 1.2, 4).bytes);
  const SizeMatrix fresh = SkewMatrix(n, 200000, 7, 1.2, 4);
  uint64_t hottest = 0;
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(fresh.RowBytes(r), 200000u) << r;
    hottest = std::max(hottest, fresh.ColBytes(r));
  }
  EXPECT_GT(hottest, 3 * 200000u) << "a Zipf 1.2 skew has a hot expert";
  EXPECT_GE(fresh.BusiestRankBytes(), hottest - 200000);

  for (const std::string preset : {"medium", "small"}) {
    SimWorldOptions o = ServerOptions(n);
    o.comm.all_pairs = true;
    auto w = MakeWorld(preset, o);
    ASSERT_NE(w, nullptr);
    auto counts = std::make_shared<const std::vector<uint64_t>>(m.Elements(4));
    std::vector<std::unique_ptr<RankBuffers>> bufs;
    std::vector<const void*> in;
    std::vector<void*> out;
    for (int r = 0; r < n; ++r) {
      bufs.push_back(std::make_unique<RankBuffers>(CollKind::kAllToAllV, n, r, DataType::kFloat32,
                                                   m.MaxRowOrColBytes() / 4));
      bufs.back()->set_counts(counts);
      bufs.back()->Fill(0, false);
      in.push_back(bufs.back()->in());
      out.push_back(bufs.back()->out());
    }
    CollSpec spec;
    spec.kind = CollKind::kAllToAllV;
    spec.nranks = n;
    spec.counts = counts;
    RunOutcome res = w->Run(spec, DataType::kFloat32, RedOp::kSum, in, out);
    ASSERT_TRUE(res.status.ok()) << res.status.ToString() << "\n" << res.report;
    int64_t wrong = 0;
    for (const auto& b : bufs) wrong += b->CountWrong(0, RedOp::kSum, 0);
    EXPECT_EQ(wrong, 0) << preset;
    // The check can fail: a rank's output shifted by one element is wrong.
    std::memmove(out[2], static_cast<uint8_t*>(out[2]) + 4, 16);
    EXPECT_GT(bufs[2]->CountWrong(0, RedOp::kSum, 0), 0);
  }
}

// A bad matrix file names FILE:LINE and what is wrong.
TEST(ServerSimTest, BadSizeMatrixFilesNameTheFileAndLine) {
  test_util::ScratchDir tmp;
  const std::string path = tmp.File("alltoallv_matrix.txt");
  auto error = [&](const std::string& text) {
    std::ofstream(path) << text;
    auto m = LoadSizeMatrix(path, 3);
    return m.ok() ? std::string("ok") : m.status().message();
  };
  EXPECT_EQ(error("# rows = senders\n1K 2K 0\n\n4,5,6  # bytes\n7 8 1M\n"), "ok");
  auto m = LoadSizeMatrix(path, 3);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->At(0, 1), 2048u);
  EXPECT_EQ(m->At(2, 2), 1u << 20);
  EXPECT_NE(error("1 2 3\n1 2\n1 2 3\n")
                .find(path + ":2: row 2 (sender rank 1) has 2 entries, "
                             "expected 3"),
            std::string::npos);
  EXPECT_NE(error("1 2 3\n# x\n1 -2 3\n1 2 3\n").find(path + ":3: entry 2 '-2' is negative"),
            std::string::npos);
  EXPECT_NE(error("1 2 3\n1 2 3\n1 2 x3\n").find(path + ":3: entry 3 'x3' is not a size"),
            std::string::npos);
  EXPECT_NE(error("1 2 3\n1 2 3\n").find(path + ":2: 2 rows, expected 3"), std::string::npos);
  EXPECT_NE(error("1 2 3\n1 2 3\n1 2 3\n1 2 3\n").find(path + ":4: row 4 is one too many"),
            std::string::npos);
  EXPECT_NE(error("").find(":1: 0 rows"), std::string::npos);
}

// All-to-all on the medium level (leaf-spine, 4 spines x 4 parallel
// uplinks per leaf): 32 ranks on 4 servers under 2 leaves. Every link
// direction carries what the routes of the QPs crossing it say: each
// cross-server QP sends one block, so a port's data bytes are its QPs'
// blocks in frames (full_wire_bytes per full_payload), plus the reverse
// flows' ACKs and credits, a few percent (lossless: no retransmissions).
// Returns the run's time; fills the
// hot links.
double MediumAllToAll(bool salt, std::vector<worlds::LinkLoad>* hot, double* nic_bound_us) {
  // One channel: the alltoall pairs' QPs (and the trees', idle).
  SimWorldOptions o = ServerOptions(32, 1);
  o.comm.all_pairs = true;
  o.network.ecmp_salt = salt;
  // Lossless (PFC): an all-to-all's incast drops packets on a lossy fabric,
  // and their retransmissions would load the links beyond the routes' figure.
  o.network.qos = sim::LosslessRoceQos();
  o.comm.qp.traffic_class = sim::kLosslessRoceTrafficClass;
  auto w = MakeWorld("medium", o);
  if (w == nullptr) return 0;
  const uint64_t count = 1 << 14, block = count * 4;  // 64 KiB per pair
  sim::Network& net = w->network();
  const std::vector<uint64_t> before = worlds::PortBytes(net);
  double us = 0;
  EXPECT_EQ(RunChecked(*w, CollKind::kAllToAll, Algorithm::kRing, count, &us), 0);
  const std::vector<uint64_t> after = worlds::PortBytes(net);
  // The figure the routes give, per port.
  std::unordered_map<const sim::Port*, double> expected;
  int flows = 0;
  for (size_t h = 0; h < w->topology().hosts().size(); ++h) {
    sim::Nic& nic = net.nic(static_cast<int32_t>(h));
    nic.ForEachFlow([&](const sim::QpFlow& f) {
      // The pair's QP that ran (the trees' second channel connects some
      // pairs twice; that QP stays idle).
      if (nic.GetQpCounters(f.src_qpn).value().sent_pkts == 0) return;
      ++flows;
      const double wire = static_cast<double>(block) * f.full_wire_bytes / f.full_payload;
      for (const sim::Port* p : f.path) {
        if (p != nullptr) expected[p] += wire;
      }
    });
  }
  EXPECT_EQ(flows, 32 * 24);  // every pair on different servers, each way
  int checked = 0;
  const auto ports = net.ports();
  for (size_t i = 0; i < ports.size(); ++i) {
    const double got = static_cast<double>(after[i] - before[i]);
    auto it = expected.find(ports[i]);
    if (it == expected.end()) {
      // No data route crosses it: at most ACKs and credits of others.
      EXPECT_LT(got, 0.05 * static_cast<double>(block)) << worlds::PortLinkName(net, *ports[i]);
      continue;
    }
    ++checked;
    // Within 1% below (a message's first and last packets have other
    // headers than the full-size ones) and 5% above (ACKs, credits).
    EXPECT_GE(got, 0.99 * it->second) << worlds::PortLinkName(net, *ports[i]);
    EXPECT_LE(got, 1.05 * it->second) << worlds::PortLinkName(net, *ports[i]);
  }
  EXPECT_GT(checked, 64);
  *hot = worlds::HotLinks(net, before, after, 8);
  // The traffic matrix's bound: each NIC sends its GPU's 24 cross-server
  // blocks at the rail's payload rate (the world's alpha-beta).
  *nic_bound_us = 24.0 * static_cast<double>(block) / w->alpha_beta().payload_bytes_per_s * 1e6;
  return us;
}

TEST(ServerSimTest, MediumAllToAllLinkLoadsFollowTheRoutesAndPolarizationIsSlower) {
  std::vector<worlds::LinkLoad> hot_salted, hot_polarized;
  double bound_us = 0, unused = 0;
  const double salted = MediumAllToAll(true, &hot_salted, &bound_us);
  const double polarized = MediumAllToAll(false, &hot_polarized, &unused);
  // busbw follows the traffic matrix: the salted run takes the NICs' time
  // (busbw near the rail's payload rate), within 15%.
  EXPECT_GT(salted, bound_us);
  EXPECT_LT(salted, 1.15 * bound_us) << "bound " << bound_us << " us";
  std::printf(
      "medium alltoall 32 ranks, 64 KiB per pair: salted %.2f us (%zu hot links), "
      "salt off %.2f us (%zu hot links, hottest %s at %.2fx)\n",
      salted, hot_salted.size(), polarized, hot_polarized.size(),
      hot_polarized.empty() ? "-" : hot_polarized.front().name.c_str(),
      hot_polarized.empty() ? 0.0 : hot_polarized.front().ratio);
  // Without the salt every switch hashes a flow alike: the spines send each
  // leaf's traffic down a fraction of their links.
  EXPECT_GT(polarized, 1.2 * salted) << salted << " vs " << polarized;
  ASSERT_FALSE(hot_polarized.empty());
  EXPECT_GT(hot_polarized.front().ratio,
            hot_salted.empty() ? worlds::kHotRatio : hot_salted.front().ratio);
  EXPECT_NE(hot_polarized.front().name.find("spine"), std::string::npos)
      << hot_polarized.front().name;
}

}  // namespace
}  // namespace fathom::transport::coll
