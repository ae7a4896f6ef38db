// Builders and presets: counts, routing (reachability, ECMP widths, no
// loops), rail-optimized wiring, bisection and oversubscription.
#include "topologies/builders.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>
#include <map>
#include <string>

#include "tests/cli_run.h"

namespace fathom::topo {
namespace {

using ::testing::HasSubstr;

// Number of distinct shortest paths src -> dst along the ECMP sets.
int64_t CountPaths(const Topology& t, int32_t node, int32_t dst, std::map<int32_t, int64_t>& memo) {
  if (node == dst) return 1;
  if (auto it = memo.find(node); it != memo.end()) return it->second;
  int64_t n = 0;
  for (int32_t p : t.NextHops(node, dst)) n += CountPaths(t, t.Peer(node, p).node, dst, memo);
  memo[node] = n;
  return n;
}
int64_t CountPaths(const Topology& t, int32_t src, int32_t dst) {
  std::map<int32_t, int64_t> memo;
  return CountPaths(t, src, dst, memo);
}

struct FatTreeCase {
  int32_t k;
  int32_t hosts, switches, links;
};

class FatTreeTest : public ::testing::TestWithParam<FatTreeCase> {};

TEST_P(FatTreeTest, CountsRoutesAndValidates) {
  const FatTreeCase c = GetParam();
  auto t = BuildFatTree({.k = c.k});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(static_cast<int32_t>(t->hosts().size()), c.hosts);
  EXPECT_EQ(static_cast<int32_t>(t->nodes().size()), c.hosts + c.switches);
  EXPECT_EQ(static_cast<int32_t>(t->links().size()), c.links);
  EXPECT_TRUE(t->Validate().ok()) << t->Validate().ToString();
  const int32_t half = c.k / 2;
  EXPECT_EQ(static_cast<int32_t>(t->LinksAtTier(1).size()), c.hosts);
  EXPECT_EQ(static_cast<int32_t>(t->LinksAtTier(3).size()), c.k * half * half);
  // Host 0 (pod 0, edge 0) to: same edge, same pod other edge, other pod.
  const int32_t h0 = t->hosts()[0];
  const int32_t same_edge = t->hosts()[1];
  const int32_t same_pod = t->hosts()[half];
  const int32_t other_pod = t->hosts().back();
  EXPECT_EQ(CountPaths(*t, h0, same_edge), 1);
  EXPECT_EQ(CountPaths(*t, h0, same_pod), half);
  EXPECT_EQ(CountPaths(*t, h0, other_pod), int64_t{half} * half);
  EXPECT_EQ(t->HopCount(h0, same_edge), 2);
  EXPECT_EQ(t->HopCount(h0, same_pod), 4);
  EXPECT_EQ(t->HopCount(h0, other_pod), 6);
  // The edge switch above h0 sprays over all k/2 aggregation uplinks.
  const int32_t edge = t->Peer(h0, 0).node;
  EXPECT_EQ(static_cast<int32_t>(t->NextHops(edge, other_pod).size()), half);
  const TopologySummary s = t->Summarize();
  EXPECT_EQ(s.diameter_hops, 6);
  EXPECT_EQ(s.switches_per_tier[1], c.k * half);
  EXPECT_EQ(s.switches_per_tier[3], half * half);
  // Full bisection: half the hosts at line rate.
  EXPECT_EQ(s.bisection.bps(), int64_t{c.hosts / 2} * kDefaultRate.bps());
  EXPECT_DOUBLE_EQ(s.oversubscription[1], 1.0);
  EXPECT_DOUBLE_EQ(s.oversubscription[2], 1.0);
  EXPECT_TRUE(s.validation.ok());
}

INSTANTIATE_TEST_SUITE_P(K, FatTreeTest,
                         ::testing::Values(FatTreeCase{4, 16, 20, 48}, FatTreeCase{8, 128, 80, 384},
                                           FatTreeCase{16, 1024, 320, 3072}),
                         [](const auto& info) { return "k" + std::to_string(info.param.k); });

TEST(FatTree, NamesSwitchesByPod) {
  auto t = BuildFatTree({.k = 4});
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->FindNode("edge3.1").ok());
  EXPECT_TRUE(t->FindNode("agg0.1").ok());
  EXPECT_TRUE(t->FindNode("core3").ok());
  // Aggregation switch 1 of each pod reaches cores 2 and 3.
  EXPECT_TRUE(t->FindLink("agg0.1-core2").ok());
  EXPECT_TRUE(t->FindLink("agg2.1-core3").ok());
  EXPECT_FALSE(t->FindLink("agg0.1-core0").ok());
  EXPECT_TRUE(t->FindLink("h0-edge0.0").ok());
  EXPECT_TRUE(t->FindLink("edge1.0-agg1.1").ok());
}

TEST(FatTree, EdgeOversubscription) {
  auto t = BuildFatTree({.k = 4, .hosts_per_edge = 4});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->hosts().size(), 32u);
  const TopologySummary s = t->Summarize();
  EXPECT_DOUBLE_EQ(s.oversubscription[1], 2.0);
  // Half the pods' uplinks: 2 pods * 2 aggs * 2 cores * 400G.
  EXPECT_EQ(s.bisection, BitsPerSecond::Gbps(8 * 400));
  EXPECT_TRUE(s.validation.ok());
  EXPECT_FALSE(BuildFatTree({.k = 4, .hosts_per_edge = 1}).ok());
}

