// Topology builders: leaf-spine, fat-tree, back-to-back, scale levels, presets.
#include "topologies/builders.h"

#include <charconv>
#include <cmath>
#include <map>
#include <string>
#include <vector>

namespace fathom::topo {
namespace {

std::string Str(int64_t v) { return std::to_string(v); }

Status CheckPositive(std::string_view ctx, std::string_view field, int64_t v) {
  if (v <= 0) {
    return InvalidArgument(std::string(ctx) + ": " + std::string(field) + " = " + Str(v) +
                           ", must be positive");
  }
  return Status::Ok();
}

// Adds the hosts of `servers` servers in rank order; returns their node ids.
std::vector<int32_t> AddServers(TopologyBuilder& b, int32_t servers, int32_t gpus) {
  std::vector<int32_t> ids;
  ids.reserve(static_cast<size_t>(servers) * static_cast<size_t>(gpus));
  for (int32_t s = 0; s < servers; ++s) {
    for (int32_t g = 0; g < gpus; ++g) ids.push_back(b.AddHost("h" + Str(s * gpus + g), s, g));
  }
  return ids;
}

}  // namespace

StatusOr<Topology> BuildLeafSpine(const LeafSpineOptions& o) {
  const std::string ctx = "BuildLeafSpine";
  FATHOM_RETURN_IF_ERROR(CheckPositive(ctx, "leaves", o.leaves));
  FATHOM_RETURN_IF_ERROR(CheckPositive(ctx, "hosts_per_leaf", o.hosts_per_leaf));
  FATHOM_RETURN_IF_ERROR(CheckPositive(ctx, "uplinks_per_pair", o.uplinks_per_pair));
  FATHOM_RETURN_IF_ERROR(CheckPositive(ctx, "gpus_per_server", o.gpus_per_server));
  if (o.spines < 0) return InvalidArgument(ctx + ": spines = " + Str(o.spines) + ", must be >= 0");
  const int64_t hosts = int64_t{o.leaves} * o.hosts_per_leaf;
  if (hosts > 1 << 20) return OutOfRange(ctx + ": " + Str(hosts) + " hosts is more than 2^20");
  if (hosts % o.gpus_per_server != 0) {
    return InvalidArgument(ctx + ": leaves * hosts_per_leaf = " + Str(hosts) +
                           " is not a multiple of gpus_per_server = " + Str(o.gpus_per_server));
  }
  int32_t spines = o.spines;
  if (spines == 0 && o.oversubscription > 0) {
    // ratio = hosts_per_leaf * host_rate / (spines * uplinks * fabric_rate)
    const double exact = static_cast<double>(o.hosts_per_leaf) * o.host_link.rate.gbps() /
                         (o.oversubscription * o.uplinks_per_pair * o.fabric_link.rate.gbps());
    // Range first: a tiny ratio asks for more spines than llround can say.
    spines = exact >= 0.5 && exact <= 65536 ? static_cast<int32_t>(std::llround(exact)) : 0;
    if (spines <= 0 || std::fabs(exact - spines) > 1e-9) {
      return InvalidArgument(ctx + ": oversubscription " + std::to_string(o.oversubscription) +
                             " needs " + std::to_string(exact) + " spines, not a whole number");
    }
  }
  const int32_t servers = static_cast<int32_t>(hosts / o.gpus_per_server);
  int32_t groups = 1;
  if (o.rail_optimized) {
    // A group is gpus_per_server rail leaves holding hosts_per_leaf servers.
    if (o.leaves % o.gpus_per_server != 0) {
      return InvalidArgument(ctx + ": rail-optimized wiring needs leaves = " + Str(o.leaves) +
                             " to be a multiple of gpus_per_server = " + Str(o.gpus_per_server));
    }
    groups = o.leaves / o.gpus_per_server;
  }
  Reachability reach = Reachability::kAllPairs;
  if (spines == 0) {
    if (o.rail_optimized && groups == 1) {
      reach = Reachability::kSameRail;
    } else if (o.leaves != 1) {
      return InvalidArgument(ctx + ": spines = 0 with " + Str(o.leaves) +
                             " leaves leaves them disconnected (rail-only needs rail wiring and "
                             "leaves = gpus_per_server)");
    }
  }
  // Before anything is allocated: what these parameters would need.
  FATHOM_RETURN_IF_ERROR(
      CheckTopologySize(ctx + "(leaves=" + Str(o.leaves) + ", spines=" + Str(spines) +
                            ", hosts_per_leaf=" + Str(o.hosts_per_leaf) + ")",
                        hosts + o.leaves + spines, hosts,
                        hosts + int64_t{o.leaves} * spines * o.uplinks_per_pair, Routing::kUpDown));
  std::string name = "leaf-spine leaves=" + Str(o.leaves) + " spines=" + Str(spines) +
                     " hosts=" + Str(o.hosts_per_leaf);
  if (o.rail_optimized) name += " rail";
  TopologyBuilder b(name);
  b.set_reachability(reach);
  const std::vector<int32_t> host_ids = AddServers(b, servers, o.gpus_per_server);
  std::vector<int32_t> leaf(static_cast<size_t>(o.leaves)), spine(static_cast<size_t>(spines));
  for (int32_t i = 0; i < o.leaves; ++i) leaf[i] = b.AddSwitch("leaf" + Str(i), kTierLeaf);
  for (int32_t j = 0; j < spines; ++j) spine[j] = b.AddSwitch("spine" + Str(j), kTierSpine);
  // Computed routing (topology.h): a leaf's ports are its hosts in rank
  // order, then per spine its uplinks_per_pair links; a spine's are per
  // leaf its uplinks_per_pair links. Spines head the one top subtree.
  b.UseUpDownRouting();
  for (int32_t i = 0; i < o.leaves; ++i) {
    b.SetSwitchPlace(leaf[i],
                     SwitchPlace{kTierLeaf, i, 1, o.hosts_per_leaf, spines * o.uplinks_per_pair});
  }
  for (int32_t j = 0; j < spines; ++j) {
    b.SetSwitchPlace(spine[j], SwitchPlace{kTierSpine, 0, o.uplinks_per_pair, 0, 0});
  }
  for (int32_t r = 0; r < static_cast<int32_t>(hosts); ++r) {
    int32_t l = r / o.hosts_per_leaf;
    int32_t at_leaf = r % o.hosts_per_leaf;
    if (o.rail_optimized) {
      const int32_t server = r / o.gpus_per_server, gpu = r % o.gpus_per_server;
      l = (server / o.hosts_per_leaf) * o.gpus_per_server + gpu;
      at_leaf = server % o.hosts_per_leaf;
    }
    HostPlace place;
    place.group[kTierLeaf] = l;
    place.down[kTierLeaf] = at_leaf;
    place.down[kTierSpine] = l * o.uplinks_per_pair;
    b.SetHostPlace(host_ids[r], place);
    FATHOM_ASSIGN_OR_RETURN(int32_t id, b.Connect(host_ids[r], leaf[l], o.host_link));
    (void)id;
  }
  for (int32_t i = 0; i < o.leaves; ++i) {
    for (int32_t j = 0; j < spines; ++j) {
      for (int32_t u = 0; u < o.uplinks_per_pair; ++u) {
        FATHOM_ASSIGN_OR_RETURN(int32_t id, b.Connect(leaf[i], spine[j], o.fabric_link));
        (void)id;
      }
    }
  }
  return std::move(b).Build();
}

StatusOr<Topology> BuildFatTree(const FatTreeOptions& o) {
  const std::string ctx = "BuildFatTree";
  if (o.k < 2 || o.k % 2 != 0 || o.k > 128) {
    return InvalidArgument(ctx + ": k = " + Str(o.k) + ", must be even and in 2..128");
  }
  FATHOM_RETURN_IF_ERROR(CheckPositive(ctx, "gpus_per_server", o.gpus_per_server));
  const int32_t half = o.k / 2;
  const int32_t per_edge = o.hosts_per_edge == 0 ? half : o.hosts_per_edge;
  if (per_edge < half) {
    return InvalidArgument(ctx + ": hosts_per_edge = " + Str(per_edge) +
                           ", must be >= k/2 = " + Str(half) + " (0 means k/2)");
  }
  const int64_t hosts = int64_t{o.k} * half * per_edge;
  if (hosts > 1 << 20) return OutOfRange(ctx + ": " + Str(hosts) + " hosts is more than 2^20");
  if (hosts % o.gpus_per_server != 0) {
    return InvalidArgument(
        ctx + ": " + Str(hosts) +
        " hosts is not a multiple of gpus_per_server = " + Str(o.gpus_per_server));
  }
  if (o.rail_optimized && half % o.gpus_per_server != 0) {
    return InvalidArgument(ctx + ": rail-optimized wiring needs k/2 = " + Str(half) +
                           " to be a multiple of gpus_per_server = " + Str(o.gpus_per_server));
  }
  FATHOM_RETURN_IF_ERROR(CheckTopologySize(
      ctx + "(k=" + Str(o.k) + (per_edge != half ? ", hosts_per_edge=" + Str(per_edge) : "") + ")",
      hosts + int64_t{o.k} * half * 2 + int64_t{half} * half, hosts,
      hosts + int64_t{o.k} * half * half * 2, Routing::kUpDown));
  std::string name = "fat-tree k=" + Str(o.k);
  if (per_edge != half) name += " hosts_per_edge=" + Str(per_edge);
  if (o.rail_optimized) name += " rail";
  TopologyBuilder b(name);
  const int32_t servers = static_cast<int32_t>(hosts / o.gpus_per_server);
  const std::vector<int32_t> host_ids = AddServers(b, servers, o.gpus_per_server);
  std::vector<int32_t> edge, agg, core;
  for (int32_t p = 0; p < o.k; ++p) {
    for (int32_t i = 0; i < half; ++i) {
      edge.push_back(b.AddSwitch("edge" + Str(p) + "." + Str(i), kTierLeaf));
    }
  }
  for (int32_t p = 0; p < o.k; ++p) {
    for (int32_t i = 0; i < half; ++i) {
      agg.push_back(b.AddSwitch("agg" + Str(p) + "." + Str(i), kTierSpine));
    }
  }
  for (int32_t j = 0; j < half * half; ++j) core.push_back(b.AddSwitch("core" + Str(j), kTierCore));
  // Computed routing (topology.h): an edge's ports are its hosts in rank
  // order, then the pod's aggregation switches; an aggregation switch's are
  // the pod's edges, then its k/2 cores; a core's are the pods in order.
  b.UseUpDownRouting();
  for (int32_t p = 0; p < o.k; ++p) {
    for (int32_t i = 0; i < half; ++i) {
      b.SetSwitchPlace(edge[p * half + i], SwitchPlace{kTierLeaf, p * half + i, 1, per_edge, half});
      b.SetSwitchPlace(agg[p * half + i], SwitchPlace{kTierSpine, p, 1, half, half});
    }
  }
  for (int32_t c : core) b.SetSwitchPlace(c, SwitchPlace{kTierCore, 0, 1, 0, 0});
  const int32_t per_pod = half * per_edge;
  for (int32_t r = 0; r < static_cast<int32_t>(hosts); ++r) {
    const int32_t pod = r / per_pod;
    int32_t e = (r % per_pod) / per_edge;
    int32_t at_edge = (r % per_pod) % per_edge;
    if (o.rail_optimized) {
      // Servers fill a pod's groups of gpus_per_server rail edges in order.
      const int32_t in_pod = r % per_pod;
      const int32_t server = in_pod / o.gpus_per_server, gpu = in_pod % o.gpus_per_server;
      e = (server / per_edge) * o.gpus_per_server + gpu;
      at_edge = server % per_edge;
    }
    HostPlace place;
    place.group[kTierLeaf] = pod * half + e;
    place.down[kTierLeaf] = at_edge;
    place.group[kTierSpine] = pod;
    place.down[kTierSpine] = e;
    place.down[kTierCore] = pod;
    b.SetHostPlace(host_ids[r], place);
    FATHOM_ASSIGN_OR_RETURN(int32_t id, b.Connect(host_ids[r], edge[pod * half + e], o.host_link));
    (void)id;
  }
  for (int32_t p = 0; p < o.k; ++p) {
    for (int32_t i = 0; i < half; ++i) {
      for (int32_t j = 0; j < half; ++j) {
        FATHOM_ASSIGN_OR_RETURN(int32_t id,
                                b.Connect(edge[p * half + i], agg[p * half + j], o.edge_link));
        (void)id;
      }
    }
  }
  for (int32_t p = 0; p < o.k; ++p) {
    for (int32_t i = 0; i < half; ++i) {
      for (int32_t c = 0; c < half; ++c) {
        FATHOM_ASSIGN_OR_RETURN(int32_t id,
                                b.Connect(agg[p * half + i], core[i * half + c], o.core_link));
        (void)id;
      }
    }
  }
  return std::move(b).Build();
}

StatusOr<Topology> BuildBackToBack(const BackToBackOptions& o) {
  FATHOM_RETURN_IF_ERROR(CheckPositive("BuildBackToBack", "gpus_per_server", o.gpus_per_server));
  if (o.gpus_per_server > 1 << 19) {
    return OutOfRange("BuildBackToBack: gpus_per_server = " + Str(o.gpus_per_server) +
                      " makes more than 2^20 hosts");
  }
  FATHOM_RETURN_IF_ERROR(CheckTopologySize("BuildBackToBack(gpus=" + Str(o.gpus_per_server) + ")",
                                           2 * int64_t{o.gpus_per_server},
                                           2 * int64_t{o.gpus_per_server}, o.gpus_per_server));
  TopologyBuilder b("back-to-back gpus=" + Str(o.gpus_per_server));
  b.set_reachability(Reachability::kSameRail);
  const std::vector<int32_t> ids = AddServers(b, 2, o.gpus_per_server);
  for (int32_t g = 0; g < o.gpus_per_server; ++g) {
    FATHOM_ASSIGN_OR_RETURN(int32_t id, b.Connect(ids[g], ids[o.gpus_per_server + g], o.link));
    (void)id;
  }
  return std::move(b).Build();
}

namespace {

// A scale level's shape and links; `rail`: rewired rail-optimized, rail i
// of a group on its switch i (LeafSpineOptions / FatTreeOptions::
// rail_optimized). Back-to-back servers are on their rails already.
StatusOr<Topology> BuildLevel(Connection connection, int32_t servers, int32_t gpus_per_server,
                              bool rail) {
  const std::string ctx = std::string(rail ? "BuildRailScaleLevel" : "BuildScaleLevel") +
                          "(servers=" + Str(servers) + ", gpus_per_server=" + Str(gpus_per_server) +
                          ")";
  FATHOM_RETURN_IF_ERROR(CheckPositive(ctx, "servers", servers));
  FATHOM_RETURN_IF_ERROR(CheckPositive(ctx, "gpus_per_server", gpus_per_server));
  switch (connection) {
    case Connection::kCopperDirect: {
      if (servers != 2) {
        return InvalidArgument(ctx +
                               ": copper_cable_direct (back-to-back) needs exactly 2 servers");
      }
      return BuildBackToBack({gpus_per_server, kCopperLink});
    }
    case Connection::kCopperSwitch: {
      LeafSpineOptions o;
      const int32_t per_leaf = servers % 2 == 0 ? 2 : 1;
      o.leaves = servers / per_leaf;
      o.hosts_per_leaf = per_leaf * gpus_per_server;
      o.gpus_per_server = gpus_per_server;
      o.rail_optimized = rail;
      if (o.leaves == 1) {
        o.spines = 0;
      } else if (o.hosts_per_leaf % 4 == 0) {
        o.spines = 4;
        o.uplinks_per_pair = o.hosts_per_leaf / 4;
      } else {
        o.spines = o.hosts_per_leaf;
      }
      return BuildLeafSpine(o);
    }
    case Connection::kOpticalEngine: {
      const int64_t hosts = int64_t{servers} * gpus_per_server;
      for (int32_t k = 2; k <= 128; k += 2) {
        if (int64_t{k} * k * k / 4 != hosts) continue;
        FatTreeOptions o;
        o.k = k;
        o.gpus_per_server = gpus_per_server;
        o.rail_optimized = rail;
        o.host_link = kOpticalHostLink;
        o.edge_link = kOpticalFabricLink;
        o.core_link = kOpticalFabricLink;
        return BuildFatTree(o);
      }
      return InvalidArgument(ctx + ": npo_optical_engine builds a k-ary fat-tree, which needs " +
                             Str(hosts) +
                             " GPUs to be k^3/4 for an even k (16, 128, 432, 1024, ...)");
    }
  }
  return InvalidArgument(ctx + ": unknown connection");
}

}  // namespace

StatusOr<Topology> BuildScaleLevel(Connection connection, int32_t servers,
                                   int32_t gpus_per_server) {
  return BuildLevel(connection, servers, gpus_per_server, /*rail=*/false);
}

StatusOr<Topology> BuildRailScaleLevel(Connection connection, int32_t servers,
                                       int32_t gpus_per_server) {
  return BuildLevel(connection, servers, gpus_per_server, /*rail=*/true);
}

namespace {

// Parses "a=1,b=2,flag" into a map; a bare word maps to "".
StatusOr<std::map<std::string, std::string>> ParseParams(std::string_view preset,
                                                         std::string_view params) {
  std::map<std::string, std::string> out;
  while (!params.empty()) {
    const size_t comma = params.find(',');
    const std::string_view item = params.substr(0, comma);
    params = comma == std::string_view::npos ? std::string_view() : params.substr(comma + 1);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    std::string key(item.substr(0, eq));
    std::string value = eq == std::string_view::npos ? "" : std::string(item.substr(eq + 1));
    if (!out.emplace(key, value).second) {
      return InvalidArgument("preset '" + std::string(preset) + "': '" + key + "' given twice");
    }
  }
  return out;
}

// Takes an integer parameter out of `params`; absent -> `fallback`.
StatusOr<int32_t> TakeInt(std::string_view preset, std::map<std::string, std::string>& params,
                          const std::string& key, int32_t fallback) {
  auto it = params.find(key);
  if (it == params.end()) return fallback;
  int32_t v = 0;
  const std::string& s = it->second;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) {
    return InvalidArgument("preset '" + std::string(preset) + "': " + key + "='" + s +
                           "' is not an integer");
  }
  params.erase(it);
  return v;
}

bool TakeFlag(std::map<std::string, std::string>& params, const std::string& key) {
  auto it = params.find(key);
  if (it == params.end() || !it->second.empty()) return false;
  params.erase(it);
  return true;
}

Status NoLeftovers(std::string_view preset, const std::map<std::string, std::string>& params,
                   std::string_view known) {
  if (params.empty()) return Status::Ok();
  return InvalidArgument("preset '" + std::string(preset) + "': unknown parameter '" +
                         params.begin()->first + "' (known: " + std::string(known) + ")");
}

}  // namespace

