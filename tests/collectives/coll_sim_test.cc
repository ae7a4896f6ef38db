// Collectives over the emulated NIC (transport/emulated) in virtual time:
// results checked against a reference for every op, type and collective,
// the rank counts and sizes of the issue, the alpha-beta accuracy of the
// ring, and the watchdog / completion-error paths on an MTU mismatch.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "fabric/scenario/scenario.h"
#include "topologies/builders.h"
#include "transport/worlds/sim_world.h"

namespace fathom::transport::coll {
namespace {

using worlds::SimWorld;
using worlds::SimWorldOptions;

// A topology with at least n hosts: a k=4 fat-tree (16 hosts) or the
// medium preset (128) or a k=8 fat-tree.
topo::Topology TopologyFor(int n) {
  if (n <= 16) return topo::BuildPreset("fat-tree:k=4,gpus=4").value();
  return topo::BuildPreset("fat-tree:k=8,gpus=8").value();
}

double InputValue(RedOp op, int rank, uint64_t i) {
  if (op == RedOp::kProd)
    return ((rank * 7 + i) % 5 == 0) ? 2.0 : (((rank + i) % 3 == 0) ? -1.0 : 1.0);
  return static_cast<double>(static_cast<int64_t>((rank * 3 + i * 5) % 7) - 3);
}

double Apply(RedOp op, double a, double b) {
  switch (op) {
    case RedOp::kSum:
    case RedOp::kAvg:  // divided by n at the end
      return a + b;
    case RedOp::kProd:
      return a * b;
    case RedOp::kMin:
      return std::min(a, b);
    case RedOp::kMax:
      return std::max(a, b);
  }
  return 0;
}

// Integer types, exactly: the bits of op over the ranks' inputs, wrapping as
// the type does, minima and maxima in the type's order.
uint64_t IntegerReduce(RedOp op, DataType t, int n, uint64_t j) {
  uint8_t tmp[8];
  auto value = [&](int q) {
    StoreElement(tmp, 0, t, InputValue(op, q, j));
    return LoadInteger(tmp, 0, t);
  };
  uint64_t acc = value(0);
  for (int q = 1; q < n; ++q) {
    const uint64_t v = value(q);
    const bool less =
        IsSignedInteger(t) ? static_cast<int64_t>(v) < static_cast<int64_t>(acc) : v < acc;
    if (op == RedOp::kSum || op == RedOp::kAvg) acc += v;
    if (op == RedOp::kProd) acc *= v;
    if ((op == RedOp::kMin && less) || (op == RedOp::kMax && !less)) acc = v;
  }
  StoreInteger(tmp, 0, t, acc);
  acc = LoadInteger(tmp, 0, t);
  if (op == RedOp::kAvg) {
    // NCCL's integer avg: the sum in the type, then divided (truncated).
    acc = IsSignedInteger(t) ? static_cast<uint64_t>(static_cast<int64_t>(acc) / n)
                             : acc / static_cast<uint64_t>(n);
    StoreInteger(tmp, 0, t, acc);
    acc = LoadInteger(tmp, 0, t);
  }
  return acc;
}

struct Case {
  CollKind kind;
  Algorithm algo;
  int n;
  uint64_t count;
  DataType type = DataType::kFloat32;
  RedOp op = RedOp::kSum;
  bool in_place = false;
  int channels = 1;
  uint64_t chunk_bytes = 64 * 1024;
};

// Runs a case and returns the number of wrong elements.
uint64_t RunAndCheck(const Case& c) {
  SimWorldOptions opt;
  opt.nranks = c.n;
  opt.comm.channels = c.channels;
  opt.comm.chunk_bytes = c.chunk_bytes;
  auto world = SimWorld::Create(TopologyFor(c.n), opt);
  EXPECT_TRUE(world.ok()) << world.status().ToString();
  if (!world.ok()) return ~uint64_t{0};
  CollSpec spec;
  spec.kind = c.kind;
  spec.algorithm = c.algo;
  spec.nranks = c.n;
  spec.count = c.count;
  spec.root = c.n > 1 ? 1 : 0;
  const uint64_t nn = static_cast<uint64_t>(c.n);
  const bool gather = c.kind == CollKind::kAllGather, scatter = c.kind == CollKind::kReduceScatter;
  const uint64_t in_count = scatter ? c.count * nn : c.count;
  const uint64_t out_count = gather ? c.count * nn : c.count;
  const size_t es = DataTypeSize(c.type);
  // In place: one buffer of max(in, out); the input sits at rank * count in
  // it for allgather, the output at rank * count for reduce-scatter (NCCL).
  std::vector<std::vector<uint8_t>> bufs(c.n), outs(c.n);
  std::vector<const void*> in(c.n);
  std::vector<void*> out(c.n);
  for (int r = 0; r < c.n; ++r) {
    bufs[r].assign(std::max(in_count, out_count) * es + 8, 0);
    uint8_t* inp = bufs[r].data() + (gather && c.in_place ? r * c.count * es : 0);
    for (uint64_t i = 0; i < in_count; ++i) StoreElement(inp, i, c.type, InputValue(c.op, r, i));
    in[r] = inp;
    if (c.in_place) {
      out[r] = bufs[r].data() + (scatter ? r * c.count * es : 0);
    } else {
      outs[r].assign(out_count * es + 8, 0xEE);
      out[r] = outs[r].data();
    }
  }
  RunOutcome res = world.value()->Run(spec, c.type, c.op, in, out);
  EXPECT_TRUE(res.status.ok()) << res.status.ToString();
  if (!res.status.ok()) return ~uint64_t{0};
  uint64_t wrong = 0;
  // Allreduce's reference is the same on every rank: computed once.
  std::vector<double> reduced;
  if (c.kind == CollKind::kAllReduce) {
    reduced.resize(out_count);
    for (uint64_t i = 0; i < out_count; ++i) {
      double v = InputValue(c.op, 0, i);
      for (int q = 1; q < c.n; ++q) v = Apply(c.op, v, InputValue(c.op, q, i));
      reduced[i] = v;
    }
  }
  for (int r = 0; r < c.n; ++r) {
    for (uint64_t i = 0; i < out_count; ++i) {
      double want = 0;
      switch (c.kind) {
        case CollKind::kAllReduce:
          want = reduced[i];
          break;
        case CollKind::kReduceScatter: {
          const uint64_t j = r * c.count + i;
          want = InputValue(c.op, 0, j);
          for (int q = 1; q < c.n; ++q) want = Apply(c.op, want, InputValue(c.op, q, j));
          break;
        }
        case CollKind::kAllGather:
          want = InputValue(c.op, static_cast<int>(i / c.count), i % c.count);
          break;
        case CollKind::kBroadcast:
          want = InputValue(c.op, spec.root, i);
          break;
        case CollKind::kBarrier:
          break;
        default:  // the point-to-point and rooted kinds: server_sim_test.cc
          ADD_FAILURE() << "kind not swept here";
      }
      const bool reduced_kind =
          c.kind == CollKind::kAllReduce || c.kind == CollKind::kReduceScatter;
      uint8_t tmp[8];
      if (!IsFloatingType(c.type)) {
        const uint64_t j = c.kind == CollKind::kReduceScatter ? r * c.count + i : i;
        uint64_t bits = 0;
        if (reduced_kind) {
          bits = IntegerReduce(c.op, c.type, c.n, j);
        } else {
          StoreElement(tmp, 0, c.type, want);
          bits = LoadInteger(tmp, 0, c.type);
        }
        if (LoadInteger(out[r], i, c.type) != bits) ++wrong;
        continue;
      }
      if (reduced_kind && c.op == RedOp::kAvg) {
        // Each input is scaled by a rounded 1/n before the sum: close, not
        // exact.
        want /= c.n;
        const double tol = c.type == DataType::kFloat16    ? 0x1.0p-8
                           : c.type == DataType::kBfloat16 ? 0x1.0p-5
                           : c.type == DataType::kFloat32  ? 0x1.0p-20
                                                           : 0x1.0p-48;
        if (!(std::fabs(LoadElement(out[r], i, c.type) - want) <= tol * c.n)) ++wrong;
        continue;
      }
      // The reference rounds like the type does (exact for these values).
      StoreElement(tmp, 0, c.type, want);
      if (LoadElement(out[r], i, c.type) != LoadElement(tmp, 0, c.type)) ++wrong;
    }
  }
  return wrong;
}

// Every op x type x collective, small odd counts, in and out of place.
TEST(CollSimTest, OpTypeMatrix) {
  for (int n : {3, 4}) {
    for (DataType t : kAllDataTypes) {
      for (RedOp op : kAllRedOps) {
        for (auto [kind, algo] : {std::pair{CollKind::kAllReduce, Algorithm::kRing},
                                  {CollKind::kAllReduce, Algorithm::kTree},
                                  {CollKind::kReduceScatter, Algorithm::kRing}}) {
          for (bool in_place : {false, true}) {
            Case c{kind, algo, n, 37, t, op, in_place};
            EXPECT_EQ(RunAndCheck(c), 0u)
                << CollKindName(kind) << "/" << AlgorithmName(algo) << " n=" << n << " "
                << DataTypeName(t) << " " << RedOpName(op) << (in_place ? " in-place" : "");
          }
        }
      }
      for (CollKind kind : {CollKind::kAllGather, CollKind::kBroadcast}) {
        for (bool in_place : {false, true}) {
          Case c{kind, Algorithm::kRing, n, 37, t, RedOp::kSum, in_place};
          EXPECT_EQ(RunAndCheck(c), 0u) << CollKindName(kind) << " n=" << n << " "
                                        << DataTypeName(t) << (in_place ? " in-place" : "");
        }
      }
    }
  }
}

class RanksSizesTest : public ::testing::TestWithParam<std::tuple<int, uint64_t, Algorithm>> {};

TEST_P(RanksSizesTest, AllreduceFloatSum) {
  const auto [n, count, algo] = GetParam();
  Case c{CollKind::kAllReduce, algo, n, count};
  c.channels = 2;
  EXPECT_EQ(RunAndCheck(c), 0u);
}

// Sizes: 0, 1 element, odd, 1 KiB, 1 MiB of float.
INSTANTIATE_TEST_SUITE_P(Sweep, RanksSizesTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 7, 8, 16),
                                            ::testing::Values(uint64_t{0}, uint64_t{1},
                                                              uint64_t{1001}, uint64_t{256},
                                                              uint64_t{262144}),
                                            ::testing::Values(Algorithm::kRing, Algorithm::kTree)));

