// Computed up/down routing (issue 30) against the routing tables it
// replaces: for fat-trees (k=8, k=16 and variants) and leaf-spines, every
// node's ECMP set towards every host, every host pair's hop count, the
// diameter and validation agree; and in the simulator every host pair's
// path (ECMP hash and per-switch salt included) is the same port by port.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fabric/sim/engine.h"
#include "fabric/sim/network.h"
#include "fabric/sim/packet.h"
#include "topologies/builders.h"

namespace fathom::topo {
namespace {

using ::testing::ElementsAreArray;

struct Pair {
  Topology computed;
  Topology table;
};

Pair Build(const std::string& preset) {
  auto t = BuildPreset(preset);
  EXPECT_TRUE(t.ok()) << preset << ": " << t.status().ToString();
  Pair p{*t, *t};
  EXPECT_EQ(p.computed.routing(), Routing::kUpDown) << preset;
  const Status s = p.table.UseRouteTables();
  EXPECT_TRUE(s.ok()) << preset << ": " << s.ToString();
  EXPECT_EQ(p.table.routing(), Routing::kTable) << preset;
  return p;
}

class RoutingEquality : public ::testing::TestWithParam<std::string> {};

TEST_P(RoutingEquality, EveryNextHopAndHopCountMatchesTheTables) {
  const Pair p = Build(GetParam());
  const Topology& c = p.computed;
  const Topology& t = p.table;
  ASSERT_EQ(c.nodes().size(), t.nodes().size());
  int64_t compared = 0;
  for (int32_t node = 0; node < static_cast<int32_t>(c.nodes().size()); ++node) {
    for (int32_t dst : c.hosts()) {
      const auto want = t.NextHops(node, dst);
      const auto got = c.NextHops(node, dst);
      ASSERT_THAT(std::vector<int32_t>(got.begin(), got.end()), ElementsAreArray(want))
          << GetParam() << ": " << c.node(node).name << " -> " << c.node(dst).name;
      ++compared;
    }
  }
  EXPECT_EQ(compared, static_cast<int64_t>(c.nodes().size() * c.hosts().size()));
  for (int32_t src : c.hosts()) {
    for (int32_t dst : c.hosts()) {
      ASSERT_EQ(c.HopCount(src, dst), t.HopCount(src, dst))
          << GetParam() << ": " << c.node(src).name << " -> " << c.node(dst).name;
      ASSERT_EQ(c.Reachable(src, dst), t.Reachable(src, dst));
    }
  }
  const TopologySummary cs = c.Summarize();
  const TopologySummary ts = t.Summarize();
  EXPECT_EQ(cs.diameter_hops, ts.diameter_hops) << GetParam();
  EXPECT_TRUE(cs.validation.ok()) << GetParam() << ": " << cs.validation.ToString();
  EXPECT_TRUE(ts.validation.ok()) << GetParam() << ": " << ts.validation.ToString();
  EXPECT_EQ(cs.routing, Routing::kUpDown);
  if (c.hosts().size() >= 64) {
    EXPECT_LT(cs.estimated_bytes, ts.estimated_bytes) << GetParam();
  }
}

// The simulator's switches route with the ECMP hash and per-switch salt:
// every host pair's path (for several flow hashes, i.e. QPs) is the same
// port by port on a network built from either routing.
TEST_P(RoutingEquality, EverySimulatedPathMatchesTheTables) {
  const Pair p = Build(GetParam());
  sim::Engine ec(7), et(7);
  sim::NetworkConfig nc;  // ecmp_salt on, as by default
  sim::Network nc_net(&ec, &p.computed, nc);
  sim::Network nt_net(&et, &p.table, nc);
  const auto& hosts = p.computed.hosts();
  int64_t hops = 0;
  // Several QPs' source ports per pair on the small fabrics; one on the
  // 1024-host ones (a million pairs, each with its own hash already).
  const std::vector<uint32_t> sports = hosts.size() > 256
                                           ? std::vector<uint32_t>{49152u}
                                           : std::vector<uint32_t>{49152u, 49153u, 50001u};
  for (int32_t src : hosts) {
    for (int32_t dst : hosts) {
      if (src == dst) continue;
      for (uint32_t sport : sports) {
        const uint32_t hash = sim::FlowHash(src, dst, sport);
        sim::Port* a[sim::kPathMax];
        sim::Port* b[sim::kPathMax];
        nc_net.PathOf(src, dst, hash, a);
        nt_net.PathOf(src, dst, hash, b);
        for (size_t h = 0; h < sim::kPathMax; ++h) {
          ASSERT_EQ(a[h] == nullptr, b[h] == nullptr) << GetParam() << " hop " << h;
          if (a[h] == nullptr) break;
          ASSERT_EQ(a[h]->config().node, b[h]->config().node) << GetParam() << " hop " << h;
          ASSERT_EQ(a[h]->config().index, b[h]->config().index)
              << GetParam() << ": " << p.computed.node(src).name << " -> "
              << p.computed.node(dst).name << " hop " << h;
          ++hops;
        }
      }
    }
  }
  EXPECT_GT(hops, 0);
}

INSTANTIATE_TEST_SUITE_P(FatTreesAndLeafSpines, RoutingEquality,
                         ::testing::Values("fat-tree:k=8", "fat-tree:k=16", "fat-tree:k=2,gpus=1",
                                           "fat-tree:k=4,hosts_per_edge=6", "fat-tree:k=16,rail",
                                           "fat-tree:k=8,rail,gpus=4", "medium",
                                           "leaf-spine:leaves=4,spines=2,hosts=8",
                                           "leaf-spine:leaves=6,spines=3,hosts=8,uplinks=2",
                                           "leaf-spine:leaves=16,spines=4,hosts=4,rail",
                                           "leaf-spine:leaves=8,spines=0,hosts=4,rail",
                                           "leaf-spine:leaves=1,spines=0,hosts=16"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name;
                           for (char ch : info.param)
                             name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return name;
                         });

TEST(Routing, BackToBackKeepsTables) {
  auto t = BuildPreset("small");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->routing(), Routing::kTable);
  EXPECT_TRUE(t->UseRouteTables().ok());  // a no-op
}

TEST(Routing, EstimateOfComputedRoutingGrowsWithPortsNotSwitchesTimesHosts) {
  // k=64: 70,656 nodes, 65,536 hosts, 196,608 links.
  const int64_t computed = EstimateTopologyBytes(70656, 65536, 196608, Routing::kUpDown);
  const int64_t tables = EstimateTopologyBytes(70656, 65536, 196608, Routing::kTable);
  EXPECT_LE(computed, kDefaultTopologyMemoryLimit);
  EXPECT_GT(tables, int64_t{4} * 70656 * 65536);
  EXPECT_LT(computed, int64_t{128} << 20);
}

}  // namespace
}  // namespace fathom::topo
