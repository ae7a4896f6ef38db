// Topology: the immutable graph of a fabric — hosts (one per NIC), switches,
// full-duplex links between numbered ports — and its ECMP routing tables.
// The simulator (fabric/sim) builds its network from it, the fault engine
// (faults/) selects links by name or tier, and `fathom topo` describes it.
//
// Ownership: a Topology owns all its data and is a value (movable, copyable);
// spans and references it returns stay valid while it lives. It is immutable
// after TopologyBuilder::Build(), so any number of threads may read it.
//
// Numbering: node ids are 0..nodes()-1, link ids 0..links()-1, and port
// indices at a node are 0..PortCount(node)-1 in the order links were added.
// Hosts are ranked server-major, then by GPU (hosts()[rank] is the node id),
// which is the rank order collectives use.
//
// Tiers: 0 host (a NIC), 1 leaf/ToR/edge, 2 spine/aggregation, 3 core. A link's
// tier is the tier of its upper end: 1 = host-leaf, 2 = leaf-spine (or
// edge-aggregation), 3 = aggregation-core; 0 = a host-host cable
// (back-to-back).
//
// Routing: NextHops(node, dst) is the ECMP set — every port at `node` that
// lies on a shortest path to host `dst`. Hosts never forward transit traffic.
// Two ways to get it (Routing):
//  - computed (fat-tree, leaf-spine: the builders' up/down fabrics): from
//    where the destination sits (HostPlace: the switch subtree it is under at
//    each tier and the port leading down to it) and the switch's place (its
//    tier, subtree, uplink port range). A switch whose subtree holds the
//    destination goes down, else up over all its uplinks. ECMP sets are
//    contiguous port ranges there. Memory grows with hosts and ports, not
//    with switches x hosts (issue 30: a k=64 fat-tree's tables need 27 GB).
//  - tables (anything else: TopologyBuilder graphs, back-to-back): one 32-bit
//    set id per (node, destination host) from a BFS per destination, sets
//    interned in one shared port array, and hosts x hosts hop counts.
// Both give the same sets in ascending port order (tests/topo/routing_test.cc
// compares every node and destination on k=8 and k=16 fat-trees and
// leaf-spines).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "base/units.h"

