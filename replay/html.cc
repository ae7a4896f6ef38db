#include "replay/html.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

#include "topologies/builders.h"
#include "topologies/spec.h"

namespace fathom::replay {
namespace {

std::string Esc(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string Num(double v, int precision = 3) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", precision, v);
  return buf;
}

std::string Seconds(double s) { return s < 0 ? std::string("?") : Num(s, 6) + " s"; }

// Everything on the page is styled here; no external resource is loaded.
constexpr std::string_view kStyle = R"(
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1b1f24;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #d0d7de}
.verdict{padding:10px 14px;border-radius:6px;margin:12px 0}
.found{background:#dafbe1;border:1px solid #4ac26b}.none{background:#fff8c5;border:1px solid #d4a72c}
table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #d0d7de;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.n{text-align:right;font-variant-numeric:tabular-nums}
tr.cause{cursor:pointer}tr.cause.open{background:#f6f8fa}tr.detail{display:none}tr.detail.open{display:table-row}
.yes{color:#1a7f37;font-weight:600}.no{color:#cf222e}
pre{background:#f6f8fa;padding:8px;overflow:auto;max-height:360px}
.link{stroke:#8c959f;stroke-width:1}.link.suspect{stroke:#cf222e}
.node{fill:#ddf4ff;stroke:#0969da}.node.host{fill:#f6f8fa;stroke:#8c959f}.node.suspect{fill:#ffebe9;stroke:#cf222e;stroke-width:2}
.ev{fill:#0969da}.ev.err{fill:#cf222e}.lane{stroke:#eaeef2}.axis{stroke:#57606a}
svg text{font:11px system-ui,sans-serif;fill:#1b1f24}
.muted{color:#57606a}
)";

// Toggles a cause's details; marks the page as rendered once it has run.
constexpr std::string_view kScript = R"(
(function(){
  document.querySelectorAll('tr.cause').forEach(function(row){
    row.addEventListener('click',function(){
      row.classList.toggle('open');
      var d=document.getElementById(row.dataset.detail);
      if(d){d.classList.toggle('open');}
    });
  });
  var first=document.querySelector('tr.cause');
  if(first){first.click();}
  if(document.getElementById('fabric')&&document.getElementById('ranking')&&document.getElementById('timeline')){
    document.body.dataset.rendered='ok';
  }
})();
)";

// Which links and nodes a suspect name points at. Names come as the
// topology's link names ("leaf0-spine1", "leaf0-spine1/1"), the report's
// port names ("leaf0->spine1", "leaf0->spine1#5"), ports ("leaf0:3") or
// node names ("leaf0", "h3").
struct Highlights {
  std::map<int32_t, double> links;
  std::map<int32_t, double> nodes;
};

Highlights ResolveSuspects(const topo::Topology& topology,
                           const std::map<std::string, double>& suspects) {
  Highlights h;
  auto mark_link = [&](int32_t id, double w) { h.links[id] = std::max(h.links[id], w); };
  for (const auto& [name, weight] : suspects) {
    double w = std::clamp(weight, 0.0, 1.0);
    if (auto arrow = name.find("->"); arrow != std::string::npos) {
      std::string a = name.substr(0, arrow);
      std::string b = name.substr(arrow + 2);
      int32_t port = -1;
      if (auto hash = b.find('#'); hash != std::string::npos) {
        port = std::atoi(b.c_str() + hash + 1);
        b.resize(hash);
      }
      auto na = topology.FindNode(a);
      auto nb = topology.FindNode(b);
      if (na.ok() && port >= 0 && port < topology.PortCount(*na)) {
        mark_link(topology.LinkAt(*na, port), w);
      } else if (na.ok() && nb.ok()) {
        if (auto l = topology.FindLink(*na, *nb); l.ok()) mark_link(*l, w);
      }
      continue;
    }
    if (auto colon = name.rfind(':'); colon != std::string::npos) {
      auto n = topology.FindNode(name.substr(0, colon));
      if (n.ok()) {
        h.nodes[*n] = std::max(h.nodes[*n], w);
        int32_t port = std::atoi(name.c_str() + colon + 1);
        if (port >= 0 && port < topology.PortCount(*n)) mark_link(topology.LinkAt(*n, port), w);
      }
      continue;
    }
    if (auto l = topology.FindLink(name); l.ok()) {
      mark_link(*l, w);
    } else if (auto n = topology.FindNode(name); n.ok()) {
      h.nodes[*n] = std::max(h.nodes[*n], w);
    }
  }
  return h;
}

// Hosts are drawn while there are few enough of them to tell apart.
constexpr int32_t kMaxDrawnHosts = 256;

void RenderFabric(std::ostringstream& o, const ReplayResult& result, const topo::Topology* topology,
                  const std::string& topology_error) {
  o << "<h2>Fabric</h2>\n";
  if (topology == nullptr) {
    o << "<p class=\"muted\">" << Esc(topology_error) << "</p>\n";
    o << "<svg id=\"fabric\" width=\"1\" height=\"1\"></svg>\n";
    return;
  }
  const auto& nodes = topology->nodes();
  const bool draw_hosts = static_cast<int32_t>(topology->hosts().size()) <= kMaxDrawnHosts;
  std::vector<std::vector<int32_t>> tiers(topo::kMaxTier + 1);
  for (const auto& n : nodes) {
    if (n.tier == topo::kTierHost && !draw_hosts) continue;
    tiers[std::clamp(n.tier, 0, topo::kMaxTier)].push_back(n.id);
  }
  size_t widest = 1;
  int used_tiers = 0;
  for (const auto& t : tiers) {
    widest = std::max(widest, t.size());
    used_tiers += t.empty() ? 0 : 1;
  }
  const double width = std::clamp(static_cast<double>(widest) * 16.0, 800.0, 6000.0);
  const double row = 110;
  const double height = row * std::max(used_tiers, 1) + 40;
  // Rows from the top tier down; x spread evenly within a row.
  std::vector<std::pair<double, double>> pos(nodes.size(), {-1, -1});
  double y = 30;
  for (int t = topo::kMaxTier; t >= 0; --t) {
    if (tiers[t].empty()) continue;
    const double step = width / static_cast<double>(tiers[t].size());
    for (size_t i = 0; i < tiers[t].size(); ++i) {
      pos[tiers[t][i]] = {step * (static_cast<double>(i) + 0.5), y};
    }
    y += row;
  }
  const Highlights hl = ResolveSuspects(*topology, result.suspects);
  o << "<p class=\"muted\">" << Esc(topology->name()) << ": " << topology->hosts().size()
    << " hosts, " << topology->links().size() << " links";
  if (!draw_hosts) o << " (hosts and their links not drawn: more than " << kMaxDrawnHosts << ")";
  o << ". Suspects in red.</p>\n";
  o << "<svg id=\"fabric\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << Num(width, 0)
    << "\" height=\"" << Num(height, 0) << "\" viewBox=\"0 0 " << Num(width, 0) << ' '
    << Num(height, 0) << "\" style=\"max-width:100%;height:auto\">\n";
  // Suspect links last, so they are drawn on top.
  std::vector<int32_t> order;
  for (const auto& l : topology->links()) {
    if (pos[l.a].first < 0 || pos[l.b].first < 0) continue;
    if (!hl.links.count(l.id)) order.push_back(l.id);
  }
  for (const auto& [id, w] : hl.links) {
    const auto& l = topology->link(id);
    if (pos[l.a].first >= 0 && pos[l.b].first >= 0) order.push_back(id);
  }
  for (int32_t id : order) {
    const auto& l = topology->link(id);
    auto it = hl.links.find(id);
    const bool suspect = it != hl.links.end();
    o << "<line class=\"link" << (suspect ? " suspect" : "") << "\" data-link=\"" << Esc(l.name)
      << "\" x1=\"" << Num(pos[l.a].first, 1) << "\" y1=\"" << Num(pos[l.a].second, 1) << "\" x2=\""
      << Num(pos[l.b].first, 1) << "\" y2=\"" << Num(pos[l.b].second, 1) << '"';
    if (suspect) {
      o << " stroke-width=\"" << Num(2 + 4 * it->second, 1) << "\" stroke-opacity=\""
        << Num(0.4 + 0.6 * it->second, 2) << '"';
    }
    o << "><title>" << Esc(l.name);
    if (suspect) o << " (suspect, weight " << Num(it->second, 2) << ")";
    if (l.mtu_ab != l.mtu_ba) o << " MTU " << l.mtu_ab << "/" << l.mtu_ba;
    o << "</title></line>\n";
  }
  for (const auto& n : nodes) {
    if (pos[n.id].first < 0) continue;
    const bool suspect = hl.nodes.count(n.id) > 0;
    const bool host = n.kind == topo::NodeKind::kHost;
    const double r = host ? 4 : 7;
    o << "<circle class=\"node" << (host ? " host" : "") << (suspect ? " suspect" : "")
      << "\" data-node=\"" << Esc(n.name) << "\" cx=\"" << Num(pos[n.id].first, 1) << "\" cy=\""
      << Num(pos[n.id].second, 1) << "\" r=\"" << Num(suspect ? r + 3 : r, 0) << "\"><title>"
      << Esc(n.name) << "</title></circle>\n";
    // Switch names fit when the row is not crowded; suspects are always named.
    if ((!host && tiers[n.tier].size() <= 64) || suspect) {
      o << "<text x=\"" << Num(pos[n.id].first + 9, 1) << "\" y=\"" << Num(pos[n.id].second - 9, 1)
        << "\">" << Esc(n.name) << "</text>\n";
    }
  }
  o << "</svg>\n";
  if (!hl.links.empty() || !hl.nodes.empty()) {
    o << "<table><tr><th>suspect</th><th>weight</th></tr>\n";
    for (const auto& [id, w] : hl.links) {
      o << "<tr><td>link " << Esc(topology->link(id).name) << "</td><td class=\"n\">" << Num(w, 2)
        << "</td></tr>\n";
    }
    for (const auto& [id, w] : hl.nodes) {
      o << "<tr><td>node " << Esc(topology->node(id).name) << "</td><td class=\"n\">" << Num(w, 2)
        << "</td></tr>\n";
    }
    o << "</table>\n";
  }
}

// The timeline's events: the engine's, or else the evidence's own errors
// and rank events.
std::vector<TimelineEvent> TimelineOf(const ReplayResult& result) {
  if (!result.timeline.empty()) return result.timeline;
  std::vector<TimelineEvent> events;
  for (const auto& e : result.evidence.errors) {
    events.push_back({e.host, e.rank, e.time_s,
                      (e.status.empty() ? "status " + std::to_string(e.status_code) : e.status) +
                          (e.peer.empty() ? "" : " from " + e.peer),
                      true});
  }
  for (const auto& e : result.evidence.rank_events) {
    events.push_back({e.host, e.rank, e.time_s, e.kind + ": " + e.detail, e.kind != "stall"});
  }
  return events;
}

// The window the timeline shows: the job's last seconds before its end.
constexpr double kTimelineWindowS = 60;

void RenderTimeline(std::ostringstream& o, const ReplayResult& result) {
  o << "<h2>Timeline</h2>\n";
  std::vector<TimelineEvent> events = TimelineOf(result);
  std::vector<TimelineEvent> timed;
  for (const auto& e : events) {
    if (e.time_s >= 0) timed.push_back(e);
  }
  if (timed.empty()) {
    o << "<p class=\"muted\">No timed event in the evidence.</p>\n";
    o << "<svg id=\"timeline\" width=\"1\" height=\"1\"></svg>\n";
    return;
  }
  double end = result.evidence.last_s;
  double first = timed.front().time_s;
  for (const auto& e : timed) {
    end = std::max(end, e.time_s);
    first = std::min(first, e.time_s);
  }
  const double start = std::max(first, end - kTimelineWindowS);
  const double span = std::max(end - start, 1e-6);
  // One lane per rank (or per host when the rank is unknown).
  std::map<std::pair<int, std::string>, int> lanes;
  for (const auto& e : timed) lanes.emplace(std::make_pair(e.rank, e.rank >= 0 ? "" : e.host), 0);
  int lane = 0;
  for (auto& [key, index] : lanes) index = lane++;
  const double left = 130, width = 900, lane_h = 18;
  const double height = 40 + lane_h * static_cast<double>(lanes.size());
  int hidden = 0;
  o << "<p class=\"muted\">" << Num(start, 6) << " s to " << Num(end, 6)
    << " s (time since the bundle's origin)</p>\n";
  o << "<svg id=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\""
    << Num(left + width + 60, 0) << "\" height=\"" << Num(height, 0) << "\">\n";
  for (const auto& [key, index] : lanes) {
    const double y = 20 + lane_h * (index + 0.5);
    o << "<line class=\"lane\" x1=\"" << Num(left, 0) << "\" x2=\"" << Num(left + width, 0)
      << "\" y1=\"" << Num(y, 1) << "\" y2=\"" << Num(y, 1) << "\"/>";
    std::string label = key.first >= 0 ? "rank " + std::to_string(key.first) : key.second;
    o << "<text x=\"4\" y=\"" << Num(y + 4, 1) << "\">" << Esc(label) << "</text>\n";
  }
  const double axis_y = height - 14;
  o << "<line class=\"axis\" x1=\"" << Num(left, 0) << "\" x2=\"" << Num(left + width, 0)
    << "\" y1=\"" << Num(axis_y, 0) << "\" y2=\"" << Num(axis_y, 0) << "\"/>\n";
  for (int i = 0; i <= 4; ++i) {
    const double x = left + width * i / 4.0;
    o << "<text x=\"" << Num(x - 20, 0) << "\" y=\"" << Num(height - 2, 0) << "\">"
      << Num(start + span * i / 4.0, 3) << " s</text>\n";
  }
  for (const auto& e : timed) {
    if (e.time_s < start) {
      ++hidden;
      continue;
    }
    const int index = lanes[{e.rank, e.rank >= 0 ? "" : e.host}];
    const double x = left + width * (e.time_s - start) / span;
    const double y = 20 + lane_h * (index + 0.5);
    o << "<circle class=\"ev" << (e.error ? " err" : "") << "\" cx=\"" << Num(x, 1) << "\" cy=\""
      << Num(y, 1) << "\" r=\"5\"><title>" << Esc(e.host) << " rank " << e.rank << " at "
      << Num(e.time_s, 6) << " s: " << Esc(e.what) << "</title></circle>\n";
  }
  o << "</svg>\n";
  if (hidden > 0) {
    o << "<p class=\"muted\">" << hidden << " earlier event(s) before the last "
      << Num(kTimelineWindowS, 0) << " s not drawn.</p>\n";
  }
  o << "<table><tr><th>time</th><th>rank</th><th>host</th><th>event</th></tr>\n";
  std::vector<TimelineEvent> sorted = timed;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.time_s < b.time_s; });
  constexpr size_t kMaxRows = 200;
  for (size_t i = 0; i < sorted.size() && i < kMaxRows; ++i) {
    const auto& e = sorted[i];
    o << "<tr><td class=\"n\">" << Num(e.time_s, 6) << "</td><td class=\"n\">" << e.rank
      << "</td><td>" << Esc(e.host) << "</td><td" << (e.error ? " class=\"no\"" : "") << ">"
      << Esc(e.what) << "</td></tr>\n";
  }
  o << "</table>\n";
  if (sorted.size() > kMaxRows) {
    o << "<p class=\"muted\">" << sorted.size() - kMaxRows << " more events not listed.</p>\n";
  }
}

void RenderRanking(std::ostringstream& o, const ReplayResult& result) {
  o << "<h2>Ranked causes</h2>\n";
  o << "<table id=\"ranking\"><tr><th>#</th><th>cause</th><th>target</th><th>score</th>"
       "<th>reproduces</th><th>ablation</th></tr>\n";
  for (size_t i = 0; i < result.causes.size(); ++i) {
    const Cause& c = result.causes[i];
    const std::string detail = "cause-" + std::to_string(i);
    o << "<tr class=\"cause\" data-detail=\"" << detail << "\"><td class=\"n\">" << i + 1
      << "</td><td>" << Esc(c.hypothesis.kind) << "</td><td>" << Esc(c.hypothesis.target)
      << "</td><td class=\"n\">" << Num(c.score, 3) << "</td><td class=\""
      << (c.reproduces ? "yes\">yes" : "no\">no") << "</td><td>"
      << (c.ablation.empty() ? "—" : (c.ablation_confirms ? "confirms" : "does not confirm"))
      << "</td></tr>\n";
    o << "<tr class=\"detail\" id=\"" << detail << "\"><td></td><td colspan=\"5\">\n";
    o << "<p>" << Esc(c.hypothesis.summary) << "</p>\n";
    if (!c.ran) o << "<p class=\"no\">Not simulated: " << Esc(c.error) << "</p>\n";
    if (!c.hypothesis.params.empty()) {
      o << "<p>Fitted:";
      for (const auto& [k, v] : c.hypothesis.params) o << " " << Esc(k) << "=" << Esc(v);
      o << "</p>\n";
    }
    auto list = [&](const char* title, const std::vector<std::string>& items) {
      if (items.empty()) return;
      o << "<p><b>" << title << "</b></p><ul>";
      for (const auto& s : items) o << "<li>" << Esc(s) << "</li>";
      o << "</ul>\n";
    };
    list("Evidence for", c.evidence_for);
    list("Evidence against", c.evidence_against);
    list("Ablation", c.ablation);
    if (!c.matches.empty()) {
      o << "<table><tr><th>signature</th><th>evidence</th><th>simulated</th><th>weight</th>"
           "<th>score</th></tr>\n";
      for (const auto& m : c.matches) {
        o << "<tr><td>" << Esc(m.what) << "</td><td>" << Esc(m.expected) << "</td><td>"
          << Esc(m.got) << "</td><td class=\"n\">" << Num(m.weight, 2) << "</td><td class=\"n\">"
          << Num(m.score, 2) << "</td></tr>\n";
      }
      o << "</table>\n";
    }
    if (!c.hypothesis.scenario_yaml.empty()) {
      o << "<details><summary>Reproducing scenario</summary><pre>"
        << Esc(c.hypothesis.scenario_yaml) << "</pre></details>\n";
    }
    o << "</td></tr>\n";
  }
  o << "</table>\n";
  if (result.causes.empty()) o << "<p class=\"muted\">No hypothesis was formed.</p>\n";
}

// A table of counters: one row per host, one column per counter that is
// non-zero somewhere (at most kMaxColumns of them, the most moved first).
void RenderCounterMatrix(std::ostringstream& o, const char* title,
                         const std::map<std::string, std::map<std::string, uint64_t>>& rows) {
  std::map<std::string, uint64_t> totals;
  for (const auto& [host, counters] : rows) {
    for (const auto& [name, v] : counters) {
      if (v != 0) totals[name] += v;
    }
  }
  if (totals.empty()) return;
  std::vector<std::pair<std::string, uint64_t>> columns(totals.begin(), totals.end());
  std::stable_sort(columns.begin(), columns.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  constexpr size_t kMaxColumns = 24;
  if (columns.size() > kMaxColumns) columns.resize(kMaxColumns);
  o << "<h3>" << title << "</h3>\n<table><tr><th>host</th>";
  for (const auto& [name, total] : columns) o << "<th>" << Esc(name) << "</th>";
  o << "</tr>\n";
  for (const auto& [host, counters] : rows) {
    o << "<tr><td>" << Esc(host) << "</td>";
    for (const auto& [name, total] : columns) {
      auto it = counters.find(name);
      o << "<td class=\"n\">" << (it == counters.end() ? std::string() : std::to_string(it->second))
        << "</td>";
    }
    o << "</tr>\n";
  }
  o << "</table>\n";
}

void RenderCounters(std::ostringstream& o, const Evidence& ev) {
  o << "<h2>Counters</h2>\n";
  std::map<std::string, std::map<std::string, uint64_t>> rdma, ethtool;
  bool any = false;
  for (const auto& [host, state] : ev.hosts) {
    if (!state.rdma_counters.empty()) rdma[host] = state.rdma_counters;
    if (!state.ethtool.empty()) ethtool[host] = state.ethtool;
  }
  RenderCounterMatrix(o, "RDMA counters (non-zero)", rdma);
  RenderCounterMatrix(o, "ethtool -S (non-zero)", ethtool);
  any = !rdma.empty() || !ethtool.empty();
  bool link_state = false;
  for (const auto& [host, s] : ev.hosts) {
    link_state |= s.netdev_mtu || s.active_mtu || !s.port_state.empty();
  }
  if (link_state) {
    any = true;
    o << "<h3>Link state</h3>\n<table><tr><th>host</th><th>driver</th><th>netdev MTU</th>"
         "<th>active MTU</th><th>port state</th></tr>\n";
    for (const auto& [host, s] : ev.hosts) {
      o << "<tr><td>" << Esc(host) << "</td><td>" << Esc(s.driver) << "</td><td class=\"n\">"
        << (s.netdev_mtu ? std::to_string(*s.netdev_mtu) : "") << "</td><td class=\"n\">"
        << (s.active_mtu ? std::to_string(*s.active_mtu) : "") << "</td><td>" << Esc(s.port_state)
        << "</td></tr>\n";
    }
    o << "</table>\n";
  }
  if (!ev.switch_counters.empty()) {
    any = true;
    o << "<h3>Switch counters (non-zero)</h3>\n<table><tr><th>port</th><th>counter</th>"
         "<th>value</th></tr>\n";
    for (const auto& c : ev.switch_counters) {
      if (c.value == 0) continue;
      o << "<tr><td>" << Esc(c.port) << "</td><td>" << Esc(c.counter) << "</td><td class=\"n\">"
        << c.value << "</td></tr>\n";
    }
    o << "</table>\n";
  }
  if (!ev.link_events.empty()) {
    any = true;
    o << "<h3>Link events</h3>\n<table><tr><th>time</th><th>link</th><th>state</th></tr>\n";
    for (const auto& e : ev.link_events) {
      o << "<tr><td class=\"n\">" << Seconds(e.time_s) << "</td><td>" << Esc(e.link) << "</td><td>"
        << (e.up ? "up" : "down") << "</td></tr>\n";
    }
    o << "</table>\n";
  }
  if (!ev.captures.empty()) {
    any = true;
    o << "<h3>Captures</h3>\n<table><tr><th>capture</th><th>src</th><th>dst</th><th>QP</th>"
         "<th>frames</th><th>PSN gaps</th><th>retransmissions</th><th>NAKs</th><th>oversize</th>"
         "<th>largest</th></tr>\n";
    for (const auto& c : ev.captures) {
      o << "<tr><td>" << Esc(c.path) << "</td><td>" << Esc(c.src) << "</td><td>" << Esc(c.dst)
        << "</td><td class=\"n\">" << Hex(c.dest_qp) << "</td><td class=\"n\">" << c.frames
        << "</td><td class=\"n\">" << c.psn_gaps << "</td><td class=\"n\">" << c.retransmissions
        << "</td><td class=\"n\">" << c.naks << "</td><td class=\"n\">" << c.oversize_frames
        << "</td><td class=\"n\">" << c.max_frame << "</td></tr>\n";
    }
    o << "</table>\n";
  }
  if (!any) o << "<p class=\"muted\">The evidence holds no counters.</p>\n";
}

void RenderSources(std::ostringstream& o, const Evidence& ev) {
  o << "<h2>What was read</h2>\n<p>Bundle: " << Esc(ev.root) << "</p>\n";
  if (!ev.library.library.empty()) {
    const auto& l = ev.library;
    o << "<p>" << Esc(l.library) << (l.version.empty() ? "" : " " + Esc(l.version));
    auto opt = [&](const char* name, const std::optional<int>& v) {
      if (v) o << ", " << name << "=" << *v;
    };
    opt("IB_TIMEOUT", l.ib_timeout);
    opt("IB_RETRY_CNT", l.ib_retry_cnt);
    opt("IB_GID_INDEX", l.ib_gid_index);
    opt("IB_TC", l.ib_tc);
    opt("QPS_PER_CONNECTION", l.qps_per_connection);
    opt("nranks", l.nranks);
    if (!l.algorithm.empty()) o << ", algorithm " << Esc(l.algorithm);
    o << "</p>\n";
  }
  o << "<table id=\"sources\"><tr><th>file</th><th>kind</th><th>host</th><th>use</th>"
       "<th>lines used / ignored</th><th>reason</th></tr>\n";
  for (const auto& s : ev.sources) {
    const bool bad = s.use == SourceReport::Use::kUnusable;
    o << "<tr><td>" << Esc(s.path) << "</td><td>" << Esc(s.kind) << "</td><td>" << Esc(s.host)
      << "</td><td" << (bad ? " class=\"no\"" : "") << ">" << UseName(s.use)
      << "</td><td class=\"n\">" << s.lines_recognised << " / " << s.lines_ignored << "</td><td>"
      << Esc(s.reason) << "</td></tr>\n";
  }
  o << "</table>\n";
}

}  // namespace

namespace {

std::string RenderPage(const ReplayResult& result, const topo::Topology* topology,
                       const std::string& topology_error) {
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
    << "<title>fathom replay: " << Esc(result.evidence.root) << "</title>\n<style>" << kStyle
    << "</style></head>\n<body>\n";
  o << "<h1>fathom replay</h1>\n<p class=\"muted\">" << Esc(result.evidence.root) << " · "
    << result.evidence.sources.size() << " files read · replayed in " << Num(result.wall_s, 1)
    << " s</p>\n";
  if (result.found && !result.causes.empty()) {
    const Cause& c = result.causes.front();
    o << "<div class=\"verdict found\" id=\"verdict\"><b>Root cause: " << Esc(c.hypothesis.kind)
      << " on " << Esc(c.hypothesis.target) << "</b> (score " << Num(c.score, 2) << ")<br>"
      << Esc(c.hypothesis.summary) << "</div>\n";
  } else {
    o << "<div class=\"verdict none\" id=\"verdict\"><b>No hypothesis reproduces the "
         "symptom.</b> The ranking below shows how close each came.</div>\n";
  }
  if (!result.symptoms.empty()) {
    o << "<h2>Symptom</h2>\n<ul>";
    for (const auto& s : result.symptoms) o << "<li>" << Esc(s) << "</li>";
    o << "</ul>\n";
  }
  if (!result.verdict.empty()) o << "<p id=\"verdict-text\">" << Esc(result.verdict) << "</p>\n";
  if (!result.notes.empty()) {
    o << "<h2>Assumptions</h2>\n<ul>";
    for (const auto& s : result.notes) o << "<li>" << Esc(s) << "</li>";
    o << "</ul>\n";
  }
  if (!result.not_simulated.empty()) {
    o << "<p class=\"muted\">Formed " << result.hypotheses_formed << " hypotheses, ran "
      << result.simulations << " simulations; not simulated:";
    for (const auto& s : result.not_simulated) o << " " << Esc(s) << ";";
    o << "</p>\n";
  }
  if (!result.scenario_path.empty()) {
    o << "<p>Reproducing scenario: <code>" << Esc(result.scenario_path) << "</code></p>\n";
  }
  RenderRanking(o, result);
  RenderFabric(o, result, topology, topology_error);
  RenderTimeline(o, result);
  RenderCounters(o, result.evidence);
  RenderSources(o, result.evidence);
  o << "<script>" << kScript << "</script>\n</body></html>\n";
  return o.str();
}

}  // namespace

StatusOr<topo::Topology> EvidenceTopology(const Evidence& evidence) {
  if (!evidence.topology_path.empty() && std::filesystem::is_regular_file(evidence.topology_path)) {
    return topo::LoadTopologyFile(evidence.topology_path);
  }
  if (!evidence.topology.empty() && evidence.topology.find('\n') == std::string::npos) {
    return topo::BuildPreset(evidence.topology);
  }
  if (!evidence.topology.empty()) {
    // A topology YAML's text: the loader reads files, so give it one.
    std::error_code ec;
    auto dir = std::filesystem::temp_directory_path(ec);
    if (ec) return IoError("EvidenceTopology: no temporary directory: " + ec.message());
    auto path = dir / ("fathom-replay-topology-" + std::to_string(::getpid()) + ".yaml");
    {
      std::ofstream out(path);
      out << evidence.topology;
      if (!out) return IoError("EvidenceTopology: cannot write " + path.string());
    }
    auto topology = topo::LoadTopologyFile(path.string());
    std::filesystem::remove(path, ec);
    return topology;
  }
  return NotFound(
      "EvidenceTopology: the evidence names no topology file or preset (topology_path '" +
      evidence.topology_path + "')");
}

std::string RenderHtml(const ReplayResult& result, const topo::Topology* topology) {
  return RenderPage(result, topology, "The evidence names no fabric.");
}

std::string RenderHtml(const ReplayResult& result) {
  auto topology = EvidenceTopology(result.evidence);
  if (!topology.ok()) return RenderPage(result, nullptr, topology.status().message());
  return RenderPage(result, &*topology, "");
}

}  // namespace fathom::replay
