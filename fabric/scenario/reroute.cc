#include "fabric/scenario/reroute.h"

#include <algorithm>
#include <span>

namespace fathom::sim {

bool Rerouting::Failed(const Port* p) const {
  return std::find(down_.begin(), down_.end(), p) != down_.end();
}

void Rerouting::Down(const std::vector<Port*>& failed, int32_t via) {
  for (Port* p : failed) down_.push_back(p);
  if (via >= 0) vias_.push_back(via);
  if (installed_) return;
  // From the first route change on, each switch checks the egress a packet
  // reads from its route (Port::set_forwarding); it stays so after the
  // routes return, as packets may then be on a detour.
  installed_ = true;
  for (Port* p : net_->ports()) p->set_forwarding(&forwarding_);
}

void Rerouting::Up(const std::vector<Port*>& failed, int32_t via) {
  for (Port* p : failed) down_.erase(std::find(down_.begin(), down_.end(), p));
  if (via >= 0) vias_.erase(std::find(vias_.begin(), vias_.end(), via));
}

Port* Rerouting::Step(int32_t cur, int32_t prev, const QpFlow& flow, uint32_t hash,
                      std::span<const int32_t> vias) const {
  const topo::Topology& topo = net_->topology();
  const int32_t tier = topo.node(cur).tier;
  // Kind 0: an ECMP next hop; 1: a port to a bounce neighbour; 2: a port up
  // a tier. Each up and not straight back.
  auto takes = [&](int kind, int32_t i) {
    const int32_t far = topo.Peer(cur, i).node;
    if (far == prev || Failed(&net_->port(cur, i))) return false;
    if (kind == 0) return true;
    if (kind == 1) return std::find(vias.begin(), vias.end(), far) != vias.end();
    return topo.node(far).kind == topo::NodeKind::kSwitch && topo.node(far).tier > tier;
  };
  const std::span<const int32_t> ecmp = topo.NextHops(cur, flow.dst_host);
  const uint64_t mix = Mix64(hash ^ (uint64_t{static_cast<uint32_t>(cur)} << 32));
  for (int kind = 0; kind < 3; ++kind) {
    const int32_t count = kind == 0 ? static_cast<int32_t>(ecmp.size()) : topo.PortCount(cur);
    auto port_at = [&](int32_t k) { return kind == 0 ? ecmp[static_cast<size_t>(k)] : k; };
    uint64_t n = 0;
    for (int32_t k = 0; k < count; ++k) n += takes(kind, port_at(k));
    if (n == 0) continue;
    uint64_t pick = ((mix >> 32) * n) >> 32;
    for (int32_t k = 0; k < count; ++k) {
      if (takes(kind, port_at(k)) && pick-- == 0) return &net_->port(cur, port_at(k));
    }
  }
  return nullptr;
}

Port* Rerouting::Pick(void* self, const Port& in, const QpFlow& flow, uint32_t* hops) {
  const Rerouting& r = *static_cast<const Rerouting*>(self);
  const int32_t node = in.peer()->config().node;  // the switch forwarding
  const uint32_t h = *hops;
  Port* out = NextHop(flow, h);
  if (out != nullptr && out->config().node == node) return out;  // on its route
  // The switch is elsewhere on the route (the packet was past the hop the
  // route was rewritten from, or the route changed back): on from there,
  // the furthest along if it is there twice.
  for (uint32_t j = kPathMax - 1; j >= 1; --j) {
    Port* p = flow.path[j];
    if (p != nullptr && p->config().node == node) {
      *hops = j;
      return p;
    }
  }
  // Past the end of a route of kPathMax links (the switch's table gives
  // the rest: Switch::Receive), the hop count goes on as usual; off its
  // route, a packet counts past kPathMax, where nothing reads the route.
  const Port* last = flow.path[kPathMax - 1];
  if (h != kPathMax || last == nullptr || last->peer()->config().node != node) {
    if (h >= kOffRouteHops) return nullptr;
    *hops = std::max<uint32_t>(h, kPathMax + 1);
  }
  return r.Step(node, in.config().node, flow,
                FlowHash(flow.src_host, flow.dst_host, flow.udp_sport), r.vias_);
}

Reroute::Reroute(Network* net, std::vector<Port*> failed, int32_t via, Rerouting* shared)
    : net_(net), shared_(shared), failed_(std::move(failed)), via_(via) {}

bool Reroute::Route(const QpFlow& flow, size_t k, Port** path) const {
  const topo::Topology& topo = net_->topology();
  const uint32_t hash = FlowHash(flow.src_host, flow.dst_host, flow.udp_sport);
  int32_t prev = path[k - 1]->config().node;  // the node the flow came from
  int32_t cur = path[k]->config().node;       // the switch before the failed link
  const int32_t via[1] = {via_};
  const std::span<const int32_t> vias(via, via_ >= 0 ? 1 : 0);
  for (size_t h = k; h < kPathMax; ++h) {
    Port* out = shared_->Step(cur, prev, flow, hash, vias);
    if (out == nullptr) return false;
    path[h] = out;
    prev = cur;
    cur = out->peer()->config().node;
    if (topo.node(cur).kind == topo::NodeKind::kHost) {
      if (cur != flow.dst_host) return false;
      std::fill(path + h + 1, path + kPathMax, nullptr);
      return true;
    }
  }
  // The route is full (kPathMax links: QpFlow's first line, what every
  // hop reads; packet.h) and the packet has not arrived: past the route a
  // switch looks it up in its table (Switch::Receive; Port::DeliverCompact
  // hands it there). That finishes the route when the switch reached is the
  // destination's own, whose table's next hop is the host link: the bounce
  // around a failure above tier 1 in a 3-tier fat-tree (8 links) ends so.
  if (topo.node(cur).kind != topo::NodeKind::kSwitch) return false;
  const std::span<const int32_t> last = topo.NextHops(cur, flow.dst_host);
  if (last.empty()) return false;
  for (const int32_t i : last) {
    if (topo.Peer(cur, i).node != flow.dst_host || Failed(&net_->port(cur, i))) return false;
  }
  return true;
}

void Reroute::Apply() {
  shared_->Down(failed_, via_);
  saved_.clear();
  unrouted_ = 0;
  for (int32_t r = 0; r < net_->host_count(); ++r) {
    net_->nic(r).ForEachFlow([&](QpFlow& flow) {
      size_t k = 0;
      while (k < kPathMax && flow.path[k] != nullptr && !Failed(flow.path[k])) ++k;
      if (k == kPathMax || flow.path[k] == nullptr || k == 0) return;  // k 0: the host's own link
      Port* path[kPathMax];
      std::copy(flow.path, flow.path + kPathMax, path);
      if (!Route(flow, k, path)) {
        ++unrouted_;
        return;
      }
      Saved s{&flow, {}};
      std::copy(flow.path, flow.path + kPathMax, s.path.begin());
      saved_.push_back(s);
      ++total_rerouted_;
      std::copy(path, path + kPathMax, flow.path);
    });
  }
}

void Reroute::Restore() {
  shared_->Up(failed_, via_);
  for (const Saved& s : saved_) std::copy(s.path.begin(), s.path.end(), s.flow->path);
  saved_.clear();
}

}  // namespace fathom::sim
