// Topology graph, ECMP route computation and validation.
#include "topologies/topology.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <limits>
#include <new>
#include <unordered_map>

namespace fathom::topo {
namespace {

bool GlobMatch(std::string_view pattern, std::string_view text) {
  // Iterative '*' / '?' matcher with backtracking to the last star.
  size_t p = 0, t = 0, star = std::string_view::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

}  // namespace

// ---------------------------------------------------------------------------
// TopologyBuilder

int32_t TopologyBuilder::AddHost(std::string name, int32_t server, int32_t gpu) {
  const int32_t id = static_cast<int32_t>(topo_.nodes_.size());
  topo_.nodes_.push_back(Node{id, NodeKind::kHost, std::move(name), kTierHost, server, gpu});
  ports_.emplace_back();
  return id;
}

void TopologyBuilder::SetHostPlace(int32_t host, const HostPlace& place) {
  const size_t n = topo_.nodes_.size();
  host_place_by_node_.resize(n);
  node_place_by_node_.resize(n);
  placed_.resize(n);
  if (host < 0 || static_cast<size_t>(host) >= n) return;  // Build() reports the unplaced
  host_place_by_node_[host] = place;
  node_place_by_node_[host] = SwitchPlace{kTierHost, 0, 0, 0, 1};
  placed_[host] = 1;
}

void TopologyBuilder::SetSwitchPlace(int32_t node, const SwitchPlace& place) {
  const size_t n = topo_.nodes_.size();
  host_place_by_node_.resize(n);
  node_place_by_node_.resize(n);
  placed_.resize(n);
  if (node < 0 || static_cast<size_t>(node) >= n) return;
  node_place_by_node_[node] = place;
  placed_[node] = 1;
}

int32_t TopologyBuilder::AddSwitch(std::string name, int tier) {
  const int32_t id = static_cast<int32_t>(topo_.nodes_.size());
  topo_.nodes_.push_back(Node{id, NodeKind::kSwitch, std::move(name), tier, -1, -1});
  ports_.emplace_back();
  return id;
}

StatusOr<int32_t> TopologyBuilder::Connect(int32_t a, int32_t b, const LinkParams& params) {
  const int32_t n = static_cast<int32_t>(topo_.nodes_.size());
  if (a < 0 || a >= n || b < 0 || b >= n || a == b) {
    return InvalidArgument("TopologyBuilder::Connect(" + std::to_string(a) + ", " +
                           std::to_string(b) + "): bad node ids (have " + std::to_string(n) +
                           " nodes)");
  }
  if (params.rate.bps() <= 0 || params.latency.ps() < 0 || params.mtu_bytes <= 0) {
    return InvalidArgument("TopologyBuilder::Connect(" + topo_.nodes_[a].name + ", " +
                           topo_.nodes_[b].name + "): rate " + std::to_string(params.rate.bps()) +
                           " bps, latency " + std::to_string(params.latency.ps()) + " ps, mtu " +
                           std::to_string(params.mtu_bytes) + " must be positive");
  }
  // The lower-tier end is `a`, so names read bottom-up ("h3-leaf0").
  if (topo_.nodes_[b].tier < topo_.nodes_[a].tier) std::swap(a, b);
  Link link;
  link.id = static_cast<int32_t>(topo_.links_.size());
  link.a = a;
  link.b = b;
  link.a_port = static_cast<int32_t>(ports_[a].size());
  link.b_port = static_cast<int32_t>(ports_[b].size());
  link.rate = params.rate;
  link.latency = params.latency;
  link.mtu_ab = link.mtu_ba = params.mtu_bytes;
  link.tier = std::max(topo_.nodes_[a].tier, topo_.nodes_[b].tier);
  const uint64_t pair =
      uint64_t{static_cast<uint32_t>(std::min(a, b))} << 32 | static_cast<uint32_t>(std::max(a, b));
  const int32_t parallel = pair_links_[pair]++;
  link.name = topo_.nodes_[a].name + "-" + topo_.nodes_[b].name;
  if (parallel > 0) link.name += "/" + std::to_string(parallel);
  ports_[a].push_back(link.id);
  ports_[b].push_back(link.id);
  topo_.links_.push_back(std::move(link));
  return topo_.links_.back().id;
}

StatusOr<Topology> TopologyBuilder::Build() && {
  Topology& t = topo_;
  const std::string ctx = "TopologyBuilder::Build(" + t.name_ + ")";
  pair_links_ = {};  // names are given; free it before the routes are built
  if (t.nodes_.empty()) return InvalidArgument(ctx + ": no nodes");
  std::unordered_map<std::string, int32_t> names;
  for (const Node& n : t.nodes_) {
    if (n.name.empty())
      return InvalidArgument(ctx + ": node " + std::to_string(n.id) + " has no name");
    if (!names.emplace(n.name, n.id).second) {
      return InvalidArgument(ctx + ": duplicate node name '" + n.name + "'");
    }
    if (n.kind == NodeKind::kSwitch && (n.tier < kTierLeaf || n.tier > kMaxTier)) {
      return InvalidArgument(ctx + ": switch " + n.name + " has tier " + std::to_string(n.tier) +
                             ", want 1.." + std::to_string(kMaxTier));
    }
  }
  // Flatten ports.
  t.port_begin_.assign(t.nodes_.size() + 1, 0);
  for (size_t i = 0; i < t.nodes_.size(); ++i) {
    t.port_begin_[i + 1] = t.port_begin_[i] + static_cast<int32_t>(ports_[i].size());
  }
  t.port_link_.clear();
  t.port_link_.reserve(static_cast<size_t>(t.port_begin_.back()));
  for (const auto& p : ports_) t.port_link_.insert(t.port_link_.end(), p.begin(), p.end());
  // Hosts in rank order: server-major, then GPU, then id.
  t.hosts_.clear();
  for (const Node& n : t.nodes_) {
    if (n.kind == NodeKind::kHost) t.hosts_.push_back(n.id);
  }
  if (t.hosts_.empty()) return InvalidArgument(ctx + ": no hosts");
  if (t.hosts_.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max() / 2)) {
    return OutOfRange(ctx + ": too many hosts");
  }
  std::stable_sort(t.hosts_.begin(), t.hosts_.end(), [&](int32_t x, int32_t y) {
    const Node& a = t.nodes_[x];
    const Node& b = t.nodes_[y];
    if (a.server != b.server) return a.server < b.server;
    return a.gpu < b.gpu;
  });
  t.host_rank_.assign(t.nodes_.size(), -1);
  std::vector<int32_t> servers;
  for (size_t r = 0; r < t.hosts_.size(); ++r) {
    t.host_rank_[t.hosts_[r]] = static_cast<int32_t>(r);
    servers.push_back(t.nodes_[t.hosts_[r]].server);
  }
  servers.erase(std::unique(servers.begin(), servers.end()), servers.end());
  t.servers_ = static_cast<int32_t>(servers.size());
  t.link_by_name_.clear();
  for (const Link& l : t.links_) t.link_by_name_.emplace(l.name, l.id);
  t.node_by_name_ = std::move(names);
  FATHOM_RETURN_IF_ERROR(CheckTopologySize(ctx, static_cast<int64_t>(t.nodes_.size()),
                                           static_cast<int64_t>(t.hosts_.size()),
                                           static_cast<int64_t>(t.links_.size()), t.routing_));
  if (t.routing_ == Routing::kUpDown) {
    FATHOM_RETURN_IF_ERROR(PlaceUpDown());
    return std::move(topo_);
  }
  try {
    FATHOM_RETURN_IF_ERROR(t.BuildRoutes().WithContext(ctx));
  } catch (const std::bad_alloc&) {
    // The estimate should have refused this; no exception leaves the module.
    return OutOfRange(ctx + ": out of memory while computing routes");
  }
  return std::move(topo_);
}

Status TopologyBuilder::PlaceUpDown() {
  Topology& t = topo_;
  const std::string ctx = "TopologyBuilder::Build(" + t.name_ + ")";
  const size_t n = t.nodes_.size();
  placed_.resize(n);
  host_place_by_node_.resize(n);
  node_place_by_node_.resize(n);
  t.top_tier_ = 0;
  int32_t max_ports = 1;
  for (size_t u = 0; u < n; ++u) {
    const Node& node = t.nodes_[u];
    if (!placed_[u]) return Internal(ctx + ": up/down routing: " + node.name + " has no place");
    const SwitchPlace& p = node_place_by_node_[u];
    const int32_t ports = t.PortCount(static_cast<int32_t>(u));
    max_ports = std::max(max_ports, ports);
    const int want_tier = node.kind == NodeKind::kHost ? kTierHost : node.tier;
    if (p.tier != want_tier || p.up_first < 0 || p.up_count < 0 ||
        p.up_first + p.up_count > ports || p.down_count < 0) {
      return Internal(ctx + ": up/down routing: " + node.name + "'s place (tier " +
                      std::to_string(p.tier) + ", uplinks " + std::to_string(p.up_first) + "+" +
                      std::to_string(p.up_count) + ") does not fit its " + std::to_string(ports) +
                      " ports");
    }
    t.top_tier_ = std::max(t.top_tier_, p.tier);
  }
  t.node_place_ = std::move(node_place_by_node_);
  t.host_place_.resize(t.hosts_.size());
  for (size_t r = 0; r < t.hosts_.size(); ++r) t.host_place_[r] = host_place_by_node_[t.hosts_[r]];
  host_place_by_node_.clear();
  t.port_index_.resize(static_cast<size_t>(max_ports));
  for (int32_t i = 0; i < max_ports; ++i) t.port_index_[static_cast<size_t>(i)] = i;
  t.route_.clear();
  t.route_sets_.assign(1, Topology::RouteSet{});
  t.route_ports_.clear();
  t.hops_.clear();
  t.diameter_hops_ = t.UpDownDiameter();
  return Status::Ok();
}

Status Topology::UseRouteTables() {
  if (routing_ == Routing::kTable) return Status::Ok();
  const std::string ctx = "Topology::UseRouteTables(" + name_ + ")";
  FATHOM_RETURN_IF_ERROR(CheckTopologySize(ctx, static_cast<int64_t>(nodes_.size()),
                                           static_cast<int64_t>(hosts_.size()),
                                           static_cast<int64_t>(links_.size())));
  try {
    FATHOM_RETURN_IF_ERROR(BuildRoutes().WithContext(ctx));
  } catch (const std::bad_alloc&) {
    return OutOfRange(ctx + ": out of memory while computing routes");
  }
  routing_ = Routing::kTable;
  host_place_.clear();
  node_place_.clear();
  port_index_.clear();
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// Size guard

std::string FormatBytes(int64_t b) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.1f %s", v, kUnits[u]);
  return buf;
}

namespace {

std::string Bytes(int64_t b) { return FormatBytes(b); }

// Physical memory, or the cgroup v2 limit when that is lower; 0 if unknown.
int64_t MachineMemory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  int64_t mem = pages > 0 && page > 0 ? int64_t{pages} * page : 0;
  std::ifstream cg("/sys/fs/cgroup/memory.max");
  std::string word;
  if (cg >> word && word != "max") {
    int64_t v = 0;
    auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), v);
    if (ec == std::errc() && end == word.data() + word.size() && v > 0) {
      mem = mem == 0 ? v : std::min(mem, v);
    }
  }
  return mem;
}

