#include "fabric/scenario/reroute.h"

#include <algorithm>
#include <span>

namespace fathom::sim {

Reroute::Reroute(Network* net, std::vector<Port*> failed, int32_t via, std::vector<Port*>* down)
    : net_(net), down_(down), failed_(std::move(failed)), via_(via) {}

bool Reroute::Failed(const Port* p) const {
  return std::find(down_->begin(), down_->end(), p) != down_->end();
}

bool Reroute::Route(const QpFlow& flow, size_t k, Port** path) const {
  const topo::Topology& topo = net_->topology();
  const uint32_t hash = FlowHash(flow.src_host, flow.dst_host, flow.udp_sport);
  int32_t prev = path[k - 1]->config().node;  // the node the flow came from
  int32_t cur = path[k]->config().node;       // the switch before the failed link
  for (size_t h = k; h < kPathMax; ++h) {
    // The candidates: ECMP next hops that are up and do not go straight
    // back; else the bounce; else up.
    std::vector<Port*> next;
    for (const int32_t i : topo.NextHops(cur, flow.dst_host)) {
      Port* p = &net_->port(cur, i);
      if (!Failed(p) && topo.Peer(cur, i).node != prev) next.push_back(p);
    }
    for (int pass = 0; pass < 2 && next.empty(); ++pass) {
      for (int32_t i = 0; i < topo.PortCount(cur); ++i) {
        Port* p = &net_->port(cur, i);
        const int32_t far = topo.Peer(cur, i).node;
        if (Failed(p) || far == prev) continue;
        const bool take = pass == 0 ? far == via_
                                    : topo.node(far).kind == topo::NodeKind::kSwitch &&
                                          topo.node(far).tier > topo.node(cur).tier;
        if (take) next.push_back(p);
      }
    }
    if (next.empty()) return false;
    // One pick per flow and switch, by the flow's hash (as ECMP does).
    const uint64_t mix = Mix64(hash ^ (uint64_t{static_cast<uint32_t>(cur)} << 32));
    Port* out = next[static_cast<size_t>(((mix >> 32) * next.size()) >> 32)];
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
  for (Port* p : failed_) down_->push_back(p);
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
  for (Port* p : failed_) down_->erase(std::find(down_->begin(), down_->end(), p));
  for (const Saved& s : saved_) std::copy(s.path.begin(), s.path.end(), s.flow->path);
  saved_.clear();
}

}  // namespace fathom::sim