namespace fathom::topo {

enum class NodeKind { kHost, kSwitch };

inline constexpr int kTierHost = 0;
inline constexpr int kTierLeaf = 1;
inline constexpr int kTierSpine = 2;
inline constexpr int kTierCore = 3;
inline constexpr int kMaxTier = 3;

struct Node {
  int32_t id = -1;
  NodeKind kind = NodeKind::kHost;
  std::string name;  // "h12", "leaf3", "spine1", "edge0.1", "agg0.1", "core5"
  int tier = kTierHost;
  // Hosts: the server index and the GPU/NIC index (rail) in the server.
  int32_t server = -1;
  int32_t gpu = -1;
};

// What one link is made of; the builders take one per tier.
struct LinkParams {
  BitsPerSecond rate;     // line rate, each direction
  Picoseconds latency;    // propagation + PHY/transceiver delay, each direction
  int32_t mtu_bytes = 0;  // largest IP packet the link carries (Ethernet MTU)
};

struct Link {
  int32_t id = -1;
  std::string name;                  // "<lower>-<upper>", e.g. "h12-leaf1", "leaf1-spine3";
                                     // parallel links between one pair get "/1", "/2", ...
  int32_t a = -1, b = -1;            // node ids; a is the lower-tier end
  int32_t a_port = -1, b_port = -1;  // port index at each end
  BitsPerSecond rate;
  Picoseconds latency;
  int32_t mtu_ab = 0, mtu_ba = 0;  // per direction (an MTU mismatch is one side)
  int tier = 0;                    // tier of the upper end
};

// The other end of a port.
struct PortRef {
  int32_t node = -1;
  int32_t port = -1;
};

// What reachability a topology promises; Validate() checks exactly this.
enum class Reachability {
  kAllPairs,  // every host reaches every other host
  kSameRail,  // rail-only wiring (CASES.md 8): hosts reach the hosts with the
              // same gpu index on other servers, and nothing else
};

// How NextHops is answered (see Routing above).
enum class Routing { kTable, kUpDown };

// Computed up/down routing: where a host sits. group[t] numbers the tier-t
// subtree holding the host (a leaf/edge switch's hosts at t=1, a pod at t=2
// of a fat-tree; 0 at a topology's top tier, which reaches everything);
// down[t] is the first port a tier-t switch of that subtree takes towards
// the host. [0] is unused. Subtrees nest: hosts with one group[t] share
// group[t+1] and down[t+1].
struct HostPlace {
  int32_t group[kMaxTier + 1] = {};
  int32_t down[kMaxTier + 1] = {};
};

// Computed up/down routing: a node's place. Hosts have tier 0 (their one
// port leads up). A switch heads subtree `group` of its tier; towards a host
// of that subtree it takes ports [down[tier], down[tier] + down_count)
// (down_count > 1: parallel links, leaf-spine uplinks_per_pair), towards any
// other host its uplinks [up_first, up_first + up_count) (none at the top).
struct SwitchPlace {
  int32_t tier = 0;
  int32_t group = 0;
  int32_t down_count = 1;
  int32_t up_first = 0;
  int32_t up_count = 0;
};

// A run of consecutive port indices.
struct PortRange {
  int32_t first = 0;
  int32_t count = 0;
};

struct TierLinks {
  int tier = 0;
  int32_t count = 0;
  BitsPerSecond rate;   // of the first link at that tier (builders use one rate)
  BitsPerSecond total;  // sum of rates (one direction)
  Picoseconds latency;  // of the first link at that tier
};

struct TopologySummary {
  std::string name;  // what built it, e.g. "fat-tree k=16"
  int32_t hosts = 0;
  int32_t servers = 0;
  int32_t switches_per_tier[kMaxTier + 1] = {};  // [0] unused
  int32_t switches = 0;
  std::vector<TierLinks> links_per_tier;  // ascending tier, only tiers present
  int32_t links = 0;
  // Max flow between the first and second half of the hosts in rank order
  // (one direction). For the regular topologies the builders make this is
  // the bisection bandwidth.
  BitsPerSecond bisection;
  int32_t diameter_hops = 0;  // longest shortest host-to-host path, in links
  // oversubscription[t] = (capacity towards tier t-1) / (capacity towards
  // tier t+1) summed over the switches of tier t; 0 where a tier has no
  // uplinks (the top tier) or no switches.
  double oversubscription[kMaxTier + 1] = {};
  Reachability reachability = Reachability::kAllPairs;
  // Smallest and largest per-direction MTU, and how many links carry a
  // different MTU each way (CASES.md 1-4: MTU mismatches hang transfers).
  int32_t mtu_min_bytes = 0;
  int32_t mtu_max_bytes = 0;
  int32_t asymmetric_mtu_links = 0;
  Status validation;  // Validate()'s result
  Routing routing = Routing::kTable;
  // EstimateTopologyBytes for this topology (what the size guard admitted).
  int64_t estimated_bytes = 0;
};

class Topology {
 public:
  Topology() = default;

