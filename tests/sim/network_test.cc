// The Network's fixed paths: a QP's packets carry the route the switches'
// tables would give them hop by hop, so a run with paths and a run without
// (every switch looks each packet up) must be the same run, bit for bit.
#include "fabric/sim/network.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "fabric/scenario/workload.h"
#include "topologies/builders.h"

namespace fathom::sim {
namespace {

topo::Topology SmallFatTree() {
  topo::FatTreeOptions o;
  o.k = 4;
  const topo::LinkParams l{BitsPerSecond::Gbps(100), Picoseconds::FromNanoseconds(5), 4200};
  o.host_link = o.edge_link = o.core_link = l;
  return topo::BuildFatTree(o).value();
}

TEST(NetworkTest, PathsLeadHopByHopToTheDestinationAsTheTablesDo) {
  const topo::Topology topo = SmallFatTree();
  Engine engine(1);
  Network net(&engine, &topo, NetworkConfig{});
  const std::vector<int32_t>& hosts = topo.hosts();
  for (int32_t src : hosts) {
    for (int32_t dst : hosts) {
      if (src == dst) continue;
      for (uint32_t hash : {0u, 1u, 0x9e3779b9u, 0xdeadbeefu, 0xffffffffu}) {
        Port* path[kPathMax];
        net.PathOf(src, dst, hash, path);
        ASSERT_EQ(path[0], &net.port(src, 0)) << src << " -> " << dst;
        // Follow the path: each entry leaves from the node the previous one
        // reached, and is what that switch's table picks for the packet.
        size_t h = 1;
        int32_t at = path[0]->peer()->config().node;
        for (; topo.node(at).kind == topo::NodeKind::kSwitch; ++h) {
          ASSERT_LT(h, size_t{kPathMax});
          ASSERT_NE(path[h], nullptr);
          EXPECT_EQ(path[h]->config().node, at);
          at = path[h]->peer()->config().node;
        }
        EXPECT_EQ(at, dst) << "path from " << src << " ends elsewhere";
        for (; h < kPathMax; ++h) EXPECT_EQ(path[h], nullptr);
      }
    }
  }
  // Hosts in other pods are 6 links apart in a 3-tier fat-tree.
  Port* far[kPathMax];
  net.PathOf(hosts.front(), hosts.back(), 7, far);
  EXPECT_NE(far[5], nullptr);
  EXPECT_EQ(far[6], nullptr);
  // A node that is not a host has no path: every entry is null (each switch
  // would look the packet up), whatever the array held before.
  Port* none[kPathMax];
  std::fill(none, none + kPathMax, &net.port(hosts.front(), 0));
  net.PathOf(-1, hosts.back(), 7, none);
  for (Port* entry : none) EXPECT_EQ(entry, nullptr);
}

struct RunFacts {
  uint64_t digest = 0;
  uint64_t events = 0;
  uint64_t drops = 0;
  std::vector<uint64_t> port_packets;
};

RunFacts PermutationRun(bool fixed_paths) {
  const topo::Topology topo = SmallFatTree();
  Engine engine(3);
  NetworkConfig config;
  config.fixed_paths = fixed_paths;
  config.switch_buffer_bytes = 64 << 10;  // small: tail drops and go-back-N happen
  Network net(&engine, &topo, config);
  Rng rng = engine.MakeRng(1);
  FlowOptions fo;
  fo.qps_per_connection = 2;
  FlowDriver driver(&net, PermutationFlows(net.host_count(), 1 << 20, Picoseconds(0), rng), fo);
  EXPECT_TRUE(driver.Setup().ok());
  engine.Run();
  EXPECT_EQ(driver.completed(), net.host_count());
  RunFacts f;
  f.digest = engine.trace_digest();
  f.events = engine.events_dispatched();
  f.drops = net.drops().total();
  for (Port* p : net.ports()) f.port_packets.push_back(p->counters().port_xmit_packets);
  return f;
}

TEST(NetworkTest, RunWithPathsIsTheRunWithTableLookups) {
  const RunFacts with = PermutationRun(true);
  const RunFacts without = PermutationRun(false);
  EXPECT_GT(with.drops, 0u);  // the comparison covers losses and recovery
  EXPECT_EQ(with.digest, without.digest);
  EXPECT_EQ(with.events, without.events);
  EXPECT_EQ(with.drops, without.drops);
  EXPECT_EQ(with.port_packets, without.port_packets);
}

}  // namespace
}  // namespace fathom::sim
