// Fabric evidence: the topology (a fathom TopologySpec YAML, as `fathom topo
// FILE` reads, or a file holding a preset name such as "medium"), a
// neighbour table (host, nic, switch, port: CSV with a header or a JSON
// list, as an LLDP dump is commonly reduced to), switch port counters
// (port, counter, value) and link state events (time, link, up/down: CSV,
// JSON or "TIME LINK up|down" text). Checks the neighbour table against the
// topology once both are read.
#include <map>
#include <nlohmann/json.hpp>

#include "proto/topology.pb.h"
#include "proto/yaml_loader.h"
#include "replay/evidence_internal.h"
#include "topologies/builders.h"
#include "topologies/spec.h"

namespace fathom::replay::internal {
namespace {

using Json = nlohmann::json;

// A file holding only a preset name ("medium", "fat-tree:k=8").
bool IsPresetName(std::string_view text) {
  const std::string_view t = Trim(text);
  return !t.empty() && SplitLines(t).size() == 1 && !Contains(t, ": ") && !Contains(t, " ") &&
         t.front() != '{' && t.front() != '[';
}

// A preset name alone, or a YAML (or JSON) TopologySpec.
StatusOr<topo::Topology> BuildFromText(const std::string& text, const std::string& name) {
  const std::string_view t = Trim(text);
  if (IsPresetName(t)) {
    return topo::BuildPreset(t);
  }
  proto::TopologySpec spec;
  config::SourceMap map;
  config::YamlLoadOptions opt;
  opt.source_map = &map;
  Status s = config::LoadYamlString(text, name, &spec, opt);
  if (!s.ok()) return s;
  return topo::BuildTopology(spec, &map);
}

// The header's column index for each name in `names` (the first that fits).
int Column(const std::vector<std::string>& header, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    for (size_t i = 0; i < header.size(); ++i) {
      std::string h = header[i];
      for (char& c : h) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (h == n) return static_cast<int>(i);
    }
  }
  return -1;
}

std::string JsonText(const Json& o, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    if (!o.contains(k)) continue;
    const Json& v = o[k];
    if (v.is_string()) return v.get<std::string>();
    if (v.is_number_integer()) return std::to_string(v.get<long long>());
    if (v.is_number()) return std::to_string(v.get<double>());
    if (v.is_boolean()) return v.get<bool>() ? "up" : "down";
  }
  return "";
}

// Rows of a CSV (header first) or a JSON list of objects, as column texts
// in the order of `cols` (each a list of accepted names).
struct Table {
  std::vector<std::vector<std::string>> rows;
  std::vector<int> lines;  // source line of each row (1-based; JSON: item index + 1)
  bool ok = true;
  std::string why;
};

Table ReadTable(const std::string& text, const std::vector<std::vector<const char*>>& cols,
                SourceReport* src) {
  Table t;
  const std::string_view head = Trim(text);
  if (StartsWith(head, "[") || StartsWith(head, "{")) {
    Json j = Json::parse(text, nullptr, false);
    if (j.is_discarded()) {
      t.ok = false;
      t.why = "not valid JSON (truncated?)";
      return t;
    }
    if (j.is_object()) {
      // {"rows": [...]} or a single row.
      for (const char* k : {"rows", "neighbors", "neighbours", "counters", "events"}) {
        if (j.contains(k) && j[k].is_array()) {
          j = j[k];
          break;
        }
      }
      if (j.is_object()) j = Json::array({j});
    }
    int i = 0;
    for (const Json& o : j) {
      ++i;
      if (!o.is_object()) {
        ++src->lines_ignored;
        continue;
      }
      std::vector<std::string> row;
      for (const auto& names : cols) {
        std::string v;
        for (const char* n : names) {
          v = JsonText(o, {n});
          if (!v.empty()) break;
        }
        row.push_back(v);
      }
      t.rows.push_back(row);
      t.lines.push_back(i);
    }
    return t;
  }
  const auto lines = SplitLines(text);
  if (lines.empty()) {
    t.ok = false;
    t.why = "empty";
    return t;
  }
  const char sep = Contains(lines[0], ",") ? ',' : Contains(lines[0], "\t") ? '\t' : ' ';
  std::vector<std::string> header = sep == ' ' ? SplitWords(lines[0]) : SplitFields(lines[0], sep);
  std::vector<int> idx;
  for (const auto& names : cols) {
    int c = -1;
    for (const char* n : names) {
      c = Column(header, {n});
      if (c >= 0) break;
    }
    idx.push_back(c);
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    if (Trim(lines[i]).empty() || StartsWith(Trim(lines[i]), "#")) continue;
    const auto f = sep == ' ' ? SplitWords(lines[i]) : SplitFields(lines[i], sep);
    std::vector<std::string> row;
    for (int c : idx) row.push_back(c >= 0 && c < static_cast<int>(f.size()) ? f[c] : "");
    t.rows.push_back(row);
    t.lines.push_back(static_cast<int>(i + 1));
  }
  return t;
}

}  // namespace