StatusOr<Topology> BuildPreset(std::string_view preset) {
  if (preset == "small") return BuildScaleLevel(Connection::kCopperDirect, 2, 8);
  if (preset == "medium") return BuildScaleLevel(Connection::kCopperSwitch, 16, 8);
  if (preset == "large") return BuildScaleLevel(Connection::kOpticalEngine, 128, 8);
  if (preset == "xlarge") return BuildScaleLevel(Connection::kOpticalEngine, 1024, 8);
  if (preset == "xxlarge") return BuildScaleLevel(Connection::kOpticalEngine, 8192, 8);
  if (preset == "medium:rail") return BuildRailScaleLevel(Connection::kCopperSwitch, 16, 8);
  if (preset == "large:rail") return BuildRailScaleLevel(Connection::kOpticalEngine, 128, 8);
  if (preset == "xlarge:rail") return BuildRailScaleLevel(Connection::kOpticalEngine, 1024, 8);
  const size_t colon = preset.find(':');
  const std::string_view kind = preset.substr(0, colon);
  const std::string_view rest =
      colon == std::string_view::npos ? std::string_view() : preset.substr(colon + 1);
  FATHOM_ASSIGN_OR_RETURN(auto params, ParseParams(preset, rest));
  if (kind == "fat-tree") {
    FatTreeOptions o;
    FATHOM_ASSIGN_OR_RETURN(o.k, TakeInt(preset, params, "k", 0));
    FATHOM_ASSIGN_OR_RETURN(o.hosts_per_edge, TakeInt(preset, params, "hosts_per_edge", 0));
    FATHOM_ASSIGN_OR_RETURN(o.gpus_per_server, TakeInt(preset, params, "gpus", 8));
    o.rail_optimized = TakeFlag(params, "rail");
    FATHOM_RETURN_IF_ERROR(NoLeftovers(preset, params, "k, hosts_per_edge, gpus, rail"));
    return BuildFatTree(o);
  }
  if (kind == "leaf-spine") {
    LeafSpineOptions o;
    FATHOM_ASSIGN_OR_RETURN(o.leaves, TakeInt(preset, params, "leaves", 0));
    FATHOM_ASSIGN_OR_RETURN(o.spines, TakeInt(preset, params, "spines", 0));
    FATHOM_ASSIGN_OR_RETURN(o.hosts_per_leaf, TakeInt(preset, params, "hosts", 0));
    FATHOM_ASSIGN_OR_RETURN(o.uplinks_per_pair, TakeInt(preset, params, "uplinks", 1));
    FATHOM_ASSIGN_OR_RETURN(o.gpus_per_server, TakeInt(preset, params, "gpus", 8));
    o.rail_optimized = TakeFlag(params, "rail");
    FATHOM_RETURN_IF_ERROR(
        NoLeftovers(preset, params, "leaves, spines, hosts, uplinks, gpus, rail"));
    return BuildLeafSpine(o);
  }
  if (kind == "back-to-back") {
    BackToBackOptions o;
    FATHOM_ASSIGN_OR_RETURN(o.gpus_per_server, TakeInt(preset, params, "gpus", 8));
    FATHOM_RETURN_IF_ERROR(NoLeftovers(preset, params, "gpus"));
    return BuildBackToBack(o);
  }
  return InvalidArgument("unknown topology preset '" + std::string(preset) +
                         "' (known: small, medium, large, xlarge, xxlarge, medium:rail, "
                         "large:rail, xlarge:rail, fat-tree:k=N, "
                         "leaf-spine:leaves=N,spines=N,hosts=N, back-to-back)");
}

}  // namespace fathom::topo
