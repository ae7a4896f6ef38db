// Topology graph basics on hand-built graphs: naming, ports, lookup,
// selection, routing and what Validate() rejects.
#include "topologies/topology.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace fathom::topo {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr LinkParams kLink{BitsPerSecond::Gbps(100), Picoseconds::FromNanoseconds(10), 1500};

// Two hosts under one leaf, one more under a second leaf, two spines.
struct Small {
  Topology t;
  int32_t h0, h1, h2, leaf0, leaf1, spine0, spine1;
};

Small MakeSmall() {
  TopologyBuilder b("small-test");
  Small s;
  s.h0 = b.AddHost("h0", 0, 0);
  s.h1 = b.AddHost("h1", 0, 1);
  s.h2 = b.AddHost("h2", 1, 0);
  s.leaf0 = b.AddSwitch("leaf0", kTierLeaf);
  s.leaf1 = b.AddSwitch("leaf1", kTierLeaf);
  s.spine0 = b.AddSwitch("spine0", kTierSpine);
  s.spine1 = b.AddSwitch("spine1", kTierSpine);
  EXPECT_TRUE(b.Connect(s.leaf0, s.h0, kLink).ok());  // reversed on purpose
  EXPECT_TRUE(b.Connect(s.h1, s.leaf0, kLink).ok());
  EXPECT_TRUE(b.Connect(s.h2, s.leaf1, kLink).ok());
  for (int32_t leaf : {s.leaf0, s.leaf1}) {
    for (int32_t spine : {s.spine0, s.spine1}) EXPECT_TRUE(b.Connect(leaf, spine, kLink).ok());
  }
  auto t = std::move(b).Build();
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  s.t = std::move(t).value();
  return s;
}

TEST(TopologyTest, NamesLinksBottomUpAndNumbersPorts) {
  Small s = MakeSmall();
  const Link& l = s.t.link(0);
  EXPECT_EQ(l.name, "h0-leaf0");
  EXPECT_EQ(l.a, s.h0);
  EXPECT_EQ(l.b, s.leaf0);
  EXPECT_EQ(l.tier, 1);
  EXPECT_EQ(s.t.link(3).name, "leaf0-spine0");
  EXPECT_EQ(s.t.link(3).tier, 2);
  EXPECT_EQ(s.t.PortCount(s.leaf0), 4);
  EXPECT_EQ(s.t.PortCount(s.h0), 1);
  const PortRef peer = s.t.Peer(s.leaf0, 1);
  EXPECT_EQ(peer.node, s.h1);
  EXPECT_EQ(peer.port, 0);
  EXPECT_EQ(s.t.LinkAt(s.h2, 0), 2);
}

TEST(TopologyTest, HostsAreRankedServerMajorThenGpu) {
  TopologyBuilder b("rank");
  const int32_t x = b.AddHost("x", 1, 0);
  const int32_t y = b.AddHost("y", 0, 1);
  const int32_t z = b.AddHost("z", 0, 0);
  const int32_t leaf = b.AddSwitch("leaf", kTierLeaf);
  for (int32_t h : {x, y, z}) ASSERT_TRUE(b.Connect(h, leaf, kLink).ok());
  auto t = std::move(b).Build();
  ASSERT_TRUE(t.ok());
  EXPECT_THAT(t->hosts(), ElementsAre(z, y, x));
  EXPECT_EQ(t->HostRank(x), 2);
  EXPECT_EQ(t->HostRank(leaf), -1);
  EXPECT_EQ(t->servers(), 2);
}

TEST(TopologyTest, EcmpSetsFollowShortestPaths) {
  Small s = MakeSmall();
  // leaf0 towards h2: both spine uplinks (ports 2 and 3).
  EXPECT_THAT(s.t.NextHops(s.leaf0, s.h2), ElementsAre(2, 3));
  // leaf0 towards h1: the one host port.
  EXPECT_THAT(s.t.NextHops(s.leaf0, s.h1), ElementsAre(1));
  // A spine towards h0: down to leaf0 only.
  ASSERT_EQ(s.t.NextHops(s.spine1, s.h0).size(), 1u);
  EXPECT_EQ(s.t.Peer(s.spine1, s.t.NextHops(s.spine1, s.h0)[0]).node, s.leaf0);
  EXPECT_TRUE(s.t.NextHops(s.h0, s.h0).empty());
  EXPECT_EQ(s.t.HopCount(s.h0, s.h1), 2);
  EXPECT_EQ(s.t.HopCount(s.h0, s.h2), 4);
  EXPECT_TRUE(s.t.Validate().ok()) << s.t.Validate().ToString();
}