TEST(CollSimTest, OtherCollectivesAcrossRankCounts) {
  for (int n : {1, 2, 7, 16}) {
    for (CollKind kind : {CollKind::kAllGather, CollKind::kReduceScatter, CollKind::kBroadcast}) {
      for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{1001}}) {
        Case c{kind, Algorithm::kRing, n, count};
        c.channels = 2;
        EXPECT_EQ(RunAndCheck(c), 0u) << CollKindName(kind) << " n=" << n << " count=" << count;
      }
    }
  }
}

TEST(CollSimTest, Allreduce128RanksOneMiB) {
  for (Algorithm a : {Algorithm::kRing, Algorithm::kTree}) {
    Case c{CollKind::kAllReduce, a, 128, 262144};
    c.chunk_bytes = 128 * 1024;
    EXPECT_EQ(RunAndCheck(c), 0u) << AlgorithmName(a);
  }
}

TEST(CollSimTest, Allreduce64MiBInPlace) {
  Case c{CollKind::kAllReduce, Algorithm::kRing, 4, uint64_t{16} << 20};
  c.in_place = true;
  c.chunk_bytes = 1 << 20;
  EXPECT_EQ(RunAndCheck(c), 0u);
}

// avg runs as NCCL's pre-multiplied sum on floating types; on integers as
// NCCL's sum, then a division truncated toward zero: (2 + 2 - 9) / 3 = -1 on
// every rank, where the sum is -5, a floor -2, and dividing each input
// first 0 + 0 - 3 = -3.
TEST(CollSimTest, IntegerAvgIsTheSumDividedTowardZero) {
  for (Algorithm algo : {Algorithm::kRing, Algorithm::kTree}) {
    SimWorldOptions opt;
    opt.nranks = 3;
    auto world = SimWorld::Create(TopologyFor(3), opt).value();
    CollSpec spec;
    spec.kind = CollKind::kAllReduce;
    spec.algorithm = algo;
    spec.nranks = 3;
    spec.count = 5;
    const int32_t inputs[3] = {2, 2, -9};
    std::vector<std::vector<int32_t>> bufs;
    std::vector<const void*> in;
    std::vector<void*> out;
    for (int r = 0; r < 3; ++r) bufs.emplace_back(5, inputs[r]);
    for (auto& b : bufs) {
      in.push_back(b.data());
      out.push_back(b.data());
    }
    RunOutcome res = world->Run(spec, DataType::kInt32, RedOp::kAvg, in, out);
    ASSERT_TRUE(res.status.ok()) << res.status.ToString();
    for (int r = 0; r < 3; ++r) {
      EXPECT_THAT(bufs[r], ::testing::Each(-1)) << AlgorithmName(algo) << " rank " << r;
    }
  }
}

