#include "fabric/scenario/fault_attach.h"

#include <algorithm>
#include <tuple>

#include "fabric/scenario/reroute.h"
#include "faults/spec.h"

namespace fathom::sim {

// The faults of one port direction and the hook the port calls.
struct FaultAttachment::PortFaults {
  Port* port = nullptr;
  faults::FaultSet set;
  Impairment hook{};
};

struct FaultAttachment::NicFeed {
  Engine* engine;
  Nic* nic;
  faults::FlapSchedule schedule;
};

void FaultAttachment::OnPortTransition(void* obj, uint64_t) {
  auto* feed = static_cast<NicFeed*>(obj);
  const Picoseconds now = feed->engine->Now();
  feed->nic->SetPortState(!feed->schedule.IsDown(now));
  // A flap that repeats forever must not keep an idle fabric alive: when
  // nothing else is pending the run is over, and the feed stops.
  if (feed->engine->pending() == 0) return;
  if (const auto next = feed->schedule.NextTransition(now)) {
    feed->engine->Schedule<&FaultAttachment::OnPortTransition>(
        next->at, EventKind::kFault, static_cast<uint32_t>(feed->nic->host()), feed, 0);
  }
}

void FaultAttachment::OnHostCrash(void* nic, uint64_t) { static_cast<Nic*>(nic)->Crash(); }

FaultAttachment::~FaultAttachment() {
  for (auto& pf : ports_) pf->port->set_impairment(nullptr);
}

ImpairmentVerdict FaultAttachment::Decide(void* ctx, const Packet& p, uint32_t wire_bytes,
                                          Picoseconds at) {
  auto* pf = static_cast<PortFaults*>(ctx);
  const PortConfig& cfg = pf->port->config();
  faults::Frame f{};
  f.at = at;
  // The frame is on the wire until its last bit reaches the far end: a link
  // that goes down in that interval loses it.
  f.end = at + cfg.rate.SerializationTime(wire_bytes) + cfg.latency;
  f.wire_bytes = wire_bytes;
  f.ip_bytes = IpPacketBytes(p);
  f.dest_qpn = p.dest_qpn;
  f.opcode = static_cast<uint8_t>(p.opcode);
  f.traffic_class = p.flow->traffic_class;
  f.udp_sport = p.flow->udp_sport;
  f.src_host = p.flow->src_host;
  f.dst_host = p.flow->dst_host;
  const faults::Verdict v = pf->set.Evaluate(f);
  switch (v.action) {
    case faults::Verdict::Action::kDrop:
      return {ImpairmentVerdict::kDrop, {}};
    case faults::Verdict::Action::kCorrupt:
      // The receiver drops it on its ICRC; extra delay does not matter then.
      return {ImpairmentVerdict::kCorrupt, {}};
    case faults::Verdict::Action::kPass:
      break;
  }
  if (v.extra_delay.ps() > 0) return {ImpairmentVerdict::kDelay, v.extra_delay};
  return {};
}

FaultAttachment::PortFaults* FaultAttachment::ForPort(Port* port) {
  for (auto& pf : ports_) {
    if (pf->port == port) return pf.get();
  }
  auto pf = std::make_unique<PortFaults>();
  pf->port = port;
  pf->hook = Impairment{&FaultAttachment::Decide, pf.get()};
  ports_.push_back(std::move(pf));
  return ports_.back().get();
}

const faults::FaultSet* FaultAttachment::FaultsAt(const Port* port) const {
  for (const auto& pf : ports_) {
    if (pf->port == port) return &pf->set;
  }
  return nullptr;
}

namespace {

// Link ids a spec's link/host target names.
StatusOr<std::vector<int32_t>> ResolveLinks(const topo::Topology& topo,
                                            const proto::FaultSpec& spec) {
  if (!spec.host().empty()) {
    FATHOM_ASSIGN_OR_RETURN(const int32_t node, topo.FindNode(spec.host()));
    if (topo.node(node).kind != topo::NodeKind::kHost) {
      return InvalidArgument("\"" + spec.host() + "\" is a switch, not a host");
    }
    return topo.LinksOf(node);
  }
  // A link name or its endpoints in either order first, then selectors.
  if (auto id = topo.FindLink(spec.link()); id.ok()) return std::vector<int32_t>{*id};
  return topo.SelectLinks(spec.link());
}

}  // namespace

StatusOr<std::unique_ptr<FaultAttachment>> FaultAttachment::Attach(
    Network* network, const google::protobuf::RepeatedPtrField<proto::FaultSpec>& specs,
    uint64_t seed, const config::SourceMap& map, std::string_view path) {
  FATHOM_RETURN_IF_ERROR(faults::ValidateFaults(specs, path, map));
  std::unique_ptr<FaultAttachment> out(new FaultAttachment());
  out->network_ = network;
  out->seed_ = seed;
  out->map_ = map;
  out->path_ = std::string(path);
  out->specs_.assign(specs.begin(), specs.end());
  out->armed_.assign(out->specs_.size(), false);
  for (int i = 0; i < specs.size(); ++i) {
    // A fault placed at an iteration is checked now and attached by Arm.
    const bool now = !specs[i].has_at_iteration();
    FATHOM_RETURN_IF_ERROR(out->AttachOne(i, Picoseconds(), now));
    out->armed_[static_cast<size_t>(i)] = now;
  }
  for (auto& pf : out->ports_) pf->port->set_impairment(&pf->hook);
  return out;
}

Status FaultAttachment::Arm(int index, Picoseconds origin) {
  if (index < 0 || index >= static_cast<int>(specs_.size()) || armed_[static_cast<size_t>(index)]) {
    return InvalidArgument("FaultAttachment::Arm: fault " + std::to_string(index) +
                           " is not an unarmed fault of " + std::to_string(specs_.size()));
  }
  FATHOM_RETURN_IF_ERROR(AttachOne(index, origin, true));
  armed_[static_cast<size_t>(index)] = true;
  // Ports new to this fault get their hook; the others already have it.
  for (auto& pf : ports_) pf->port->set_impairment(&pf->hook);
  return Status::Ok();
}

Status FaultAttachment::AttachOne(int i, Picoseconds origin, bool install) {
  Network* network = network_;
  const config::SourceMap& map = map_;
  const uint64_t seed = seed_;
  const topo::Topology& topo = network->topology();
  auto find_host = [&topo](std::string_view name) -> StatusOr<int32_t> {
    FATHOM_ASSIGN_OR_RETURN(const int32_t node, topo.FindNode(name));
    if (topo.node(node).kind != topo::NodeKind::kHost) {
      return InvalidArgument("\"" + std::string(name) + "\" is a switch, not a host");
    }
    return node;
  };
  const proto::FaultSpec& spec = specs_[static_cast<size_t>(i)];
  const std::string item = path_ + "[" + std::to_string(i) + "]";
  const std::string name = faults::FaultName(spec, i);
  auto links = ResolveLinks(topo, spec);
  if (!links.ok()) {
    return map.Error(config::JoinPath(item, spec.host().empty() ? "link" : "host"),
                     links.status().message());
  }
  faults::Placement place;
  place.scenario_seed = seed;
  place.find_host = find_host;
  place.origin = origin;
  if (spec.kind() == "pfc_storm") {
    // Not a frame model: the host's NIC sends PAUSE (fabric/scenario/
    // pfc_field.h), scheduled by the scenario.
    if (auto host = find_host(spec.host()); !host.ok()) {
      return map.Error(config::JoinPath(item, "host"), host.status().message());
    }
    return Status::Ok();
  }
  if (spec.kind() == "host_crash") {
    place.crashed_host = *find_host(spec.host());
  }
  int32_t from = -1;
  if (!spec.from().empty()) {
    auto node = topo.FindNode(spec.from());
    if (!node.ok()) return map.Error(config::JoinPath(item, "from"), node.status().message());
    from = *node;
  }
  int attached = 0;
  std::vector<Port*> directions;  // the ports this fault covers
  for (const int32_t id : *links) {
    const topo::Link& l = topo.link(id);
    for (const auto& [node, port, far] :
         {std::tuple{l.a, l.a_port, l.b}, std::tuple{l.b, l.b_port, l.a}}) {
      if (from >= 0 && node != from) continue;
      place.label = name + "@" + topo.node(node).name + ">" + topo.node(far).name;
      place.link_rate = l.rate;
      auto model = faults::BuildModel(spec, place);
      if (!model.ok()) return map.Error(item, model.status().message());
      Port* p = &network->port(node, port);
      directions.push_back(p);
      if (install) ForPort(p)->set.Add(std::move(*model), place.label);
      ++attached;
    }
  }
  if (install && attached > 0 && (spec.kind() == "link_down" || spec.kind() == "link_flap")) {
    // Each host end of a flapping link sees its port go down and up.
    for (const int32_t id : *links) {
      const topo::Link& l = topo.link(id);
      for (const int32_t node : {l.a, l.b}) {
        if (topo.node(node).kind != topo::NodeKind::kHost) continue;
        auto feed = std::make_unique<NicFeed>(NicFeed{&network->engine(),
                                                      &network->nic(topo.HostRank(node)),
                                                      faults::FlapScheduleOf(spec, origin)});
        network->engine().Schedule<&FaultAttachment::OnPortTransition>(
            network->engine().Now(), EventKind::kFault, static_cast<uint32_t>(node), feed.get(), 0);
        feeds_.push_back(std::move(feed));
      }
    }
  }
  if (attached > 0 && !spec.reroute_via().empty()) {
    auto via = topo.FindNode(spec.reroute_via());
    if (!via.ok()) {
      return map.Error(config::JoinPath(item, "reroute_via"), via.status().message());
    }
    // Each direction re-routes: an upward one takes another ECMP next hop
    // up, a downward one with no other way down bounces through `via`.
    if (!install) return Status::Ok();
    if (rerouting_ == nullptr) rerouting_ = std::make_unique<Rerouting>(network);
    auto reroute = std::make_unique<Reroute>(network, directions, *via, rerouting_.get());
    const faults::Window w = faults::WindowOf(spec, origin);
    network->engine().Schedule<&Reroute::OnApply>(w.start, EventKind::kFault,
                                                  static_cast<uint32_t>(*via), reroute.get(), 0);
    if (w.end != Picoseconds::Max()) {
      network->engine().Schedule<&Reroute::OnRestore>(
          w.end, EventKind::kFault, static_cast<uint32_t>(*via), reroute.get(), 0);
    }
    reroutes_.push_back({i, std::move(reroute)});
  }
  if (install && spec.kind() == "host_crash") {
    Nic* nic = &network->nic(topo.HostRank(place.crashed_host));
    network->engine().Schedule<&FaultAttachment::OnHostCrash>(
        faults::WindowOf(spec, origin).start, EventKind::kFault,
        static_cast<uint32_t>(place.crashed_host), nic, 0);
  }
  if (attached == 0) {
    return map.Error(
        config::JoinPath(item, "from"),
        "\"" + spec.from() + "\" is not an end of any link \"" + spec.link() + "\" selects");
  }
  return Status::Ok();
}

std::vector<FaultAttachment::FaultReport> FaultAttachment::Report(Picoseconds now) {
  std::vector<FaultReport> rows(specs_.size());
  for (size_t i = 0; i < specs_.size(); ++i) {
    const proto::FaultSpec& s = specs_[i];
    rows[i].name = faults::FaultName(s, static_cast<int>(i));
    rows[i].kind = s.kind();
    rows[i].target = !s.host().empty() ? "host " + s.host() : "link " + s.link();
    if (!s.from().empty()) rows[i].target += " from " + s.from();
  }
  for (auto& pf : ports_) {
    pf->set.SyncTo(now);
    for (size_t m = 0; m < pf->set.size(); ++m) {
      // Labels are "<name>@<from>><to>": find the row by name.
      const std::string& label = pf->set.label(m);
      const std::string name = label.substr(0, label.rfind('@'));
      for (FaultReport& row : rows) {
        if (row.name != name) continue;
        ++row.attachments;
        row.counters += pf->set.counters(m);
        break;
      }
    }
  }
  return rows;
}

std::string FaultAttachment::Summary(Picoseconds now) {
  std::string out;
  const std::vector<FaultReport> rows = Report(now);
  for (size_t i = 0; i < rows.size(); ++i) {
    const FaultReport& r = rows[i];
    out += "fault " + r.name + " (" + r.kind + ", " + r.target + ", " +
           std::to_string(r.attachments) + " port" + (r.attachments == 1 ? "" : "s") + "):";
    bool any = false;
    r.counters.ForEach([&](const char* n, uint64_t v) {
      if (v == 0) return;
      out += std::string(" ") + n + "=" + std::to_string(v);
      any = true;
    });
    for (const auto& [index, reroute] : reroutes_) {
      if (static_cast<size_t>(index) != i || reroute->total_rerouted() == 0) continue;
      out += " flows_rerouted=" + std::to_string(reroute->total_rerouted());
      any = true;
    }
    if (!any) out += " no counter moved";
    out += "\n";
  }
  return out;
}

}  // namespace fathom::sim