  const std::string& name() const { return name_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<Link>& links() const { return links_; }
  const Node& node(int32_t id) const { return nodes_[id]; }
  const Link& link(int32_t id) const { return links_[id]; }
  // Host node ids in rank order (server-major, then GPU).
  const std::vector<int32_t>& hosts() const { return hosts_; }
  // Rank of a host node, -1 for a switch.
  int32_t HostRank(int32_t node) const { return host_rank_[node]; }
  // HostRank of every node id (-1 for switches), for lookups on a hot path.
  const std::vector<int32_t>& HostRankTable() const { return host_rank_; }
  int32_t servers() const { return servers_; }
  Reachability reachability() const { return reachability_; }

  int32_t PortCount(int32_t node) const { return port_begin_[node + 1] - port_begin_[node]; }
  // Link id on that port.
  int32_t LinkAt(int32_t node, int32_t port) const { return port_link_[port_begin_[node] + port]; }
  // The node and port at the far end of `port`.
  PortRef Peer(int32_t node, int32_t port) const;

  // ECMP set: port indices at `node` on shortest paths to host node
  // `dst_host`; empty if unreachable, or if node == dst_host, or if `node` is
  // another host with no path. Ascending port order.
  std::span<const int32_t> NextHops(int32_t node, int32_t dst_host) const {
    if (routing_ == Routing::kUpDown) {
      const PortRange r = UpDownHops(node, dst_host);
      return {port_index_.data() + r.first, static_cast<size_t>(r.count)};
    }
    const RouteSet& s = route_sets_[route_[static_cast<size_t>(node) * hosts_.size() +
                                           static_cast<size_t>(host_rank_[dst_host])]];
    return {route_ports_.data() + s.offset, s.count};
  }
  Routing routing() const { return routing_; }
  // Computed routing (routing() == kUpDown): NextHops as a port range.
  PortRange UpDownHops(int32_t node, int32_t dst_host) const {
    const int32_t rank = host_rank_[dst_host];
    if (rank < 0 || node == dst_host) return {};
    const SwitchPlace& n = node_place_[static_cast<size_t>(node)];
    if (n.tier == kTierHost) {
      return HopCount(node, dst_host) > 0 ? PortRange{0, 1} : PortRange{};
    }
    const HostPlace& d = host_place_[static_cast<size_t>(rank)];
    if (d.group[n.tier] == n.group) return {d.down[n.tier], n.down_count};
    return {n.up_first, n.up_count};
  }
  // Computed routing: every host's place by rank, every node's by id (empty
  // with tables). The simulator's switches route from these.
  const std::vector<HostPlace>& HostPlaces() const { return host_place_; }
  const std::vector<SwitchPlace>& NodePlaces() const { return node_place_; }
  // Replaces computed routing by tables (the routing before issue 30), for
  // tests that compare the two and benchmarks that time them. Same size
  // guard as a table-routed Build. No-op with tables already.
  Status UseRouteTables();
  bool Reachable(int32_t src_host, int32_t dst_host) const;
  // Shortest-path length in links between two hosts, -1 if unreachable.
  int32_t HopCount(int32_t src_host, int32_t dst_host) const;

  // Every host reaches what reachability() promises, every ECMP path ends at
  // its destination without a loop, ports and links agree.
  Status Validate() const;
  TopologySummary Summarize() const;

  StatusOr<int32_t> FindNode(std::string_view name) const;
  // By name ("leaf3-spine1", "leaf3-spine1/1"), or by endpoints in either
  // order ("spine1-leaf3" also works; the first of parallel links).
  StatusOr<int32_t> FindLink(std::string_view name) const;
  StatusOr<int32_t> FindLink(int32_t a, int32_t b) const;
  // Link ids whose tier is `tier` (e.g. 2 = every leaf-spine uplink).
  std::vector<int32_t> LinksAtTier(int tier) const;
  // Link ids on a node's ports, in port order.
  std::vector<int32_t> LinksOf(int32_t node) const;
  // Selects links by a selector: "tier:N", a node name ("spine1" = all its
  // links), or a name glob with '*' and '?' ("leaf3-*", "*-spine*"). Error if
  // nothing matches.
  StatusOr<std::vector<int32_t>> SelectLinks(std::string_view selector) const;

  // Changes a link's rate, latency and per-direction MTU (for per-tier and
  // per-link overrides in a topology spec, before the topology is shared).
  // Routes are hop-count shortest paths, so they do not change.
  Status SetLinkParams(int32_t link, BitsPerSecond rate, Picoseconds latency, int32_t mtu_ab,
                       int32_t mtu_ba);

 private:
  friend class TopologyBuilder;
  struct RouteSet {
    uint32_t offset = 0;
    uint32_t count = 0;
  };
  Status BuildRoutes();
  Status ValidateUpDown(const std::string& ctx) const;
  Status ValidateRouteDag(const std::string& ctx, const std::vector<int32_t>& dsts) const;
  int32_t UpDownDiameter() const;

  std::string name_;
  Reachability reachability_ = Reachability::kAllPairs;
  std::vector<Node> nodes_;
  std::vector<Link> links_;
  std::vector<int32_t> hosts_;
  std::vector<int32_t> host_rank_;
  int32_t servers_ = 0;
  std::vector<int32_t> port_begin_;  // size nodes+1, into port_link_
  std::vector<int32_t> port_link_;
  // route_[node * hosts + rank] -> index into route_sets_ (0 = empty set).
  std::vector<uint32_t> route_;
  std::vector<RouteSet> route_sets_;
  std::vector<int32_t> route_ports_;
  // hops_[src_rank * hosts + dst_rank], -1 unreachable (hosts^2 int16).
  std::vector<int16_t> hops_;
  int32_t diameter_hops_ = 0;
  // Computed routing: places, the highest switch tier, and 0..max ports - 1
  // (NextHops' spans point into it).
  Routing routing_ = Routing::kTable;
  std::vector<HostPlace> host_place_;
  std::vector<SwitchPlace> node_place_;
  int top_tier_ = 0;
  std::vector<int32_t> port_index_;
  std::unordered_map<std::string, int32_t> node_by_name_;
  std::unordered_map<std::string, int32_t> link_by_name_;
};

// Size guard. Routing tables grow as nodes x hosts (4 bytes per entry) plus
// hosts x hosts hop counts (2 bytes), so a table-routed fabric whose
// parameters look modest can need more memory than the machine has (fat-tree
// k=64 with tables: 70 K nodes x 65 K hosts, 27 GB). Computed routing needs
// only the graph and a place per node and host. Builders call
// CheckTopologySize with the counts their parameters imply BEFORE allocating
// anything, and TopologyBuilder::Build checks the graph it was given.
//
// The limit is the lesser of the machine's memory (physical RAM, or a
// cgroup's memory.max when lower) and FATHOM_TOPOLOGY_MEMORY_LIMIT (bytes,
// with an optional K/M/G/T binary suffix), default kDefaultTopologyMemoryLimit.
// With tables the default admitted k=32 (0.43 GiB RSS measured) and refused
// k=40; with computed routing a k=64 fat-tree (65,536 hosts) estimates
// 73 MiB (tests/topo/scale_test.cc measured 69.5 MiB peak RSS building and
// routing it) and is admitted.
inline constexpr int64_t kDefaultTopologyMemoryLimit = int64_t{1} << 30;  // 1 GiB
// Bytes to build and route a topology of that many nodes, hosts and links.
int64_t EstimateTopologyBytes(int64_t nodes, int64_t hosts, int64_t links,
                              Routing routing = Routing::kTable);
// The limit in bytes, and a sentence saying where it came from; an
// unparsable FATHOM_TOPOLOGY_MEMORY_LIMIT is an error.
StatusOr<int64_t> TopologyMemoryLimit(std::string* explanation = nullptr);
// InvalidArgument naming `what`, the counts, the estimate, the limit and how
// to raise it, when the estimate exceeds the limit.
Status CheckTopologySize(std::string_view what, int64_t nodes, int64_t hosts, int64_t links,
                         Routing routing = Routing::kTable);
// "81.2 MiB": a byte count in binary units, for messages.
std::string FormatBytes(int64_t bytes);

// Assembles a Topology. Add nodes and links, then Build() checks the graph
// and computes routes.
class TopologyBuilder {
 public:
  explicit TopologyBuilder(std::string name) { topo_.name_ = std::move(name); }