constexpr const char* kLimitEnv = "FATHOM_TOPOLOGY_MEMORY_LIMIT";

}  // namespace

int64_t EstimateTopologyBytes(int64_t nodes, int64_t hosts, int64_t links, Routing routing) {
  // Saturating: the inputs come from user parameters (k, leaves, ...).
  const auto mul = [](int64_t a, int64_t b) -> int64_t {
    if (a <= 0 || b <= 0) return 0;
    return a > std::numeric_limits<int64_t>::max() / b ? std::numeric_limits<int64_t>::max()
                                                       : a * b;
  };
  const auto add = [](int64_t a, int64_t b) -> int64_t {
    return a > std::numeric_limits<int64_t>::max() - b ? std::numeric_limits<int64_t>::max()
                                                       : a + b;
  };
  // Tables: route_ (4 bytes per node x host) and hops_ (2 per host pair).
  // Computed: a HostPlace per host and a SwitchPlace per node.
  int64_t bytes = routing == Routing::kTable
                      ? add(mul(mul(nodes, hosts), 4), mul(mul(hosts, hosts), 2))
                      : add(mul(hosts, static_cast<int64_t>(sizeof(HostPlace))),
                            mul(nodes, static_cast<int64_t>(sizeof(SwitchPlace))));
  // Per node: Node with its name, name index, rank, ports, BFS scratch;
  // per link: Link with its name, name index, two ports (generous figures;
  // the routing tables dominate: k=32 estimates 0.42 GiB, measured 0.43).
  bytes = add(bytes, mul(nodes, 200));
  bytes = add(bytes, mul(links, 300));
  return bytes;
}

