// Re-routing around a failed link (fabric/scenario/reroute.h): a route that
// crosses the failed direction bounces down and up through the neighbour
// named, and gets its old route back when the link returns.
#include "fabric/scenario/reroute.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

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

TEST(RerouteTest, ARouteIntoAFailedDownlinkBouncesThroughTheNeighbour) {
  topo::LeafSpineOptions o;
  o.leaves = 4;
  o.spines = 2;
  o.hosts_per_leaf = 1;
  o.gpus_per_server = 1;
  auto built = topo::BuildLeafSpine(o);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  const topo::Topology t = std::move(built).value();
  Engine engine(1);
  Network net(&engine, &t, NetworkConfig{});
  QpAttr attr;
  // QPs from h0 (leaf0) to h3 (leaf3): some hash onto spine0.
  for (int i = 0; i < 8; ++i) testing::Connect(net, 0, 3, attr);
  const int32_t spine0 = t.FindNode("spine0").value();
  const int32_t leaf1 = t.FindNode("leaf1").value();
  const int32_t leaf3 = t.FindNode("leaf3").value();
  Port* failed = nullptr;
  for (int32_t i = 0; i < t.PortCount(spine0); ++i) {
    if (t.Peer(spine0, i).node == leaf3) failed = &net.port(spine0, i);
  }
  ASSERT_NE(failed, nullptr);
  std::vector<std::vector<std::string>> before;
  int via_spine0 = 0;
  net.nic(0).ForEachFlow([&](QpFlow& f) {
    before.push_back(Names(t, f.path));
    for (Port* p : f.path) via_spine0 += p == failed;
  });
  ASSERT_GT(via_spine0, 0) << "no QP hashed onto spine0: pick other QPs";
  std::vector<Port*> down;
  Reroute r(&net, {failed}, leaf1, &down);
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
  EXPECT_TRUE(down.empty());
  i = 0;
  net.nic(0).ForEachFlow([&](QpFlow& f) { EXPECT_EQ(Names(t, f.path), before[i++]); });
}

}  // namespace
}  // namespace fathom::sim