TEST(TopologyTest, HostsDoNotForwardTransitTraffic) {
  // leaf0 - h_mid - leaf1: a dual-homed host is not a path between leaves.
  TopologyBuilder b("dual");
  const int32_t a = b.AddHost("a", 0, 0);
  const int32_t mid = b.AddHost("mid", 1, 0);
  const int32_t c = b.AddHost("c", 2, 0);
  const int32_t l0 = b.AddSwitch("leaf0", kTierLeaf);
  const int32_t l1 = b.AddSwitch("leaf1", kTierLeaf);
  ASSERT_TRUE(b.Connect(a, l0, kLink).ok());
  ASSERT_TRUE(b.Connect(mid, l0, kLink).ok());
  ASSERT_TRUE(b.Connect(mid, l1, kLink).ok());
  ASSERT_TRUE(b.Connect(c, l1, kLink).ok());
  auto t = std::move(b).Build();
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->Reachable(a, c));
  EXPECT_TRUE(t->Reachable(a, mid));
  EXPECT_TRUE(t->Reachable(mid, c));
  const Status v = t->Validate();
  EXPECT_EQ(v.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(v.message(), HasSubstr("host a cannot reach host c"));
}

TEST(TopologyTest, ParallelLinksGetSuffixes) {
  TopologyBuilder b("parallel");
  const int32_t h = b.AddHost("h0", 0, 0);
  const int32_t h1 = b.AddHost("h1", 1, 0);
  const int32_t l0 = b.AddSwitch("leaf0", kTierLeaf);
  const int32_t l1 = b.AddSwitch("leaf1", kTierLeaf);
  const int32_t s = b.AddSwitch("spine0", kTierSpine);
  ASSERT_TRUE(b.Connect(h, l0, kLink).ok());
  ASSERT_TRUE(b.Connect(h1, l1, kLink).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(b.Connect(l0, s, kLink).ok());
  ASSERT_TRUE(b.Connect(l1, s, kLink).ok());
  auto t = std::move(b).Build();
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->link(2).name, "leaf0-spine0");
  EXPECT_EQ(t->link(3).name, "leaf0-spine0/1");
  EXPECT_EQ(t->link(4).name, "leaf0-spine0/2");
  EXPECT_EQ(*t->FindLink("leaf0-spine0/2"), 4);
  EXPECT_THAT(t->NextHops(l0, h1), ElementsAre(1, 2, 3));
}

TEST(TopologyTest, FindsNodesAndLinksByNameAndEndpoints) {
  Small s = MakeSmall();
  EXPECT_EQ(*s.t.FindNode("spine1"), s.spine1);
  EXPECT_EQ(s.t.FindNode("spine9").status().code(), StatusCode::kNotFound);
  EXPECT_THAT(s.t.FindNode("spine9").status().message(), HasSubstr("spine9"));
  EXPECT_EQ(*s.t.FindLink("leaf1-spine1"), 6);
  EXPECT_EQ(*s.t.FindLink("spine1-leaf1"), 6);  // either order
  EXPECT_EQ(*s.t.FindLink(s.spine1, s.leaf1), 6);
  EXPECT_FALSE(s.t.FindLink("leaf0-leaf1").ok());
  EXPECT_FALSE(s.t.FindLink(s.h0, s.h2).ok());
}