StatusOr<int64_t> TopologyMemoryLimit(std::string* explanation) {
  int64_t limit = kDefaultTopologyMemoryLimit;
  std::string from = "the default " + Bytes(limit);
  if (const char* env = std::getenv(kLimitEnv); env != nullptr && *env != '\0') {
    const std::string_view text(env);
    uint64_t v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    int shift = 0;
    const std::string_view rest(end, static_cast<size_t>(text.data() + text.size() - end));
    if (rest == "K" || rest == "k") shift = 10;
    if (rest == "M" || rest == "m") shift = 20;
    if (rest == "G" || rest == "g") shift = 30;
    if (rest == "T" || rest == "t") shift = 40;
    if (ec != std::errc() || end == text.data() || (!rest.empty() && shift == 0) ||
        v > (uint64_t{1} << (62 - shift))) {
      return InvalidArgument(std::string(kLimitEnv) + "='" + std::string(text.substr(0, 40)) +
                             "' is not a byte count (e.g. 8G, 512M, 1073741824)");
    }
    limit = static_cast<int64_t>(v << shift);
    from = std::string(kLimitEnv) + "=" + std::string(text);
  }
  const int64_t machine = MachineMemory();
  if (machine > 0 && machine < limit) {
    limit = machine;
    from = "this machine's memory, " + Bytes(machine);
  }
  if (explanation != nullptr) *explanation = from;
  return limit;
}

