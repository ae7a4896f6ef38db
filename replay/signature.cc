#include "replay/signature.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "base/verbs_types.h"
#include "replay/hypotheses.h"

namespace fathom::replay {
namespace {

std::string Lower(const std::string& s) {
  std::string out;
  for (char c : s) out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return out;
}

bool Has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

double Jaccard(const std::set<std::string>& a, const std::set<std::string>& b) {
  if (a.empty() && b.empty()) return 1;
  size_t common = 0;
  for (const auto& x : a) common += b.count(x);
  return static_cast<double>(common) / static_cast<double>(a.size() + b.size() - common);
}

std::string Join(const std::set<std::string>& s, size_t limit = 6) {
  if (s.empty()) return "none";
  std::string out;
  size_t n = 0;
  for (const auto& x : s) {
    if (n == limit) {
      out += " +" + std::to_string(s.size() - limit) + " more";
      break;
    }
    if (n++) out += ' ';
    out += x;
  }
  return out;
}

std::string MapHost(const World& world, const std::string& host) {
  auto it = world.sim_host.find(host);
  return it == world.sim_host.end() ? host : it->second;
}

bool IsFlush(const std::string& status) { return status == "IBV_WC_WR_FLUSH_ERR"; }

// "a->b" (a port report's name, maybe "#index") -> the node names.
bool SplitArrow(const std::string& name, std::string* a, std::string* b) {
  size_t arrow = name.find("->");
  if (arrow == std::string::npos) return false;
  *a = name.substr(0, arrow);
  *b = name.substr(arrow + 2);
  size_t hash = b->find('#');
  if (hash != std::string::npos) b->resize(hash);
  return true;
}

void AddLink(const topo::Topology& topology, int32_t link, const std::string& cls, Signature* s) {
  if (link < 0 || cls.empty()) return;
  const topo::Link& l = topology.link(link);
  s->link_classes[cls].insert(l.name);
  // A host's own link shows at its NIC too (ethtool: carrier, CRC, FEC,
  // pause); oversize drops happen at the switch's egress, not the NIC.
  if (cls == "oversize" || cls == "discards") return;
  for (int32_t end : {l.a, l.b}) {
    if (topology.node(end).kind == topo::NodeKind::kHost) {
      s->host_classes[cls].insert(topology.node(end).name);
    }
  }
}

}  // namespace

bool Signature::HasSymptom() const {
  if (HasErrors() || HasStalls()) return true;
  for (const auto& [cls, set] : host_classes) {
    if (!set.empty()) return true;
  }
  for (const auto& [cls, set] : link_classes) {
    if (!set.empty()) return true;
  }
  return false;
}

std::string CounterClass(const std::string& raw) {
  const std::string n = Lower(raw);
  if (Has(n, "rnr")) return "rnr";
  if (Has(n, "pause")) return "pause";
  if (Has(n, "local_ack_timeout") || Has(n, "completer_retry") || Has(n, "retry_exceeded") ||
      Has(n, "retry_exc")) {
    return "timeouts";
  }
  if (Has(n, "out_of_seq") || Has(n, "seq_err") || Has(n, "duplicate_request") ||
      Has(n, "retrans") || Has(n, "implied_nak")) {
    return "sequence";
  }
  if (Has(n, "oversize") || Has(n, "mtu")) return "oversize";
  if (Has(n, "link_down") || Has(n, "linkdown") || Has(n, "carrier_changes")) return "link_down";
  if (Has(n, "corrected_b") || Has(n, "fec_corrected")) return "fec_corrected";
  if (Has(n, "symbol") || Has(n, "crc") || Has(n, "rcv_errors") || Has(n, "rcverrors") ||
      Has(n, "uncorrectable") || Has(n, "fcs") || Has(n, "physicalerrors")) {
    return "phy_errors";
  }
  if (Has(n, "discard") || Has(n, "out_of_buffer")) return "discards";
  if (Has(n, "ecn") || Has(n, "cnp")) return "ecn";
  return "";
}

std::string StatusName(int code) {
  if (code < 0 || code > 21) return "";
  return std::string(WcStatusName(static_cast<WcStatus>(code)));
}

int32_t ResolveLink(const topo::Topology& topology, const std::string& raw) {
  std::string name = raw;
  // "node:port"
  size_t colon = name.rfind(':');
  if (colon != std::string::npos && name.find("->") == std::string::npos) {
    auto node = topology.FindNode(name.substr(0, colon));
    if (!node.ok()) return -1;
    char* end = nullptr;
    long port = std::strtol(name.c_str() + colon + 1, &end, 10);
    if (end == name.c_str() + colon + 1 || port < 0 || port >= topology.PortCount(*node)) return -1;
    return topology.LinkAt(*node, static_cast<int32_t>(port));
  }
  std::string a, b;
  if (SplitArrow(name, &a, &b)) {
    // "a->b#port": the port index at a names one of parallel links.
    size_t hash = name.find('#');
    if (hash != std::string::npos) {
      auto node = topology.FindNode(a);
      if (!node.ok()) return -1;
      long port = std::strtol(name.c_str() + hash + 1, nullptr, 10);
      if (port < 0 || port >= topology.PortCount(*node)) return -1;
      return topology.LinkAt(*node, static_cast<int32_t>(port));
    }
    name = a + "-" + b;
  }
  auto link = topology.FindLink(name);
  return link.ok() ? *link : -1;
}

Signature EvidenceSignature(const Evidence& evidence, const World& world,
                            std::set<std::string>* observable) {
  Signature s;
  std::map<int, std::string> rank_host;
  for (const auto& r : evidence.ranks) rank_host[r.rank] = r.host;
  auto host_of = [&](const std::string& host, int rank) {
    if (!host.empty()) return MapHost(world, host);
    auto it = rank_host.find(rank);
    return it == rank_host.end() ? std::string() : MapHost(world, it->second);
  };
  for (const auto& e : evidence.errors) {
    std::string status = e.status.empty() ? StatusName(e.status_code) : e.status;
    if (IsFlush(status)) continue;
    std::string host = host_of(e.host, e.rank);
    if (!host.empty()) s.error_hosts.insert(host);
    if (!e.peer_host.empty()) s.error_hosts.insert(MapHost(world, e.peer_host));
    if (!status.empty()) s.statuses.insert(status);
    if (e.time_s >= 0 && (s.first_error_s < 0 || e.time_s < s.first_error_s)) {
      s.first_error_s = e.time_s;
    }
  }
  for (const auto& ev : evidence.rank_events) {
    std::string host = host_of(ev.host, ev.rank);
    if (host.empty()) continue;
    if (ev.kind == "stall" || ev.kind == "timeout") s.stalled_hosts.insert(host);
    // "port error" / "port active" async events: the host's port went down
    // and came back (CASES.md 9).
    if (ev.kind == "async_event" && Has(Lower(ev.detail), "port")) {
      s.host_classes["link_down"].insert(host);
    }
  }
  std::set<std::string> obs;
  for (const auto& [name, h] : evidence.hosts) {
    std::string host = MapHost(world, name);
    // A class is observable on a host when one of its counters is listed
    // there at all (zero or not): a counter the node does not report
    // cannot be compared.
    for (const auto* counters : {&h.rdma_counters, &h.ethtool}) {
      for (const auto& [counter, value] : *counters) {
        std::string cls = CounterClass(counter);
        if (cls.empty()) continue;
        obs.insert("host:" + cls + "@" + host);
        if (value > 0) s.host_classes[cls].insert(host);
      }
    }
  }
  for (const auto& c : evidence.switch_counters) {
    std::string cls = CounterClass(c.counter);
    if (!cls.empty()) obs.insert("link:" + cls);
    if (c.value == 0 || cls.empty()) continue;
    int32_t link = ResolveLink(world.topology, c.port);
    if (link >= 0) s.link_classes[cls].insert(world.topology.link(link).name);
  }
  if (!evidence.link_events.empty()) obs.insert("link:link_down");
  for (const auto& e : evidence.link_events) {
    if (e.up) continue;
    int32_t link = ResolveLink(world.topology, e.link);
    if (link >= 0) AddLink(world.topology, link, "link_down", &s);
  }
  // A host's link_down class already counts its own events; links named by
  // the events add their host ends above.
  for (auto it = s.host_classes.begin(); it != s.host_classes.end();) {
    it = it->second.empty() ? s.host_classes.erase(it) : std::next(it);
  }
  if (observable) *observable = std::move(obs);
  return s;
}

Signature RunSignature(const sim::RunReport& report, const topo::Topology& topology,
                       double offset_s, bool swallowed) {
  Signature s;
  s.simulated = true;
  s.flows_completed = report.flows_completed;
  s.flows_failed = report.flows_failed;
  s.flows_stalled = report.flows_stalled;
  s.completion_statuses = report.completion_statuses;
  for (const auto& f : report.flow_table) {
    if (f.status == "failed") {
      if (swallowed) {
        s.stalled_hosts.insert(f.src);
        s.stalled_hosts.insert(f.dst);
        continue;
      }
      s.error_hosts.insert(f.src);
      s.error_hosts.insert(f.dst);
      for (const auto& q : f.qps) {
        if (!q.first_error.empty() && !IsFlush(q.first_error)) s.statuses.insert(q.first_error);
      }
      if (!f.first_error.empty() && !IsFlush(f.first_error)) s.statuses.insert(f.first_error);
    } else if (f.status == "stalled") {
      s.stalled_hosts.insert(f.src);
      s.stalled_hosts.insert(f.dst);
    }
    for (const auto& q : f.qps) {
      const auto& r = q.requester;
      if (r.local_ack_timeout_err || r.retry_exceeded_err)
        s.host_classes["timeouts"].insert(q.host);
      if (r.packet_seq_err || r.implied_nak_seq_err || r.retransmitted_packets ||
          r.roce_adp_retrans) {
        s.host_classes["sequence"].insert(q.host);
      }
      if (r.rcvd_rnr_err || r.rnr_nak_retry_err) s.host_classes["rnr"].insert(q.host);
      // The responder's RNR NAKs sent are left out: mlx5 has no such counter,
      // so the evidence shows RNR at the senders only.
      const auto& p = q.responder;
      if (p.out_of_sequence || p.duplicate_request) s.host_classes["sequence"].insert(q.peer_host);
    }
  }
  if (!swallowed && report.first_error_ns >= 0) {
    s.first_error_s = report.first_error_ns * 1e-9 + offset_s;
  }
  for (const auto& p : report.ports) {
    auto node = topology.FindNode(p.node);
    if (!node.ok() || p.index < 0 || p.index >= topology.PortCount(*node)) continue;
    int32_t link = topology.LinkAt(*node, p.index);
    if (p.counters.port_rcv_errors) AddLink(topology, link, "phy_errors", &s);
    if (p.counters.mtu_discards) AddLink(topology, link, "oversize", &s);
    if (p.counters.port_xmit_discards) AddLink(topology, link, "discards", &s);
  }
  for (const auto& [name, pfc] : report.port_pfc) {
    uint64_t pauses = 0;
    for (int i = 0; i < static_cast<int>(pfc.rx_pause.size()); ++i) {
      pauses += pfc.rx_pause[i] + pfc.tx_pause[i];
    }
    std::string a, b;
    if (pauses == 0 || !SplitArrow(name, &a, &b)) continue;
    AddLink(topology, ResolveLink(topology, name), "pause", &s);
  }
  for (const auto& f : report.fault_stats) {
    // The report's target reads "link SELECTOR" or "host NAME".
    std::string target = f.target;
    for (const char* prefix : {"link ", "host "}) {
      if (target.rfind(prefix, 0) == 0) target = target.substr(std::strlen(prefix));
    }
    auto links = topology.SelectLinks(target);
    if (!links.ok()) continue;
    const auto& c = f.counters;
    for (int32_t link : *links) {
      if (c.link_downed) AddLink(topology, link, "link_down", &s);
      if (c.fec_uncorrectable_blocks || c.symbol_error || c.port_rcv_errors) {
        AddLink(topology, link, "phy_errors", &s);
      }
      if (c.fec_corrected_blocks) AddLink(topology, link, "fec_corrected", &s);
      if (c.port_xmit_discards) AddLink(topology, link, "oversize", &s);
      // Corrupted frames fail the receiver's CRC (counted there); frames a
      // `loss` fault drops vanish without a counter, as the simulator has it.
      if (f.kind == "corrupt" && c.frames_corrupted) AddLink(topology, link, "phy_errors", &s);
    }
  }
  return s;
}

std::vector<Match> Compare(const Signature& ev, const Signature& sim,
                           const std::set<std::string>& observable, const Signature* baseline) {
  std::vector<Match> rows;
  auto add = [&](std::string what, std::string expected, std::string got, double weight,
                 double score) {
    rows.push_back(Match{std::move(what), std::move(expected), std::move(got), weight, score});
  };
  add("hosts with an error completion", Join(ev.error_hosts), Join(sim.error_hosts), 3,
      Jaccard(ev.error_hosts, sim.error_hosts));
  if (!ev.statuses.empty() || !sim.statuses.empty()) {
    add("error status", Join(ev.statuses), Join(sim.statuses), 2,
        Jaccard(ev.statuses, sim.statuses));
  }
  if (ev.first_error_s >= 0 && sim.first_error_s >= 0) {
    double tol = std::max(0.25 * ev.first_error_s, 0.05);
    double d = std::fabs(ev.first_error_s - sim.first_error_s);
    char e[32], g[32];
    std::snprintf(e, sizeof e, "%.3f s", ev.first_error_s);
    std::snprintf(g, sizeof g, "%.3f s", sim.first_error_s);
    add("first error time", e, g, 1, std::max(0.0, 1 - d / tol));
  }
  if (!ev.HasErrors() && (ev.HasStalls() || sim.HasStalls())) {
    add("stalled hosts", Join(ev.stalled_hosts), Join(sim.stalled_hosts), 3,
        Jaccard(ev.stalled_hosts, sim.stalled_hosts));
  }
  // Counter classes: what moves without any fault (the baseline run) is
  // background on both sides and left out; a simulated counter the evidence
  // could not have shown (not listed for that host or switch) is too.
  auto strip = [&](const std::string& c, const std::set<std::string>& set, bool host_scope,
                   bool simulated) {
    std::set<std::string> out;
    const auto* bg_map =
        baseline ? (host_scope ? &baseline->host_classes : &baseline->link_classes) : nullptr;
    const std::set<std::string>* bg = nullptr;
    if (bg_map) {
      auto it = bg_map->find(c);
      if (it != bg_map->end()) bg = &it->second;
    }
    for (const auto& x : set) {
      if (bg && bg->count(x)) continue;
      if (simulated && host_scope && !observable.count("host:" + c + "@" + x)) continue;
      if (simulated && !host_scope && !observable.count("link:" + c)) continue;
      out.insert(x);
    }
    return out;
  };
  auto classes = [&](const char* scope, const auto& e, const auto& g, double weight) {
    bool host_scope = std::string(scope) == "host";
    std::set<std::string> names;
    for (const auto& [c, set] : e) names.insert(c);
    for (const auto& [c, set] : g) names.insert(c);
    static const std::set<std::string> kEmpty;
    for (const auto& c : names) {
      auto ei = e.find(c);
      auto gi = g.find(c);
      std::set<std::string> es = strip(c, ei == e.end() ? kEmpty : ei->second, host_scope, false);
      std::set<std::string> gs = strip(c, gi == g.end() ? kEmpty : gi->second, host_scope, true);
      if (es.empty() && gs.empty()) continue;
      add(c + " counters on " + scope + "s", Join(es), Join(gs), weight, Jaccard(es, gs));
    }
  };
  classes("host", ev.host_classes, sim.host_classes, 1);
  classes("link", ev.link_classes, sim.link_classes, 1.5);
  return rows;
}

double WeightedScore(const std::vector<Match>& matches) {
  double w = 0, sum = 0;
  for (const auto& m : matches) {
    w += m.weight;
    sum += m.weight * m.score;
  }
  return w > 0 ? sum / w : 0;
}

bool ShowsSymptom(const Signature& ev, const Signature& sim, const Signature* baseline) {
  auto meets = [](const std::set<std::string>& a, const std::set<std::string>& b) {
    for (const auto& x : a) {
      if (b.count(x)) return true;
    }
    return false;
  };
  if (ev.HasErrors()) return meets(ev.error_hosts, sim.error_hosts);
  if (ev.HasStalls()) return meets(ev.stalled_hosts, sim.stalled_hosts);
  Signature e = baseline ? Residual(ev, *baseline) : ev;
  Signature g = baseline ? Residual(sim, *baseline) : sim;
  for (const auto* pair : {&e.link_classes, &e.host_classes}) {
    const auto& other = pair == &e.link_classes ? g.link_classes : g.host_classes;
    for (const auto& [c, set] : *pair) {
      auto it = other.find(c);
      if (it != other.end() && meets(set, it->second)) return true;
    }
  }
  return false;
}

Signature Residual(const Signature& s, const Signature& baseline) {
  Signature out = s;
  for (auto* pair : {&out.host_classes, &out.link_classes}) {
    const auto& bg = pair == &out.host_classes ? baseline.host_classes : baseline.link_classes;
    for (auto it = pair->begin(); it != pair->end();) {
      auto b = bg.find(it->first);
      if (b != bg.end()) {
        for (const auto& x : b->second) it->second.erase(x);
      }
      it = it->second.empty() ? pair->erase(it) : std::next(it);
    }
  }
  return out;
}

std::string SignatureToJson(const Signature& s) {
  nlohmann::json j;
  j["error_hosts"] = s.error_hosts;
  j["statuses"] = s.statuses;
  j["first_error_s"] = s.first_error_s;
  j["stalled_hosts"] = s.stalled_hosts;
  j["host_classes"] = s.host_classes;
  j["link_classes"] = s.link_classes;
  j["flows"] = {s.flows_completed, s.flows_failed, s.flows_stalled};
  j["completion_statuses"] = s.completion_statuses;
  j["simulated"] = s.simulated;
  return j.dump();
}

bool SignatureFromJson(const std::string& text, Signature* s) {
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return false;
  try {
    s->error_hosts = j.at("error_hosts").get<std::set<std::string>>();
    s->statuses = j.at("statuses").get<std::set<std::string>>();
    s->first_error_s = j.at("first_error_s").get<double>();
    s->stalled_hosts = j.at("stalled_hosts").get<std::set<std::string>>();
    s->host_classes = j.at("host_classes").get<std::map<std::string, std::set<std::string>>>();
    s->link_classes = j.at("link_classes").get<std::map<std::string, std::set<std::string>>>();
    auto flows = j.at("flows").get<std::vector<int>>();
    if (flows.size() != 3) return false;
    s->flows_completed = flows[0];
    s->flows_failed = flows[1];
    s->flows_stalled = flows[2];
    s->completion_statuses = j.at("completion_statuses").get<std::map<std::string, uint64_t>>();
    s->simulated = j.at("simulated").get<bool>();
  } catch (const nlohmann::json::exception&) {
    return false;
  }
  return true;
}

}  // namespace fathom::replay
