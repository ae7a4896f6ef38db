#include "transport/verbs/preflight.h"

#include <cstdio>
#include <functional>
#include <map>

namespace fathom::transport::verbs {
namespace {

// "1024 on rank 1; 4096 on ranks 0, 2" when more than one value is present.
std::string Spread(const std::vector<RankFacts>& ranks,
                   const std::function<std::string(const RankFacts&)>& value) {
  std::map<std::string, std::vector<int>> groups;
  for (const RankFacts& r : ranks) {
    if (r.error.empty()) groups[value(r)].push_back(r.rank);
  }
  if (groups.size() < 2) return {};
  std::string out;
  for (const auto& [v, rs] : groups) {
    if (!out.empty()) out += "; ";
    out += v + " on rank" + (rs.size() > 1 ? "s " : " ");
    for (size_t i = 0; i < rs.size(); ++i) out += (i ? ", " : "") + std::to_string(rs[i]);
  }
  return out;
}

}  // namespace

std::vector<std::string> FindInconsistencies(const std::vector<RankFacts>& ranks) {
  std::vector<std::string> out;
  for (const RankFacts& r : ranks) {
    if (!r.error.empty()) {
      out.push_back("rank " + std::to_string(r.rank) + " (" + r.host +
                    ") has no usable device: " + r.error);
    } else if (r.info.port_state != "ACTIVE") {
      out.push_back("rank " + std::to_string(r.rank) + " (" + r.host + ") " + r.info.name +
                    " port " + std::to_string(r.info.port) + " is " + r.info.port_state +
                    ", not ACTIVE");
    }
  }
  std::string s =
      Spread(ranks, [](const RankFacts& r) { return std::to_string(r.info.active_mtu); });
  if (!s.empty()) {
    out.push_back("active_mtu differs: " + s +
                  " (a connection must use the smaller of its two ends' MTUs; a side that "
                  "uses its own larger MTU sends packets the other end drops, and large "
                  "messages hang in retransmissions)");
  }
  s = Spread(ranks, [](const RankFacts& r) {
    return r.info.link_layer == "Ethernet" ? std::to_string(r.info.netdev_mtu) : std::string("n/a");
  });
  if (!s.empty()) {
    out.push_back("Ethernet MTU of the RoCE netdevs differs: " + s +
                  " (frames larger than the smaller MTU are dropped silently on the way, so "
                  "large messages hang in retransmissions)");
  }
  s = Spread(ranks, [](const RankFacts& r) { return r.info.link_layer; });
  if (!s.empty()) out.push_back("link layers are mixed: " + s);
  s = Spread(ranks, [](const RankFacts& r) { return r.info.gid_type; });
  if (!s.empty()) out.push_back("GID types differ: " + s + " (peers cannot reach each other)");
  s = Spread(ranks, [](const RankFacts& r) { return r.info.fw_ver; });
  if (!s.empty()) out.push_back("firmware versions differ: " + s);
  return out;
}

std::string FactsTable(const std::vector<RankFacts>& ranks) {
  std::string out;
  char buf[512];
  std::snprintf(buf, sizeof(buf), "%-5s %-16s %-10s %-12s %-10s %-4s %-8s %-7s %-8s %-9s %-8s %s\n",
                "rank", "host", "device", "fw_ver", "link", "port", "state", "mtu", "eth_mtu",
                "Gb/s", "gid_type", "gid");
  out += buf;
  for (const RankFacts& r : ranks) {
    if (!r.error.empty()) {
      std::snprintf(buf, sizeof(buf), "%-5d %-16s %s\n", r.rank, r.host.c_str(), r.error.c_str());
    } else {
      const DeviceInfo& i = r.info;
      std::snprintf(buf, sizeof(buf),
                    "%-5d %-16s %-10s %-12s %-10s %-4d %-8s %-7d %-8d %-9.2f %-8s %d:%s\n", r.rank,
                    r.host.c_str(), i.name.c_str(), i.fw_ver.c_str(), i.link_layer.c_str(), i.port,
                    i.port_state.c_str(), i.active_mtu, i.netdev_mtu, i.active_gbps,
                    i.gid_type.c_str(), i.gid_index, i.gid.c_str());
    }
    out += buf;
  }
  return out;
}

}  // namespace fathom::transport::verbs