Status CheckTopologySize(std::string_view what, int64_t nodes, int64_t hosts, int64_t links,
                         Routing routing) {
  std::string from;
  FATHOM_ASSIGN_OR_RETURN(int64_t limit, TopologyMemoryLimit(&from));
  const int64_t need = EstimateTopologyBytes(nodes, hosts, links, routing);
  if (need <= limit) return Status::Ok();
  return InvalidArgument(
      std::string(what) + ": " + std::to_string(nodes) + " nodes x " + std::to_string(hosts) +
      " hosts (" + std::to_string(links) + " links) need about " + Bytes(need) +
      (routing == Routing::kTable ? " for the topology and its routing tables"
                                  : " for the topology and its routing") +
      ", more than the limit of " + Bytes(limit) + " (" + from +
      "); choose a smaller topology or raise " + kLimitEnv +
      " (e.g. =" + std::to_string((need >> 30) + 1) + "G; never above the machine's " + "memory)");
}

// ---------------------------------------------------------------------------
// Routing

PortRef Topology::Peer(int32_t node, int32_t port) const {
  const Link& l = links_[LinkAt(node, port)];
  if (l.a == node && l.a_port == port) return {l.b, l.b_port};
  return {l.a, l.a_port};
}

Status Topology::BuildRoutes() {
  const size_t n = nodes_.size();
  const size_t h = hosts_.size();
  route_.assign(n * h, 0);
  route_sets_.assign(1, RouteSet{});  // set 0: empty
  route_ports_.clear();
  hops_.assign(h * h, -1);
  diameter_hops_ = 0;
  // Interning: hash of the port list -> candidate set ids.
  std::unordered_multimap<uint64_t, uint32_t> interned;
  std::vector<int32_t> dist(n);
  std::vector<int32_t> queue(n);
  std::vector<int32_t> scratch;
  for (size_t r = 0; r < h; ++r) {
    const int32_t dst = hosts_[r];
    std::fill(dist.begin(), dist.end(), -1);
    dist[dst] = 0;
    size_t head = 0, tail = 0;
    queue[tail++] = dst;
    while (head < tail) {
      const int32_t u = queue[head++];
      // Hosts do not forward: only the destination itself expands.
      if (u != dst && nodes_[u].kind == NodeKind::kHost) continue;
      for (int32_t p = 0; p < PortCount(u); ++p) {
        const int32_t v = Peer(u, p).node;
        if (dist[v] < 0) {
          dist[v] = dist[u] + 1;
          queue[tail++] = v;
        }
      }
    }
    for (size_t u = 0; u < n; ++u) {
      if (dist[u] <= 0) continue;
      scratch.clear();
      for (int32_t p = 0; p < PortCount(static_cast<int32_t>(u)); ++p) {
        const int32_t v = Peer(static_cast<int32_t>(u), p).node;
        if (dist[v] != dist[u] - 1) continue;
        if (v != dst && nodes_[v].kind == NodeKind::kHost) continue;
        scratch.push_back(p);
      }
      if (scratch.empty()) continue;
      uint64_t hash = 1469598103934665603ull;
      for (int32_t p : scratch) hash = (hash ^ static_cast<uint64_t>(p)) * 1099511628211ull;
      uint32_t set_id = 0;
      auto [lo, hi] = interned.equal_range(hash);
      for (auto it = lo; it != hi; ++it) {
        const RouteSet& s = route_sets_[it->second];
        if (s.count == scratch.size() &&
            std::equal(scratch.begin(), scratch.end(), route_ports_.begin() + s.offset)) {
          set_id = it->second;
          break;
        }
      }
      if (set_id == 0) {
        set_id = static_cast<uint32_t>(route_sets_.size());
        route_sets_.push_back(RouteSet{static_cast<uint32_t>(route_ports_.size()),
                                       static_cast<uint32_t>(scratch.size())});
        route_ports_.insert(route_ports_.end(), scratch.begin(), scratch.end());
        interned.emplace(hash, set_id);
      }
      route_[u * h + r] = set_id;
    }
    for (size_t s = 0; s < h; ++s) {
      const int32_t d = dist[hosts_[s]];
      if (d > std::numeric_limits<int16_t>::max()) return OutOfRange("path longer than 32767 hops");
      hops_[s * h + r] = static_cast<int16_t>(d);
      diameter_hops_ = std::max(diameter_hops_, d);
    }
  }
  return Status::Ok();
}

