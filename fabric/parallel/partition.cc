#include "fabric/parallel/partition.h"

#include <algorithm>
#include <limits>

namespace fathom::parallel {
namespace {

// Cuts `items` (units, in order) into contiguous runs for processes
// 0..need.size()-1 of about equal `weight` (by unit): process r takes items
// until its share is reached. A process with need[r] gets at least one
// item (the caller leaves enough); one without may get none.
void CutRuns(const std::vector<int32_t>& items, const std::vector<int64_t>& weight,
             const std::vector<char>& need, std::vector<int32_t>& process_of) {
  const int32_t processes = static_cast<int32_t>(need.size());
  std::vector<size_t> needy_after(need.size(), 0);
  for (int32_t r = processes - 2; r >= 0; --r) {
    needy_after[static_cast<size_t>(r)] =
        needy_after[static_cast<size_t>(r) + 1] + (need[static_cast<size_t>(r) + 1] ? 1 : 0);
  }
  int64_t total = 0;
  for (const int32_t u : items) total += weight[static_cast<size_t>(u)];
  int32_t r = 0;
  int64_t sum = 0;
  bool took = false;
  for (size_t i = 0; i < items.size(); ++i) {
    // Move on when this process has its share (or needs nothing), or when
    // the items left are only enough for one each of the needy after it.
    const size_t left = items.size() - i;
    while (r + 1 < processes && (took || !need[static_cast<size_t>(r)]) &&
           (left <= needy_after[static_cast<size_t>(r)] || sum * processes >= total * (r + 1))) {
      ++r;
      took = false;
    }
    process_of[static_cast<size_t>(items[i])] = r;
    took = true;
    sum += weight[static_cast<size_t>(items[i])];
  }
}

// The hosts of `used` (partition.h), checked against the topology: by
// node id, 1 for a used host; empty when `used` is, or names every host or
// none (then every host weighs: the plain cut).
StatusOr<std::vector<char>> UsedHosts(const char* call, const topo::Topology& topology,
                                      const std::vector<char>& used) {
  if (used.empty()) return std::vector<char>();
  const auto& nodes = topology.nodes();
  if (used.size() != nodes.size()) {
    return InvalidArgument(std::string(call) + ": used hosts given for " +
                           std::to_string(used.size()) + " nodes, topology " + topology.name() +
                           " has " + std::to_string(nodes.size()));
  }
  size_t count = 0;
  for (size_t n = 0; n < nodes.size(); ++n) {
    if (used[n] == 0) continue;
    if (nodes[n].kind != topo::NodeKind::kHost) {
      return InvalidArgument(std::string(call) + ": node " + nodes[n].name +
                             " marked used is not a host of topology " + topology.name());
    }
    ++count;
  }
  if (count == 0 || count == topology.hosts().size()) return std::vector<char>();
  return used;
}

}  // namespace

StatusOr<Partition> PartitionFabric(const topo::Topology& topology, int32_t processes,
                                    const std::vector<std::vector<int32_t>>& together,
                                    const std::vector<char>& used) {
  const auto& nodes = topology.nodes();
  if (processes < 1)
    return InvalidArgument("PartitionFabric: processes " + std::to_string(processes));
  FATHOM_ASSIGN_OR_RETURN(const std::vector<char> used_hosts,
                          UsedHosts("PartitionFabric", topology, used));
  // The unit of each node: a switch is its own; a host joins the switch its
  // first port reaches, or (back-to-back cables) the lowest host it reaches.
  std::vector<int32_t> unit(nodes.size(), -1);
  for (const topo::Node& n : nodes) {
    if (n.kind == topo::NodeKind::kSwitch) unit[static_cast<size_t>(n.id)] = n.id;
  }
  for (const topo::Node& n : nodes) {
    if (n.kind == topo::NodeKind::kSwitch) continue;
    int32_t u = n.id;
    for (int32_t p = 0; p < topology.PortCount(n.id); ++p) {
      const int32_t peer = topology.Peer(n.id, p).node;
      if (nodes[static_cast<size_t>(peer)].kind == topo::NodeKind::kSwitch) {
        u = peer;
        break;
      }
      u = std::min(u, peer);
    }
    unit[static_cast<size_t>(n.id)] = u;
  }
  // A host-host chain: follow to the lowest id.
  for (size_t n = 0; n < nodes.size(); ++n) {
    int32_t u = unit[n];
    while (unit[static_cast<size_t>(u)] != u) u = unit[static_cast<size_t>(u)];
    unit[n] = u;
  }
  // Groups kept together. A group of hosts that reaches several units (a
  // server's NICs on different rail leaves) becomes a unit of its own,
  // named by its lowest node: its links to the switches cross between
  // processes like any other, with their latency as lookahead. Any other
  // group merges the units it touches (the lowest names the merged one).
  // Either way the units stay in node-id order.
  std::vector<char> server_unit(nodes.size(), 0);  // by unit: a server of its own
  if (!together.empty()) {
    std::vector<int32_t> root(nodes.size());
    for (size_t n = 0; n < nodes.size(); ++n) root[n] = static_cast<int32_t>(n);
    auto find = [&root](int32_t x) {
      while (root[static_cast<size_t>(x)] != x) {
        root[static_cast<size_t>(x)] = root[static_cast<size_t>(root[static_cast<size_t>(x)])];
        x = root[static_cast<size_t>(x)];
      }
      return x;
    };
    std::vector<int32_t> detached(nodes.size(), -1);  // by node: its group's own unit
    for (const std::vector<int32_t>& group : together) {
      bool hosts = true, several = false;
      for (const int32_t node : group) {
        if (node < 0 || static_cast<size_t>(node) >= nodes.size()) {
          return InvalidArgument(
              "PartitionFabric: node " + std::to_string(node) + " to keep together is outside 0.." +
              std::to_string(nodes.size() - 1) + " in topology " + topology.name());
        }
        hosts = hosts && nodes[static_cast<size_t>(node)].kind == topo::NodeKind::kHost;
        several =
            several || unit[static_cast<size_t>(node)] != unit[static_cast<size_t>(group.front())];
      }
      if (hosts && several) {
        const int32_t own = *std::min_element(group.begin(), group.end());
        for (const int32_t node : group) detached[static_cast<size_t>(node)] = own;
        server_unit[static_cast<size_t>(own)] = 1;
        continue;
      }
      for (const int32_t node : group) {
        const int32_t a = find(unit[static_cast<size_t>(group.front())]);
        const int32_t b = find(unit[static_cast<size_t>(node)]);
        root[static_cast<size_t>(std::max(a, b))] = std::min(a, b);
      }
    }
    for (size_t n = 0; n < nodes.size(); ++n) unit[n] = find(unit[n]);
    for (size_t n = 0; n < nodes.size(); ++n) {
      if (detached[n] >= 0) unit[n] = detached[n];
    }
    // A host cabled back to back to a detached one, in no group: with it.
    for (size_t n = 0; n < nodes.size(); ++n) {
      const int32_t u = unit[n];
      if (detached[n] < 0 && detached[static_cast<size_t>(u)] >= 0) {
        unit[n] = detached[static_cast<size_t>(u)];
      }
    }
  }
  // With `used`, every unit weighs its used hosts (partition.h).
  std::vector<int64_t> unit_weight(nodes.size(), 0);  // ports, or used hosts
  std::vector<int64_t> unit_hosts(nodes.size(), 0);   // hosts, or used hosts
  std::vector<int32_t> units;
  for (size_t n = 0; n < nodes.size(); ++n) {
    const int32_t node = static_cast<int32_t>(n);
    const size_t u = static_cast<size_t>(unit[n]);
    if (used_hosts.empty()) {
      unit_weight[u] += topology.PortCount(node);
      if (nodes[n].kind == topo::NodeKind::kHost) ++unit_hosts[u];
    } else if (used_hosts[n]) {
      ++unit_weight[u];
      ++unit_hosts[u];
    }
    if (unit[n] == node) units.push_back(node);
  }
  Partition part;
  part.processes = processes;
  part.units = static_cast<int32_t>(units.size());
  if (processes > part.units) {
    return InvalidArgument(
        "more processes (" + std::to_string(processes) + ") than partitions (" +
        std::to_string(part.units) +
        (together.empty() ? std::string(" switches with their hosts")
                          : std::string(" units: switches with their hosts, and the GPU servers "
                                        "whose NICs reach several, each whole")) +
        ") in topology " + topology.name());
  }
  // Server units first, by hosts; then the others, by ports. Without
  // server units every process needs a unit and the cut is by ports alone.
  std::vector<int32_t> servers, others;
  for (const int32_t u : units)
    (server_unit[static_cast<size_t>(u)] ? servers : others).push_back(u);
  std::vector<int32_t> process_of_unit(nodes.size(), 0);
  const size_t np = static_cast<size_t>(processes);
  std::vector<char> need(np, 0);
  for (size_t r = 0; r < np && r < servers.size(); ++r) need[r] = 1;
  CutRuns(servers, unit_hosts, need, process_of_unit);
  for (size_t r = 0; r < np; ++r) need[r] = r >= servers.size();
  CutRuns(others, unit_weight, need, process_of_unit);
  part.weight.assign(np, 0);
  for (const int32_t u : units) {
    part.weight[static_cast<size_t>(process_of_unit[static_cast<size_t>(u)])] +=
        unit_weight[static_cast<size_t>(u)];
  }
  part.owner.resize(nodes.size());
  for (size_t n = 0; n < nodes.size(); ++n) {
    part.owner[n] = process_of_unit[static_cast<size_t>(unit[n])];
  }
  return part;
}

StatusOr<Partition> PartitionHosts(const topo::Topology& topology, int32_t processes,
                                   const std::vector<std::vector<int32_t>>& together,
                                   const std::vector<char>& used) {
  const auto& nodes = topology.nodes();
  if (processes < 1)
    return InvalidArgument("PartitionHosts: processes " + std::to_string(processes));
  FATHOM_ASSIGN_OR_RETURN(const std::vector<char> used_hosts,
                          UsedHosts("PartitionHosts", topology, used));
  auto weighs = [&used_hosts](int32_t host) {
    return used_hosts.empty() || used_hosts[static_cast<size_t>(host)] != 0;
  };
  // The unit of each host: itself, or the lowest host of its group.
  std::vector<int32_t> unit(nodes.size(), -1);
  for (const int32_t h : topology.hosts()) unit[static_cast<size_t>(h)] = h;
  for (const std::vector<int32_t>& group : together) {
    int32_t low = std::numeric_limits<int32_t>::max();
    for (const int32_t node : group) {
      if (node < 0 || static_cast<size_t>(node) >= nodes.size() ||
          nodes[static_cast<size_t>(node)].kind != topo::NodeKind::kHost) {
        return InvalidArgument("PartitionHosts: node " + std::to_string(node) +
                               " to keep together is not a host of topology " + topology.name());
      }
      low = std::min(low, unit[static_cast<size_t>(node)]);
    }
    for (const int32_t node : group) unit[static_cast<size_t>(node)] = low;
  }
  // A host chained into a group through another: follow to the lowest.
  for (const int32_t h : topology.hosts()) {
    int32_t u = unit[static_cast<size_t>(h)];
    while (unit[static_cast<size_t>(u)] != u) u = unit[static_cast<size_t>(u)];
    unit[static_cast<size_t>(h)] = u;
  }
  std::vector<int64_t> unit_hosts(nodes.size(), 0);
  std::vector<int32_t> units;
  std::vector<int32_t> hosts = topology.hosts();
  std::sort(hosts.begin(), hosts.end());
  for (const int32_t h : hosts) {
    if (weighs(h)) ++unit_hosts[static_cast<size_t>(unit[static_cast<size_t>(h)])];
    if (unit[static_cast<size_t>(h)] == h) units.push_back(h);
  }
  Partition part;
  part.processes = processes;
  part.units = static_cast<int32_t>(units.size());
  if (processes > part.units) {
    return InvalidArgument("more processes (" + std::to_string(processes) + ") than partitions (" +
                           std::to_string(part.units) +
                           " hosts, each GPU server whole) for the flow model in topology " +
                           topology.name());
  }
  const size_t np = static_cast<size_t>(processes);
  std::vector<int32_t> process_of_unit(nodes.size(), 0);
  CutRuns(units, unit_hosts, std::vector<char>(np, 1), process_of_unit);
  part.owner.assign(nodes.size(), 0);
  part.weight.assign(np, 0);
  for (const int32_t h : hosts) {
    const int32_t r = process_of_unit[static_cast<size_t>(unit[static_cast<size_t>(h)])];
    part.owner[static_cast<size_t>(h)] = r;
    if (weighs(h)) ++part.weight[static_cast<size_t>(r)];
  }
  for (const topo::Node& n : nodes) {
    if (n.kind == topo::NodeKind::kHost) continue;
    int32_t low = std::numeric_limits<int32_t>::max();
    for (int32_t p = 0; p < topology.PortCount(n.id); ++p) {
      const int32_t peer = topology.Peer(n.id, p).node;
      if (nodes[static_cast<size_t>(peer)].kind == topo::NodeKind::kHost) low = std::min(low, peer);
    }
    part.owner[static_cast<size_t>(n.id)] =
        low == std::numeric_limits<int32_t>::max() ? 0 : part.owner[static_cast<size_t>(low)];
  }
  return part;
}

StatusOr<Picoseconds> SyncWindow(const topo::Topology& topology, const Partition& partition,
                                 Picoseconds host_extra) {
  int64_t window = std::numeric_limits<int64_t>::max();
  for (const topo::Link& l : topology.links()) {
    const bool host_end = topology.node(l.a).kind == topo::NodeKind::kHost ||
                          topology.node(l.b).kind == topo::NodeKind::kHost;
    const int64_t latency = l.latency.ps() + (host_end ? host_extra.ps() : 0);
    const bool crosses =
        partition.owner[static_cast<size_t>(l.a)] != partition.owner[static_cast<size_t>(l.b)];
    if (crosses && latency <= 0) {
      return InvalidArgument("link " + l.name + " crosses between processes " +
                             std::to_string(partition.owner[static_cast<size_t>(l.a)]) + " and " +
                             std::to_string(partition.owner[static_cast<size_t>(l.b)]) +
                             " with zero latency: no lookahead to synchronize on (give it a "
                             "latency, or run fewer processes)");
    }
    if (latency > 0) window = std::min(window, latency);
  }
  // No link with a latency: one process, one window per nanosecond.
  if (window == std::numeric_limits<int64_t>::max()) window = 1000;
  return Picoseconds(window);
}

}  // namespace fathom::parallel
