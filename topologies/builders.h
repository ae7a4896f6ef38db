// Builders for the fabrics fathom models: 2-tier leaf-spine, 3-tier k-ary
// fat-tree, back-to-back servers, and the three scale levels of the
// cluster_network block (DESIGN.md) as presets. Each returns a routed
// Topology by value; leaf-spines and fat-trees route by computation from
// where the hosts sit (topology.h, Routing::kUpDown), back-to-back by tables.
//
// Host model: a server has gpus_per_server GPUs (default 8, the seed's
// "compute-8gpu" node) and one NIC per GPU; each NIC is one host node, named
// "h<rank>", rank = server * gpus_per_server + gpu. Rail-optimized wiring
// (an option) cables NIC i of every server in a group to leaf i of the group
// ("rail i"), so same-rail traffic stays one leaf away.
//
// Default link models (chosen for a current AI cluster; all overridable):
//   rate 400 Gb/s per NIC and per switch port;
//   copper (DAC, ~1 m): 5 ns propagation;
//   optics: 500 ns for ~100 m of fibre between switches plus 50 ns for the
//   optical engine; host-leaf optics ~30 m: 150 ns + 50 ns;
//   MTU 4200-byte Ethernet everywhere, so a RoCE path MTU of 4096 fits
//   (CASES.md 4: 4200 gives active_mtu 4096).
#pragma once

#include <cstdint>
#include <string_view>

#include "base/status.h"
#include "base/units.h"
#include "topologies/topology.h"

namespace fathom::topo {

inline constexpr int32_t kDefaultGpusPerServer = 8;
inline constexpr int32_t kDefaultMtuBytes = 4200;
inline constexpr BitsPerSecond kDefaultRate = BitsPerSecond::Gbps(400);

inline constexpr LinkParams kCopperLink{kDefaultRate, Picoseconds::FromNanoseconds(5),
                                        kDefaultMtuBytes};
inline constexpr LinkParams kOpticalHostLink{kDefaultRate, Picoseconds::FromNanoseconds(200),
                                             kDefaultMtuBytes};
inline constexpr LinkParams kOpticalFabricLink{kDefaultRate, Picoseconds::FromNanoseconds(550),
                                               kDefaultMtuBytes};

// leaves x hosts_per_leaf hosts; every leaf has uplinks_per_pair links to
// every spine. Oversubscription at the leaf = hosts_per_leaf * host rate /
// (spines * uplinks_per_pair * fabric rate). spines = 0 with
// oversubscription > 0 derives the spine count from the ratio (it must come
// out whole). spines = 0 otherwise is a rail-only fabric (CASES.md 8): legal
// only with rail-optimized wiring and one group of leaves, or a single leaf.
struct LeafSpineOptions {
  int32_t leaves = 0;
  int32_t spines = 0;
  int32_t hosts_per_leaf = 0;
  int32_t uplinks_per_pair = 1;
  int32_t gpus_per_server = kDefaultGpusPerServer;
  bool rail_optimized = false;
  double oversubscription = 0;           // > 0: derive `spines` when it is 0
  LinkParams host_link = kCopperLink;    // tier 1
  LinkParams fabric_link = kCopperLink;  // tier 2
};
StatusOr<Topology> BuildLeafSpine(const LeafSpineOptions& options);

// k-ary fat-tree (Al-Fares et al.): k pods of k/2 edge and k/2 aggregation
// switches, (k/2)^2 core switches, k^3/4 hosts. hosts_per_edge > k/2
// oversubscribes the edge (ratio hosts_per_edge / (k/2)); 0 means k/2.
// Names: "edge<pod>.<i>", "agg<pod>.<i>", "core<j>"; aggregation switch i of
// each pod connects to cores i*k/2 .. i*k/2 + k/2 - 1. Rail-optimized wiring
// needs k/2 to be a multiple of gpus_per_server.
struct FatTreeOptions {
  int32_t k = 0;
  int32_t hosts_per_edge = 0;
  int32_t gpus_per_server = kDefaultGpusPerServer;
  bool rail_optimized = false;
  LinkParams host_link = kCopperLink;  // tier 1: host-edge
  LinkParams edge_link = kCopperLink;  // tier 2: edge-aggregation
  LinkParams core_link = kCopperLink;  // tier 3: aggregation-core
};
StatusOr<Topology> BuildFatTree(const FatTreeOptions& options);

// Two servers, NIC i of server 0 cabled to NIC i of server 1, no switches.
// Rail-only by construction: Reachability::kSameRail.
struct BackToBackOptions {
  int32_t gpus_per_server = kDefaultGpusPerServer;
  LinkParams link = kCopperLink;  // tier 0
};
StatusOr<Topology> BuildBackToBack(const BackToBackOptions& options);

// The cluster_network connection kinds (DESIGN.md scale_levels).
enum class Connection { kCopperDirect, kCopperSwitch, kOpticalEngine };

// A topology for `servers` servers of gpus_per_server GPUs:
//  kCopperDirect  -> back-to-back (servers must be 2);
//  kCopperSwitch  -> leaf-spine, 2 servers per leaf (1 if servers is odd),
//                    4 spines, non-blocking (uplinks split evenly), copper;
//  kOpticalEngine -> k-ary fat-tree with k^3/4 == servers * gpus_per_server
//                    (16, 128, 432, 1024, ...), optical links.
StatusOr<Topology> BuildScaleLevel(Connection connection, int32_t servers, int32_t gpus_per_server);
// The same level with rail-optimized wiring (NIC i of every server of a
// group on the group's leaf / edge switch i, as production GPU clusters are
// cabled: NVIDIA's DGX SuperPOD reference architecture, "Network Fabrics",
// each scalable unit's nodes are rail-aligned, a rail's traffic one switch
// away, docs.nvidia.com/dgx-superpod/reference-architecture/
// scalable-infrastructure-b300/latest/network-fabrics.html), everything
// else as BuildScaleLevel builds it; kCopperDirect is rail-only already.
StatusOr<Topology> BuildRailScaleLevel(Connection connection, int32_t servers,
                                       int32_t gpus_per_server);

// Presets: "small" (16 GPUs, 2 servers back-to-back, copper), "medium" (128
// GPUs, 16 servers, leaf-spine, copper), "large" (1024 GPUs, 128 servers,
// k=16 fat-tree, optical), and beyond the seed's three levels (issue 30)
// "xlarge" (8,192 GPUs, 1,024 servers, k=32 fat-tree, optical) and
// "xxlarge" (65,536 GPUs, 8,192 servers, k=64 fat-tree, optical). Also
// parameterized forms:
//   "fat-tree:k=8[,hosts_per_edge=N][,gpus=N][,rail]"
//   "leaf-spine:leaves=4,spines=2,hosts=8[,uplinks=N][,gpus=N][,rail]"
//   "back-to-back[:gpus=N]"
//   "medium:rail", "large:rail", "xlarge:rail": the level, rail-optimized
//   (BuildRailScaleLevel); the plain names stay as they are.
StatusOr<Topology> BuildPreset(std::string_view preset);

}  // namespace fathom::topo
