#include "fabric/sim/network.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <new>

namespace fathom::sim {

Switch::Switch(const topo::Topology* topo, int32_t node, uint64_t salt,
               std::span<Port* const> ports, PacketPool* pool, DropStats* drops)
    : host_rank_(&topo->HostRankTable()[0]),
      node_count_(topo->HostRankTable().size()),
      salt_(salt),
      pool_(pool),
      drops_(drops),
      node_(node) {
  if (topo->routing() == topo::Routing::kUpDown) {
    const topo::SwitchPlace& sp = topo->NodePlaces()[static_cast<size_t>(node)];
    places_ = topo->HostPlaces().data();
    place_count_ = topo->HostPlaces().size();
    tier_ = sp.tier;
    group_ = sp.group;
    down_count_ = static_cast<uint32_t>(sp.down_count);
    up_first_ = static_cast<uint32_t>(sp.up_first);
    up_count_ = static_cast<uint32_t>(sp.up_count);
    next_.assign(ports.begin(), ports.end());
    return;
  }
  const std::vector<int32_t>& hosts = topo->hosts();
  row_.resize(hosts.size());
  // Intern the sets: a fat-tree switch has a handful of distinct ones.
  std::map<std::vector<int32_t>, uint32_t> interned;
  for (size_t r = 0; r < hosts.size(); ++r) {
    const std::span<const int32_t> hops = topo->NextHops(node, hosts[r]);
    if (hops.size() >= (1u << kCountBits) || next_.size() >= (1u << (32 - kCountBits))) {
      std::fprintf(stderr, "fathom sim: switch %d: ECMP sets too large for its routing row\n",
                   node);
      std::abort();
    }
    std::vector<int32_t> key(hops.begin(), hops.end());
    auto [it, fresh] = interned.emplace(std::move(key), static_cast<uint32_t>(next_.size()));
    if (fresh) {
      for (int32_t port : hops) next_.push_back(ports[static_cast<size_t>(port)]);
    }
    row_[r] = (it->second << kCountBits) | static_cast<uint32_t>(hops.size());
  }
}

void Switch::Receive(void* sw, Packet* p, int32_t /*in_port*/) {
  // Only packets without a next_out come here (the port hands the others
  // straight to it, Port::Connect): look them up.
  Switch* self = static_cast<Switch*>(sw);
  const QpFlow& f = *p->flow;
  Port* out = self->Route(f.dst_host, FlowHash(f.src_host, f.dst_host, f.udp_sport));
  if (out == nullptr) {
    self->drops_->Add(DropReason::kNoRoute);
    self->pool_->Free(p);
    return;
  }
  out->Send(p);
}

void Network::PathOf(int32_t src_host, int32_t dst_host, uint32_t flow_hash, Port** path) const {
  std::fill(path, path + kPathMax, nullptr);
  if (src_host < 0 || static_cast<size_t>(src_host) >= switch_at_.size() ||
      topo_->PortCount(src_host) == 0) {
    return;
  }
  Port* hops[kPathMax] = {};
  hops[0] = &port(src_host, 0);
  for (size_t h = 1;; ++h) {
    const Switch* sw = switch_at_[static_cast<size_t>(hops[h - 1]->peer()->config().node)];
    if (sw == nullptr) break;  // reached a host
    if (h == kPathMax) return;
    hops[h] = sw->Route(dst_host, flow_hash);
    if (hops[h] == nullptr) break;  // the packet is dropped there
  }
  std::copy(hops, hops + kPathMax, path);
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
      // The NIC profile's TX and RX pipelines are constant per packet and
      // FIFO: folded into the latency of the links at the hosts, they delay
      // every packet exactly as the pipelines would (0 in `ideal`).
      const int32_t peer = link.a == node ? link.b : link.a;
      if (nodes[n].kind != topo::NodeKind::kSwitch) pc.latency += config.nic.tx_pipeline;
      if (nodes[static_cast<size_t>(peer)].kind != topo::NodeKind::kSwitch) {
        pc.latency += config.nic.rx_pipeline;
      }
      pc.mtu_bytes = link.a == node ? link.mtu_ab : link.mtu_ba;
      // NICs transmit only into an idle port, so only switches queue.
      pc.buffer_bytes = nodes[n].kind == topo::NodeKind::kSwitch ? config.switch_buffer_bytes : 0;
      ports_[static_cast<size_t>(port_begin_[n] + i)] =
          new (arena_.Allocate(sizeof(Port), alignof(Port)))
              Port(engine, &pool_, &arena_, &drops_, pc);
    }
  }
  if (config.ecn.enabled) {
    // Marking at every switch egress port, each with its own stream.
    for (Port* p : ports_) {
      if (nodes[static_cast<size_t>(p->config().node)].kind != topo::NodeKind::kSwitch) continue;
      const uint64_t id =
          static_cast<uint64_t>(p->config().node) << 16 | static_cast<uint64_t>(p->config().index);
      ecn_markers_.push_back(
          std::make_unique<EcnMarker>(config.ecn, engine->MakeRng(0xEC000000000000ULL | id)));
      p->set_ecn(ecn_markers_.back().get());
    }
  }
  nics_.resize(topo->hosts().size());
  switch_at_.resize(nodes.size(), nullptr);
  std::vector<void*> receiver(nodes.size(), nullptr);
  std::vector<ReceiveFn> receive_fn(nodes.size(), nullptr);
  std::vector<ReceivePrefetchFn> prefetch_fn(nodes.size(), nullptr);
  std::vector<ReceiveFullSizeFn> full_size_fn(nodes.size(), nullptr);
  for (size_t n = 0; n < nodes.size(); ++n) {
    const int32_t node = static_cast<int32_t>(n);
    if (nodes[n].kind == topo::NodeKind::kSwitch) {
      const uint64_t salt = config.ecmp_salt ? Mix64(engine->seed() ^ Mix64(0x5a17 + n)) : 0;
      std::vector<Port*> sw_ports;
      for (int32_t i = 0; i < topo->PortCount(node); ++i) sw_ports.push_back(&port(node, i));
      auto sw = std::make_unique<Switch>(topo, node, salt, sw_ports, &pool_, &drops_);
      receiver[n] = sw.get();
      switch_at_[n] = sw.get();
      // No fetch hint: the packets a switch forwards by their path never
      // reach it (the port fetches for them), and a table lookup reads
      // the packet and the switch's row, nothing to fetch a level ahead.
      receive_fn[n] = &Switch::Receive;
      switches_.push_back(std::move(sw));
    } else {
      auto nic = std::make_unique<Nic>(engine, &pool_, &drops_, node, config);
      if (topo->PortCount(node) > 0) nic->AttachPort(&port(node, 0));
      // Lossless accounting reads the route (pfc.h): fixed paths then.
      if (config.fixed_paths || config.qos.lossless_mask() != 0) {
        nic->set_paths(
            [](void* net, int32_t src, int32_t dst, uint32_t hash, Port** path) {
              static_cast<const Network*>(net)->PathOf(src, dst, hash, path);
            },
            this);
      }
      if (topo->PortCount(node) > 0) port(node, 0).set_on_resume(&Nic::OnPortResumed, nic.get());
      receiver[n] = nic.get();
      receive_fn[n] = &Nic::Receive;
      prefetch_fn[n] = &Nic::Prefetch;
      full_size_fn[n] = &Nic::ReceiveFullSize;
      nics_[static_cast<size_t>(topo->HostRank(node))] = std::move(nic);
    }
  }
  for (size_t n = 0; n < nodes.size(); ++n) {
    const int32_t node = static_cast<int32_t>(n);
    for (int32_t i = 0; i < topo->PortCount(node); ++i) {
      const topo::PortRef peer = topo->Peer(node, i);
      const size_t far = static_cast<size_t>(peer.node);
      port(node, i).Connect(&port(peer.node, peer.port), receive_fn[far], receiver[far],
                            prefetch_fn[far], switch_at_[far] != nullptr, full_size_fn[far]);
    }
  }
  if (config.qos.lossless_mask() != 0) EnablePfc(config);
}

