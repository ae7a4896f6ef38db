// Topology::Summarize (counts, bisection bandwidth by max flow, diameter,
// oversubscription) and link parameter overrides.
#include <algorithm>
#include <limits>

#include "topologies/topology.h"

namespace fathom::topo {
namespace {

// Dinic's max flow on an undirected capacitated graph: each link is one arc
// pair whose two arcs are each other's residual, so a link carries up to its
// rate in either direction (full duplex, one direction measured).
class MaxFlow {
 public:
  explicit MaxFlow(size_t nodes) : head_(nodes, -1), level_(nodes), it_(nodes) {}

  void AddEdge(int32_t u, int32_t v, int64_t cap_uv, int64_t cap_vu) {
    arcs_.push_back({v, head_[u], cap_uv});
    head_[u] = static_cast<int32_t>(arcs_.size() - 1);
    arcs_.push_back({u, head_[v], cap_vu});
    head_[v] = static_cast<int32_t>(arcs_.size() - 1);
  }

  int64_t Run(int32_t s, int32_t t) {
    int64_t flow = 0;
    while (Levels(s, t)) {
      std::copy(head_.begin(), head_.end(), it_.begin());
      while (int64_t f = Push(s, t, std::numeric_limits<int64_t>::max())) flow += f;
    }
    return flow;
  }

 private:
  struct Arc {
    int32_t to;
    int32_t next;
    int64_t cap;
  };

  bool Levels(int32_t s, int32_t t) {
    std::fill(level_.begin(), level_.end(), -1);
    std::vector<int32_t> queue{s};
    level_[s] = 0;
    for (size_t i = 0; i < queue.size(); ++i) {
      for (int32_t a = head_[queue[i]]; a >= 0; a = arcs_[a].next) {
        if (arcs_[a].cap > 0 && level_[arcs_[a].to] < 0) {
          level_[arcs_[a].to] = level_[queue[i]] + 1;
          queue.push_back(arcs_[a].to);
        }
      }
    }
    return level_[t] >= 0;
  }

  // Depth is bounded by the BFS level of t (a handful of hops here).
  int64_t Push(int32_t u, int32_t t, int64_t limit) {
    if (u == t) return limit;
    for (int32_t& a = it_[u]; a >= 0; a = arcs_[a].next) {
      Arc& arc = arcs_[a];
      if (arc.cap <= 0 || level_[arc.to] != level_[u] + 1) continue;
      if (int64_t f = Push(arc.to, t, std::min(limit, arc.cap))) {
        arc.cap -= f;
        arcs_[a ^ 1].cap += f;
        return f;
      }
    }
    return 0;
  }

  std::vector<Arc> arcs_;
  std::vector<int32_t> head_;
  std::vector<int32_t> level_;
  std::vector<int32_t> it_;
};

}  // namespace

TopologySummary Topology::Summarize() const {
  TopologySummary s;
  s.name = name_;
  s.hosts = static_cast<int32_t>(hosts_.size());
  s.servers = servers_;
  s.reachability = reachability_;
  for (const Node& n : nodes_) {
    if (n.kind == NodeKind::kSwitch) {
      ++s.switches_per_tier[n.tier];
      ++s.switches;
    }
  }
  s.links = static_cast<int32_t>(links_.size());
  for (int tier = 0; tier <= kMaxTier; ++tier) {
    TierLinks tl;
    tl.tier = tier;
    int64_t total = 0;
    for (const Link& l : links_) {
      if (l.tier != tier) continue;
      if (tl.count++ == 0) {
        tl.rate = l.rate;
        tl.latency = l.latency;
      }
      total += l.rate.bps();
    }
    tl.total = BitsPerSecond(total);
    if (tl.count > 0) s.links_per_tier.push_back(tl);
  }
  for (const Link& l : links_) {
    const int32_t lo = std::min(l.mtu_ab, l.mtu_ba), hi = std::max(l.mtu_ab, l.mtu_ba);
    s.mtu_min_bytes = s.mtu_min_bytes == 0 ? lo : std::min(s.mtu_min_bytes, lo);
    s.mtu_max_bytes = std::max(s.mtu_max_bytes, hi);
    if (l.mtu_ab != l.mtu_ba) ++s.asymmetric_mtu_links;
  }
  // Oversubscription per switch tier: down capacity / up capacity.
  int64_t down[kMaxTier + 1] = {}, up[kMaxTier + 1] = {};
  for (const Link& l : links_) {
    const Node& lo = nodes_[l.a];
    const Node& hi = nodes_[l.b];
    if (lo.tier == hi.tier) continue;
    if (lo.kind == NodeKind::kSwitch) up[lo.tier] += l.rate.bps();
    if (hi.kind == NodeKind::kSwitch) down[hi.tier] += l.rate.bps();
  }
  for (int tier = kTierLeaf; tier <= kMaxTier; ++tier) {
    if (up[tier] > 0 && down[tier] > 0) {
      s.oversubscription[tier] = static_cast<double>(down[tier]) / static_cast<double>(up[tier]);
    }
  }
  // Bisection: first half of the ranks against the second half.
  const size_t n = nodes_.size();
  if (hosts_.size() >= 2) {
    MaxFlow flow(n + 2);
    const int32_t src = static_cast<int32_t>(n);
    const int32_t sink = static_cast<int32_t>(n + 1);
    for (const Link& l : links_) flow.AddEdge(l.a, l.b, l.rate.bps(), l.rate.bps());
    const size_t half = hosts_.size() / 2;
    const int64_t inf = std::numeric_limits<int64_t>::max() / 4;
    for (size_t r = 0; r < hosts_.size(); ++r) {
      if (r < half) {
        flow.AddEdge(src, hosts_[r], inf, 0);
      } else if (r < 2 * half) {
        flow.AddEdge(hosts_[r], sink, inf, 0);
      }
    }
    s.bisection = BitsPerSecond(flow.Run(src, sink));
  }
  s.diameter_hops = diameter_hops_;
  s.routing = routing_;
  s.estimated_bytes = EstimateTopologyBytes(static_cast<int64_t>(nodes_.size()),
                                            static_cast<int64_t>(hosts_.size()),
                                            static_cast<int64_t>(links_.size()), routing_);
  s.validation = Validate();
  return s;
}

Status Topology::SetLinkParams(int32_t link, BitsPerSecond rate, Picoseconds latency,
                               int32_t mtu_ab, int32_t mtu_ba) {
  if (link < 0 || static_cast<size_t>(link) >= links_.size()) {
    return InvalidArgument("Topology::SetLinkParams: no link " + std::to_string(link));
  }
  Link& l = links_[link];
  if (rate.bps() <= 0 || latency.ps() < 0 || mtu_ab <= 0 || mtu_ba <= 0) {
    return InvalidArgument("Topology::SetLinkParams(" + l.name + "): rate " +
                           std::to_string(rate.bps()) + " bps, latency " +
                           std::to_string(latency.ps()) + " ps, mtu " + std::to_string(mtu_ab) +
                           "/" + std::to_string(mtu_ba) + " must be positive");
  }
  l.rate = rate;
  l.latency = latency;
  l.mtu_ab = mtu_ab;
  l.mtu_ba = mtu_ba;
  return Status::Ok();
}

}  // namespace fathom::topo