TEST(CollSimTest, BarrierCompletesOnEveryRank) {
  SimWorldOptions opt;
  opt.nranks = 7;
  auto world = SimWorld::Create(TopologyFor(7), opt).value();
  CollSpec spec;
  spec.kind = CollKind::kBarrier;
  spec.algorithm = Algorithm::kTree;
  spec.nranks = 7;
  std::vector<int32_t> ones(7, 1), outs(7, 0);
  std::vector<const void*> in;
  std::vector<void*> out;
  for (int r = 0; r < 7; ++r) {
    in.push_back(&ones[r]);
    out.push_back(&outs[r]);
  }
  RunOutcome res = world->Run(spec, DataType::kInt32, RedOp::kSum, in, out);
  ASSERT_TRUE(res.status.ok()) << res.status.ToString();
  for (int r = 0; r < 7; ++r) EXPECT_EQ(outs[r], 7);
}

// A scenario's world: its topology, its transport settings over the
// caller's, and its faults attached (a black hole on h0's link: the barrier
// fails with retry exceeded; without the fault it completes).
std::string BlackHoleScenario(bool with_fault) {
  std::string yaml = R"(name: world-from-scenario
seed: 5
end_time_us: 10000
topology:
  preset: "leaf-spine:leaves=2,spines=1,hosts=2,gpus=1"
transport:
  ib_timeout: 8
  retry_cnt: 2
  qps_per_connection: 2
workload:
  pattern: flows
  flows:
    - {src: h0, dst: h2, bytes: 4096}
)";
  if (with_fault) yaml += "faults:\n  - {kind: black_hole, link: h0-leaf0, from: h0}\n";
  return yaml;
}

