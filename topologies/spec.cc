// TopologySpec -> Topology, with errors placed on the spec's source lines.
#include "topologies/spec.h"

#include <charconv>
#include <cmath>
#include <tuple>
#include <utility>

#include "topologies/builders.h"

namespace fathom::topo {
namespace {

namespace pb = fathom::proto;

// Reports errors at a field path, through the source map when there is one.
class Reporter {
 public:
  Reporter(const config::SourceMap* map, std::string_view prefix) : map_(map), prefix_(prefix) {}

  std::string Path(std::string_view field) const { return config::JoinPath(prefix_, field); }

  Status Error(std::string_view field, std::string_view message) const {
    const std::string path = Path(field);
    if (map_ != nullptr) return map_->Error(path, message);
    return InvalidArgument((path.empty() ? "<root>" : path) + ": " + std::string(message));
  }
  // Re-homes a builder's error on the field that drove it.
  Status Wrap(std::string_view field, const Status& s) const {
    if (s.ok()) return s;
    return Error(field, s.message());
  }

 private:
  const config::SourceMap* map_;
  std::string prefix_;
};

StatusOr<LinkParams> ToParams(const pb::LinkSpec& spec, LinkParams params, const Reporter& r,
                              const std::string& field) {
  if (spec.has_rate_gbps()) {
    // At least 1 kb/s: smaller rates round to 0 b/s, which no link can have.
    if (!(spec.rate_gbps() >= 1e-6 && spec.rate_gbps() <= 1e6)) {
      return r.Error(field + ".rate_gbps",
                     std::to_string(spec.rate_gbps()) + " must be in [1e-6, 1e6] Gb/s");
    }
    params.rate = BitsPerSecond(std::llround(spec.rate_gbps() * 1e9));
  }
  if (spec.has_latency_ns()) {
    if (!(spec.latency_ns() >= 0 && spec.latency_ns() <= 1e9)) {
      return r.Error(field + ".latency_ns",
                     std::to_string(spec.latency_ns()) + " must be in [0, 1e9] ns");
    }
    params.latency = Picoseconds(std::llround(spec.latency_ns() * 1e3));
  }
  if (spec.has_mtu_bytes()) {
    if (spec.mtu_bytes() < 68 || spec.mtu_bytes() > 65535) {
      return r.Error(field + ".mtu_bytes",
                     std::to_string(spec.mtu_bytes()) + " must be in [68, 65535] (IP MTU)");
    }
    params.mtu_bytes = spec.mtu_bytes();
  }
  return params;
}

Status CheckGpus(int32_t gpus, const Reporter& r, const std::string& field) {
  if (gpus < 0 || gpus > 64) {
    return r.Error(field, std::to_string(gpus) + " must be in 1..64 (0 means 8)");
  }
  return Status::Ok();
}

StatusOr<Topology> FromClusterNetwork(const pb::ClusterNetwork& cn, const std::string& level,
                                      const Reporter& r) {
  // "compute-8gpu" -> 8
  const std::string& type = cn.node_type();
  int32_t gpus = 0;
  const size_t dash = type.rfind('-');
  const bool shaped = dash != std::string::npos && type.size() > dash + 4 && type.ends_with("gpu");
  if (shaped) {
    const char* b = type.data() + dash + 1;
    const char* e = type.data() + type.size() - 3;
    auto [end, ec] = std::from_chars(b, e, gpus);
    if (ec != std::errc() || end != e) gpus = 0;
  }
  if (gpus <= 0 || gpus > 64) {
    return r.Error("cluster_network.node_type",
                   "'" + type + "' is not of the form '<name>-<N>gpu' with N in 1..64");
  }
  if (cn.scale_levels().empty()) {
    return r.Error("cluster_network.scale_levels", "lists no scale level");
  }
  int index = 0;
  if (!level.empty()) {
    index = -1;
    std::string names;
    for (int i = 0; i < cn.scale_levels_size(); ++i) {
      if (cn.scale_levels(i).level() == level) index = i;
      names += (i ? ", " : "") + cn.scale_levels(i).level();
    }
    if (index < 0) return r.Error("level", "'" + level + "' is not a scale level (" + names + ")");
  }
  const pb::ClusterNetwork::ScaleLevel& sl = cn.scale_levels(index);
  const std::string at = "cluster_network.scale_levels[" + std::to_string(index) + "]";
  if (sl.servers() <= 0 || sl.servers() > 65536) {
    return r.Error(at + ".servers", std::to_string(sl.servers()) + " must be in 1..65536");
  }
  if (int64_t{sl.servers()} * gpus != sl.gpu_count()) {
    return r.Error(at + ".gpu_count", std::to_string(sl.gpu_count()) + " is not servers (" +
                                          std::to_string(sl.servers()) + ") * " +
                                          std::to_string(gpus) + " GPUs of " + type);
  }
  Connection c;
  switch (sl.connection()) {
    case pb::ClusterNetwork::CONNECTION_COPPER_CABLE_DIRECT:
      c = Connection::kCopperDirect;
      break;
    case pb::ClusterNetwork::CONNECTION_COPPER_CABLE_SWITCH:
      c = Connection::kCopperSwitch;
      break;
    case pb::ClusterNetwork::CONNECTION_NPO_OPTICAL_ENGINE:
      c = Connection::kOpticalEngine;
      break;
    default:
      return r.Error(at + ".connection",
                     "must be copper_cable_direct, copper_cable_switch or npo_optical_engine");
  }
  auto t = BuildScaleLevel(c, sl.servers(), gpus);
  if (!t.ok()) return r.Wrap(at, t.status());
  return t;
}

StatusOr<Topology> BuildShape(const pb::TopologySpec& spec, const Reporter& r) {
  switch (spec.shape_case()) {
    case pb::TopologySpec::kPreset: {
      auto t = BuildPreset(spec.preset());
      if (!t.ok()) return r.Wrap("preset", t.status());
      return t;
    }
    case pb::TopologySpec::kLeafSpine: {
      const pb::LeafSpineSpec& s = spec.leaf_spine();
      LeafSpineOptions o;
      o.leaves = s.leaves();
      o.spines = s.spines();
      o.hosts_per_leaf = s.hosts_per_leaf();
      o.uplinks_per_pair = s.uplinks_per_pair() == 0 ? 1 : s.uplinks_per_pair();
      FATHOM_RETURN_IF_ERROR(CheckGpus(s.gpus_per_server(), r, "leaf_spine.gpus_per_server"));
      if (s.gpus_per_server() != 0) o.gpus_per_server = s.gpus_per_server();
      o.rail_optimized = s.rail_optimized();
      if (s.oversubscription() < 0 || !std::isfinite(s.oversubscription())) {
        return r.Error("leaf_spine.oversubscription", "must be a finite ratio >= 0");
      }
      o.oversubscription = s.oversubscription();
      for (const auto& [field, value] : {std::pair{"leaves", o.leaves},
                                         {"hosts_per_leaf", o.hosts_per_leaf},
                                         {"uplinks_per_pair", o.uplinks_per_pair}}) {
        if (value <= 0 || value > 65536) {
          return r.Error(std::string("leaf_spine.") + field,
                         std::to_string(value) + " must be in 1..65536");
        }
      }
      if (o.spines < 0 || o.spines > 65536) {
        return r.Error("leaf_spine.spines", std::to_string(o.spines) + " must be in 0..65536");
      }
      FATHOM_ASSIGN_OR_RETURN(o.host_link,
                              ToParams(s.host_link(), o.host_link, r, "leaf_spine.host_link"));
      FATHOM_ASSIGN_OR_RETURN(
          o.fabric_link, ToParams(s.fabric_link(), o.fabric_link, r, "leaf_spine.fabric_link"));
      auto t = BuildLeafSpine(o);
      if (!t.ok()) return r.Wrap("leaf_spine", t.status());
      return t;
    }
    case pb::TopologySpec::kFatTree: {
      const pb::FatTreeSpec& s = spec.fat_tree();
      if (s.k() < 2 || s.k() > 128 || s.k() % 2 != 0) {
        return r.Error("fat_tree.k", std::to_string(s.k()) + ": k must be even, in 2..128");
      }
      FatTreeOptions o;
      o.k = s.k();
      if (s.hosts_per_edge() != 0 &&
          (s.hosts_per_edge() < s.k() / 2 || s.hosts_per_edge() > 4096)) {
        return r.Error("fat_tree.hosts_per_edge",
                       std::to_string(s.hosts_per_edge()) + " must be 0 (k/2) or in k/2..4096");
      }
      o.hosts_per_edge = s.hosts_per_edge();
      FATHOM_RETURN_IF_ERROR(CheckGpus(s.gpus_per_server(), r, "fat_tree.gpus_per_server"));
      if (s.gpus_per_server() != 0) o.gpus_per_server = s.gpus_per_server();
      o.rail_optimized = s.rail_optimized();
      FATHOM_ASSIGN_OR_RETURN(o.host_link,
                              ToParams(s.host_link(), o.host_link, r, "fat_tree.host_link"));
      FATHOM_ASSIGN_OR_RETURN(o.edge_link,
                              ToParams(s.edge_link(), o.edge_link, r, "fat_tree.edge_link"));
      FATHOM_ASSIGN_OR_RETURN(o.core_link,
                              ToParams(s.core_link(), o.core_link, r, "fat_tree.core_link"));
      auto t = BuildFatTree(o);
      if (!t.ok()) return r.Wrap("fat_tree", t.status());
      return t;
    }
    case pb::TopologySpec::kBackToBack: {
      const pb::BackToBackSpec& s = spec.back_to_back();
      BackToBackOptions o;
      FATHOM_RETURN_IF_ERROR(CheckGpus(s.gpus_per_server(), r, "back_to_back.gpus_per_server"));
      if (s.gpus_per_server() != 0) o.gpus_per_server = s.gpus_per_server();
      FATHOM_ASSIGN_OR_RETURN(o.link, ToParams(s.link(), o.link, r, "back_to_back.link"));
      auto t = BuildBackToBack(o);
      if (!t.ok()) return r.Wrap("back_to_back", t.status());
      return t;
    }
    case pb::TopologySpec::kClusterNetwork:
      return FromClusterNetwork(spec.cluster_network(), spec.level(), r);
    case pb::TopologySpec::SHAPE_NOT_SET:
      break;
  }
  return r.Error("",
                 "no topology given (one of: preset, leaf_spine, fat_tree, back_to_back, "
                 "cluster_network)");
}

Status ApplyOverride(const pb::LinkOverride& o, int index, const Reporter& r, Topology& t) {
  const std::string at = "link_overrides[" + std::to_string(index) + "]";
  std::vector<int32_t> links;
  if (o.links().empty()) {
    if (o.tier() < 0 || o.tier() > kMaxTier) {
      return r.Error(at + ".tier", std::to_string(o.tier()) + " must be in 0..3");
    }
    links = t.LinksAtTier(o.tier());
    if (links.empty()) {
      return r.Error(at + ".tier",
                     "this topology has no links at tier " + std::to_string(o.tier()));
    }
  } else {
    if (o.tier() != 0) return r.Error(at + ".tier", "give either tier or links, not both");
    auto sel = t.SelectLinks(o.links());
    if (!sel.ok()) return r.Wrap(at + ".links", sel.status());
    links = std::move(sel).value();
  }
  for (int32_t id : links) {
    const Link& l = t.link(id);
    pb::LinkSpec spec;
    if (o.has_rate_gbps()) spec.set_rate_gbps(o.rate_gbps());
    if (o.has_latency_ns()) spec.set_latency_ns(o.latency_ns());
    FATHOM_ASSIGN_OR_RETURN(LinkParams p, ToParams(spec, LinkParams{l.rate, l.latency, 1}, r, at));
    int32_t ab = l.mtu_ab, ba = l.mtu_ba;
    for (const auto& [has, value, field, both, up] :
         {std::tuple{o.has_mtu_bytes(), o.mtu_bytes(), "mtu_bytes", true, true},
          {o.has_mtu_up_bytes(), o.mtu_up_bytes(), "mtu_up_bytes", false, true},
          {o.has_mtu_down_bytes(), o.mtu_down_bytes(), "mtu_down_bytes", false, false}}) {
      if (!has) continue;
      if (value < 68 || value > 65535) {
        return r.Error(at + "." + field, std::to_string(value) + " must be in [68, 65535]");
      }
      if (both || up) ab = value;
      if (both || !up) ba = value;
    }
    FATHOM_RETURN_IF_ERROR(r.Wrap(at, t.SetLinkParams(id, p.rate, p.latency, ab, ba)));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<Topology> BuildTopology(const fathom::proto::TopologySpec& spec,
                                 const config::SourceMap* source_map,
                                 std::string_view path_prefix) {
  const Reporter r(source_map, path_prefix);
  if (!spec.level().empty() && spec.shape_case() != pb::TopologySpec::kClusterNetwork) {
    return r.Error("level", "only applies to cluster_network");
  }
  FATHOM_ASSIGN_OR_RETURN(Topology t, BuildShape(spec, r));
  for (int i = 0; i < spec.link_overrides_size(); ++i) {
    FATHOM_RETURN_IF_ERROR(ApplyOverride(spec.link_overrides(i), i, r, t));
  }
  return t;
}

StatusOr<Topology> LoadTopologyFile(const std::string& path) {
  fathom::proto::TopologySpec spec;
  config::SourceMap map;
  FATHOM_RETURN_IF_ERROR(config::LoadYamlFile(path, &spec, {.source_map = &map}));
  return BuildTopology(spec, &map, "");
}

}  // namespace fathom::topo