TEST(FatTree, RejectsBadK) {
  for (int32_t k : {0, 3, -2, 130}) {
    auto t = BuildFatTree({.k = k});
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument) << k;
    EXPECT_THAT(t.status().message(), HasSubstr("k = " + std::to_string(k)));
  }
}

TEST(FatTree, RailOptimizedPutsNicIOnEdgeI) {
  auto t = BuildFatTree({.k = 16, .rail_optimized = true});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  for (int32_t h : t->hosts()) {
    const Node& n = t->node(h);
    const Node& edge = t->node(t->Peer(h, 0).node);
    // 8 servers per pod; NIC g of each sits on edge <pod>.<g>.
    EXPECT_EQ(edge.name, "edge" + std::to_string(n.server / 8) + "." + std::to_string(n.gpu));
  }
  // Same rail, same pod: one edge switch away.
  EXPECT_EQ(t->HopCount(t->hosts()[0], t->hosts()[8]), 2);
  // Different rails in one server: through an aggregation switch.
  EXPECT_EQ(t->HopCount(t->hosts()[0], t->hosts()[1]), 4);
  EXPECT_TRUE(t->Validate().ok());
  EXPECT_FALSE(BuildFatTree({.k = 4, .rail_optimized = true}).ok());  // k/2 = 2 rails < 8 GPUs
}

TEST(LeafSpine, CountsAndOversubscription) {
  auto t = BuildLeafSpine({.leaves = 4, .spines = 2, .hosts_per_leaf = 8});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->hosts().size(), 32u);
  EXPECT_EQ(t->links().size(), 32u + 8u);
  const TopologySummary s = t->Summarize();
  EXPECT_EQ(s.servers, 4);
  EXPECT_DOUBLE_EQ(s.oversubscription[1], 4.0);
  EXPECT_EQ(s.diameter_hops, 4);
  // Two leaves' 2 uplinks each.
  EXPECT_EQ(s.bisection, BitsPerSecond::Gbps(4 * 400));
  EXPECT_EQ(CountPaths(*t, t->hosts()[0], t->hosts()[31]), 2);
  EXPECT_TRUE(s.validation.ok());
}

TEST(LeafSpine, ParallelUplinksWidenEcmp) {
  auto t = BuildLeafSpine({.leaves = 2, .spines = 2, .hosts_per_leaf = 8, .uplinks_per_pair = 4});
  ASSERT_TRUE(t.ok());
  // 2 spines x 4 parallel links up, then 4 parallel links down: 32 paths.
  EXPECT_EQ(CountPaths(*t, t->hosts()[0], t->hosts()[15]), 32);
  EXPECT_EQ(t->NextHops(t->Peer(t->hosts()[0], 0).node, t->hosts()[15]).size(), 8u);
  EXPECT_TRUE(t->FindLink("leaf1-spine0/3").ok());
  EXPECT_DOUBLE_EQ(t->Summarize().oversubscription[1], 1.0);
}

TEST(LeafSpine, DerivesSpinesFromOversubscription) {
  auto t = BuildLeafSpine({.leaves = 2, .hosts_per_leaf = 16, .oversubscription = 2.0});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->Summarize().switches_per_tier[2], 8);
  EXPECT_DOUBLE_EQ(t->Summarize().oversubscription[1], 2.0);
  auto bad = BuildLeafSpine({.leaves = 2, .hosts_per_leaf = 16, .oversubscription = 3.0});
  EXPECT_THAT(bad.status().message(), HasSubstr("not a whole number"));
}

