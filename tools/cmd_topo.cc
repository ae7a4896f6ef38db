// `fathom topo PRESET|FILE [--json]`: build a topology and describe it —
// hosts, servers, switches and links per tier, bisection bandwidth, diameter,
// oversubscription and the validation result. Exit 0 when it validates, 1
// when it builds but fails validation, 2 for a bad preset or file.
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>

#include "base/json.h"
#include "tools/command.h"
#include "topologies/builders.h"
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

std::string Json(const topo::TopologySummary& s) {
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
  o << "]},\"bisection_gbps\":" << Num(s.bisection.gbps())
    << ",\"diameter_hops\":" << s.diameter_hops << ",\"oversubscription\":{";
  for (int t = topo::kTierLeaf; t <= topo::kMaxTier; ++t) {
    o << (t > topo::kTierLeaf ? "," : "") << "\"tier" << t << "\":" << Num(s.oversubscription[t]);
  }
  o << "},\"mtu\":{\"min_bytes\":" << s.mtu_min_bytes << ",\"max_bytes\":" << s.mtu_max_bytes
    << ",\"asymmetric_links\":" << s.asymmetric_mtu_links << "}";
  o << ",\"reachability\":\"" << ReachName(s.reachability)
    << "\",\"valid\":" << (s.validation.ok() ? "true" : "false") << ",\"validation\":\""
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
    << "validation:       " << (s.validation.ok() ? "ok" : s.validation.message()) << "\n";
  return o.str();
}

bool LooksLikeFile(const std::string& arg) {
  return arg.ends_with(".yaml") || arg.ends_with(".yml") || arg.find('/') != std::string::npos ||
         std::filesystem::exists(arg);
}

struct Options {
  std::string what;
  bool json = false;
};

int Run(const Options& o) {
  StatusOr<topo::Topology> t =
      LooksLikeFile(o.what) ? topo::LoadTopologyFile(o.what) : topo::BuildPreset(o.what);
  if (!t.ok()) {
    std::fprintf(stderr, "fathom topo: %s\n", t.status().message().c_str());
    return kExitUsage;
  }
  const topo::TopologySummary s = t->Summarize();
  const std::string out = o.json ? Json(s) : Text(s);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return s.validation.ok() ? kExitOk : kExitFailure;
}

}  // namespace

FATHOM_REGISTER_COMMAND(
    topo, Command{"topo", "Build a topology (preset or YAML file) and describe it",
                  [](CLI::App* sub) -> std::function<int()> {
                    auto opts = std::make_shared<Options>();
                    sub->add_option("topology", opts->what,
                                    "PRESET or FILE.yaml. Presets: small (16 GPUs, 2 servers "
                                    "back-to-back), medium (128 GPUs, leaf-spine), large (1024 "
                                    "GPUs, k=16 fat-tree, optics), fat-tree:k=N[,hosts_per_edge="
                                    "N][,gpus=N][,rail], leaf-spine:leaves=N,spines=N,hosts=N[,"
                                    "uplinks=N][,gpus=N][,rail], back-to-back[:gpus=N]. A FILE "
                                    "holds a TopologySpec (proto/topology.proto).")
                        ->required();
                    sub->add_flag("--json", opts->json, "print one JSON object");
                    return [opts] { return Run(*opts); };
                  },
                  20});

}  // namespace fathom::tools
