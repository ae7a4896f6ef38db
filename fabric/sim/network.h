// Network: the simulated fabric built from a topo::Topology — one Port per
// direction of every link, an output-queued Switch per switch node, a Nic per
// host node. It owns all of them, the packet pool and the drop statistics;
// the Engine and the Topology belong to the caller and must outlive it.
//
// Switch forwarding: hop by hop, by the topology's routing (computed up/down
// or tables, Topology::NextHops) and a hash of the packet's 5-tuple (FlowHash: addresses + the UDP
// source port that carries per-QP entropy) mixed with a per-switch salt. With the salt off every
// switch hashes alike and traffic polarizes (CASES.md 15).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/status.h"
#include "fabric/sim/config.h"
#include "fabric/sim/engine.h"
#include "fabric/sim/nic.h"
#include "fabric/sim/packet.h"
#include "fabric/sim/port.h"
#include "topologies/topology.h"

namespace fathom::sim {

// Forwards by the topology's routing. Computed (up/down): the destination's
// HostPlace (one load from the topology's per-host array) says whether it is
// in this switch's subtree; the ECMP set is then its down ports or its
// uplinks, a contiguous range of this switch's ports. Tables: a row of its
// own, for every destination host rank the ECMP set as a span of Port
// pointers (one load from the row, one from the pointer array). A packet
// whose flow carries its route (QpFlow) is not looked up at all: the route
// holds what Route() gives, computed once per QP.
class Switch {
 public:
  // `ports` are this switch's egress ports, by port index.
  Switch(const topo::Topology* topo, int32_t node, uint64_t salt, std::span<Port* const> ports,
         PacketPool* pool, DropStats* drops);
  static void Receive(void* sw, Packet* p, int32_t in_port);
  int32_t node() const { return node_; }
  // The egress port for a packet of `flow_hash` to host node `dst_host`;
  // null when there is none (no route, or `dst_host` is not a host).
  Port* Route(int32_t dst_host, uint32_t flow_hash) const {
    const size_t dst = static_cast<uint32_t>(dst_host);
    if (dst >= node_count_) return nullptr;
    const size_t rank = static_cast<uint32_t>(host_rank_[dst]);
    uint32_t first, count;
    if (places_ != nullptr) {
      if (rank >= place_count_) return nullptr;
      const topo::HostPlace& d = places_[rank];
      const bool below = d.group[tier_] == group_;
      first = below ? static_cast<uint32_t>(d.down[tier_]) : up_first_;
      count = below ? down_count_ : up_count_;
    } else {
      if (rank >= row_.size()) return nullptr;
      const uint32_t entry = row_[rank];
      count = entry & ((1u << kCountBits) - 1);
      first = entry >> kCountBits;
    }
    if (count == 0) return nullptr;
    size_t pick = 0;
    if (count > 1) {
      const uint64_t h = Mix64(flow_hash ^ salt_);
      pick = static_cast<size_t>(((h >> 32) * count) >> 32);
    }
    return next_[first + pick];
  }

 private:
  static constexpr uint32_t kCountBits = 10;  // an ECMP set has < 1024 ports
  alignas(64) const int32_t* host_rank_;      // the topology's node id -> host rank
  size_t node_count_;                         // entries of host_rank_
  // Computed routing: the topology's HostPlaces (null: tables) and this
  // switch's place; next_ is then its ports by index.
  const topo::HostPlace* places_ = nullptr;
  size_t place_count_ = 0;
  int32_t tier_ = 0;
  int32_t group_ = 0;
  uint32_t down_count_ = 0, up_first_ = 0, up_count_ = 0;
  std::vector<uint32_t> row_;  // tables, by destination host rank: offset << 10 | count into next_
  std::vector<Port*> next_;    // tables: the ECMP sets, interned
  uint64_t salt_;
  PacketPool* pool_;
  DropStats* drops_;
  int32_t node_;
};

class Network {
 public:
  Network(Engine* engine, const topo::Topology* topo, const NetworkConfig& config);
  Network(const Network&) = delete;
  Network& operator=(const Network&) = delete;
  ~Network();

  Engine& engine() { return *engine_; }
  const topo::Topology& topology() const { return *topo_; }
  // The NIC of host rank `rank` (topology hosts() order).
  Nic& nic(int32_t rank) { return *nics_[static_cast<size_t>(rank)]; }
  int32_t host_count() const { return static_cast<int32_t>(nics_.size()); }
  // Egress port `index` of `node` (one direction of the link on that port).
  Port& port(int32_t node, int32_t index) const {
    return *ports_[static_cast<size_t>(port_begin_[static_cast<size_t>(node)] + index)];
  }
  std::span<Port* const> ports() const { return ports_; }
  PacketPool& pool() { return pool_; }
  const DropStats& drops() const { return drops_; }
  // Sum of every NIC's QP counters.
  QpCounters TotalQpCounters() const;
  // Sum of every NIC's DCQCN counters (np_*, rp_*), and the packets every
  // switch port marked CE (NetworkConfig::ecn).
  DcqcnCounters TotalDcqcnCounters() const;
  uint64_t TotalEcnMarkedPackets() const;
  // Writes the route (QpFlow::path) of a flow from host node `src_host` to
  // `dst_host` with `flow_hash` to path[0..kPathMax). All null when the
  // route is longer than kPathMax links or loops back (the switches then
  // look each packet up).
  void PathOf(int32_t src_host, int32_t dst_host, uint32_t flow_hash, Port** path) const;

 private:
  Engine* engine_;
  const topo::Topology* topo_;
  PacketPool pool_;
  DropStats drops_;
  // Ports and their rings live in arena_ (built there, destroyed by ~Network).
  HugePageArena arena_;
  std::vector<Port*> ports_;
  std::vector<int32_t> port_begin_;
  std::vector<std::unique_ptr<Switch>> switches_;
  std::vector<Switch*> switch_at_;                       // by node id; null for hosts
  std::vector<std::unique_ptr<Nic>> nics_;               // by host rank
  std::vector<std::unique_ptr<EcnMarker>> ecn_markers_;  // switch egress ports, when ECN is on
  // PFC (pfc.h): the configuration the ports point at, and each switch's
  // lossless accounting; empty without a lossless class.
  QosConfig qos_;
  std::vector<std::unique_ptr<PfcSwitch>> pfc_switches_;
  // Builds the PFC state of every port (a lossless class is configured).
  void EnablePfc(const NetworkConfig& config);

 public:
  // The lossless accounting of switch `node` (null: none, or not a switch).
  PfcSwitch* pfc_switch(int32_t node) const;
  // The traffic classes the fabric runs (no lossless class: the default).
  const QosConfig& qos() const { return qos_; }
};

}  // namespace fathom::sim