void ParseTopology(const FileInput& file, Evidence* ev, SourceReport* src) {
  src->kind = "topology";
  auto topo = BuildFromText(file.text, file.rel);
  if (!topo.ok()) {
    src->use = SourceReport::Use::kUnusable;
    src->reason = "not a topology fathom can build: " + topo.status().message();
    return;
  }
  if (!ev->topology.empty()) {
    src->use = SourceReport::Use::kIgnored;
    src->reason = "a second topology; " + ev->topology_path + " is used";
    return;
  }
  ev->topology = IsPresetName(file.text) ? std::string(Trim(file.text)) : file.text;
  ev->topology_path = file.rel;
  src->lines_recognised = static_cast<int>(SplitLines(file.text).size());
}

void ParseNeighbors(const FileInput& file, Evidence* ev, SourceReport* src) {
  src->kind = "neighbors";
  Table t = ReadTable(file.text,
                      {{"host", "hostname", "node"},
                       {"nic", "interface", "ifname", "local_port", "device"},
                       {"switch", "switch_name", "remote_system", "neighbor"},
                       {"port", "switch_port", "remote_port"}},
                      src);
  if (!t.ok) {
    src->use = SourceReport::Use::kUnusable;
    src->reason = t.why;
    return;
  }
  for (size_t i = 0; i < t.rows.size(); ++i) {
    const auto& r = t.rows[i];
    if (r[0].empty() || r[2].empty()) {
      NoteProblem(src, t.lines[i], "row without host or switch");
      ++src->lines_ignored;
      continue;
    }
    ev->neighbors.push_back({r[0], r[1], r[2], r[3]});
    ++src->lines_recognised;
  }
}

void ParseSwitchCounters(const FileInput& file, Evidence* ev, SourceReport* src) {
  src->kind = "switch_counters";
  Table t =
      ReadTable(file.text, {{"port", "interface"}, {"counter", "name"}, {"value", "count"}}, src);
  if (!t.ok) {
    src->use = SourceReport::Use::kUnusable;
    src->reason = t.why;
    return;
  }
  for (size_t i = 0; i < t.rows.size(); ++i) {
    const auto& r = t.rows[i];
    auto v = ParseInt(r[2]);
    if (r[0].empty() || r[1].empty() || !v || *v < 0) {
      NoteProblem(src, t.lines[i], "port, counter and a count expected");
      ++src->lines_ignored;
      continue;
    }
    ev->switch_counters.push_back({r[0], r[1], static_cast<uint64_t>(*v)});
    ++src->lines_recognised;
  }
}

