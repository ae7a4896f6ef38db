#include "fabric/sim/network.h"

namespace fathom::sim {

void Switch::Receive(void* sw, Packet* p, int32_t /*in_port*/) {
  Switch* self = static_cast<Switch*>(sw);
  const std::span<const int32_t> hops = self->topo_->NextHops(self->node_, p->dst_host);
  if (hops.empty()) {
    self->drops_->Add(DropReason::kNoRoute);
    self->pool_->Free(p);
    return;
  }
  size_t pick = 0;
  if (hops.size() > 1) {
    const uint64_t h = Mix64(p->flow_hash ^ self->salt_);
    pick = static_cast<size_t>(((h >> 32) * hops.size()) >> 32);
  }
  self->ports_[static_cast<size_t>(hops[pick])]->Send(p);
}

Network::Network(Engine* engine, const topo::Topology* topo, const NetworkConfig& config)
    : engine_(engine), topo_(topo) {
  const auto& nodes = topo->nodes();
  port_begin_.resize(nodes.size() + 1, 0);
  for (size_t n = 0; n < nodes.size(); ++n) {
    port_begin_[n + 1] = port_begin_[n] + topo->PortCount(static_cast<int32_t>(n));
  }
  ports_.resize(static_cast<size_t>(port_begin_.back()));
  for (size_t n = 0; n < nodes.size(); ++n) {
    const int32_t node = static_cast<int32_t>(n);
    for (int32_t i = 0; i < topo->PortCount(node); ++i) {
      const topo::Link& link = topo->link(topo->LinkAt(node, i));
      PortConfig pc;
      pc.node = node;
      pc.index = i;
      pc.link = link.id;
      pc.rate = link.rate;
      pc.latency = link.latency;
      pc.mtu_bytes = link.a == node ? link.mtu_ab : link.mtu_ba;
      // NICs transmit only into an idle port, so only switches queue.
      pc.buffer_bytes = nodes[n].kind == topo::NodeKind::kSwitch ? config.switch_buffer_bytes : 0;
      ports_[static_cast<size_t>(port_begin_[n] + i)] =
          std::make_unique<Port>(engine, &pool_, &drops_, pc);
    }
  }
  nics_.resize(topo->hosts().size());
  std::vector<void*> receiver(nodes.size(), nullptr);
  std::vector<ReceiveFn> receive_fn(nodes.size(), nullptr);
  for (size_t n = 0; n < nodes.size(); ++n) {
    const int32_t node = static_cast<int32_t>(n);
    if (nodes[n].kind == topo::NodeKind::kSwitch) {
      const uint64_t salt = config.ecmp_salt ? Mix64(engine->seed() ^ Mix64(0x5a17 + n)) : 0;
      auto sw = std::make_unique<Switch>(topo, node, salt, &pool_, &drops_);
      for (int32_t i = 0; i < topo->PortCount(node); ++i) sw->AddPort(&port(node, i));
      receiver[n] = sw.get();
      receive_fn[n] = &Switch::Receive;
      switches_.push_back(std::move(sw));
    } else {
      auto nic = std::make_unique<Nic>(engine, &pool_, &drops_, node, config.ipv6);
      if (topo->PortCount(node) > 0) nic->AttachPort(&port(node, 0));
      receiver[n] = nic.get();
      receive_fn[n] = &Nic::Receive;
      nics_[static_cast<size_t>(topo->HostRank(node))] = std::move(nic);
    }
  }
  for (size_t n = 0; n < nodes.size(); ++n) {
    const int32_t node = static_cast<int32_t>(n);
    for (int32_t i = 0; i < topo->PortCount(node); ++i) {
      const topo::PortRef peer = topo->Peer(node, i);
      port(node, i).Connect(&port(peer.node, peer.port), receive_fn[static_cast<size_t>(peer.node)],
                            receiver[static_cast<size_t>(peer.node)]);
    }
  }
}

Network::~Network() = default;

QpCounters Network::TotalQpCounters() const {
  QpCounters t;
  for (const auto& nic : nics_) {
    const QpCounters c = nic->TotalCounters();
    t += c;
  }
  return t;
}

}  // namespace fathom::sim
