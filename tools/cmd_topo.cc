// `fathom topo PRESET|FILE [--json] [--links] [--dot FILE]`: build a
// topology and describe it — hosts, servers, switches and links per tier,
// bisection bandwidth, diameter, oversubscription and the validation result;
// with --links every link by the name `fathom sim --fault link=NAME` and
// `--pcap NAME=FILE` resolve (Topology::FindLink); with --dot a Graphviz
// graph. Exit 0 when it validates, 1 when it builds but fails validation, 2
// for a bad preset, file or flag.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>

#include "base/json.h"
#include "tools/command.h"
#include "topologies/builders.h"
#include "topologies/server.h"
#include "topologies/spec.h"

namespace fathom::tools {
namespace {

std::string Num(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

const char* ReachName(topo::Reachability r) {
  return r == topo::Reachability::kAllPairs ? "all_pairs" : "same_rail";
}

// One link as JSON: its name and what it joins, rate, latency and MTUs.
std::string LinkJson(const topo::Topology& t, const topo::Link& l) {
  std::ostringstream o;
  o << "{\"name\":\"" << JsonEscape(l.name) << "\",\"tier\":" << l.tier << ",\"a\":\""
    << JsonEscape(t.node(l.a).name) << "\",\"a_port\":" << l.a_port << ",\"b\":\""
    << JsonEscape(t.node(l.b).name) << "\",\"b_port\":" << l.b_port
    << ",\"rate_gbps\":" << Num(l.rate.gbps()) << ",\"latency_ns\":" << Num(l.latency.ns())
    << ",\"mtu_ab\":" << l.mtu_ab << ",\"mtu_ba\":" << l.mtu_ba << "}";
  return o.str();
}

// `topo` is non-null with --links: the "links" object then has a "list".
std::string Json(const topo::TopologySummary& s, const topo::Topology* topo) {
  std::ostringstream o;
  o << "{\"name\":\"" << JsonEscape(s.name) << "\",\"hosts\":" << s.hosts
    << ",\"servers\":" << s.servers << ",\"switches\":{\"total\":" << s.switches;
  for (int t = topo::kTierLeaf; t <= topo::kMaxTier; ++t) {
    o << ",\"tier" << t << "\":" << s.switches_per_tier[t];
  }
  o << "},\"links\":{\"total\":" << s.links << ",\"per_tier\":[";
  for (size_t i = 0; i < s.links_per_tier.size(); ++i) {
    const topo::TierLinks& l = s.links_per_tier[i];
    o << (i ? "," : "") << "{\"tier\":" << l.tier << ",\"count\":" << l.count
      << ",\"rate_gbps\":" << Num(l.rate.gbps()) << ",\"total_gbps\":" << Num(l.total.gbps())
      << ",\"latency_ns\":" << Num(l.latency.ns()) << "}";
  }
  o << "]";
  if (topo != nullptr) {
    o << ",\"list\":[";
    for (const topo::Link& l : topo->links()) {
      o << (l.id ? "," : "") << LinkJson(*topo, l);
    }
    o << "]";
  }
  o << "},\"bisection_gbps\":" << Num(s.bisection.gbps())
    << ",\"diameter_hops\":" << s.diameter_hops << ",\"oversubscription\":{";
  for (int t = topo::kTierLeaf; t <= topo::kMaxTier; ++t) {
    o << (t > topo::kTierLeaf ? "," : "") << "\"tier" << t << "\":" << Num(s.oversubscription[t]);
  }
  o << "},\"mtu\":{\"min_bytes\":" << s.mtu_min_bytes << ",\"max_bytes\":" << s.mtu_max_bytes
    << ",\"asymmetric_links\":" << s.asymmetric_mtu_links << "}";
  o << ",\"reachability\":\"" << ReachName(s.reachability) << "\",\"routing\":\""
    << (s.routing == topo::Routing::kUpDown ? "computed" : "tables")
    << "\",\"estimated_bytes\":" << s.estimated_bytes
    << ",\"valid\":" << (s.validation.ok() ? "true" : "false") << ",\"validation\":\""
    << JsonEscape(s.validation.ok() ? "ok" : s.validation.message()) << "\"}\n";
  return o.str();
}

std::string Text(const topo::TopologySummary& s) {
  std::ostringstream o;
  o << "topology:         " << s.name << "\n"
    << "hosts:            " << s.hosts << " NICs in " << s.servers << " servers\n"
    << "switches:         " << s.switches;
  const char* tier_names[] = {"host", "leaf", "spine", "core"};
  if (s.switches > 0) {
    o << " (";
    bool first = true;
    for (int t = topo::kTierLeaf; t <= topo::kMaxTier; ++t) {
      if (s.switches_per_tier[t] == 0) continue;
      o << (first ? "" : ", ") << "tier " << t << " " << tier_names[t] << ": "
        << s.switches_per_tier[t];
      first = false;
    }
    o << ")";
  }
  o << "\nlinks:            " << s.links << "\n";
  for (const topo::TierLinks& l : s.links_per_tier) {
    o << "  tier " << l.tier << ":          " << l.count << " x " << Num(l.rate.gbps())
      << " Gb/s = " << Num(l.total.gbps()) << " Gb/s, " << Num(l.latency.ns()) << " ns\n";
  }
  o << "bisection:        " << Num(s.bisection.gbps()) << " Gb/s (ranks 0..n/2-1 vs the rest)\n"
    << "diameter:         " << s.diameter_hops << " hops\n"
    << "oversubscription:";
  bool any = false;
  for (int t = topo::kTierLeaf; t <= topo::kMaxTier; ++t) {
    if (s.oversubscription[t] <= 0) continue;
    o << (any ? ", " : " ") << "tier " << t << " " << Num(s.oversubscription[t]) << ":1";
    any = true;
  }
  o << (any ? "" : " none (no uplinks)") << "\n"
    << "mtu:              " << s.mtu_min_bytes;
  if (s.mtu_max_bytes != s.mtu_min_bytes) o << ".." << s.mtu_max_bytes;
  o << " bytes";
  if (s.asymmetric_mtu_links > 0) {
    o << " (" << s.asymmetric_mtu_links << " link(s) with a different MTU each way)";
  }
  o << "\n"
    << "reachability:     "
    << (s.reachability == topo::Reachability::kAllPairs ? "all pairs"
                                                        : "same rail only (rail-only wiring)")
    << "\n"
    << "routing:          "
    << (s.routing == topo::Routing::kUpDown ? "computed (up/down ECMP from addresses)"
                                            : "tables (per node and destination)")
    << ", about " << topo::FormatBytes(s.estimated_bytes) << " for the topology\n"
    << "validation:       " << (s.validation.ok() ? "ok" : s.validation.message()) << "\n";
  return o.str();
}

// Every link, one per line, by the name the fault and capture flags take.
std::string LinkList(const topo::Topology& t) {
  auto end = [&t](int32_t node, int32_t port) {
    return t.node(node).name + ":" + std::to_string(port);
  };
  size_t name_width = 0, a_width = 0, b_width = 0;
  for (const topo::Link& l : t.links()) {
    name_width = std::max(name_width, l.name.size());
    a_width = std::max(a_width, end(l.a, l.a_port).size());
    b_width = std::max(b_width, end(l.b, l.b_port).size());
  }
  auto pad = [](const std::string& s, size_t width) {
    return s + std::string(width > s.size() ? width - s.size() : 0, ' ');
  };
  std::ostringstream o;
  o << "link names (for `fathom sim --fault link=NAME` and `--pcap NAME=FILE`):\n";
  for (const topo::Link& l : t.links()) {
    o << "  " << pad(l.name, name_width) << "  tier " << l.tier << "  "
      << pad(end(l.a, l.a_port), a_width) << " <-> " << pad(end(l.b, l.b_port), b_width) << "  "
      << Num(l.rate.gbps()) << " Gb/s, " << Num(l.latency.ns()) << " ns, mtu " << l.mtu_ab;
    if (l.mtu_ba != l.mtu_ab) o << "/" << l.mtu_ba;
    o << "\n";
  }
  return o.str();
}

// A DOT identifier: always quoted, with the two characters DOT escapes.
std::string DotId(std::string_view s) {
  std::string q = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') q += '\\';
    q += c;
  }
  return q + "\"";
}

// Graphviz: hosts (ellipses) at the bottom, one row per switch tier, every
// link an edge labelled with its rate and carrying its name as the tooltip
// and the SVG id.
std::string Dot(const topo::Topology& t) {
  std::ostringstream o;
  o << "graph " << DotId(t.name()) << " {\n"
    << "  rankdir=BT;\n"
    << "  node [shape=box, fontsize=10];\n"
    << "  edge [fontsize=8];\n";
  for (int tier = topo::kTierHost; tier <= topo::kMaxTier; ++tier) {
    std::ostringstream row;
    int count = 0;
    for (const topo::Node& n : t.nodes()) {
      if (n.tier != tier) continue;
      ++count;
      row << "    " << DotId(n.name);
      if (n.kind == topo::NodeKind::kHost) {
        row << " [shape=ellipse, tooltip="
            << DotId("server " + std::to_string(n.server) + " gpu " + std::to_string(n.gpu)) << "]";
      }
      row << ";\n";
    }
    if (count == 0) continue;
    o << "  subgraph " << DotId("tier" + std::to_string(tier)) << " {\n    rank=same;\n"
      << row.str() << "  }\n";
  }
  for (const topo::Link& l : t.links()) {
    std::string label = Num(l.rate.gbps()) + " Gb/s";
    if (l.mtu_ab != l.mtu_ba) {
      label += "\\nmtu " + std::to_string(l.mtu_ab) + "/" + std::to_string(l.mtu_ba);
    }
    o << "  " << DotId(t.node(l.a).name) << " -- " << DotId(t.node(l.b).name)
      << " [label=" << DotId(label) << ", id=" << DotId(l.name) << ", tooltip=" << DotId(l.name)
      << "];\n";
  }
  o << "}\n";
  return o.str();
}

bool LooksLikeFile(const std::string& arg) {
  return arg.ends_with(".yaml") || arg.ends_with(".yml") || arg.find('/') != std::string::npos ||
         std::filesystem::exists(arg);
}

struct Options {
  std::string what;
  bool json = false;
  bool links = false;
  std::string dot;  // --dot FILE, "-" = stdout instead of the summary
  // The server tier (topologies/server.h): auto = h100 where
  // ServerTierByDefault says, none elsewhere.
  std::string server = "auto";
};

int Run(const Options& o) {
  StatusOr<topo::Topology> t =
      LooksLikeFile(o.what) ? topo::LoadTopologyFile(o.what) : topo::BuildPreset(o.what);
  if (!t.ok()) {
    std::fprintf(stderr, "fathom topo: %s\n", t.status().message().c_str());
    return kExitUsage;
  }
  if (o.dot == "-" && o.json) {
    std::fprintf(stderr, "fathom topo: --dot - and --json both want stdout; give --dot a FILE\n");
    return kExitUsage;
  }
  const topo::TopologySummary s = t->Summarize();
  std::string gpu = o.server;
  if (gpu == "auto") {
    gpu = topo::ServerTierByDefault(o.what) ? std::string(topo::kDefaultServerGpu) : "none";
  }
  std::optional<topo::ServerTier> tier;
  if (gpu != "none") {
    auto spec = topo::ServerPreset(gpu);
    if (!spec.ok()) {
      std::fprintf(stderr, "fathom topo: --server: %s\n", spec.status().message().c_str());
      return kExitUsage;
    }
    auto built = topo::BuildServerTier(*t, *spec);
    if (!built.ok()) {
      std::fprintf(stderr, "fathom topo: %s\n", built.status().message().c_str());
      return kExitUsage;
    }
    tier = std::move(built).value();
  }
  if (!o.dot.empty()) {
    const std::string dot = Dot(*t);
    FILE* out = o.dot == "-" ? stdout : std::fopen(o.dot.c_str(), "w");
    if (out == nullptr) {
      std::fprintf(stderr, "fathom topo: --dot %s: cannot create the file: %s\n", o.dot.c_str(),
                   std::strerror(errno));
      return kExitUsage;
    }
    const bool written = std::fwrite(dot.data(), 1, dot.size(), out) == dot.size();
    if (out != stdout && std::fclose(out) != 0) {
      std::fprintf(stderr, "fathom topo: --dot %s: write failed\n", o.dot.c_str());
      return kExitUsage;
    }
    if (!written) return kExitUsage;
  }
  if (o.dot != "-") {
    std::string out = o.json ? Json(s, o.links ? &*t : nullptr) : Text(s);
    if (tier && o.json) {
      out.insert(out.rfind('}'), ",\"server\":" + topo::ServerTierJson(*tier));
    } else if (tier) {
      out += topo::DescribeServerTier(*tier);
    }
    if (o.links && !o.json) out += LinkList(*t);
    std::fwrite(out.data(), 1, out.size(), stdout);
  }
  return s.validation.ok() ? kExitOk : kExitFailure;
}

}  // namespace

FATHOM_REGISTER_COMMAND(
    topo,
    Command{
        "topo", "Build a topology (preset or YAML file) and describe it",
        [](CLI::App* sub) -> std::function<int()> {
          auto opts = std::make_shared<Options>();
          sub->add_option("topology", opts->what,
                          "PRESET or FILE.yaml. Presets: small (16 GPUs, 2 servers "
                          "back-to-back), medium (128 GPUs, leaf-spine), large (1024 "
                          "GPUs, k=16 fat-tree, optics), xlarge (8192 GPUs, k=32), "
                          "xxlarge (65536 GPUs, k=64), medium:rail, large:rail, xlarge:rail "
                          "(the levels rail-optimized: NIC i of every server on rail "
                          "switch i), fat-tree:k=N[,hosts_per_edge="
                          "N][,gpus=N][,rail], leaf-spine:leaves=N,spines=N,hosts=N[,"
                          "uplinks=N][,gpus=N][,rail], back-to-back[:gpus=N]. A FILE "
                          "holds a TopologySpec (proto/topology.proto).")
              ->required();
          sub->add_flag("--json", opts->json, "print one JSON object");
          sub->add_option(
              "--server", opts->server,
              "the server tier to show: auto (default: h100 on small, "
              "medium, large, medium:rail and large:rail; none elsewhere), none, a100, h100, b200 "
              "(GPUs on NVSwitch, PCIe switches, one NIC per GPU on its "
              "rail, NUMA placement)");
          sub->add_flag("--links", opts->links,
                        "also list every link: its name (what `fathom sim --fault "
                        "link=NAME` and `--pcap NAME=FILE` take; the 2nd, 3rd... "
                        "parallel link is NAME/1, NAME/2), ends:ports, rate, latency, "
                        "MTU; "
                        "with --json as links.list");
          sub->add_option("--dot", opts->dot,
                          "write a Graphviz graph to FILE ('-' = stdout instead of the "
                          "summary): hosts at the bottom, a row per switch tier, links "
                          "labelled with their rate (render: dot -Tsvg FILE)")
              ->type_name("FILE");
          return [opts] { return Run(*opts); };
        },
        20});

}  // namespace fathom::tools