TEST(LeafSpine, RailOptimizedWiring) {
  // 2 groups of 8 rail leaves, 4 servers per group.
  auto t = BuildLeafSpine({.leaves = 16, .spines = 4, .hosts_per_leaf = 4, .rail_optimized = true});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->servers(), 8);
  for (int32_t h : t->hosts()) {
    const Node& n = t->node(h);
    const int32_t leaf = (n.server / 4) * 8 + n.gpu;
    EXPECT_EQ(t->node(t->Peer(h, 0).node).name, "leaf" + std::to_string(leaf)) << n.name;
  }
  EXPECT_TRUE(t->Validate().ok());
}

TEST(LeafSpine, RailOnlyReachesSameRailOnly) {
  // CASES.md 8: without spines, disjoint rails cannot reach each other.
  auto t = BuildLeafSpine({.leaves = 8, .spines = 0, .hosts_per_leaf = 4, .rail_optimized = true});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->reachability(), Reachability::kSameRail);
  EXPECT_TRUE(t->Reachable(t->hosts()[0], t->hosts()[8]));   // server 1, GPU 0
  EXPECT_FALSE(t->Reachable(t->hosts()[0], t->hosts()[9]));  // server 1, GPU 1
  EXPECT_TRUE(t->Validate().ok());
  EXPECT_FALSE(BuildLeafSpine({.leaves = 4, .spines = 0, .hosts_per_leaf = 8}).ok());
}

TEST(LeafSpine, RejectsBadShapes) {
  EXPECT_THAT(BuildLeafSpine({.leaves = 0, .spines = 1, .hosts_per_leaf = 8}).status().message(),
              HasSubstr("leaves = 0"));
  EXPECT_THAT(BuildLeafSpine({.leaves = 3, .spines = 1, .hosts_per_leaf = 3}).status().message(),
              HasSubstr("not a multiple of gpus_per_server"));
  EXPECT_THAT(
      BuildLeafSpine({.leaves = 4, .spines = 1, .hosts_per_leaf = 8, .rail_optimized = true})
          .status()
          .message(),
      HasSubstr("rail-optimized"));
}

TEST(BackToBack, CablesNicIToNicI) {
  auto t = BuildBackToBack({});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->hosts().size(), 16u);
  EXPECT_EQ(t->links().size(), 8u);
  EXPECT_EQ(t->link(3).name, "h3-h11");
  EXPECT_EQ(t->link(3).tier, 0);
  EXPECT_EQ(t->HopCount(t->hosts()[3], t->hosts()[11]), 1);
  EXPECT_FALSE(t->Reachable(t->hosts()[3], t->hosts()[12]));
  const TopologySummary s = t->Summarize();
  EXPECT_EQ(s.switches, 0);
  EXPECT_EQ(s.diameter_hops, 1);
  EXPECT_EQ(s.bisection, BitsPerSecond::Gbps(8 * 400));
  EXPECT_TRUE(s.validation.ok()) << s.validation.ToString();
}

TEST(Presets, ScaleLevels) {
  auto small = BuildPreset("small");
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->hosts().size(), 16u);
  EXPECT_EQ(small->servers(), 2);
  EXPECT_EQ(small->link(0).latency, Picoseconds::FromNanoseconds(5));

  auto medium = BuildPreset("medium");
  ASSERT_TRUE(medium.ok()) << medium.status().ToString();
  EXPECT_EQ(medium->hosts().size(), 128u);
  EXPECT_EQ(medium->servers(), 16);
  const TopologySummary ms = medium->Summarize();
  EXPECT_EQ(ms.switches_per_tier[1], 8);
  EXPECT_EQ(ms.switches_per_tier[2], 4);
  EXPECT_DOUBLE_EQ(ms.oversubscription[1], 1.0);
  EXPECT_EQ(ms.bisection, BitsPerSecond::Gbps(64 * 400));
  EXPECT_TRUE(ms.validation.ok());

  auto large = BuildPreset("large");
  ASSERT_TRUE(large.ok());
  EXPECT_EQ(large->hosts().size(), 1024u);
  EXPECT_EQ(large->servers(), 128);
  const int32_t core_link = large->LinksAtTier(3).front();
  EXPECT_EQ(large->link(core_link).latency, Picoseconds::FromNanoseconds(550));
  EXPECT_EQ(large->link(large->LinksAtTier(1).front()).mtu_ab, 4200);
}

