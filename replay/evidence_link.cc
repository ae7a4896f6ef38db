// Per-node link state: `ibv_devinfo -v` (rdma-core libibverbs/examples/
// devinfo.c: "hca_id:", "port:", "state: PORT_ACTIVE (4)", "active_mtu:
// 1024 (3)", "link_layer: Ethernet", "GID[  3]: ::ffff:10.0.0.1, RoCE v2"),
// `ip -d link` / `ip -d addr` (iproute2: "2: eth0: <...> mtu 9000 ..."),
// show_gids tables (Mellanox OFED's script: DEV PORT INDEX GID IPv4 VER DEV)
// and `ethtool -S` ("NIC statistics:" then "name: value"; mlx5 names such as
// rx_prio3_pause, tx_prio3_pause_duration, rx_corrected_bits_phy,
// rx_err_lane_0_phy; ethtool --show-fec counters fec_*).
#include <regex>

#include "replay/evidence_internal.h"

namespace fathom::replay::internal {
namespace {

std::string HostOr(const FileInput& file, SourceReport* src) {
  if (!file.host.empty()) return file.host;
  NoteProblem(src, 0, "no host in the path; filed under 'unknown'");
  return "unknown";
}

void AddGid(HostState& h, Gid g) {
  for (Gid& old : h.gids) {
    if (old.index == g.index) {
      if (old.type.empty()) old.type = g.type;
      if (old.netdev.empty()) old.netdev = g.netdev;
      return;
    }
  }
  h.gids.push_back(std::move(g));
}

}  // namespace

void ParseIbvDevinfo(const FileInput& file, Evidence* ev, SourceReport* src) {
  src->kind = "ibv_devinfo";
  HostState& h = Host(ev, HostOr(file, src));
  static const std::regex kKey(R"(^\s*([A-Za-z_]+):\s*(.*?)\s*$)");
  static const std::regex kGid(R"(^\s*GID\[\s*(\d+)\]:\s*([0-9a-fA-F:.]+)(?:,\s*(.+?))?\s*$)");
  int n = 0;
  int port = 0;
  for (std::string_view raw : SplitLines(file.text)) {
    ++n;
    const std::string line(raw);
    if (Trim(line).empty()) continue;
    std::smatch m;
    if (std::regex_match(line, m, kGid)) {
      // Only port 1's table: fathom models one port per NIC.
      if (port <= 1) {
        Gid g;
        g.index = std::stoi(m[1].str());
        g.gid = m[2].str();
        g.type = m[3].str();
        AddGid(h, g);
      }
      ++src->lines_recognised;
      continue;
    }
    if (!std::regex_match(line, m, kKey)) {
      ++src->lines_ignored;
      continue;
    }
    const std::string key = m[1].str(), value = m[2].str();
    const auto w = SplitWords(value);
    if (key == "hca_id") {
      if (h.device.empty()) h.device = value;
      const std::string drv = DriverFromDevice(value);
      if (!drv.empty() && h.driver == "unknown") h.driver = drv;
    } else if (key == "port") {
      port = ParseInt(value).value_or(0);
    } else if (key == "state" && port <= 1) {
      if (!w.empty()) h.port_state = w[0];
    } else if (key == "active_mtu" && port <= 1) {
      auto v = w.empty() ? std::nullopt : ParseInt(w[0]);
      if (!v) {
        NoteProblem(src, n, "active_mtu '" + value + "' is not a number");
        ++src->lines_ignored;
        continue;
      }
      h.active_mtu = static_cast<int>(*v);
    } else if (key != "link_layer" && key != "max_mtu" && key != "transport") {
      ++src->lines_ignored;
      continue;
    }
    ++src->lines_recognised;
  }
}

void ParseIpLink(const FileInput& file, Evidence* ev, SourceReport* src) {
  src->kind = "ip_link";
  HostState& h = Host(ev, HostOr(file, src));
  static const std::regex kIf(R"(^\d+:\s+([^:@\s]+)(?:@\S+)?:\s+<([^>]*)>.*?\bmtu (\d+))");
  static const std::regex kInet(R"(^\s+inet6? ([0-9a-fA-F.:]+)/\d+)");
  int n = 0;
  bool chosen = false;
  bool in_lo = false;
  for (std::string_view raw : SplitLines(file.text)) {
    ++n;
    const std::string line(raw);
    std::smatch m;
    if (std::regex_search(line, m, kIf)) {
      const std::string ifname = m[1].str();
      in_lo = ifname == "lo" || Contains(m[2].str(), "LOOPBACK");
      // The first interface that is not the loopback carries RoCE (a bundle
      // made per node keeps the RDMA netdev; fathom models one NIC a node).
      if (!in_lo && !chosen) {
        h.netdev_mtu = std::stoi(m[3].str());
        chosen = true;
      }
      ++src->lines_recognised;
    } else if (std::regex_search(line, m, kInet)) {
      if (!in_lo && m[1].str() != "::1" && !StartsWith(m[1].str(), "fe80")) {
        h.addresses.push_back(m[1].str());
      }
      ++src->lines_recognised;
    } else {
      ++src->lines_ignored;
    }
  }
  if (!chosen && src->lines_recognised > 0) NoteProblem(src, 0, "only the loopback interface");
}

void ParseGids(const FileInput& file, Evidence* ev, SourceReport* src) {
  src->kind = "gids";
  HostState& h = Host(ev, HostOr(file, src));
  int n = 0;
  for (std::string_view raw : SplitLines(file.text)) {
    ++n;
    const auto w = SplitWords(raw);
    if (w.empty() || w[0] == "DEV" || StartsWith(w[0], "---") || StartsWith(w[0], "n_gids")) {
      ++src->lines_ignored;
      continue;
    }
    // DEV PORT INDEX GID [IPv4] VER NETDEV
    if (w.size() < 6 || !ParseInt(w[1]) || !ParseInt(w[2])) {
      NoteProblem(src, n, "not a show_gids row");
      ++src->lines_ignored;
      continue;
    }
    Gid g;
    g.index = static_cast<int>(*ParseInt(w[2]));
    g.gid = w[3];
    const bool has_v4 = w.size() >= 7;
    const std::string& ver = w[has_v4 ? 5 : 4];
    g.type = ver == "v2" ? "RoCE v2" : ver == "v1" ? "RoCE v1" : ver;
    g.netdev = w[has_v4 ? 6 : 5];
    if (has_v4 && std::find(h.addresses.begin(), h.addresses.end(), w[4]) == h.addresses.end()) {
      h.addresses.push_back(w[4]);
    }
    if (h.device.empty()) h.device = w[0];
    const std::string drv = DriverFromDevice(w[0]);
    if (!drv.empty() && h.driver == "unknown") h.driver = drv;
    AddGid(h, g);
    ++src->lines_recognised;
  }
}

void ParseEthtool(const FileInput& file, Evidence* ev, SourceReport* src) {
  src->kind = "ethtool";
  HostState& h = Host(ev, HostOr(file, src));
  int n = 0;
  for (std::string_view raw : SplitLines(file.text)) {
    ++n;
    std::string_view l = Trim(raw);
    if (l.empty() || StartsWith(l, "NIC statistics")) continue;
    const size_t c = l.rfind(':');
    if (c == std::string_view::npos) {
      NoteProblem(src, n, "'name: value' expected");
      ++src->lines_ignored;
      continue;
    }
    auto v = ParseInt(l.substr(c + 1));
    if (!v || *v < 0) {
      NoteProblem(src, n, "value of " + std::string(Trim(l.substr(0, c))) + " is not a count");
      ++src->lines_ignored;
      continue;
    }
    h.ethtool[std::string(Trim(l.substr(0, c)))] = static_cast<uint64_t>(*v);
    ++src->lines_recognised;
  }
}

}  // namespace fathom::replay::internal
