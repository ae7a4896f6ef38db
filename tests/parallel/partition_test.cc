#include "fabric/parallel/partition.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <string>

#include "topologies/builders.h"
#include "topologies/server.h"

namespace fathom::parallel {
namespace {

topo::Topology FatTree(int32_t k, Picoseconds latency) {
  topo::FatTreeOptions o;
  o.k = k;
  o.host_link.latency = o.edge_link.latency = o.core_link.latency = latency;
  auto t = topo::BuildFatTree(o);
  EXPECT_TRUE(t.ok()) << t.status().message();
  return *std::move(t);
}

TEST(PartitionTest, EveryNodeOwnedHostsWithTheirSwitchPortsBalanced) {
  const topo::Topology t = FatTree(4, Picoseconds::FromNanoseconds(100));
  for (int32_t n = 1; n <= 4; ++n) {
    auto p = PartitionFabric(t, n);
    ASSERT_TRUE(p.ok()) << p.status().message();
    EXPECT_EQ(p->units, 20);  // 8 edge + 8 aggregation + 4 core switches
    std::vector<int64_t> ports(static_cast<size_t>(n), 0);
    for (const topo::Node& node : t.nodes()) {
      const int32_t owner = p->owner[static_cast<size_t>(node.id)];
      ASSERT_GE(owner, 0);
      ASSERT_LT(owner, n);
      ports[static_cast<size_t>(owner)] += t.PortCount(node.id);
      if (node.kind == topo::NodeKind::kHost) {
        // A host goes with the switch it is cabled to.
        EXPECT_EQ(owner, p->owner[static_cast<size_t>(t.Peer(node.id, 0).node)]) << node.name;
      }
    }
    int64_t total = 0;
    for (int32_t r = 0; r < n; ++r) {
      EXPECT_EQ(ports[static_cast<size_t>(r)], p->weight[static_cast<size_t>(r)]);
      EXPECT_GT(ports[static_cast<size_t>(r)], 0) << "process " << r << " of " << n;
      total += ports[static_cast<size_t>(r)];
    }
    // Contiguous cuts at the share: no process over twice its share.
    for (int32_t r = 0; r < n; ++r) EXPECT_LE(ports[static_cast<size_t>(r)] * n, 2 * total);
  }
}

TEST(PartitionTest, MoreProcessesThanUnitsIsRefused) {
  const topo::Topology t = FatTree(4, Picoseconds::FromNanoseconds(100));
  auto p = PartitionFabric(t, 21);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("more processes (21) than partitions (20"), std::string::npos)
      << p.status().message();
  EXPECT_FALSE(PartitionFabric(t, 0).ok());
}

TEST(PartitionTest, WindowIsTheLeastLatencyAndZeroLookaheadIsRefused) {
  topo::FatTreeOptions o;
  o.k = 4;
  o.host_link.latency = Picoseconds::FromNanoseconds(300);
  o.edge_link.latency = Picoseconds::FromNanoseconds(200);
  o.core_link.latency = Picoseconds::FromNanoseconds(700);
  auto t = topo::BuildFatTree(o);
  ASSERT_TRUE(t.ok());
  auto p = PartitionFabric(*t, 3);
  ASSERT_TRUE(p.ok());
  auto w = SyncWindow(*t, *p, Picoseconds(0));
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->ps(), Picoseconds::FromNanoseconds(200).ps());
  // NIC pipelines lengthen host links only.
  w = SyncWindow(*t, *p, Picoseconds::FromNanoseconds(50));
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->ps(), Picoseconds::FromNanoseconds(200).ps());

  // Zero-latency switch links: some cross between two processes (both
  // own switches of one connected fabric), and give no lookahead.
  o.edge_link.latency = Picoseconds(0);
  o.core_link.latency = Picoseconds(0);
  auto z = topo::BuildFatTree(o);
  ASSERT_TRUE(z.ok());
  auto pz = PartitionFabric(*z, 2);
  ASSERT_TRUE(pz.ok());
  auto wz = SyncWindow(*z, *pz, Picoseconds(0));
  ASSERT_FALSE(wz.ok());
  EXPECT_NE(wz.status().message().find("zero latency"), std::string::npos) << wz.status().message();
  // One process: nothing crosses, the zero-latency links are fine.
  auto one = PartitionFabric(*z, 1);
  ASSERT_TRUE(one.ok());
  EXPECT_TRUE(SyncWindow(*z, *one, Picoseconds(0)).ok());
}