bool Topology::Reachable(int32_t src_host, int32_t dst_host) const {
  return HopCount(src_host, dst_host) > 0 || src_host == dst_host;
}

int32_t Topology::HopCount(int32_t src_host, int32_t dst_host) const {
  const int32_t s = host_rank_[src_host];
  const int32_t d = host_rank_[dst_host];
  if (s < 0 || d < 0) return -1;
  if (routing_ == Routing::kUpDown) {
    // Up to the lowest tier whose subtree holds both, and down again.
    if (s == d) return 0;
    const HostPlace& a = host_place_[static_cast<size_t>(s)];
    const HostPlace& b = host_place_[static_cast<size_t>(d)];
    for (int tier = kTierLeaf; tier <= top_tier_; ++tier) {
      if (a.group[tier] == b.group[tier]) return 2 * tier;
    }
    return -1;
  }
  return hops_[static_cast<size_t>(s) * hosts_.size() + static_cast<size_t>(d)];
}

// ---------------------------------------------------------------------------
// Validation

int32_t Topology::UpDownDiameter() const {
  // The longest shortest path climbs to the highest tier t whose subtree
  // holds two hosts in different tier t-1 subtrees (tier 0: the hosts).
  for (int tier = top_tier_; tier >= kTierLeaf; --tier) {
    std::unordered_map<int32_t, int32_t> first_child;
    for (size_t r = 0; r < host_place_.size(); ++r) {
      const HostPlace& h = host_place_[r];
      const int32_t child = tier == kTierLeaf ? static_cast<int32_t>(r) : h.group[tier - 1];
      auto [it, fresh] = first_child.emplace(h.group[tier], child);
      if (!fresh && it->second != child) return 2 * tier;
    }
  }
  return 0;
}