  // Returns the node id. Names must be unique (checked by Build()).
  int32_t AddHost(std::string name, int32_t server, int32_t gpu);
  int32_t AddSwitch(std::string name, int tier);
  // Adds a full-duplex link on the next free port of each end; the link is
  // named "<lower>-<upper>" (plus "/n" for the n-th parallel link).
  StatusOr<int32_t> Connect(int32_t a, int32_t b, const LinkParams& params);
  void set_reachability(Reachability r) { topo_.reachability_ = r; }
  // Computed up/down routing instead of tables: every node needs a place
  // (hosts: tier 0 and their HostPlace). Build() checks the places against
  // the wiring (Topology::Validate checks the routes they give).
  void UseUpDownRouting() { topo_.routing_ = Routing::kUpDown; }
  void SetHostPlace(int32_t host, const HostPlace& place);
  void SetSwitchPlace(int32_t node, const SwitchPlace& place);

  // Fails on duplicate names, empty graphs, dangling ids; then builds routes.
  StatusOr<Topology> Build() &&;

 private:
  Status PlaceUpDown();

  Topology topo_;
  std::vector<std::vector<int32_t>> ports_;  // per node: link ids in port order
  // Links so far between each pair of nodes (key: lower id << 32 | higher),
  // for a parallel link's "/N" name: counting them on a node's ports made
  // Connect quadratic in a node's parallel links (a leaf-spine preset with
  // 22,224 uplinks per pair ran over the fuzz target's 10 s timeout).
  std::unordered_map<uint64_t, int32_t> pair_links_;
  std::vector<HostPlace> host_place_by_node_;  // up/down routing, by node id
  std::vector<SwitchPlace> node_place_by_node_;
  std::vector<uint8_t> placed_;
};

}  // namespace fathom::topo