RunOutcome RunBarrier(SimWorld& world) {
  const int n = world.nranks();
  CollSpec spec;
  spec.kind = CollKind::kBarrier;
  spec.algorithm = Algorithm::kTree;
  spec.nranks = n;
  std::vector<int32_t> ones(static_cast<size_t>(n), 1), outs(static_cast<size_t>(n), 0);
  std::vector<const void*> in;
  std::vector<void*> out;
  for (int r = 0; r < n; ++r) {
    in.push_back(&ones[static_cast<size_t>(r)]);
    out.push_back(&outs[static_cast<size_t>(r)]);
  }
  return world.Run(spec, DataType::kInt32, RedOp::kSum, in, out);
}

TEST(SimWorldTest, CreateFromScenarioTakesItsTransportAndFaults) {
  SimWorldOptions opt;
  opt.comm.qp.timeout = 14;
  opt.comm.qp.retry_cnt = 7;
  opt.comm.channels = 1;
  opt.comm.chunk_bytes = 64 << 10;
  for (bool with_fault : {false, true}) {
    SCOPED_TRACE(with_fault ? "black hole" : "no fault");
    auto sc = sim::LoadScenarioString(BlackHoleScenario(with_fault), "world.yaml");
    ASSERT_TRUE(sc.ok()) << sc.status().ToString();
    auto world_or = SimWorld::CreateFromScenario(sc.value(), opt);
    ASSERT_TRUE(world_or.ok()) << world_or.status().ToString();
    SimWorld& world = *world_or.value();
    EXPECT_EQ(world.nranks(), 4);
    EXPECT_EQ(world.comm_options().qp.timeout, 8);
    EXPECT_EQ(world.comm_options().qp.retry_cnt, 2);
    EXPECT_EQ(world.comm_options().channels, 1);  // qps_per_connection is not channels
    EXPECT_EQ(world.comm_options().qps_per_connection, 2);
    EXPECT_EQ(world.comm_options().chunk_bytes, uint64_t{64} << 10);  // not in the scenario
    RunOutcome res = RunBarrier(world);
    if (with_fault) {
      EXPECT_FALSE(res.status.ok());
      EXPECT_NE(res.report.find("IBV_WC_RETRY_EXC_ERR"), std::string::npos) << res.report;
    } else {
      EXPECT_TRUE(res.status.ok()) << res.status.ToString() << res.report;
    }
  }
}

}  // namespace
}  // namespace fathom::transport::coll
