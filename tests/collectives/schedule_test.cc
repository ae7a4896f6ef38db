#include "transport/collectives/schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "transport/collectives/cost_model.h"

namespace fathom::transport::coll {
namespace {

// Executes every rank's plan with unbounded FIFO links (src, dst, channel)
// and no transport: checks the schedules alone. Values are sums of doubles.
struct Executed {
  std::vector<std::vector<double>> out;
  bool deadlock = false;
};

Executed Execute(const CollSpec& spec, const std::vector<std::vector<double>>& in) {
  const int n = spec.nranks;
  std::vector<Plan> plans;
  for (int r = 0; r < n; ++r) plans.push_back(BuildPlan(spec, r).value());
  Executed ex;
  for (int r = 0; r < n; ++r) ex.out.emplace_back(plans[r].out_count, -1.0);
  std::map<std::tuple<int, int, int>, std::deque<std::vector<double>>> links;
  std::vector<std::vector<uint64_t>> next(n);
  for (int r = 0; r < n; ++r) next[r].assign(plans[r].streams.size(), 0);
  bool progress = true;
  while (progress) {
    progress = false;
    for (int r = 0; r < n; ++r) {
      for (size_t si = 0; si < plans[r].streams.size(); ++si) {
        const Stream& st = *plans[r].streams[si];
        while (next[r][si] < st.size()) {
          const Step s = st.At(next[r][si]);
          bool ready = true;
          for (int p : s.recv) {
            if (p >= 0 && s.count > 0 && links[{p, r, st.channel()}].empty()) ready = false;
          }
          if (s.after_stream >= 0 && next[r][s.after_stream] <= s.after_step) ready = false;
          if (!ready) break;
          std::vector<double> v(s.count, 0.0);
          bool have = false;
          if (s.in_offset >= 0) {
            for (uint64_t i = 0; i < s.count; ++i) v[i] = in[r][s.in_offset + i];
            have = true;
          }
          for (int p : s.recv) {
            if (p < 0 || s.count == 0) continue;
            auto& q = links[{p, r, st.channel()}];
            EXPECT_EQ(q.front().size(), s.count) << "rank " << r << " from " << p;
            for (uint64_t i = 0; i < s.count; ++i) v[i] = have ? v[i] + q.front()[i] : q.front()[i];
            have = true;
            q.pop_front();
          }
          if (!have && s.out_offset >= 0) {
            for (uint64_t i = 0; i < s.count; ++i) v[i] = ex.out[r][s.out_offset + i];
          }
          if (s.out_offset >= 0) {
            for (uint64_t i = 0; i < s.count; ++i) ex.out[r][s.out_offset + i] = v[i];
          }
          for (int p : s.send) {
            if (p >= 0 && s.count > 0) links[{r, p, st.channel()}].push_back(v);
          }
          ++next[r][si];
          progress = true;
        }
      }
    }
  }
  for (int r = 0; r < n; ++r) {
    for (size_t si = 0; si < plans[r].streams.size(); ++si) {
      if (next[r][si] < plans[r].streams[si]->size()) ex.deadlock = true;
    }
  }
  for (auto& [key, q] : links) {
    EXPECT_TRUE(q.empty()) << "undelivered data " << std::get<0>(key) << "->" << std::get<1>(key);
  }
  return ex;
}

double Value(int rank, uint64_t i) { return rank * 1000.0 + static_cast<double>(i % 997); }

using Param = std::tuple<CollKind, Algorithm, int, uint64_t, int, uint64_t>;
class ScheduleTest : public ::testing::TestWithParam<Param> {};

TEST_P(ScheduleTest, ComputesTheCollective) {
  const auto [kind, algo, n, count, channels, chunk] = GetParam();
  CollSpec spec;
  spec.kind = kind;
  spec.algorithm = algo;
  spec.nranks = n;
  spec.count = count;
  spec.channels = channels;
  spec.chunk_elems = chunk;
  spec.root = n / 2;
  std::vector<std::vector<double>> in(n);
  const uint64_t in_count = BuildPlan(spec, 0).value().in_count;
  for (int r = 0; r < n; ++r) {
    for (uint64_t i = 0; i < in_count; ++i) in[r].push_back(Value(r, i));
  }
  const Executed ex = Execute(spec, in);
  ASSERT_FALSE(ex.deadlock);
  for (int r = 0; r < n; ++r) {
    for (uint64_t i = 0; i < ex.out[r].size(); ++i) {
      double want = 0;
      switch (kind) {
        case CollKind::kAllReduce:
          for (int q = 0; q < n; ++q) want += Value(q, i);
          break;
        case CollKind::kAllGather:
          want = Value(static_cast<int>(i / count), i % count);
          break;
        case CollKind::kReduceScatter:
          for (int q = 0; q < n; ++q) want += Value(q, static_cast<uint64_t>(r) * count + i);
          break;
        case CollKind::kBroadcast:
          want = Value(spec.root, i);
          break;
        case CollKind::kBarrier:
          break;
        default:  // the point-to-point and rooted kinds: server_sim_test.cc
          FAIL() << "kind not swept here";
      }
      ASSERT_EQ(ex.out[r][i], want) << "rank " << r << " element " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Sweep, ScheduleTest,
    ::testing::Combine(::testing::Values(CollKind::kAllReduce, CollKind::kAllGather,
                                         CollKind::kReduceScatter, CollKind::kBroadcast),
                       ::testing::Values(Algorithm::kRing, Algorithm::kTree),
                       ::testing::Values(1, 2, 3, 4, 7, 8, 16),
                       ::testing::Values(uint64_t{0}, uint64_t{1}, uint64_t{13}, uint64_t{1000}),
                       ::testing::Values(1, 2), ::testing::Values(uint64_t{1}, uint64_t{64})));

TEST(ScheduleTest, BarrierIsATreeAllreduceOfOneElement) {
  CollSpec spec;
  spec.kind = CollKind::kBarrier;
  spec.nranks = 5;
  spec.chunk_elems = 4;
  std::vector<std::vector<double>> in(5, std::vector<double>(1, 1.0));
  const Executed ex = Execute(spec, in);
  ASSERT_FALSE(ex.deadlock);
  for (const auto& o : ex.out) EXPECT_EQ(o[0], 5.0);
}

TEST(ScheduleTest, RingAllreduceStepCountIsTwoNMinusOnePerLoop) {
  CollSpec spec;
  spec.nranks = 8;
  spec.count = 8 * 10 * 3;  // exactly three loops of 8 chunks of 10
  spec.chunk_elems = 10;
  const Plan plan = BuildPlan(spec, 3).value();
  ASSERT_EQ(plan.streams.size(), 1u);
  EXPECT_EQ(plan.streams[0]->size(), 3u * 15u);
}

// Every rank is interior in at most one of the two trees, both trees span
// all ranks with one root, parents and children agree, depth is O(log n).
TEST(DoubleTreeTest, EveryRankInteriorInAtMostOneTree) {
  for (int n = 1; n <= 1024; ++n) {
    std::vector<int> interior(n, 0);
    for (int t = 0; t < 2; ++t) {
      int roots = 0;
      int max_depth = 0;
      for (int r = 0; r < n; ++r) {
        const TreeLinks l = DoubleTreeLinks(n, t, r);
        if (l.parent < 0) {
          ++roots;
          EXPECT_EQ(r, DoubleTreeRoot(n, t)) << "n=" << n;
        } else {
          const TreeLinks pl = DoubleTreeLinks(n, t, l.parent);
          EXPECT_TRUE(pl.children[0] == r || pl.children[1] == r)
              << "n=" << n << " tree " << t << " rank " << r << " parent " << l.parent;
        }
        for (int c : l.children) {
          if (c >= 0) {
            EXPECT_EQ(DoubleTreeLinks(n, t, c).parent, r) << "n=" << n;
          }
        }
        if (l.children[0] >= 0 || l.children[1] >= 0) ++interior[r];
        int depth = 0;
        for (int x = r; DoubleTreeLinks(n, t, x).parent >= 0 && depth <= n;
             x = DoubleTreeLinks(n, t, x).parent) {
          ++depth;
        }
        max_depth = std::max(max_depth, depth);
      }
      EXPECT_EQ(roots, 1) << "n=" << n << " tree " << t;
      int log2n = 0;
      while ((1 << log2n) < n) ++log2n;
      EXPECT_LE(max_depth, log2n + 1) << "n=" << n << " tree " << t;
    }
    for (int r = 0; r < n; ++r) EXPECT_LE(interior[r], 1) << "n=" << n << " rank " << r;
  }
}

TEST(ChooseAlgorithmTest, TreeForSmallRingForLarge) {
  PathFigures path;
  path.hops = 2;
  path.wire_latency = Picoseconds::FromNanoseconds(1000);
  path.bottleneck = BitsPerSecond::Gbps(100);
  path.small_frame_bytes = 100;
  path.full_frame_bytes = 4096 + 100;
  const AlphaBeta ab = ComputeAlphaBeta(path);
  const uint64_t chunk = 512 << 10;
  EXPECT_EQ(ChooseAlgorithm(CollKind::kAllReduce, 1024, 128, ab, chunk), Algorithm::kTree);
  EXPECT_EQ(ChooseAlgorithm(CollKind::kAllReduce, uint64_t{1} << 30, 128, ab, chunk),
            Algorithm::kRing);
  EXPECT_EQ(ChooseAlgorithm(CollKind::kAllGather, 1024, 128, ab, chunk), Algorithm::kRing);
  EXPECT_EQ(ChooseAlgorithm(CollKind::kBarrier, 0, 128, ab, chunk), Algorithm::kTree);
  EXPECT_EQ(ChooseAlgorithm(CollKind::kAllReduce, 1024, 2, ab, chunk), Algorithm::kRing);
}

// alpha: each hop's latency and a small frame's serialization, plus the
// NIC's per-message figures; beta: the bottleneck's payload rate.
TEST(CostModelTest, AlphaBetaFromThePathAndTheNic) {
  PathFigures path;
  path.hops = 4;
  path.wire_latency = Picoseconds::FromNanoseconds(20);
  path.bottleneck = BitsPerSecond::Gbps(400);  // 20 ps per byte
  path.small_frame_bytes = 100;                // 2 ns
  path.full_frame_bytes = 5000;
  path.mtu_payload_bytes = 4000;
  AlphaBeta ab = ComputeAlphaBeta(path);
  EXPECT_EQ(ab.alpha, Picoseconds::FromNanoseconds(20 + 4 * 2));
  EXPECT_DOUBLE_EQ(ab.payload_bytes_per_s, 50e9 * 0.8);
  path.nic_latency = Picoseconds::FromNanoseconds(400);
  EXPECT_EQ(ComputeAlphaBeta(path).alpha, Picoseconds::FromNanoseconds(28 + 400));
}

// The estimates' shape: latency terms grow with the step counts (ring
// 2(n-1), tree 2 log2 n), bandwidth terms with the bytes each link carries.
TEST(CostModelTest, EstimatesFollowStepCountsAndBytes) {
  AlphaBeta ab;
  ab.alpha = Picoseconds::FromMicroseconds(1);
  ab.payload_bytes_per_s = 1e9;
  ab.hops = 1;
  const uint64_t chunk = 1 << 20;
  // Latency bound: 1 byte; ring 2 x 15 steps, tree 2 x 4.
  EXPECT_NEAR(EstimateAllreduce(Algorithm::kRing, 1, 16, ab, chunk).us(), 30, 0.1);
  EXPECT_NEAR(EstimateAllreduce(Algorithm::kTree, 1, 16, ab, chunk).us(), 8, 0.1);
  // Bandwidth bound: ring 2(n-1)/n S, tree 2S once its chunks pipeline.
  ab.alpha = Picoseconds(0);
  const uint64_t s = uint64_t{1} << 30;
  EXPECT_NEAR(EstimateAllreduce(Algorithm::kRing, s, 16, ab, chunk).seconds(),
              2.0 * 15 / 16 * s / 1e9, 1e-3);
  EXPECT_NEAR(EstimateAllreduce(Algorithm::kTree, s, 16, ab, chunk).seconds(), 2.0 * s / 1e9, 0.02);
}

TEST(PlanPeersTest, RingTalksToNeighboursOnEveryChannel) {
  CollSpec spec;
  spec.nranks = 5;
  spec.channels = 2;
  const auto peers = PlanPeers(spec, 0);
  const std::vector<std::pair<int, int>> want = {{1, 0}, {1, 1}, {4, 0}, {4, 1}};
  EXPECT_EQ(peers, want);
}

// DataPeers declares the QPs a collective sends data on (the flow model
// across processes replicates only the flows that can share a link with
// them: FlowFabric::Plan): every step's send peer must be among them.
TEST(DataPeersTest, HoldEveryStepsSendPeer) {
  const CollKind kinds[] = {CollKind::kAllReduce, CollKind::kAllGather, CollKind::kReduceScatter,
                            CollKind::kBroadcast, CollKind::kBarrier,   CollKind::kAllToAll,
                            CollKind::kSendRecv,  CollKind::kReduce,    CollKind::kGather,
                            CollKind::kScatter};
  int checked = 0;
  for (CollKind kind : kinds) {
    for (Algorithm algo : {Algorithm::kRing, Algorithm::kTree}) {
      for (int n : {2, 5, 8}) {
        for (int g : {0, 4}) {
          for (int channels : {1, 2}) {
            CollSpec spec;
            spec.kind = kind;
            spec.algorithm = algo;
            spec.nranks = n;
            spec.count = kind == CollKind::kBarrier ? 1 : 64;
            spec.chunk_elems = 8;
            spec.channels = channels;
            spec.gpus_per_server = g;
            spec.root = n - 1;
            for (int r = 0; r < n; ++r) {
              const auto declared = DataPeers(spec, r);
              StatusOr<Plan> plan = BuildPlan(spec, r);
              if (!plan.ok()) continue;  // a layout the kind refuses
              for (const auto& stream : plan->streams) {
                for (uint64_t i = 0; i < stream->size(); ++i) {
                  for (int32_t p : stream->At(i).send) {
                    if (p < 0) continue;
                    ++checked;
                    EXPECT_TRUE(std::binary_search(declared.begin(), declared.end(),
                                                   std::make_pair(p, stream->channel())))
                        << CollKindName(kind) << " " << AlgorithmName(algo) << " n=" << n
                        << " g=" << g << " channels=" << channels << " rank " << r << " -> " << p
                        << " on channel " << stream->channel();
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 1000);
  // A flat ring sends only forward: the previous rank gets credits.
  CollSpec ring;
  ring.nranks = 5;
  ring.channels = 2;
  const std::vector<std::pair<int, int>> want = {{1, 0}, {1, 1}};
  EXPECT_EQ(DataPeers(ring, 0), want);
}

}  // namespace
}  // namespace fathom::transport::coll