// medium:rail and large:rail: the levels' shape and links, NIC i of every
// server on the group's leaf / edge i (issue 31: the wiring GPU clusters
// use); the plain presets stay as they were.
TEST(Presets, RailOptimizedLevels) {
  auto medium = BuildPreset("medium:rail");
  ASSERT_TRUE(medium.ok()) << medium.status().ToString();
  EXPECT_EQ(medium->hosts().size(), 128u);
  const TopologySummary ms = medium->Summarize();
  EXPECT_EQ(ms.switches_per_tier[1], 8);
  EXPECT_EQ(ms.switches_per_tier[2], 4);
  EXPECT_DOUBLE_EQ(ms.oversubscription[1], 1.0);
  EXPECT_TRUE(ms.validation.ok());
  for (int32_t h : medium->hosts()) {
    const Node& n = medium->node(h);
    EXPECT_EQ(medium->node(medium->Peer(h, 0).node).name, "leaf" + std::to_string(n.gpu));
  }
  auto plain = BuildPreset("medium");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->node(plain->Peer(plain->hosts()[8], 0).node).name, "leaf0");

  auto large = BuildPreset("large:rail");
  ASSERT_TRUE(large.ok()) << large.status().ToString();
  EXPECT_EQ(large->hosts().size(), 1024u);
  EXPECT_EQ(large->link(large->LinksAtTier(3).front()).latency, Picoseconds::FromNanoseconds(550));
  EXPECT_EQ(large->link(large->LinksAtTier(1).front()).latency, Picoseconds::FromNanoseconds(200));
  const Node& h9 = large->node(large->hosts()[9]);  // server 1, GPU 1
  EXPECT_EQ(large->node(large->Peer(large->hosts()[9], 0).node).name, "edge0.1");
  EXPECT_EQ(h9.gpu, 1);
}

TEST(Presets, ParameterizedForms) {
  auto ft = BuildPreset("fat-tree:k=8");
  ASSERT_TRUE(ft.ok());
  EXPECT_EQ(ft->hosts().size(), 128u);
  auto ls = BuildPreset("leaf-spine:leaves=4,spines=2,hosts=8");
  ASSERT_TRUE(ls.ok()) << ls.status().ToString();
  EXPECT_EQ(ls->hosts().size(), 32u);
  auto rail = BuildPreset("leaf-spine:leaves=8,spines=2,hosts=2,rail");
  ASSERT_TRUE(rail.ok()) << rail.status().ToString();
  EXPECT_EQ(rail->node(rail->Peer(rail->hosts()[1], 0).node).name, "leaf1");
  auto b2b = BuildPreset("back-to-back:gpus=4");
  ASSERT_TRUE(b2b.ok());
  EXPECT_EQ(b2b->hosts().size(), 8u);
}

TEST(Presets, BadFormsNameTheProblem) {
  EXPECT_THAT(BuildPreset("huge").status().message(), HasSubstr("unknown topology preset 'huge'"));
  EXPECT_THAT(BuildPreset("fat-tree:k=eight").status().message(),
              HasSubstr("k='eight' is not an integer"));
  EXPECT_THAT(BuildPreset("fat-tree:k=8,pods=3").status().message(),
              HasSubstr("unknown parameter 'pods'"));
  EXPECT_THAT(BuildPreset("fat-tree:k=5").status().message(), HasSubstr("k = 5"));
  EXPECT_THAT(BuildPreset("fat-tree:k=4,k=8").status().message(), HasSubstr("given twice"));
}

TEST(ScaleLevels, SizeRules) {
  EXPECT_FALSE(BuildScaleLevel(Connection::kCopperDirect, 3, 8).ok());
  auto ls = BuildScaleLevel(Connection::kCopperSwitch, 3, 8);
  ASSERT_TRUE(ls.ok()) << ls.status().ToString();
  EXPECT_EQ(ls->hosts().size(), 24u);
  EXPECT_TRUE(ls->Validate().ok());
  auto one = BuildScaleLevel(Connection::kCopperSwitch, 1, 8);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(one->Summarize().switches, 1);
  auto ft = BuildScaleLevel(Connection::kOpticalEngine, 16, 8);
  ASSERT_TRUE(ft.ok());
  EXPECT_EQ(ft->name(), "fat-tree k=8");
  EXPECT_THAT(BuildScaleLevel(Connection::kOpticalEngine, 10, 8).status().message(),
              HasSubstr("k^3/4"));
}

// Issue 24: sizes validation accepted used to abort with std::bad_alloc
// (k=64, k=128) or run for minutes (k=48). They are refused from the
// parameters, before anything is allocated, with the estimate and the limit.
class TopologySizeTest : public ::testing::Test {
 protected:
  void SetUp() override { ::unsetenv("FATHOM_TOPOLOGY_MEMORY_LIMIT"); }
  void TearDown() override { ::unsetenv("FATHOM_TOPOLOGY_MEMORY_LIMIT"); }
};

