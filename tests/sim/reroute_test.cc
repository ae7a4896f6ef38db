// Re-routing around a failed link (fabric/scenario/reroute.h): a route that
// crosses the failed direction bounces down and up through the neighbour
// named, and gets its old route back when the link returns.
#include "fabric/scenario/reroute.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fabric/scenario/scenario.h"
#include "fabric/sim/network.h"
#include "tests/sim/sim_test_util.h"
#include "topologies/builders.h"

namespace fathom::sim {
namespace {

// Names "node:port" of a route's egress ports, as `fathom topo --links`.
std::vector<std::string> Names(const topo::Topology& t, Port* const* path) {
  std::vector<std::string> out;
  for (size_t h = 0; h < kPathMax && path[h] != nullptr; ++h) {
    out.push_back(t.node(path[h]->config().node).name + ">" +
                  t.node(path[h]->peer()->config().node).name);
  }
  return out;
}

// The 4-leaf, 2-spine leaf-spine with one host a leaf (h<i> on leaf<i>).
topo::Topology FourLeavesTwoSpines() {
  topo::LeafSpineOptions o;
  o.leaves = 4;
  o.spines = 2;
  o.hosts_per_leaf = 1;
  o.gpus_per_server = 1;
  auto built = topo::BuildLeafSpine(o);
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  return std::move(built).value();
}

// Node `from`'s egress port to node `to` (null: no link).
Port* PortTo(const topo::Topology& t, Network& net, const char* from, const char* to) {
  const int32_t a = t.FindNode(from).value();
  const int32_t b = t.FindNode(to).value();
  for (int32_t i = 0; i < t.PortCount(a); ++i) {
    if (t.Peer(a, i).node == b) return &net.port(a, i);
  }
  return nullptr;
}

TEST(RerouteTest, ARouteIntoAFailedDownlinkBouncesThroughTheNeighbour) {
  const topo::Topology t = FourLeavesTwoSpines();
  Engine engine(1);
  Network net(&engine, &t, NetworkConfig{});
  QpAttr attr;
  // QPs from h0 (leaf0) to h3 (leaf3): some hash onto spine0.
  for (int i = 0; i < 8; ++i) testing::Connect(net, 0, 3, attr);
  const int32_t leaf1 = t.FindNode("leaf1").value();
  Port* failed = PortTo(t, net, "spine0", "leaf3");
  ASSERT_NE(failed, nullptr);
  std::vector<std::vector<std::string>> before;
  int via_spine0 = 0;
  net.nic(0).ForEachFlow([&](QpFlow& f) {
    before.push_back(Names(t, f.path));
    for (Port* p : f.path) via_spine0 += p == failed;
  });
  ASSERT_GT(via_spine0, 0) << "no QP hashed onto spine0: pick other QPs";
  Rerouting shared(&net);
  Reroute r(&net, {failed}, leaf1, &shared);
  r.Apply();
  EXPECT_EQ(r.rerouted(), via_spine0);
  EXPECT_EQ(r.unrouted(), 0);
  size_t i = 0;
  net.nic(0).ForEachFlow([&](QpFlow& f) {
    const std::vector<std::string> now = Names(t, f.path);
    if (now == before[i++]) {
      for (Port* p : f.path) EXPECT_NE(p, failed);
      return;
    }
    EXPECT_EQ(now, (std::vector<std::string>{"h0>leaf0", "leaf0>spine0", "spine0>leaf1",
                                             "leaf1>spine1", "spine1>leaf3", "leaf3>h3"}));
  });
  r.Restore();
  EXPECT_TRUE(shared.down().empty());
  i = 0;
  net.nic(0).ForEachFlow([&](QpFlow& f) { EXPECT_EQ(Names(t, f.path), before[i++]); });
}

// An upward direction (leaf3's link up to spine0) re-routes onto the
// leaf's other spine, its other ECMP next hop: no bounce.
TEST(RerouteTest, AFailedUplinkTakesAnotherEcmpNextHop) {
  const topo::Topology t = FourLeavesTwoSpines();
  Engine engine(1);
  Network net(&engine, &t, NetworkConfig{});
  QpAttr attr;
  for (int i = 0; i < 8; ++i) testing::Connect(net, 3, 0, attr);
  Port* failed = PortTo(t, net, "leaf3", "spine0");
  ASSERT_NE(failed, nullptr);
  std::vector<std::vector<std::string>> before;
  int via_spine0 = 0;
  net.nic(3).ForEachFlow([&](QpFlow& f) {
    before.push_back(Names(t, f.path));
    for (Port* p : f.path) via_spine0 += p == failed;
  });
  ASSERT_GT(via_spine0, 0) << "no QP hashed onto spine0: pick other QPs";
  ASSERT_LT(via_spine0, 8) << "every QP hashed onto spine0: pick other QPs";
  Rerouting shared(&net);
  Reroute r(&net, {failed}, t.FindNode("leaf1").value(), &shared);
  r.Apply();
  EXPECT_EQ(r.rerouted(), via_spine0);
  EXPECT_EQ(r.unrouted(), 0);
  const std::vector<std::string> other{"h3>leaf3", "leaf3>spine1", "spine1>leaf0", "leaf0>h0"};
  net.nic(3).ForEachFlow([&](QpFlow& f) { EXPECT_EQ(Names(t, f.path), other); });
  r.Restore();
  size_t i = 0;
  net.nic(3).ForEachFlow([&](QpFlow& f) { EXPECT_EQ(Names(t, f.path), before[i++]); });
}

// A failure above tier 1 in a 3-tier fat-tree (k=4): core0's link down to
// agg3.0. The flows from pod 0 to pod 3 over core0 bounce through agg2.0
// and up to core1: 8 links, one more than a route holds (kPathMax). The
// route holds the first 7, to the destination's edge switch, whose table
// gives the host link.
TEST(RerouteTest, AFailureAboveTierOneBouncesOverEightLinks) {
  topo::FatTreeOptions o;
  o.k = 4;
  o.gpus_per_server = 1;
  auto built = topo::BuildFatTree(o);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  const topo::Topology t = std::move(built).value();
  Engine engine(1);
  Network net(&engine, &t, NetworkConfig{});
  QpAttr attr;
  const int32_t h0 = t.HostRank(t.FindNode("h0").value());
  const int32_t h12 = t.HostRank(t.FindNode("h12").value());
  for (int i = 0; i < 16; ++i) testing::Connect(net, h0, h12, attr);
  Port* failed = PortTo(t, net, "core0", "agg3.0");
  ASSERT_NE(failed, nullptr);
  int via_core0 = 0;
  net.nic(h0).ForEachFlow([&](QpFlow& f) {
    for (Port* p : f.path) via_core0 += p == failed;
  });
  ASSERT_GT(via_core0, 0) << "no QP hashed onto core0: pick other QPs";
  Rerouting shared(&net);
  Reroute r(&net, {failed}, t.FindNode("agg2.0").value(), &shared);
  r.Apply();
  EXPECT_EQ(r.rerouted(), via_core0);
  EXPECT_EQ(r.unrouted(), 0);
  int bounced = 0;
  net.nic(h0).ForEachFlow([&](QpFlow& f) {
    const std::vector<std::string> now = Names(t, f.path);
    for (Port* p : f.path) EXPECT_NE(p, failed);
    if (now.size() < 4 || now[3] != "core0>agg2.0") return;
    ++bounced;
    ASSERT_EQ(now.size(), size_t{kPathMax});
    EXPECT_EQ(now[4], "agg2.0>core1");
    EXPECT_EQ(now[5], "core1>agg3.0");
    // The last switch reached by the route is h12's: its table's one hop.
    const int32_t last = f.path[kPathMax - 1]->peer()->config().node;
    EXPECT_EQ(t.Peer(last, t.NextHops(last, t.hosts()[static_cast<size_t>(h12)])[0]).node,
              t.hosts()[static_cast<size_t>(h12)]);
  });
  EXPECT_EQ(bounced, via_core0);
}

// The same failure in a run (tests/parallel/scenarios/reroute_core.yaml):
// the re-routed flows' packets cross the 8 links and every flow completes.
TEST(RerouteTest, ATierTwoFailureReroutesAndDelivers) {
  auto sc =
      LoadScenario(std::string(FATHOM_SOURCE_DIR) + "/tests/parallel/scenarios/reroute_core.yaml");
  ASSERT_TRUE(sc.ok()) << sc.status().ToString();
  auto r = RunScenario(*sc, RunOptions{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->flows_completed, 6);
  EXPECT_EQ(r->flows_failed, 0);
  EXPECT_TRUE(CheckExpectations(sc->spec, *r).empty());
}

// Both directions of a leaf-spine link in a run (tests/parallel/scenarios/
// reroute_both.yaml): the flows up over it take the other spine, those down
// over it bounce through leaf1, and every flow completes.
TEST(RerouteTest, BothDirectionsOfALinkRerouteAndDeliver) {
  auto sc =
      LoadScenario(std::string(FATHOM_SOURCE_DIR) + "/tests/parallel/scenarios/reroute_both.yaml");
  ASSERT_TRUE(sc.ok()) << sc.status().ToString();
  auto r = RunScenario(*sc, RunOptions{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->flows_completed, 6);
  EXPECT_EQ(r->flows_failed, 0);
  ASSERT_EQ(r->fault_stats.size(), 1u);
  EXPECT_EQ(r->fault_stats[0].attachments, 2);  // both directions
  const size_t at = r->faults_summary.find("flows_rerouted=");
  ASSERT_NE(at, std::string::npos) << r->faults_summary;
  EXPECT_GT(std::stoi(r->faults_summary.substr(at + 15)), 0) << r->faults_summary;
}

}  // namespace
}  // namespace fathom::sim