// The server tier's groups (transport/worlds/dist_backend.cc): every
// server's NICs in one process. On medium a server's NICs share a leaf,
// and the partition is the one without groups; on medium:rail they sit on
// eight leaves, and each server is a unit of its own.
std::vector<std::vector<int32_t>> Servers(const topo::Topology& t) {
  auto spec = topo::ServerPreset("h100");
  EXPECT_TRUE(spec.ok());
  auto tier = topo::BuildServerTier(t, *spec);
  EXPECT_TRUE(tier.ok()) << tier.status().message();
  std::vector<std::vector<int32_t>> groups(static_cast<size_t>(tier->servers));
  for (const topo::GpuPlace& g : tier->gpus) {
    groups[static_cast<size_t>(g.server)].push_back(t.hosts()[static_cast<size_t>(g.host)]);
  }
  return groups;
}

TEST(PartitionTest, ServersStayWhole) {
  for (const char* preset : {"medium", "medium:rail"}) {
    auto t = topo::BuildPreset(preset);
    ASSERT_TRUE(t.ok()) << t.status().message();
    const auto groups = Servers(*t);
    ASSERT_EQ(groups.size(), 16u);
    const bool rail = std::string(preset) == "medium:rail";
    for (int32_t n = 1; n <= 4; ++n) {
      auto p = PartitionFabric(*t, n, groups);
      ASSERT_TRUE(p.ok()) << p.status().message();
      // 8 leaves and 4 spines; on rail, 16 servers too.
      EXPECT_EQ(p->units, rail ? 28 : 12) << preset;
      for (const auto& g : groups) {
        for (int32_t h : g) {
          EXPECT_EQ(p->owner[static_cast<size_t>(h)], p->owner[static_cast<size_t>(g[0])])
              << preset << " " << n << " processes, host " << h;
        }
      }
      if (!rail) {
        auto plain = PartitionFabric(*t, n);
        ASSERT_TRUE(plain.ok());
        EXPECT_EQ(p->owner, plain->owner) << n << " processes";
      }
    }
    auto many = PartitionFabric(*t, 29, groups);
    ASSERT_FALSE(many.ok());
    EXPECT_NE(many.status().message().find(rail ? "than partitions (28 units" : "partitions (12"),
              std::string::npos)
        << many.status().message();
  }
  auto t = topo::BuildPreset("medium");
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(PartitionFabric(*t, 2, {{0, 100000}}).ok());
}

// Hosts and switches per process, e.g. "64 hosts + 5 switches | ...".
std::string Layout(const topo::Topology& t, const Partition& p) {
  std::vector<int32_t> hosts(static_cast<size_t>(p.processes), 0);
  std::vector<int32_t> switches(static_cast<size_t>(p.processes), 0);
  for (const topo::Node& node : t.nodes()) {
    auto& count = node.kind == topo::NodeKind::kHost ? hosts : switches;
    ++count[static_cast<size_t>(p.owner[static_cast<size_t>(node.id)])];
  }
  std::string s;
  for (size_t r = 0; r < hosts.size(); ++r) {
    s += (r ? " | " : "") + std::to_string(hosts[r]) + " hosts + " + std::to_string(switches[r]) +
         " switches";
  }
  return s;
}