void ParseLinkEvents(const FileInput& file, Evidence* ev, SourceReport* src) {
  src->kind = "link_events";
  auto state_up = [](std::string s) -> std::optional<bool> {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (s == "up" || s == "link_up" || s == "active" || s == "1") return true;
    if (s == "down" || s == "link_down" || s == "polling" || s == "0") return false;
    return std::nullopt;
  };
  auto add = [&](int line, const std::string& time, const std::string& link,
                 const std::string& state) {
    auto tm = ParseTimeField(time);
    auto up = state_up(state);
    if (!tm || link.empty() || !up) {
      NoteProblem(src, line, "time, link and up/down expected");
      ++src->lines_ignored;
      return;
    }
    SeeWallTime(ev, *tm);
    ev->link_events.push_back({link, *up, *tm});
    ++src->lines_recognised;
  };
  const std::string first(Trim(SplitLines(file.text).empty() ? "" : SplitLines(file.text)[0]));
  const bool table = StartsWith(Trim(file.text), "[") || StartsWith(Trim(file.text), "{") ||
                     (Contains(first, "link") && (Contains(first, ",") || Contains(first, "time")));
  if (table) {
    Table t = ReadTable(file.text,
                        {{"time", "time_s", "timestamp", "ts"},
                         {"link", "port"},
                         {"state", "event", "status", "up"}},
                        src);
    if (!t.ok) {
      src->use = SourceReport::Use::kUnusable;
      src->reason = t.why;
      return;
    }
    for (size_t i = 0; i < t.rows.size(); ++i)
      add(t.lines[i], t.rows[i][0], t.rows[i][1], t.rows[i][2]);
    return;
  }
  int n = 0;
  for (std::string_view raw : SplitLines(file.text)) {
    ++n;
    std::string_view l = Trim(raw);
    if (l.empty() || l[0] == '#') continue;
    std::string time;
    if (auto ts = TakeTimestamp(&l)) {
      time = std::to_string(*ts);
    }
    auto w = SplitWords(l);
    if (time.empty() && !w.empty()) {
      time = w[0];
      w.erase(w.begin());
    }
    if (w.size() < 2) {
      NoteProblem(src, n, "TIME LINK up|down expected");
      ++src->lines_ignored;
      continue;
    }
    add(n, time, w[0], w[1]);
  }
}

void CheckFabricConsistency(Evidence* ev) {
  if (ev->topology.empty() || ev->neighbors.empty()) return;
  auto topo = BuildFromText(ev->topology, ev->topology_path);
  if (!topo.ok()) return;
  SourceReport* nsrc = nullptr;
  for (SourceReport& s : ev->sources) {
    if (s.kind == "neighbors" && s.use != SourceReport::Use::kUnusable) nsrc = &s;
  }
  if (nsrc == nullptr) return;
  int bad = 0;
  for (const Neighbor& nb : ev->neighbors) {
    auto host = topo->FindNode(nb.host);
    auto sw = topo->FindNode(nb.switch_name);
    std::string why;
    if (!host.ok()) {
      why = "host " + nb.host + " is not in the topology";
    } else if (!sw.ok()) {
      why = "switch " + nb.switch_name + " is not in the topology";
    } else if (!topo->FindLink(*host, *sw).ok()) {
      std::string actual;
      for (int32_t l : topo->LinksOf(*host)) {
        const topo::Link& link = topo->link(l);
        const int32_t other = link.a == *host ? link.b : link.a;
        actual += (actual.empty() ? "" : ", ") + topo->node(other).name;
      }
      why = nb.host + " -> " + nb.switch_name + " contradicts the topology (" + ev->topology_path +
            " attaches " + nb.host + " to " + actual + ")";
    } else if (auto port = ParseInt(nb.switch_port);
               port && *port >= 0 && *port < topo->PortCount(*sw)) {
      const topo::PortRef peer = topo->Peer(*sw, static_cast<int32_t>(*port));
      if (peer.node != *host) {
        why = nb.switch_name + " port " + nb.switch_port + " leads to " +
              topo->node(peer.node).name + " in the topology, not " + nb.host;
      }
    }
    if (!why.empty()) {
      ++bad;
      NoteProblem(nsrc, 0, why);
    }
  }
  if (bad > 0) {
    nsrc->reason += " (" + std::to_string(bad) + " of " + std::to_string(ev->neighbors.size()) +
                    " rows contradict the topology)";
  }
}

}  // namespace fathom::replay::internal