// Computed routes: the places nest as HostPlace promises, and the route DAG
// towards one host per leaf subtree (group[1]) reaches it without a loop in
// exactly HopCount hops from every node; hosts of one leaf subtree share
// every place above the leaf, so their routes differ only in the leaf's
// down port, which is checked for every host. Cost: leaves x (nodes + DAG
// edges), not hosts x nodes.
Status Topology::ValidateUpDown(const std::string& ctx) const {
  const size_t h = hosts_.size();
  // Nesting: hosts with one group[t] share group[t+1] and down[t+1].
  for (int tier = kTierLeaf; tier < top_tier_; ++tier) {
    std::unordered_map<int32_t, size_t> first;
    for (size_t r = 0; r < h; ++r) {
      const HostPlace& a = host_place_[r];
      auto [it, fresh] = first.emplace(a.group[tier], r);
      const HostPlace& b = host_place_[it->second];
      if (!fresh &&
          (a.group[tier + 1] != b.group[tier + 1] || a.down[tier + 1] != b.down[tier + 1])) {
        return Internal(ctx + ": hosts " + nodes_[hosts_[r]].name + " and " +
                        nodes_[hosts_[it->second]].name + " share a tier-" + std::to_string(tier) +
                        " subtree but not their places above it");
      }
    }
  }
  // Reachability as promised: host pairs meet below the top iff their
  // group[top] is equal.
  std::unordered_map<int32_t, int32_t> top_of_rail;
  for (size_t r = 0; r < h; ++r) {
    const Node& a = nodes_[hosts_[r]];
    const int32_t top = host_place_[r].group[top_tier_];
    if (reachability_ == Reachability::kAllPairs) {
      if (top != host_place_[0].group[top_tier_]) {
        return FailedPrecondition(ctx + ": host " + nodes_[hosts_[0]].name + " cannot reach host " +
                                  a.name);
      }
    } else if (auto [it, fresh] = top_of_rail.emplace(a.gpu, top); !fresh && it->second != top) {
      return FailedPrecondition(ctx + ": host " + a.name +
                                " cannot reach the other hosts of rail " + std::to_string(a.gpu));
    }
  }
  // Every host's leaf takes its down port straight to it, and its own port
  // 0 leads up to that leaf.
  for (size_t r = 0; r < h; ++r) {
    const int32_t host = hosts_[r];
    if (PortCount(host) == 0) continue;
    const int32_t leaf = Peer(host, 0).node;
    const SwitchPlace& lp = node_place_[static_cast<size_t>(leaf)];
    const HostPlace& hp = host_place_[r];
    if (lp.tier != kTierLeaf || lp.group != hp.group[kTierLeaf] || lp.down_count != 1 ||
        hp.down[kTierLeaf] >= PortCount(leaf) || Peer(leaf, hp.down[kTierLeaf]).node != host) {
      return Internal(ctx + ": " + nodes_[leaf].name + " does not route down to " +
                      nodes_[host].name + " on the port that reaches it");
    }
  }
  // The DAG towards one host per leaf subtree.
  std::vector<int32_t> dsts;
  {
    std::unordered_map<int32_t, bool> seen;
    for (size_t r = 0; r < h; ++r) {
      if (seen.emplace(host_place_[r].group[kTierLeaf], true).second) dsts.push_back(hosts_[r]);
    }
  }
  return ValidateRouteDag(ctx, dsts);
}

