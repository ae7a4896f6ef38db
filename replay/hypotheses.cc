#include "replay/hypotheses.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>

#include "fabric/scenario/scenario.h"
#include "replay/signature.h"

namespace fathom::replay {
namespace {

// IBTA 9.7.6.1.3: the local ACK timeout is 4.096 us x 2^ib_timeout; a QP
// gives up after retry_cnt retries, i.e. retry_cnt + 1 timeouts
// (CASES.md "How long things take": NCCL_IB_TIMEOUT 20, 7 retries ~ 30 s).
double RetryBudgetS(int ib_timeout, int retry_cnt) {
  return 4.096e-6 * std::ldexp(1.0, ib_timeout) * (retry_cnt + 1);
}

std::string Fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string Lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The `topology:` body of a scenario from the evidence's topology: a preset
// name, a TopologySpec's YAML, or a whole scenario's YAML.
std::string TopologyBlock(const std::string& text) {
  if (text.find('\n') == std::string::npos) return "  preset: \"" + text + "\"\n";
  std::istringstream in(text);
  std::string line, block;
  bool in_topology = false, found = false;
  while (std::getline(in, line)) {
    if (line.rfind("topology:", 0) == 0) {
      in_topology = found = true;
      continue;
    }
    if (in_topology) {
      if (!line.empty() && line[0] != ' ' && line[0] != '#') {
        in_topology = false;
        continue;
      }
      block += line + "\n";
    }
  }
  if (found) return block;
  std::istringstream again(text);
  while (std::getline(again, line)) block += "  " + line + "\n";
  return block;
}

int32_t NodeId(const topo::Topology& t, const std::string& name) {
  auto id = t.FindNode(name);
  return id.ok() ? *id : -1;
}

// Every link on a shortest path from host a to host b, with 1 / the number
// of ECMP alternatives at its hop (how sure we are the flow crossed it).
std::map<int32_t, double> PathLinks(const topo::Topology& t, int32_t a, int32_t b) {
  std::map<int32_t, double> out;
  if (a < 0 || b < 0 || a == b) return out;
  std::set<int32_t> level = {a};
  for (int hop = 0; hop < 16 && !level.empty(); ++hop) {
    std::set<int32_t> links, next;
    for (int32_t node : level) {
      if (node == b) continue;
      for (int32_t port : t.NextHops(node, b)) {
        links.insert(t.LinkAt(node, port));
        next.insert(t.Peer(node, port).node);
      }
    }
    for (int32_t l : links) out[l] += 1.0 / static_cast<double>(links.size());
    level = std::move(next);
  }
  return out;
}

// A selector for a set of links: the one name, or a glob the topology
// resolves to exactly this set ("leaf0-spine*"); empty when there is none.
std::string Selector(const topo::Topology& t, const std::vector<int32_t>& links) {
  if (links.empty()) return "";
  if (links.size() == 1) return t.link(links[0]).name;
  std::set<int32_t> want(links.begin(), links.end());
  const topo::Link& first = t.link(links[0]);
  std::string lower = t.node(first.a).name, upper = t.node(first.b).name;
  std::string upper_kind = upper.substr(0, upper.find_first_of("0123456789"));
  for (const std::string& glob : {lower + "-" + upper_kind + "*", lower + "-*", "*-" + upper}) {
    auto got = t.SelectLinks(glob);
    if (got.ok() && std::set<int32_t>(got->begin(), got->end()) == want) return glob;
  }
  return "";
}

struct LinkEvidence {
  double first_down_s = -1, first_up_s = -1, last_up_s = -1;
  std::vector<double> downs;
  std::map<std::string, uint64_t> counters;  // class -> sum
  std::map<std::string, uint64_t> raw;       // counter name -> value
};

}  // namespace

StatusOr<World> BuildWorld(const Evidence& ev) {
  World w;
  // Every host name the evidence uses, in a stable order.
  std::vector<std::string> names;
  auto note_name = [&](const std::string& h) {
    if (!h.empty() && std::find(names.begin(), names.end(), h) == names.end()) names.push_back(h);
  };
  std::vector<RankInfo> ranks = ev.ranks;
  std::sort(ranks.begin(), ranks.end(), [](auto& a, auto& b) { return a.rank < b.rank; });
  for (const auto& r : ranks) note_name(r.host);
  for (const auto& [h, s] : ev.hosts) note_name(h);
  for (const auto& e : ev.errors) {
    note_name(e.host);
    note_name(e.peer_host);
  }
  for (const auto& e : ev.rank_events) note_name(e.host);
  for (const auto& n : ev.neighbors) note_name(n.host);

  if (!ev.topology.empty()) {
    w.topology_block = TopologyBlock(ev.topology);
    w.topology_source = ev.topology_path.empty() ? "topology " + ev.topology.substr(0, 40)
                                                 : "topology from " + ev.topology_path;
  } else {
    if (names.empty()) {
      return InvalidArgument(
          "replay: the evidence names no topology and no host to build a fabric");
    }
    int n = std::max<int>(2, static_cast<int>(names.size()));
    // One switch between the hosts, as the rxe testbed's host bridge.
    std::string preset = "leaf-spine:leaves=1,spines=1,hosts=" + std::to_string(n) + ",gpus=1";
    w.topology_block = "  preset: \"" + preset + "\"\n";
    w.topology_source = "assumed: " + preset;
    w.notes.push_back("no topology in the evidence: assumed one switch between its " +
                      std::to_string(n) + " hosts");
  }
  std::string probe = "name: replay-world\nend_time_us: 1\ntopology:\n" + w.topology_block +
                      "workload: {pattern: permutation, flow_bytes: 1}\n";
  auto loaded = sim::LoadScenarioString(probe, "evidence topology");
  if (!loaded.ok()) {
    return InvalidArgument("replay: the evidence's topology does not load: " +
                           loaded.status().message());
  }
  w.topology = std::move(loaded->topology);
  const topo::Topology& t = w.topology;

  // Evidence hosts -> topology hosts: same name, else the neighbour table
  // (the switch port the NIC is cabled to), else rank order.
  std::set<std::string> used;
  std::vector<std::string> unmapped;
  for (const auto& h : names) {
    int32_t id = NodeId(t, h);
    if (id >= 0 && t.node(id).kind == topo::NodeKind::kHost) {
      w.sim_host[h] = h;
      used.insert(h);
      continue;
    }
    bool done = false;
    for (const auto& n : ev.neighbors) {
      if (n.host != h) continue;
      int32_t sw = NodeId(t, n.switch_name);
      size_t digits = n.switch_port.find_first_of("0123456789");
      if (sw < 0 || digits == std::string::npos) continue;
      int port = std::atoi(n.switch_port.c_str() + digits);
      if (port < 0 || port >= t.PortCount(sw)) continue;
      auto peer = t.Peer(sw, port);
      if (peer.node >= 0 && t.node(peer.node).kind == topo::NodeKind::kHost &&
          !used.count(t.node(peer.node).name)) {
        w.sim_host[h] = t.node(peer.node).name;
        used.insert(w.sim_host[h]);
        done = true;
        break;
      }
    }
    if (!done) unmapped.push_back(h);
  }
  if (!unmapped.empty()) {
    size_t next = 0;
    for (const auto& h : unmapped) {
      while (next < t.hosts().size() && used.count(t.node(t.hosts()[next]).name)) ++next;
      if (next == t.hosts().size()) break;
      w.sim_host[h] = t.node(t.hosts()[next]).name;
      used.insert(w.sim_host[h]);
    }
    w.notes.push_back(std::to_string(unmapped.size()) +
                      " host(s) not named in the topology or the neighbour table were placed in "
                      "rank order (first: " +
                      unmapped[0] + " -> " +
                      (w.sim_host.count(unmapped[0]) ? w.sim_host[unmapped[0]] : "none") + ")");
  }
  for (const auto& [e, s] : w.sim_host) w.evidence_host[s] = e;

  // The job's traffic: the ring, then every pair an error names.
  std::map<int, std::string> rank_host;
  for (const auto& r : ranks) {
    if (w.sim_host.count(r.host)) rank_host[r.rank] = w.sim_host[r.host];
  }
  std::vector<std::string> ring;
  for (int r : ev.library.ring) {
    if (rank_host.count(r)) ring.push_back(rank_host[r]);
  }
  if (ring.size() < 2) {
    ring.clear();
    for (const auto& [r, h] : rank_host) ring.push_back(h);
  }
  if (ring.size() < 2) {
    ring.clear();
    for (const auto& h : names) {
      if (w.sim_host.count(h)) ring.push_back(w.sim_host[h]);
    }
  }
  if (ring.size() < 2) {
    ring.clear();
    for (int32_t id : t.hosts()) ring.push_back(t.node(id).name);
    w.notes.push_back(
        "no ranks in the evidence: the job's traffic is assumed a ring over every host");
  }
  std::set<std::pair<std::string, std::string>> seen;
  auto add_flow = [&](const std::string& a, const std::string& b) {
    if (a.empty() || b.empty() || a == b || seen.count({a, b})) return;
    seen.insert({a, b});
    w.flows.emplace_back(a, b);
  };
  // Servers with several NICs: NCCL's rings cross servers on each rail, so
  // the network carries NIC g of server s -> NIC g of the next server in
  // ring order (consecutive ranks on one server talk over NVLink); one NIC
  // per server: the ranks' ring itself.
  std::vector<int32_t> server_order;
  std::map<int32_t, std::map<int32_t, std::string>> by_server;  // server -> gpu -> host
  for (const auto& h : ring) {
    const topo::Node& n = t.node(NodeId(t, h));
    if (!by_server.count(n.server)) server_order.push_back(n.server);
    by_server[n.server][n.gpu] = h;
  }
  bool rails = server_order.size() > 1;
  for (const auto& [srv, gpus] : by_server) rails = rails && gpus.size() > 1;
  if (rails) {
    for (size_t i = 0; i < server_order.size(); ++i) {
      const auto& from = by_server[server_order[i]];
      const auto& to = by_server[server_order[(i + 1) % server_order.size()]];
      for (const auto& [g, h] : from) {
        auto it = to.find(g);
        if (it != to.end()) add_flow(h, it->second);
      }
    }
    w.notes.push_back(
        "traffic: NCCL's ring on each rail, NIC g of each server to NIC g of the next");
  } else {
    for (size_t i = 0; i < ring.size(); ++i) add_flow(ring[i], ring[(i + 1) % ring.size()]);
  }
  for (const auto& e : ev.errors) {
    if (e.peer_host.empty() || !w.sim_host.count(e.host) || !w.sim_host.count(e.peer_host))
      continue;
    const std::string& a = w.sim_host[e.host];
    const std::string& b = w.sim_host[e.peer_host];
    if (!seen.count({a, b}) && !seen.count({b, a})) add_flow(a, b);
  }

  const auto& lib = ev.library;
  if (lib.ib_timeout) {
    w.ib_timeout = *lib.ib_timeout;
  } else {
    w.notes.push_back("NCCL_IB_TIMEOUT not in the evidence: NCCL's default 20");
  }
  if (lib.ib_retry_cnt) {
    w.retry_cnt = *lib.ib_retry_cnt;
  } else {
    w.notes.push_back("NCCL_IB_RETRY_CNT not in the evidence: NCCL's default 7");
  }
  w.retry_budget_s = RetryBudgetS(w.ib_timeout, w.retry_cnt);
  if (lib.ib_tc) w.traffic_class = *lib.ib_tc;
  // The hosts' link rate, and the bytes each flow carried: the median of the
  // hosts' transmitted bytes over the flows each sends.
  if (!t.hosts().empty() && t.PortCount(t.hosts()[0]) > 0) {
    w.host_rate_gbps = static_cast<double>(t.link(t.LinkAt(t.hosts()[0], 0)).rate.bps()) / 1e9;
  }
  std::map<std::string, int> sends;
  for (const auto& [a, b2] : w.flows) sends[a]++;
  std::vector<uint64_t> per_flow;
  for (const auto& [name, h] : ev.hosts) {
    auto it = h.ethtool.find("tx_bytes_phy");
    if (it == h.ethtool.end()) it = h.ethtool.find("tx_bytes");
    auto host = w.sim_host.find(name);
    if (it == h.ethtool.end() || host == w.sim_host.end() || !sends.count(host->second)) continue;
    per_flow.push_back(it->second / static_cast<uint64_t>(sends[host->second]));
  }
  if (!per_flow.empty()) {
    std::sort(per_flow.begin(), per_flow.end());
    w.flow_bytes = std::clamp<uint64_t>(per_flow[per_flow.size() / 2], 64u << 10, 64u << 20);
    // The wire's bytes carry headers (and any retransmissions): a power of
    // two within 10% below them is the likelier message size.
    uint64_t pow2 = uint64_t{1} << (63 - std::countl_zero(w.flow_bytes));
    if (w.flow_bytes - pow2 <= w.flow_bytes / 10) w.flow_bytes = pow2;
    w.notes.push_back("each flow carries " + std::to_string(w.flow_bytes) +
                      " bytes (the hosts' median tx_bytes_phy, clamped to 64 KiB..64 MiB)");
  } else {
    w.notes.push_back("no transmitted-byte counter: each flow carries 8 MiB");
  }
  bool rxe = false;
  std::optional<int> min_active;
  for (const auto& [name, h] : ev.hosts) {
    if (h.driver == "rxe") rxe = true;
    if (h.active_mtu && (!min_active || *h.active_mtu < *min_active)) min_active = h.active_mtu;
    for (const auto& [c, v] : h.ethtool) {
      if (v > 0 && CounterClass(c) == "pause") w.lossless = true;
    }
  }
  for (const auto& c : ev.switch_counters) {
    if (c.value > 0 && CounterClass(c.counter) == "pause") w.lossless = true;
    if (c.value > 0 && Lower(c.counter).find("wd") != std::string::npos) w.pfc_watchdog = true;
  }
  if (w.lossless)
    w.notes.push_back("pause counters moved: the RoCE class is lossless (PFC, priority 3)");
  if (rxe && w.retry_cnt == 7) {
    // rxe treats retry_cnt 7 as "retry forever" (scenarios/faults/mtu_mismatch_rxe.yaml).
    w.rxe_infinite_retry = true;
    w.notes.push_back("rxe with retry_cnt 7: the QPs retry forever (a silent hang, no error 12)");
  }
  // active_mtu is the QPs' path MTU when every node shows the same one;
  // a smaller one on some node is a hypothesis, not the world.
  std::set<int> actives;
  for (const auto& [name, h] : ev.hosts) {
    if (h.active_mtu) actives.insert(*h.active_mtu);
  }
  if (!actives.empty()) w.path_mtu = *actives.rbegin();
  (void)min_active;
  return w;
}

namespace {

// Everything FormHypotheses works from.
struct Facts {
  const Evidence& ev;
  const World& w;
  Signature sig;
  std::map<int32_t, LinkEvidence> links;                              // by topology link id
  std::map<std::string, std::map<std::string, uint64_t>> host_class;  // host -> class -> sum
  std::map<int32_t, double> path_score;  // link -> how much symptom flows share it
  std::string focus_host;                // the host most errors/stalls name
  double t_symptom = -1;                 // first error, else first stall
};

int32_t HostLink(const topo::Topology& t, const std::string& host) {
  int32_t id = NodeId(t, host);
  if (id < 0 || t.PortCount(id) == 0) return -1;
  return t.LinkAt(id, 0);
}

Facts Gather(const Evidence& ev, const World& w) {
  Facts f{ev, w, {}, {}, {}, {}, {}, -1};
  const auto& t = w.topology;
  f.sig = EvidenceSignature(ev, w, nullptr);
  for (const auto& e : ev.link_events) {
    int32_t l = ResolveLink(t, e.link);
    if (l < 0) continue;
    auto& le = f.links[l];
    if (!e.up) {
      le.downs.push_back(e.time_s);
      if (le.first_down_s < 0 || e.time_s < le.first_down_s) le.first_down_s = e.time_s;
    } else {
      if (le.first_up_s < 0 || e.time_s < le.first_up_s) le.first_up_s = e.time_s;
      le.last_up_s = std::max(le.last_up_s, e.time_s);
    }
  }
  for (const auto& c : ev.switch_counters) {
    int32_t l = ResolveLink(t, c.port);
    std::string cls = CounterClass(c.counter);
    if (l < 0 || cls.empty() || c.value == 0) continue;
    f.links[l].counters[cls] += c.value;
    f.links[l].raw[Lower(c.counter)] += c.value;
  }
  for (const auto& [name, h] : ev.hosts) {
    auto it = w.sim_host.find(name);
    std::string host = it == w.sim_host.end() ? name : it->second;
    for (const auto* m : {&h.rdma_counters, &h.ethtool}) {
      for (const auto& [c, v] : *m) {
        std::string cls = CounterClass(c);
        if (!cls.empty() && v > 0) f.host_class[host][cls] += v;
      }
    }
  }
  // Links the symptom's flows share and healthy flows do not.
  std::set<std::string> sick = f.sig.HasErrors() ? f.sig.error_hosts : f.sig.stalled_hosts;
  if (sick.empty()) {
    // Counters only: the hosts that retransmitted most (background
    // congestion moves the same counters a little everywhere).
    std::map<std::string, uint64_t> load;
    uint64_t most = 0;
    for (const auto& [h, classes] : f.host_class) {
      for (const char* cls : {"timeouts", "sequence", "phy_errors"}) {
        auto it = classes.find(cls);
        if (it != classes.end()) load[h] += it->second;
      }
      most = std::max(most, load[h]);
    }
    for (const auto& [h, n] : load) {
      if (most > 0 && n * 2 >= most) sick.insert(h);
    }
  }
  std::map<std::string, int> mentions;
  for (const auto& e : ev.errors) {
    if (StatusName(e.status_code) == "IBV_WC_WR_FLUSH_ERR") continue;
    auto it = w.sim_host.find(e.host);
    if (it != w.sim_host.end()) mentions[it->second] += 2;
    auto p = w.sim_host.find(e.peer_host);
    if (p != w.sim_host.end()) mentions[p->second] += 1;
  }
  for (const auto& h : f.sig.stalled_hosts) mentions[h] += 1;
  int best = 0;
  for (const auto& [h, n] : mentions) {
    if (n > best) best = n, f.focus_host = h;
  }
  if (!f.sig.HasErrors() && !f.sig.HasStalls()) {
    // Counters only: weigh each flow by what its ends counted — the
    // receiver's out-of-sequence / duplicate packets and the sender's NAKs
    // and timeouts (split over their flows) — and its path's links by that.
    std::map<std::string, double> recv, send;
    std::map<std::string, int> n_in, n_out;
    for (const auto& [a, b] : w.flows) n_out[a]++, n_in[b]++;
    for (const auto& [name, h] : ev.hosts) {
      auto it = w.sim_host.find(name);
      if (it == w.sim_host.end()) continue;
      for (const auto& [c, v] : h.rdma_counters) {
        std::string l = Lower(c), cls = CounterClass(c);
        if (l.find("out_of_seq") != std::string::npos || l.find("duplicate") != std::string::npos) {
          recv[it->second] += static_cast<double>(v);
        } else if (cls == "sequence" || cls == "timeouts") {
          send[it->second] += static_cast<double>(v);
        }
      }
    }
    double most = 0;
    for (const auto& [a, b] : w.flows) {
      double weight = (n_in[b] ? recv[b] / n_in[b] : 0) + (n_out[a] ? send[a] / n_out[a] : 0);
      if (weight <= 0) continue;
      for (const auto& [l, wgt] : PathLinks(t, NodeId(t, a), NodeId(t, b))) {
        most = std::max(most, f.path_score[l] += weight * wgt);
      }
    }
    if (most > 0) {
      for (auto& [l, v] : f.path_score) v /= most;
    }
  }
  if (f.path_score.empty()) {
    for (const auto& [a, b] : w.flows) {
      bool symptom = sick.count(a) && sick.count(b);
      if (!symptom && (sick.count(a) || sick.count(b)) && sick.size() == 1) symptom = true;
      auto links = PathLinks(t, NodeId(t, a), NodeId(t, b));
      for (const auto& [l, wgt] : links) f.path_score[l] += symptom ? wgt : -wgt;
    }
  }
  f.t_symptom = f.sig.first_error_s;
  if (f.t_symptom < 0) {
    for (const auto& e : ev.rank_events) {
      if ((e.kind == "stall" || e.kind == "timeout") && e.time_s >= 0 &&
          (f.t_symptom < 0 || e.time_s < f.t_symptom)) {
        f.t_symptom = e.time_s;
      }
    }
  }
  return f;
}

// The best path-based suspects: groups of equally suspect ECMP alternatives
// (expressible as one selector) or single links, best first.
std::vector<std::vector<int32_t>> PathSuspects(const Facts& f, size_t count) {
  std::vector<std::pair<double, int32_t>> order;
  for (const auto& [l, s] : f.path_score) {
    if (s > 1e-9) order.emplace_back(s, l);
  }
  std::sort(order.begin(), order.end(), [](auto& a, auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  std::vector<std::vector<int32_t>> out;
  std::set<int32_t> taken;
  const auto& t = f.w.topology;
  for (const auto& [s, l] : order) {
    if (out.size() == count) break;
    if (taken.count(l)) continue;
    // Its ECMP alternatives: same score, same lower node, same tier.
    std::vector<int32_t> group;
    for (const auto& [s2, l2] : order) {
      if (std::fabs(s2 - s) < 1e-9 && t.link(l2).a == t.link(l).a &&
          t.link(l2).tier == t.link(l).tier) {
        group.push_back(l2);
      }
    }
    for (int32_t g : group) taken.insert(g);
    if (group.size() > 1 && Selector(t, group).empty()) group = {l};
    out.push_back(group);
  }
  return out;
}

struct Builder {
  const Facts& f;
  std::vector<Candidate> out;
  std::set<std::string> keys;

  double Budget() const { return f.w.retry_budget_s; }
  // Evidence time of the fault from the first error: one retry budget before it.
  double FaultAtFromError() const {
    return f.sig.first_error_s >= 0 ? std::max(0.0, f.sig.first_error_s - Budget()) : -1;
  }
  double TransferS() const {
    return static_cast<double>(f.w.flow_bytes) * 8 / (f.w.host_rate_gbps * 1e9);
  }

  Candidate& Add(const std::string& kind, const std::string& target, const std::string& summary) {
    Candidate c;
    c.hypothesis.kind = kind;
    c.hypothesis.target = target;
    c.hypothesis.summary = summary;
    out.push_back(std::move(c));
    keys.insert(kind + "|" + target);
    return out.back();
  }
  bool Has(const std::string& kind, const std::string& target) const {
    return keys.count(kind + "|" + target) > 0;
  }

  static Element Fault(const std::string& label, const std::string& yaml) {
    Element e;
    e.type = Element::Type::kFault;
    e.label = label;
    e.yaml = yaml;
    return e;
  }

  // The fault at `at_s` (evidence time = simulated time); the flows start at
  // 0, or — when the evidence shows traffic was live at the fault (errors,
  // stalls) — half a transfer before it; the run lasts until a retry budget
  // after the fault's window has expired. Call before building the faults.
  void Time(Candidate& c, double at_s, double window_s) {
    double at = std::max(at_s, 0.0);
    c.plan.fault_at_us = at * 1e6;
    bool live = f.sig.HasErrors() || f.sig.HasStalls();
    double start = live ? std::max(0.0, at - TransferS() / 2) : 0;
    c.plan.flows_start_us = start * 1e6;
    double window = std::min(std::max(window_s, 0.0), 3 * Budget());
    double end = std::max(at + window + 1.5 * Budget(), start + 2 * TransferS()) + 0.005;
    c.plan.end_us = end * 1e6;
    if (at_s >= 0) c.hypothesis.params["at_s"] = Fmt("%.6f", at);
  }
  std::string StartUs(const Candidate& c) const { return Fmt("%.3f", c.plan.fault_at_us); }

  void For(Candidate& c, double weight, std::string why) {
    c.prior += weight;
    c.evidence_for.push_back(std::move(why));
  }
  void Against(Candidate& c, double weight, std::string why) {
    c.prior -= weight;
    c.evidence_against.push_back(std::move(why));
  }

  // Support every link-fault kind shares: errors 12, and the symptom flows' paths.
  void Common(Candidate& c, const std::vector<int32_t>& links, bool fails) {
    const auto& sig = f.sig;
    if (fails) {
      if (sig.statuses.count("IBV_WC_RETRY_EXC_ERR")) {
        For(c, 1,
            "IBV_WC_RETRY_EXC_ERR (12): packets on the path went unanswered for the retry budget");
      } else if (sig.HasErrors()) {
        Against(c, 1, "the errors are not retry-exceeded (12): " + *sig.statuses.begin());
      }
    } else if (sig.HasErrors()) {
      Against(c, 1.5, "completion errors: this fault alone is retried away");
    }
    double best = 0;
    for (int32_t l : links) {
      auto it = f.path_score.find(l);
      if (it != f.path_score.end()) best = std::max(best, it->second);
    }
    if (best > 0) For(c, std::min(1.0, best), "on the paths of the affected ranks' flows");
  }

  std::vector<int32_t> Resolve(const std::string& selector) const {
    auto got = f.w.topology.SelectLinks(selector);
    return got.ok() ? *got : std::vector<int32_t>{};
  }

  void LinkDown(const std::string& sel, double at_s, double duration_s, const std::string& source) {
    if (Has("link_down", sel)) return;
    auto& c =
        Add("link_down", sel,
            "link " + sel + " down longer than the retry budget (" + Fmt("%.3f", Budget()) + " s)");
    Time(c, at_s, duration_s > 0 ? duration_s : 2 * Budget());
    std::string yaml = "{kind: link_down, link: \"" + sel + "\", start_us: " + StartUs(c);
    if (duration_s > 0) yaml += ", duration_us: " + Fmt("%.3f", duration_s * 1e6);
    yaml += "}";
    c.plan.elements.push_back(Fault("link_down on " + sel, yaml));
    if (duration_s > 0) c.hypothesis.params["duration_s"] = Fmt("%.6f", duration_s);
    c.hypothesis.params["retry_budget_s"] = Fmt("%.6f", Budget());
    c.hypothesis.params["fitted_from"] = source;
    auto links = Resolve(sel);
    bool events = false, short_down = false;
    for (int32_t l : links) {
      auto it = f.links.find(l);
      if (it == f.links.end()) continue;
      if (it->second.first_down_s >= 0) {
        events = true;
        double d =
            it->second.first_up_s >= 0 ? it->second.first_up_s - it->second.first_down_s : -1;
        if (d >= 0 && d < Budget()) short_down = true;
      }
      if (it->second.counters.count("link_down")) {
        For(c, 1.5, "the switch counts link_downed on " + f.w.topology.link(l).name);
      }
    }
    if (events && !short_down)
      For(c, 2.5, "link events: " + sel + " went down and stayed down past the budget");
    if (short_down) Against(c, 2, "link events: " + sel + " came back within the retry budget");
    if (!events && !f.ev.link_events.empty()) Against(c, 1, "the link events do not name " + sel);
    Common(c, links, !f.w.rxe_infinite_retry);
  }

  void LinkFlap(const std::string& sel, double at_s, double down_s, double period_s,
                double until_s) {
    if (Has("link_flap", sel)) return;
    auto& c = Add("link_flap", sel,
                  "link " + sel + " flapping, each outage shorter than the retry budget");
    Time(c, at_s, std::max(down_s, until_s > at_s ? until_s - at_s : 0));
    std::string yaml = "{kind: link_flap, link: \"" + sel + "\", start_us: " + StartUs(c) +
                       ", duration_us: " + Fmt("%.3f", down_s * 1e6);
    if (period_s > down_s) {
      yaml += ", period_us: " + Fmt("%.3f", period_s * 1e6);
      if (until_s > at_s) yaml += ", until_us: " + Fmt("%.3f", until_s * 1e6);
      c.hypothesis.params["period_s"] = Fmt("%.6f", period_s);
    } else {
      // One outage: a period past the run's end.
      yaml += ", period_us: " + Fmt("%.3f", c.plan.end_us + 1e6);
    }
    yaml += "}";
    c.plan.elements.push_back(Fault("link_flap on " + sel, yaml));
    c.hypothesis.params["down_s"] = Fmt("%.6f", down_s);
    auto links = Resolve(sel);
    bool events = false;
    int downs = 0;
    for (int32_t l : links) {
      auto it = f.links.find(l);
      if (it == f.links.end()) continue;
      downs += static_cast<int>(it->second.downs.size());
      if (it->second.first_down_s >= 0 && it->second.first_up_s >= 0 &&
          it->second.first_up_s - it->second.first_down_s < Budget()) {
        events = true;
      }
    }
    if (events)
      For(c, 2.5, "link events: " + sel + " went down and came back within the retry budget");
    if (downs > static_cast<int>(links.size()))
      For(c, 1, "it went down " + std::to_string(downs) + " times");
    if (!events && !f.ev.link_events.empty())
      Against(c, 1, "the link events show no short outage of " + sel);
    if (f.sig.host_classes.count("sequence") || f.sig.host_classes.count("timeouts")) {
      For(c, 0.5, "retransmission / timeout counters moved");
    }
    Common(c, links, false);
  }

  void Mtu(const std::string& sel, int mtu, const std::string& why, double weight) {
    if (Has("mtu_mismatch", sel)) return;
    auto& c = Add("mtu_mismatch", sel,
                  "MTU " + std::to_string(mtu) + " on " + sel +
                      " below the QPs' path MTU: full-size frames dropped");
    // Present from before the traffic that hit it: at the fault time the
    // first error implies, else from the start.
    Time(c, FaultAtFromError(), 0);
    c.plan.elements.push_back(Fault("mtu " + std::to_string(mtu) + " on " + sel,
                                    "{kind: mtu, link: \"" + sel + "\", mtu_bytes: " +
                                        std::to_string(mtu) + ", start_us: " + StartUs(c) + "}"));
    c.hypothesis.params["mtu_bytes"] = std::to_string(mtu);
    if (!why.empty()) For(c, weight, why);
    auto links = Resolve(sel);
    bool counted = false;
    for (int32_t l : links) {
      auto it = f.links.find(l);
      if (it != f.links.end() && it->second.counters.count("oversize")) counted = true;
    }
    if (counted) For(c, 2, "the switch counts oversize / MTU discards on " + sel);
    if (f.sig.statuses.count("IBV_WC_LOC_LEN_ERR") || f.sig.statuses.count("IBV_WC_LOC_PROT_ERR")) {
      For(c, 1.5,
          "a local length/protection error: the two ends disagree on the MTU (CASES.md 1-2)");
    }
    Common(c, links, !f.w.rxe_infinite_retry);
  }

  // A lossy link: CRC-failing frames (`corrupt`, counted as receive errors)
  // when the evidence counts them, else frames that vanish (`loss`).
  void Loss(const std::string& sel, double rate, const std::string& why, bool crc) {
    if (Has("lossy_link", sel)) return;
    auto& c = Add("lossy_link", sel,
                  "link " + sel + " loses " + Fmt("%.2g", rate * 100) + "% of its frames");
    Time(c, FaultAtFromError(), 0);
    c.plan.elements.push_back(Fault((crc ? "corruption on " : "loss on ") + sel,
                                    std::string("{kind: ") + (crc ? "corrupt" : "loss") +
                                        ", link: \"" + sel + "\", rate: " + Fmt("%.6g", rate) +
                                        ", start_us: " + StartUs(c) + "}"));
    c.hypothesis.params["rate"] = Fmt("%.6g", rate);
    if (!why.empty()) For(c, 2, why);
    if (f.sig.host_classes.count("sequence") || f.sig.host_classes.count("timeouts")) {
      For(c, 0.5, "retransmission / timeout counters moved");
    }
    Common(c, Resolve(sel), rate >= 0.2);
  }

  void Fec(const std::string& sel, const std::string& why) {
    if (Has("fec_past_limit", sel)) return;
    auto& c = Add("fec_past_limit", sel,
                  "link " + sel + " past its FEC's limit (pre-FEC BER 4e-3 on RS(544,514))");
    Time(c, FaultAtFromError(), 0);
    // CASES.md 18: past about 2.4e-4 pre-FEC BER KP4 stops correcting.
    c.plan.elements.push_back(
        Fault("fec past limit on " + sel,
              "{kind: fec, link: \"" + sel +
                  "\", fec_mode: kp4, pre_fec_ber: 4e-3, start_us: " + StartUs(c) + "}"));
    c.hypothesis.params["pre_fec_ber"] = "4e-3";
    if (!why.empty()) For(c, 3, why);
    Common(c, Resolve(sel), true);
  }

  void Gid(const std::string& host, const std::string& why) {
    if (Has("gid_misconfig", host)) return;
    auto& c = Add("gid_misconfig", host,
                  host + " uses a GID that does not route across the fabric (CASES.md 5)");
    Time(c, FaultAtFromError(), 0);
    c.plan.elements.push_back(
        Fault("unroutable GID on " + host,
              "{kind: black_hole, host: \"" + host + "\", start_us: " + StartUs(c) + "}"));
    if (!why.empty()) For(c, 3, why);
    if (f.sig.first_error_s >= 0 && f.sig.first_error_s <= 1.25 * Budget() + 1) {
      For(c, 1,
          "the first error came one retry budget after the job started: no traffic ever got "
          "through");
    } else if (f.sig.first_error_s >= 0) {
      Against(c, 1,
              "the job ran for " + Fmt("%.1f", f.sig.first_error_s) + " s before the first error");
    }
    Common(c, {HostLink(f.w.topology, host)}, !f.w.rxe_infinite_retry);
  }

  // RNR: `host` posts no receive from at_s for window_s (rnr_retry 7 retries
  // forever, so the window ends), or never (a finite rnr_retry ran out).
  void Rnr(const std::string& host, int rnr_retry, double at_s, double window_s,
           const std::string& why) {
    if (Has("rnr", host)) return;
    auto& c = Add("rnr", host, host + " posts no receive buffers: SENDs to it meet RNR NAKs");
    Time(c, at_s, window_s);
    c.plan.send_opcode = true;
    c.plan.rnr_retry = rnr_retry;
    Element e;
    e.type = Element::Type::kNoReceive;
    e.label = "no receives posted on " + host;
    e.host = host;
    if (rnr_retry == 7) {
      e.yaml = "{host: " + host + ", from_us: " + StartUs(c) +
               ", to_us: " + Fmt("%.3f", c.plan.fault_at_us + window_s * 1e6) + "}";
      c.hypothesis.params["window_s"] = Fmt("%.6f", window_s);
    }
    c.plan.elements.push_back(e);
    c.hypothesis.params["rnr_retry"] = std::to_string(rnr_retry);
    if (!why.empty()) For(c, 3, why);
    if (f.sig.statuses.count("IBV_WC_RETRY_EXC_ERR"))
      Against(c, 1.5, "error 12 is a transport timeout, not RNR (13)");
  }

  void PfcStorm(const std::string& host, double at_s, double duration_s, const std::string& why,
                double weight) {
    if (Has("pfc_storm", host)) return;
    auto& c =
        Add("pfc_storm", host, host + "'s NIC pauses the lossless class without end (CASES.md 16)");
    Time(c, at_s, duration_s);
    std::string yaml =
        "{kind: pfc_storm, host: \"" + host + "\", priority: 3, start_us: " + StartUs(c);
    if (duration_s > 0) {
      yaml += ", duration_us: " + Fmt("%.3f", duration_s * 1e6);
      c.hypothesis.params["duration_s"] = Fmt("%.6f", duration_s);
    }
    c.plan.elements.push_back(Fault("pfc_storm from " + host, yaml + "}"));
    if (!why.empty()) For(c, weight, why);
    if (!f.w.lossless) Against(c, 1, "no pause counter moved anywhere");
    if (f.sig.HasStalls() && !f.sig.HasErrors())
      For(c, 1, "ranks stalled without an error (paused, not lost)");
  }

  void Swallowed(const std::string& sel, const std::string& why) {
    if (Has("swallowed_error", sel)) return;
    auto& c =
        Add("swallowed_error", sel,
            "a completion error on " + sel + "'s flows never reached the library (CASES.md 20)");
    c.plan.swallowed = true;
    Time(c, f.t_symptom >= 0 ? std::max(0.0, f.t_symptom - Budget()) : 0, 0);
    c.plan.elements.push_back(
        Fault("black hole on " + sel,
              "{kind: black_hole, link: \"" + sel + "\", start_us: " + StartUs(c) + "}"));
    if (!why.empty()) For(c, 2, why);
    if (f.sig.HasErrors()) Against(c, 2, "errors did reach the library's log");
    if (f.sig.host_classes.count("timeouts"))
      For(c, 1, "local ACK timeouts counted: the QPs retried and gave up");
  }

  void Congestion(const std::string& host, const std::string& why) {
    if (Has("congestion", host)) return;
    auto& c = Add("congestion", host, "incast toward " + host + " overflows the switch buffers");
    Time(c, f.t_symptom >= 0 ? std::max(0.0, f.t_symptom - (f.sig.HasErrors() ? Budget() : 0)) : 0,
         0.01);
    Element e;
    e.type = Element::Type::kBackground;
    e.label = "background incast toward " + host;
    const auto& t = f.w.topology;
    int32_t dst = NodeId(t, host);
    for (int32_t id : t.hosts()) {
      if (e.flows.size() == 8) break;
      if (id != dst && t.HopCount(id, dst) > 2) e.flows.emplace_back(t.node(id).name, host);
    }
    for (int32_t id : t.hosts()) {
      if (e.flows.size() == 8) break;
      if (id != dst && t.HopCount(id, dst) <= 2) e.flows.emplace_back(t.node(id).name, host);
    }
    c.plan.elements.push_back(e);
    c.hypothesis.params["senders"] = std::to_string(e.flows.size());
    if (!why.empty()) For(c, 2, why);
    if (f.sig.statuses.count("IBV_WC_RETRY_EXC_ERR")) {
      Against(c, 1,
              "congestion drops are retried away unless the retry budget is tiny (CASES.md 12)");
    }
  }
};

std::string LinkName(const Facts& f, int32_t l) { return f.w.topology.link(l).name; }

}  // namespace

std::vector<Candidate> FormHypotheses(const Evidence& ev, const World& w) {
  Facts f = Gather(ev, w);
  Builder b{f, {}, {}};
  const auto& t = w.topology;
  const double budget = w.retry_budget_s;
  const bool errors = f.sig.HasErrors();
  const bool stalls = f.sig.HasStalls();

  // 1. Link events: outages grouped by when they began (one fault per group).
  std::map<long, std::vector<int32_t>> by_start;  // ms bucket -> links
  for (const auto& [l, le] : f.links) {
    if (le.first_down_s >= 0) by_start[std::lround(le.first_down_s * 1000)].push_back(l);
  }
  for (const auto& [ms, links] : by_start) {
    const auto& le = f.links.at(links[0]);
    std::string sel = Selector(t, links);
    std::vector<std::string> sels;
    if (!sel.empty()) {
      sels.push_back(sel);
    } else {
      for (int32_t l : links) sels.push_back(LinkName(f, l));
    }
    double down = le.first_up_s >= 0 ? le.first_up_s - le.first_down_s : -1;
    for (const auto& s : sels) {
      if (down >= 0 && down < budget) {
        double period = le.downs.size() > 1 ? le.downs[1] - le.downs[0] : 0;
        b.LinkFlap(s, le.first_down_s, down, period, le.last_up_s);
      } else {
        b.LinkDown(s, le.first_down_s, down, "link events");
      }
      if (sels.size() > 4) break;
    }
  }
  // 2. Switch counters naming links.
  for (const auto& [l, le] : f.links) {
    std::string name = LinkName(f, l);
    for (const auto& [cls, v] : le.counters) {
      if (cls == "oversize") {
        int mtu = 1500;
        for (const auto& [h, s] : ev.hosts) {
          if (s.netdev_mtu && *s.netdev_mtu < mtu) mtu = *s.netdev_mtu;
        }
        b.Mtu(name, mtu, "", 0);
      } else if (cls == "phy_errors") {
        bool fec = false;
        for (const auto& [raw, n] : le.raw) {
          if (raw.find("uncorrect") != std::string::npos || raw.find("symbol") != std::string::npos)
            fec = true;
        }
        if (fec) b.Fec(name, "uncorrectable FEC / symbol errors on " + name + " (CASES.md 11, 18)");
        // The fraction of frames lost, where the counters allow.
        double rate = 0.01;
        uint64_t pkts = 0;
        for (const auto& [raw, n] : le.raw) {
          if (raw.find("rcv_packets") != std::string::npos ||
              raw.find("rcvpkts") != std::string::npos)
            pkts += n;
        }
        if (pkts > 0)
          rate = std::clamp(static_cast<double>(v) / static_cast<double>(pkts), 1e-4, 0.5);
        b.Loss(name, rate, "receive errors (bad CRC/ICRC) on " + name, true);
      } else if (cls == "link_down" && le.first_down_s < 0) {
        b.LinkDown(name, b.FaultAtFromError(), -1, "link_downed counter");
        b.LinkFlap(name, b.FaultAtFromError(), std::min(0.002, budget / 8), 0, -1);
      } else if (cls == "discards") {
        int32_t host_end = t.node(t.link(l).a).kind == topo::NodeKind::kHost ? t.link(l).a : -1;
        std::string h = host_end >= 0 ? t.node(host_end).name : f.focus_host;
        if (!h.empty())
          b.Congestion(h, "the switch discards on " + name + " (congestion drops, CASES.md 11)");
      }
    }
  }
  // 3. Hosts: MTUs, their own counters, GIDs.
  int max_mtu = 0;
  for (const auto& [h, s] : ev.hosts) {
    if (s.netdev_mtu) max_mtu = std::max(max_mtu, *s.netdev_mtu);
  }
  int max_active = 0;
  for (const auto& [h, s] : ev.hosts) {
    if (s.active_mtu) max_active = std::max(max_active, *s.active_mtu);
  }
  std::map<std::string, uint64_t> tx_pause;
  std::map<std::string, double> pause_dur, rnr_window;
  std::map<std::string, int> rnr_votes;
  for (const auto& [name, s] : ev.hosts) {
    auto it = w.sim_host.find(name);
    if (it == w.sim_host.end()) continue;
    const std::string& host = it->second;
    int32_t hl = HostLink(t, host);
    std::string link = hl >= 0 ? LinkName(f, hl) : host;
    if (s.netdev_mtu && *s.netdev_mtu < max_mtu) {
      b.Mtu(link, *s.netdev_mtu,
            name + "'s MTU is " + std::to_string(*s.netdev_mtu) + ", other nodes' " +
                std::to_string(max_mtu) + " (ip link; CASES.md 4)",
            3);
    } else if (s.active_mtu && *s.active_mtu < max_active) {
      // active_mtu 1024 is an Ethernet MTU of about 1100 (CASES.md 4: 4200 -> 4096).
      b.Mtu(link, *s.active_mtu + 100,
            name + "'s active_mtu is " + std::to_string(*s.active_mtu) + ", other nodes' " +
                std::to_string(max_active) + " (ibv_devinfo; CASES.md 2)",
            3);
    }
    const auto& hc = f.host_class[host];
    if (hc.count("oversize")) b.Mtu(link, 1500, name + " counts oversize frames", 2);
    if (hc.count("phy_errors")) {
      bool fec = false;
      for (const auto& [c, v] : s.ethtool) {
        std::string l = Lower(c);
        if (v > 0 && (l.find("fec") != std::string::npos || l.find("symbol") != std::string::npos))
          fec = true;
      }
      if (fec)
        b.Fec(link, name + " counts uncorrectable FEC / symbol errors (ethtool; CASES.md 18)");
      b.Loss(link, 0.01, name + " counts CRC / physical errors (ethtool)", true);
    }
    bool named = hl >= 0 && f.links.count(hl) && f.links.at(hl).first_down_s >= 0;
    if (!named && (hc.count("link_down") || (f.sig.host_classes.count("link_down") &&
                                             f.sig.host_classes.at("link_down").count(host)))) {
      if (errors) b.LinkDown(link, b.FaultAtFromError(), -1, name + "'s port went down");
      b.LinkFlap(link, b.FaultAtFromError() >= 0 ? b.FaultAtFromError() : 0,
                 std::min(0.002, budget / 8), 0, -1);
    }
    // PAUSE frames a NIC sent: the storm's source sends the most, and its
    // tx pause duration (mlx5 ethtool: microseconds) is how long it paused.
    for (const auto& [c, v] : s.ethtool) {
      std::string l = Lower(c);
      if (v == 0 || l.rfind("tx_prio", 0) != 0) continue;
      if (l.find("pause_duration") != std::string::npos) {
        pause_dur[host] = std::max(pause_dur[host], static_cast<double>(v) * 1e-6);
      } else if (l.find("pause") != std::string::npos) {
        tx_pause[host] += v;
      }
    }
    // RNR NAKs: received by the sender (mlx5 rnr_nak_retry_err, rxe
    // rcvd_rnr_err), sent by the receiver (rxe send_rnr_err). One NAK per RNR
    // timer (code 12: 0.64 ms, CASES.md 22) while the receiver is not ready.
    for (const auto* m : {&s.rdma_counters}) {
      for (const auto& [c, v] : *m) {
        if (v == 0 || CounterClass(c) != "rnr" || Lower(c).find("exceeded") != std::string::npos)
          continue;
        std::vector<std::string> receivers;
        if (Lower(c).find("send_rnr") != std::string::npos) {
          receivers.push_back(host);
        } else {
          for (const auto& [a, bb] : w.flows) {
            if (a == host) receivers.push_back(bb);
          }
        }
        for (const auto& r : receivers) {
          rnr_votes[r] += 1;
          rnr_window[r] = std::max(rnr_window[r], static_cast<double>(v) * 0.00064);
        }
      }
    }
    if (hc.count("discards") || hc.count("ecn")) {
      b.Congestion(host, name + " counts discards / ECN marks / CNPs");
    }
  }
  {
    // No NIC counts PAUSE frames sent: the host whose own link carried the
    // most PAUSE frames (the switch's port facing it) is the likeliest source.
    if (tx_pause.empty()) {
      for (const auto& [l, le] : f.links) {
        auto it = le.counters.find("pause");
        if (it == le.counters.end()) continue;
        const topo::Link& link = t.link(l);
        for (int32_t end : {link.a, link.b}) {
          if (t.node(end).kind == topo::NodeKind::kHost) tx_pause[t.node(end).name] += it->second;
        }
      }
    }
    std::vector<std::pair<uint64_t, std::string>> order;
    for (const auto& [h, n] : tx_pause) order.emplace_back(n, h);
    std::sort(order.rbegin(), order.rend());
    for (size_t i = 0; i < order.size() && i < 2; ++i) {
      const std::string& h = order[i].second;
      b.PfcStorm(h, f.t_symptom >= 0 && f.sig.HasErrors() ? std::max(0.0, f.t_symptom - budget) : 0,
                 pause_dur.count(h) ? pause_dur[h] : 0,
                 h + " sent " + std::to_string(order[i].first) + " PAUSE frames" +
                     (i == 0 ? ", the most of any host" : ""),
                 i == 0 ? 3 : 1.5);
    }
    std::vector<std::pair<int, std::string>> rx;
    for (const auto& [h, n] : rnr_votes) rx.emplace_back(n, h);
    std::sort(rx.rbegin(), rx.rend());
    bool finite = f.sig.statuses.count("IBV_WC_RNR_RETRY_EXC_ERR") > 0;
    for (size_t i = 0; i < rx.size() && i < 2; ++i) {
      const std::string& h = rx[i].second;
      b.Rnr(h, finite ? 3 : 7, f.t_symptom >= 0 ? f.t_symptom : 0, std::max(0.001, rnr_window[h]),
            "RNR NAKs counted by " + std::to_string(rx[i].first) + " of " + h + "'s peers");
    }
  }
  // GIDs: the index in use is link-local or RoCE v1 on a host (CASES.md 5).
  std::set<std::string> gid_hosts;
  for (const auto& [name, s] : ev.hosts) {
    for (const auto& g : s.gids) {
      bool used = ev.library.ib_gid_index ? g.index == *ev.library.ib_gid_index : g.index == 0;
      if (used && (Lower(g.gid).rfind("fe80", 0) == 0 || g.type.find("v1") != std::string::npos)) {
        if (w.sim_host.count(name)) gid_hosts.insert(w.sim_host.at(name));
      }
    }
  }
  for (const auto& e : ev.errors) {
    if (Lower(e.local_gid).rfind("fe80", 0) == 0 && w.sim_host.count(e.host))
      gid_hosts.insert(w.sim_host.at(e.host));
  }
  // A link-local GID only fails between hosts under different switches
  // (CASES.md 5): within one L2 segment it routes.
  for (auto it = gid_hosts.begin(); it != gid_hosts.end();) {
    bool crosses = false;
    int32_t a = NodeId(t, *it);
    for (const auto& [x, y] : w.flows) {
      if (x != *it && y != *it) continue;
      if (t.HopCount(a, NodeId(t, x == *it ? y : x)) > 2) crosses = true;
    }
    it = crosses ? std::next(it) : gid_hosts.erase(it);
  }
  for (const auto& h : gid_hosts) {
    b.Gid(h, "GID index " + std::to_string(ev.library.ib_gid_index.value_or(0)) + " on " + h +
                 " is link-local / RoCE v1: it does not route between switches");
  }
  // Statuses that point at one kind.
  if (f.sig.statuses.count("IBV_WC_RNR_RETRY_EXC_ERR")) {
    // The receiver is the erring rank's peer.
    std::string rx;
    for (const auto& e : ev.errors) {
      if (StatusName(e.status_code) == "IBV_WC_RNR_RETRY_EXC_ERR" ||
          e.status == "IBV_WC_RNR_RETRY_EXC_ERR") {
        rx = w.sim_host.count(e.peer_host) ? w.sim_host.at(e.peer_host) : "";
        if (rx.empty()) {
          for (const auto& [a, bb] : w.flows) {
            if (w.sim_host.count(e.host) && a == w.sim_host.at(e.host)) rx = bb;
          }
        }
        break;
      }
    }
    if (!rx.empty())
      b.Rnr(rx, 3, b.FaultAtFromError(), 0,
            "IBV_WC_RNR_RETRY_EXC_ERR (13): the receiver had no buffer posted");
  }
  // 4. The paths the symptom's flows share: for kinds nothing named yet.
  auto suspects = PathSuspects(f, 2);
  if (errors || stalls) {
    for (const auto& group : suspects) {
      std::string sel = Selector(t, group);
      if (sel.empty()) continue;
      if (errors) {
        b.LinkDown(sel, b.FaultAtFromError(), -1, "the error pairs' paths");
        b.Mtu(sel, 1500, "", 0);
        b.Fec(sel, "");
      }
      if (stalls && !errors) b.Swallowed(sel, "ranks stalled with no completion error in any log");
      if (stalls && !errors && w.rxe_infinite_retry)
        b.LinkDown(sel, f.t_symptom, -1, "the stalled pairs' paths");
    }
    if (errors && !f.focus_host.empty() && f.sig.first_error_s >= 0 &&
        f.sig.first_error_s <= 1.25 * budget + 1) {
      b.Gid(f.focus_host, "");
    }
    if (!f.focus_host.empty()) {
      if (stalls && !errors) b.PfcStorm(f.focus_host, 0, 0, "", 0);
      b.Congestion(f.focus_host, "");
    }
  } else if (f.sig.HasSymptom()) {
    // Counters only: a fault that was retried away.
    for (const auto& group : suspects) {
      std::string sel = Selector(t, group);
      if (sel.empty()) continue;
      b.Loss(sel, 0.01, "", false);
      b.LinkFlap(sel, 0, std::min(0.002, budget / 8), 0, -1);
    }
  }

  std::vector<Candidate> out = std::move(b.out);
  for (auto& c : out) {
    // A logistic squash of the summed weights: 0.5 at none, ~0.95 at +6.
    c.prior = 1.0 / (1.0 + std::exp(-c.prior / 2));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Candidate& a, const Candidate& b2) { return a.prior > b2.prior; });
  return out;
}

std::string ScenarioYaml(const World& w, const Hypothesis& h, const Plan& plan,
                         const std::vector<bool>& keep, const std::string& expect_block) {
  auto kept = [&](size_t i) { return i >= keep.size() || keep[i]; };
  std::string name = "replay-" + h.kind + "-";
  for (char c : h.target) name.push_back(std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  std::ostringstream y;
  y << "# fathom replay: " << h.summary << "\n";
  for (const auto& [k, v] : h.params) y << "#   " << k << " = " << v << "\n";
  if (plan.offset_s != 0) {
    y << "# Simulated time t is evidence time t + " << Fmt("%.6f", plan.offset_s) << " s.\n";
  }
  for (size_t i = 0; i < plan.elements.size(); ++i) {
    if (!kept(i)) y << "# ablated: " << plan.elements[i].label << "\n";
  }
  y << "name: " << name << "\nseed: 1\nend_time_us: " << Fmt("%.3f", plan.end_us) << "\n";
  y << "topology:\n" << w.topology_block;
  y << "transport:\n  ib_timeout: " << w.ib_timeout << "\n  retry_cnt: " << w.retry_cnt << "\n";
  if (w.rxe_infinite_retry) y << "  rxe_infinite_retry: true\n";
  if (w.path_mtu && *w.path_mtu >= 256 && *w.path_mtu <= 4096)
    y << "  mtu_bytes: " << *w.path_mtu << "\n";
  y << "  message_bytes: 262144\n";
  if (plan.send_opcode) {
    y << "  opcode: send\n  rnr_retry: " << plan.rnr_retry << "\n";
  }
  bool lossless = w.lossless || h.kind == "pfc_storm";
  if (lossless || w.traffic_class) {
    // RoCE's common deployment: DSCP 26 (TOS 104) -> priority 3 lossless
    // (scenarios/faults/pfc_storm.yaml).
    y << "  traffic_class: " << w.traffic_class.value_or(104) << "\n";
  }
  if (lossless) {
    y << "network:\n  qos:\n    classes:\n"
         "      - {priority: 3, lossless: true, xoff_bytes: 65536, xon_bytes: 32768}\n";
    // SONiC's defaults (200 ms detection, drop): the switches counted its drops.
    if (w.pfc_watchdog) y << "    pfc_watchdog: {action: drop}\n";
  }
  std::set<std::string> no_receive;
  std::vector<std::string> not_ready;
  std::vector<std::pair<std::string, std::string>> background;
  for (size_t i = 0; i < plan.elements.size(); ++i) {
    if (!kept(i)) continue;
    const auto& e = plan.elements[i];
    if (e.type == Element::Type::kNoReceive) {
      if (e.yaml.empty()) {
        no_receive.insert(e.host);
      } else {
        not_ready.push_back(e.yaml);
      }
    }
    if (e.type == Element::Type::kBackground)
      background.insert(background.end(), e.flows.begin(), e.flows.end());
  }
  y << "workload:\n  pattern: flows\n  flow_bytes: " << w.flow_bytes << "\n";
  if (plan.flows_start_us > 0) y << "  start_us: " << Fmt("%.3f", plan.flows_start_us) << "\n";
  y << "  flows:\n";
  for (const auto& [a, b] : w.flows) {
    y << "    - {src: " << a << ", dst: " << b;
    if (no_receive.count(b)) y << ", receive: {post: none}";
    y << "}\n";
  }
  for (const auto& [a, b] : background) {
    y << "    - {src: " << a << ", dst: " << b << ", bytes: " << (w.flow_bytes * 4)
      << ", start_us: " << Fmt("%.3f", std::max(0.0, plan.fault_at_us - plan.flows_start_us))
      << "}\n";  // after workload.start_us
  }
  if (!not_ready.empty()) {
    y << "  receiver_not_ready:\n";
    for (const auto& r : not_ready) y << "    - " << r << "\n";
  }
  bool any_fault = false;
  for (size_t i = 0; i < plan.elements.size(); ++i) {
    if (!kept(i) || plan.elements[i].type != Element::Type::kFault) continue;
    if (!any_fault) y << "faults:\n";
    any_fault = true;
    y << "  - " << plan.elements[i].yaml << "\n";
  }
  if (!expect_block.empty()) y << "expect:\n" << expect_block;
  return y.str();
}

}  // namespace fathom::replay