// The flow model's split: hosts in node order, cut into runs of about
// equal count (each GPU server whole); every host and switch owned.
TEST(PartitionTest, FlowModelSplitsHostsEvenly) {
  auto large = topo::BuildPreset("large");
  ASSERT_TRUE(large.ok()) << large.status().message();
  for (const bool servers : {false, true}) {
    const auto groups = servers ? Servers(*large) : std::vector<std::vector<int32_t>>{};
    for (int32_t n = 1; n <= 7; ++n) {
      auto p = PartitionHosts(*large, n, groups);
      ASSERT_TRUE(p.ok()) << p.status().message();
      ASSERT_EQ(p->owner.size(), large->nodes().size());
      std::vector<int64_t> hosts(static_cast<size_t>(n), 0);
      int32_t last = 0;
      std::vector<int32_t> order = large->hosts();
      std::sort(order.begin(), order.end());
      for (const int32_t h : order) {
        const int32_t r = p->owner[static_cast<size_t>(h)];
        ASSERT_GE(r, last) << "hosts in contiguous runs, " << n << " processes";
        last = r;
        ++hosts[static_cast<size_t>(r)];
      }
      EXPECT_EQ(hosts, p->weight) << n << " processes";
      const auto [lo, hi] = std::minmax_element(hosts.begin(), hosts.end());
      // Within one host, or one server of 8 when servers stay whole.
      EXPECT_LE(*hi - *lo, servers ? 8 : 1) << n << " processes";
      EXPECT_GT(*lo, 0) << n << " processes";
      for (const topo::Node& node : large->nodes()) {
        const int32_t r = p->owner[static_cast<size_t>(node.id)];
        EXPECT_TRUE(r >= 0 && r < n) << node.name;
      }
      for (const auto& g : groups) {
        for (const int32_t h : g)
          EXPECT_EQ(p->owner[static_cast<size_t>(h)], p->owner[static_cast<size_t>(g[0])]);
      }
    }
    auto two = PartitionHosts(*large, 2, groups);
    ASSERT_TRUE(two.ok());
    EXPECT_EQ(two->weight, (std::vector<int64_t>{512, 512}));
  }
  auto tiny = topo::BuildPreset("medium");
  ASSERT_TRUE(tiny.ok());
  EXPECT_FALSE(PartitionHosts(*tiny, 0).ok());
  EXPECT_FALSE(PartitionHosts(*tiny, 129).ok());
  EXPECT_TRUE(PartitionHosts(*tiny, 128).ok());
  EXPECT_FALSE(PartitionHosts(*tiny, 17, Servers(*tiny)).ok());  // 16 servers of 8
}

// Rail wiring: the server units (every rank) spread evenly by hosts, the
// switches by ports; plain wiring keeps its port-balanced cut.
TEST(PartitionTest, ServersSpreadByHosts) {
  auto rail = topo::BuildPreset("medium:rail");
  ASSERT_TRUE(rail.ok()) << rail.status().message();
  const auto groups = Servers(*rail);
  std::string layout[5];
  for (int32_t n = 1; n <= 28; ++n) {
    auto p = PartitionFabric(*rail, n, groups);
    ASSERT_TRUE(p.ok()) << p.status().message();
    if (n <= 4) {
      layout[n] = Layout(*rail, *p);
      std::cout << "medium:rail, " << n << " processes: " << layout[n] << "\n";
    }
    // Every process simulates something; servers differ by at most one.
    std::vector<int32_t> nodes(static_cast<size_t>(n), 0), servers(static_cast<size_t>(n), 0);
    for (const topo::Node& node : rail->nodes())
      ++nodes[static_cast<size_t>(p->owner[static_cast<size_t>(node.id)])];
    for (const auto& g : groups)
      ++servers[static_cast<size_t>(p->owner[static_cast<size_t>(g[0])])];
    const auto [lo, hi] = std::minmax_element(servers.begin(), servers.end());
    EXPECT_LE(*hi - *lo, 1) << n << " processes";
    for (int32_t r = 0; r < n; ++r)
      EXPECT_GT(nodes[static_cast<size_t>(r)], 0) << n << " processes";
  }
  EXPECT_EQ(layout[2], "64 hosts + 6 switches | 64 hosts + 6 switches");
  EXPECT_EQ(layout[4],
            "32 hosts + 3 switches | 32 hosts + 3 switches | 32 hosts + 3 switches | 32 hosts + 3 "
            "switches");
  // Plain wiring, as before: leaves with their hosts, cut by ports.
  auto plain = topo::BuildPreset("medium");
  ASSERT_TRUE(plain.ok());
  auto p = PartitionFabric(*plain, 4, Servers(*plain));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(Layout(*plain, *p),
            "48 hosts + 3 switches | 48 hosts + 3 switches | 32 hosts + 2 switches | 0 hosts + 4 "
            "switches");
}