Status Topology::Validate() const {
  const std::string ctx = "Topology::Validate(" + name_ + ")";
  // Ports and links agree.
  for (const Link& l : links_) {
    if (l.a < 0 || l.b < 0 || l.a == l.b || static_cast<size_t>(l.a) >= nodes_.size() ||
        static_cast<size_t>(l.b) >= nodes_.size()) {
      return Internal(ctx + ": link " + l.name + " has bad endpoints");
    }
    if (LinkAt(l.a, l.a_port) != l.id || LinkAt(l.b, l.b_port) != l.id) {
      return Internal(ctx + ": link " + l.name + " is not on the ports it names");
    }
    if (l.rate.bps() <= 0 || l.mtu_ab <= 0 || l.mtu_ba <= 0) {
      return InvalidArgument(ctx + ": link " + l.name + " has a non-positive rate or MTU");
    }
  }
  for (size_t u = 0; u < nodes_.size(); ++u) {
    for (int32_t p = 0; p < PortCount(static_cast<int32_t>(u)); ++p) {
      const Link& l = links_[LinkAt(static_cast<int32_t>(u), p)];
      if (!((l.a == static_cast<int32_t>(u) && l.a_port == p) ||
            (l.b == static_cast<int32_t>(u) && l.b_port == p))) {
        return Internal(ctx + ": port " + std::to_string(p) + " of " + nodes_[u].name +
                        " holds link " + l.name + " which does not end there");
      }
    }
  }
  if (routing_ == Routing::kUpDown) return ValidateUpDown(ctx);
  // Reachability as promised.
  const size_t h = hosts_.size();
  for (size_t s = 0; s < h; ++s) {
    for (size_t d = 0; d < h; ++d) {
      if (s == d) continue;
      const Node& a = nodes_[hosts_[s]];
      const Node& b = nodes_[hosts_[d]];
      const bool required =
          reachability_ == Reachability::kAllPairs || (a.gpu == b.gpu && a.server != b.server);
      if (required && hops_[s * h + d] <= 0) {
        return FailedPrecondition(ctx + ": host " + a.name + " cannot reach host " + b.name);
      }
    }
  }
  return ValidateRouteDag(ctx, hosts_);
}