void Network::EnablePfc(const NetworkConfig& config) {
  qos_ = config.qos;
  const auto& nodes = topo_->nodes();
  std::vector<PfcSwitch*> at(nodes.size(), nullptr);
  for (size_t n = 0; n < nodes.size(); ++n) {
    const int32_t node = static_cast<int32_t>(n);
    if (switch_at_[n] == nullptr) continue;
    std::vector<Port*> egress;
    for (int32_t i = 0; i < topo_->PortCount(node); ++i) egress.push_back(&port(node, i));
    pfc_switches_.push_back(std::make_unique<PfcSwitch>(&qos_, std::move(egress)));
    at[n] = pfc_switches_.back().get();
  }
  const uint8_t lossless = qos_.lossless_mask();
  for (size_t n = 0; n < nodes.size(); ++n) {
    const int32_t node = static_cast<int32_t>(n);
    for (int32_t i = 0; i < topo_->PortCount(node); ++i) {
      Port& p = port(node, i);
      const int32_t far = p.peer()->config().node;
      PfcSwitch* far_switch = at[static_cast<size_t>(far)];
      int64_t headroom = qos_.headroom_bytes;
      if (headroom == 0) {
        const int64_t mtu = p.config().mtu_bytes > 0 ? p.config().mtu_bytes : 4096;
        headroom = PfcHeadroomBytes(p.config().rate.bps(), p.config().latency.ps(),
                                    mtu + static_cast<int64_t>(kEthernetWireOverhead));
      }
      p.EnablePfc(switch_at_[n] != nullptr ? lossless : 0, far_switch, &qos_, headroom);
    }
  }
}

PfcSwitch* Network::pfc_switch(int32_t node) const {
  for (const auto& s : pfc_switches_) {
    if (!s->egress().empty() && s->egress()[0]->config().node == node) return s.get();
  }
  return nullptr;
}

Network::~Network() {
  for (Port* p : ports_) p->~Port();
}

DcqcnCounters Network::TotalDcqcnCounters() const {
  DcqcnCounters t;
  for (const auto& nic : nics_) t += nic->dcqcn_counters();
  return t;
}

uint64_t Network::TotalEcnMarkedPackets() const {
  uint64_t n = 0;
  for (const auto& m : ecn_markers_) n += m->marked_packets();
  return n;
}

QpCounters Network::TotalQpCounters() const {
  QpCounters t;
  for (const auto& nic : nics_) {
    const QpCounters c = nic->TotalCounters();
    t += c;
  }
  return t;
}

}  // namespace fathom::sim