// A run on part of the hosts (`used`: the first 64 of large's 1024, its
// first pod): both cuts weigh the used hosts, so each process gets about
// its share of them (a cut of the whole fabric left them all to process
// 0); the same units, and every node owned.
TEST(PartitionTest, UsedHostsAreWhatTheCutBalances) {
  auto large = topo::BuildPreset("large");
  ASSERT_TRUE(large.ok()) << large.status().message();
  std::vector<char> used(large->nodes().size(), 0);
  for (size_t r = 0; r < 64; ++r) used[static_cast<size_t>(large->hosts()[r])] = 1;
  for (const bool by_hosts : {false, true}) {
    for (const bool servers : {false, true}) {
      const auto groups = servers ? Servers(*large) : std::vector<std::vector<int32_t>>{};
      for (int32_t n = 1; n <= 4; ++n) {
        auto p = by_hosts ? PartitionHosts(*large, n, groups, used)
                          : PartitionFabric(*large, n, groups, used);
        ASSERT_TRUE(p.ok()) << p.status().message();
        auto plain =
            by_hosts ? PartitionHosts(*large, n, groups) : PartitionFabric(*large, n, groups);
        ASSERT_TRUE(plain.ok());
        EXPECT_EQ(p->units, plain->units);
        std::vector<int64_t> mine(static_cast<size_t>(n), 0);
        for (const topo::Node& node : large->nodes()) {
          const int32_t r = p->owner[static_cast<size_t>(node.id)];
          ASSERT_TRUE(r >= 0 && r < n) << node.name;
          if (used[static_cast<size_t>(node.id)]) ++mine[static_cast<size_t>(r)];
        }
        EXPECT_EQ(mine, p->weight) << n << " processes";
        const auto [lo, hi] = std::minmax_element(mine.begin(), mine.end());
        // Within a leaf's 8 hosts (k=16: 8 a leaf), or a server of 8.
        EXPECT_LE(*hi - *lo, by_hosts && !servers ? 1 : 8)
            << (by_hosts ? "hosts" : "fabric") << (servers ? ", servers" : "") << ", " << n
            << " processes: " << Layout(*large, *p);
        EXPECT_GT(*lo, 0) << n << " processes";
        for (const auto& g : groups) {
          for (const int32_t h : g)
            EXPECT_EQ(p->owner[static_cast<size_t>(h)], p->owner[static_cast<size_t>(g[0])]);
        }
      }
    }
  }
  // Every host used (or none) is the plain cut.
  std::vector<char> all(large->nodes().size(), 0), none(large->nodes().size(), 0);
  for (const int32_t h : large->hosts()) all[static_cast<size_t>(h)] = 1;
  for (const std::vector<char>* u : {&all, &none}) {
    auto a = PartitionFabric(*large, 3, {}, *u);
    auto b = PartitionFabric(*large, 3);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->owner, b->owner);
    EXPECT_EQ(a->weight, b->weight);
    auto c = PartitionHosts(*large, 3, {}, *u);
    auto d = PartitionHosts(*large, 3);
    ASSERT_TRUE(c.ok() && d.ok());
    EXPECT_EQ(c->owner, d->owner);
  }
  // Bad input names the call and the values; more processes than units is
  // refused as before, however few the used hosts.
  auto short_used = PartitionHosts(*large, 2, {}, std::vector<char>(3, 1));
  ASSERT_FALSE(short_used.ok());
  EXPECT_NE(short_used.status().message().find("PartitionHosts: used hosts given for 3 nodes"),
            std::string::npos)
      << short_used.status().message();
  std::vector<char> on_switch = used;
  on_switch[static_cast<size_t>(large->Peer(large->hosts()[0], 0).node)] = 1;
  auto not_host = PartitionFabric(*large, 2, {}, on_switch);
  ASSERT_FALSE(not_host.ok());
  EXPECT_NE(not_host.status().message().find("marked used is not a host"), std::string::npos)
      << not_host.status().message();
  auto many = PartitionFabric(*large, 321, {}, used);
  ASSERT_FALSE(many.ok());
  EXPECT_NE(many.status().message().find("more processes (321) than partitions (320"),
            std::string::npos)
      << many.status().message();
  // Fewer used units than processes: every process still owns a unit, the
  // used hosts go to as many processes as there are leaves with them.
  std::vector<char> one_leaf(large->nodes().size(), 0);
  for (size_t r = 0; r < 8; ++r) one_leaf[static_cast<size_t>(large->hosts()[r])] = 1;
  auto few = PartitionFabric(*large, 3, {}, one_leaf);
  ASSERT_TRUE(few.ok()) << few.status().message();
  EXPECT_EQ(few->weight, (std::vector<int64_t>{8, 0, 0}));
}

}  // namespace
}  // namespace fathom::parallel