// Every ECMP path towards each of `dsts` ends there, loop-free, in exactly
// the shortest hop count from every host: depth via DFS with colouring over
// the next-hop DAG.
Status Topology::ValidateRouteDag(const std::string& ctx, const std::vector<int32_t>& dsts) const {
  const size_t h = hosts_.size();
  const size_t n = nodes_.size();
  std::vector<int32_t> min_depth(n), max_depth(n);
  std::vector<uint8_t> color(n);
  struct Frame {
    int32_t node;
    size_t next;
  };
  std::vector<Frame> stack;
  for (const int32_t dst : dsts) {
    std::fill(color.begin(), color.end(), 0);
    color[dst] = 2;
    min_depth[dst] = max_depth[dst] = 0;
    for (size_t start = 0; start < n; ++start) {
      if (color[start] != 0 || NextHops(static_cast<int32_t>(start), dst).empty()) continue;
      stack.push_back({static_cast<int32_t>(start), 0});
      color[start] = 1;
      while (!stack.empty()) {
        Frame& f = stack.back();
        const auto hops = NextHops(f.node, dst);
        if (f.next < hops.size()) {
          const int32_t v = Peer(f.node, hops[f.next++]).node;
          if (color[v] == 1) {
            return Internal(ctx + ": forwarding loop towards " + nodes_[dst].name + " through " +
                            nodes_[v].name);
          }
          if (color[v] == 0) {
            if (NextHops(v, dst).empty()) {
              return Internal(ctx + ": " + nodes_[f.node].name + " forwards towards " +
                              nodes_[dst].name + " to " + nodes_[v].name + " which has no route");
            }
            color[v] = 1;
            stack.push_back({v, 0});
          }
          continue;
        }
        int32_t lo = std::numeric_limits<int32_t>::max(), hi = 0;
        for (int32_t p : hops) {
          const int32_t v = Peer(f.node, p).node;
          lo = std::min(lo, min_depth[v] + 1);
          hi = std::max(hi, max_depth[v] + 1);
        }
        min_depth[f.node] = lo;
        max_depth[f.node] = hi;
        color[f.node] = 2;
        stack.pop_back();
      }
    }
    for (size_t s = 0; s < h; ++s) {
      const int32_t src = hosts_[s];
      const int32_t want = HopCount(src, dst);
      if (src == dst || want <= 0) continue;
      if (min_depth[src] != want || max_depth[src] != want) {
        return Internal(ctx + ": ECMP paths " + nodes_[src].name + " -> " + nodes_[dst].name +
                        " have " + std::to_string(min_depth[src]) + ".." +
                        std::to_string(max_depth[src]) + " hops, shortest is " +
                        std::to_string(want));
      }
    }
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// Lookup

StatusOr<int32_t> Topology::FindNode(std::string_view name) const {
  auto it = node_by_name_.find(std::string(name));
  if (it == node_by_name_.end()) {
    return NotFound("Topology::FindNode: no node named '" + std::string(name) + "' in " + name_);
  }
  return it->second;
}

StatusOr<int32_t> Topology::FindLink(std::string_view name) const {
  auto it = link_by_name_.find(std::string(name));
  if (it != link_by_name_.end()) return it->second;
  // "x-y" by endpoints in either order.
  for (size_t dash = name.find('-'); dash != std::string_view::npos;
       dash = name.find('-', dash + 1)) {
    auto a = node_by_name_.find(std::string(name.substr(0, dash)));
    auto b = node_by_name_.find(std::string(name.substr(dash + 1)));
    if (a != node_by_name_.end() && b != node_by_name_.end()) {
      auto l = FindLink(a->second, b->second);
      if (l.ok()) return l;
    }
  }
  return NotFound("Topology::FindLink: no link named '" + std::string(name) + "' in " + name_);
}

StatusOr<int32_t> Topology::FindLink(int32_t a, int32_t b) const {
  if (a >= 0 && static_cast<size_t>(a) < nodes_.size() && b >= 0 &&
      static_cast<size_t>(b) < nodes_.size()) {
    for (int32_t p = 0; p < PortCount(a); ++p) {
      if (Peer(a, p).node == b) return LinkAt(a, p);
    }
  }
  return NotFound("Topology::FindLink(" + std::to_string(a) + ", " + std::to_string(b) +
                  "): no link between these nodes");
}

std::vector<int32_t> Topology::LinksAtTier(int tier) const {
  std::vector<int32_t> out;
  for (const Link& l : links_) {
    if (l.tier == tier) out.push_back(l.id);
  }
  return out;
}

std::vector<int32_t> Topology::LinksOf(int32_t node) const {
  std::vector<int32_t> out;
  for (int32_t p = 0; p < PortCount(node); ++p) out.push_back(LinkAt(node, p));
  return out;
}

StatusOr<std::vector<int32_t>> Topology::SelectLinks(std::string_view selector) const {
  std::vector<int32_t> out;
  if (selector.starts_with("tier:")) {
    const std::string_view num = selector.substr(5);
    if (num.size() != 1 || num[0] < '0' || num[0] > '0' + kMaxTier) {
      return InvalidArgument("Topology::SelectLinks: '" + std::string(selector) +
                             "': tier must be 0.." + std::to_string(kMaxTier));
    }
    out = LinksAtTier(num[0] - '0');
  } else if (auto node = node_by_name_.find(std::string(selector)); node != node_by_name_.end()) {
    out = LinksOf(node->second);
  } else {
    for (const Link& l : links_) {
      if (GlobMatch(selector, l.name)) out.push_back(l.id);
    }
    if (out.empty()) {
      auto one = FindLink(selector);
      if (one.ok()) out.push_back(*one);
    }
  }
  if (out.empty()) {
    return NotFound("Topology::SelectLinks: '" + std::string(selector) + "' matches no link in " +
                    name_);
  }
  return out;
}

}  // namespace fathom::topo