TEST_F(TopologySizeTest, HugePresetsAreRefusedWithTheEstimate) {
  // Computed routing (issue 30) admits fat-trees up to k=64 and beyond; what
  // is still too big: millions of links, or tables over a million hosts.
  for (const char* preset :
       {"leaf-spine:leaves=16384,spines=1024,hosts=64",
        "leaf-spine:leaves=4096,spines=4096,hosts=8", "back-to-back:gpus=500000"}) {
    auto t = BuildPreset(preset);
    ASSERT_FALSE(t.ok()) << preset;
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument) << preset;
    EXPECT_THAT(t.status().message(), HasSubstr("need about")) << preset;
    EXPECT_THAT(t.status().message(), HasSubstr("more than the limit of")) << preset;
    EXPECT_THAT(t.status().message(), HasSubstr("FATHOM_TOPOLOGY_MEMORY_LIMIT")) << preset;
  }
  EXPECT_THAT(BuildPreset("back-to-back:gpus=500000").status().message(),
              HasSubstr("1000000 nodes x 1000000 hosts"));
  EXPECT_THAT(BuildPreset("back-to-back:gpus=2000000000").status().message(),
              HasSubstr("more than 2^20 hosts"));
}

TEST_F(TopologySizeTest, EveryPresetAndSmallFatTreeStillBuilds) {
  for (const char* preset : {"small", "medium", "large", "back-to-back", "back-to-back:gpus=4",
                             "leaf-spine:leaves=4,spines=2,hosts=8"}) {
    EXPECT_TRUE(BuildPreset(preset).ok())
        << preset << ": " << BuildPreset(preset).status().ToString();
  }
  for (int k = 2; k <= 16; k += 2) {
    const bool whole_servers = k * k * k / 4 % 8 == 0;
    const std::string preset = "fat-tree:k=" + std::to_string(k) + (whole_servers ? "" : ",gpus=1");
    EXPECT_TRUE(BuildPreset(preset).ok())
        << preset << ": " << BuildPreset(preset).status().ToString();
  }
}

TEST_F(TopologySizeTest, EstimateCoversTheRoutingTables) {
  // k=32: 9472 nodes x 8192 hosts; routes alone are 4 * 9472 * 8192 bytes.
  const int64_t k32 = EstimateTopologyBytes(9472, 8192, 24576);
  EXPECT_GE(k32, int64_t{4} * 9472 * 8192 + int64_t{2} * 8192 * 8192);
  EXPECT_LE(k32, kDefaultTopologyMemoryLimit);
  // Saturates instead of overflowing.
  EXPECT_EQ(EstimateTopologyBytes(int64_t{1} << 40, int64_t{1} << 40, 1),
            std::numeric_limits<int64_t>::max());
}

TEST_F(TopologySizeTest, TheLimitComesFromTheEnvironment) {
  ASSERT_EQ(::setenv("FATHOM_TOPOLOGY_MEMORY_LIMIT", "1K", 1), 0);
  auto t = BuildPreset("fat-tree:k=4");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("FATHOM_TOPOLOGY_MEMORY_LIMIT=1K"));
  ASSERT_EQ(::setenv("FATHOM_TOPOLOGY_MEMORY_LIMIT", "lots", 1), 0);
  EXPECT_THAT(BuildPreset("fat-tree:k=4").status().message(), HasSubstr("is not a byte count"));
  ASSERT_EQ(::setenv("FATHOM_TOPOLOGY_MEMORY_LIMIT", "2G", 1), 0);
  EXPECT_TRUE(BuildPreset("fat-tree:k=4").ok());
}

TEST_F(TopologySizeTest, CliExitsTwoWithTheEstimateInsteadOfAborting) {
  const auto r = fathom::test_util::RunCommand(std::string(FATHOM_TOPO_CLI) +
                                               " topo back-to-back:gpus=500000");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("need about 5.5 TiB"));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("bad_alloc")));
}

TEST(LeafSpineTest, TinyOversubscriptionIsAnErrorNotAnOverflow) {
  LeafSpineOptions o;
  o.leaves = 2;
  o.hosts_per_leaf = 8;
  o.oversubscription = 1e-300;
  auto t = BuildLeafSpine(o);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("not a whole number"));
}

}  // namespace
}  // namespace fathom::topo