TEST(TopologyTest, SelectsLinksByTierNodeAndGlob) {
  Small s = MakeSmall();
  EXPECT_THAT(*s.t.SelectLinks("tier:2"), ElementsAre(3, 4, 5, 6));
  EXPECT_THAT(*s.t.SelectLinks("tier:1"), ElementsAre(0, 1, 2));
  EXPECT_THAT(*s.t.SelectLinks("spine0"), ElementsAre(3, 5));
  EXPECT_THAT(*s.t.SelectLinks("leaf1-*"), ElementsAre(5, 6));
  EXPECT_THAT(*s.t.SelectLinks("*-spine?"), ElementsAre(3, 4, 5, 6));
  EXPECT_THAT(*s.t.SelectLinks("spine0-leaf1"), ElementsAre(5));
  EXPECT_EQ(s.t.SelectLinks("core*").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(s.t.SelectLinks("tier:7").status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.t.LinksAtTier(3), ElementsAre());
}

TEST(TopologyTest, BuilderRejectsBadGraphs) {
  {
    TopologyBuilder b("dup");
    b.AddHost("x", 0, 0);
    b.AddHost("x", 0, 1);
    auto t = std::move(b).Build();
    EXPECT_THAT(t.status().message(), HasSubstr("duplicate node name 'x'"));
  }
  {
    TopologyBuilder b("self");
    const int32_t x = b.AddHost("x", 0, 0);
    EXPECT_EQ(b.Connect(x, x, kLink).status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(b.Connect(x, 7, kLink).status().code(), StatusCode::kInvalidArgument);
  }
  {
    TopologyBuilder b("rate");
    const int32_t x = b.AddHost("x", 0, 0);
    const int32_t y = b.AddHost("y", 1, 0);
    EXPECT_THAT(
        b.Connect(x, y, LinkParams{BitsPerSecond(0), Picoseconds(1), 1500}).status().message(),
        HasSubstr("must be positive"));
  }
  {
    TopologyBuilder b("noswitch-tier");
    b.AddSwitch("s", 0);
    b.AddHost("h", 0, 0);
    EXPECT_THAT(std::move(b).Build().status().message(), HasSubstr("tier 0"));
  }
  {
    TopologyBuilder b("empty");
    EXPECT_FALSE(std::move(b).Build().ok());
  }
}

TEST(TopologyTest, SetLinkParamsChangesOneDirection) {
  Small s = MakeSmall();
  ASSERT_TRUE(s.t.SetLinkParams(0, BitsPerSecond::Gbps(25), Picoseconds(7), 9000, 1500).ok());
  EXPECT_EQ(s.t.link(0).rate, BitsPerSecond::Gbps(25));
  EXPECT_EQ(s.t.link(0).mtu_ab, 9000);
  EXPECT_EQ(s.t.link(0).mtu_ba, 1500);
  EXPECT_FALSE(s.t.SetLinkParams(99, BitsPerSecond::Gbps(1), Picoseconds(1), 1, 1).ok());
  EXPECT_FALSE(s.t.SetLinkParams(0, BitsPerSecond::Gbps(1), Picoseconds(1), 0, 1).ok());
}

TEST(TopologyTest, SummarizesCountsBisectionAndOversubscription) {
  Small s = MakeSmall();
  const TopologySummary sum = s.t.Summarize();
  EXPECT_EQ(sum.hosts, 3);
  EXPECT_EQ(sum.servers, 2);
  EXPECT_EQ(sum.switches, 4);
  EXPECT_EQ(sum.switches_per_tier[1], 2);
  EXPECT_EQ(sum.switches_per_tier[2], 2);
  ASSERT_EQ(sum.links_per_tier.size(), 2u);
  EXPECT_EQ(sum.links_per_tier[0].count, 3);
  EXPECT_EQ(sum.links_per_tier[1].count, 4);
  EXPECT_EQ(sum.diameter_hops, 4);
  // Ranks {h0} vs {h1, h2}... half = 1: h0 against h1 (h2 is the odd one out).
  EXPECT_EQ(sum.bisection, BitsPerSecond::Gbps(100));
  // leaf tier: 3 host links down, 4 uplinks: 0.75.
  EXPECT_DOUBLE_EQ(sum.oversubscription[1], 0.75);
  EXPECT_DOUBLE_EQ(sum.oversubscription[2], 0.0);
  EXPECT_TRUE(sum.validation.ok());
}

}  // namespace
}  // namespace fathom::topo
