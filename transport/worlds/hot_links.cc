#include "transport/worlds/hot_links.h"

#include <algorithm>

namespace fathom::transport::worlds {

std::vector<uint64_t> PortBytes(const sim::Network& net) {
  std::vector<uint64_t> b;
  b.reserve(net.ports().size());
  for (const sim::Port* p : net.ports()) b.push_back(p->counters().port_xmit_data);
  return b;
}

std::string PortLinkName(const sim::Network& net, const sim::Port& port) {
  const topo::Topology& t = net.topology();
  const topo::Link& l = t.link(port.config().link);
  const int32_t from = port.config().node;
  const int32_t to = from == l.a ? l.b : l.a;
  std::string name = t.node(from).name + "->" + t.node(to).name;
  // Parallel links keep their "/k" suffix.
  if (const size_t slash = l.name.rfind('/'); slash != std::string::npos) {
    name += l.name.substr(slash);
  }
  return name;
}

std::vector<LinkLoad> HotLinks(const sim::Network& net, const std::vector<uint64_t>& before,
                               const std::vector<uint64_t>& after, size_t limit) {
  const topo::Topology& t = net.topology();
  const auto ports = net.ports();
  std::vector<std::pair<uint64_t, size_t>> loads;
  uint64_t sum = 0;
  for (size_t i = 0; i < ports.size() && i < before.size() && i < after.size(); ++i) {
    const sim::PortConfig& c = ports[i]->config();
    if (c.link < 0) continue;
    const topo::Link& l = t.link(c.link);
    if (t.node(l.a).kind == topo::NodeKind::kHost || t.node(l.b).kind == topo::NodeKind::kHost) {
      continue;
    }
    const uint64_t d = after[i] - before[i];
    if (d == 0) continue;
    loads.emplace_back(d, i);
    sum += d;
  }
  std::vector<LinkLoad> hot;
  if (loads.empty()) return hot;
  const double mean = static_cast<double>(sum) / static_cast<double>(loads.size());
  std::sort(loads.begin(), loads.end(), [](const auto& x, const auto& y) {
    return x.first != y.first ? x.first > y.first : x.second < y.second;
  });
  for (const auto& [bytes, i] : loads) {
    const double ratio = static_cast<double>(bytes) / mean;
    if (ratio < kHotRatio || hot.size() >= limit) break;
    hot.push_back({PortLinkName(net, *ports[i]), bytes, ratio});
  }
  return hot;
}

}  // namespace fathom::transport::worlds
