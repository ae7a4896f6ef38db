// Re-routing around a failed link (the link_down fault's `reroute_via`):
// when the link goes down, every QP whose route (QpFlow::path) crosses a
// link direction that is down (this one's, or another re-routed fault's
// still down) gets a new route from the switch before the failed hop on.
// Each switch on it takes an ECMP next hop toward the destination that is
// up and does not lead straight back; a switch left with none sends the
// flow to the `via` neighbour when it has a link to it (a down-up bounce
// when `via` is a tier below, as a routing transient or a static route
// makes), else up. When the link comes back the old routes return. Such bounces are what closes a
// cycle of pauses in a lossless Clos fabric (CASES.md 17; Hu et al., HotNets 2016).
//
// Packets in flight keep their hop count, and a switch forwards by its own
// current route, never into another switch's queue (Rerouting::Pick, once
// the first route changes): a packet reads the egress of its hop from its
// flow's route; when that port is not the switch's own (the packet is past
// the rewritten hop, or on a detour whose old route came back), it goes on
// from where the switch is on the route (its hop count set there), and a
// switch off the route forwards by its ECMP next hops toward the
// destination that are up, as Reroute picks them, until the packet meets
// its route again. Such a packet is off the route's hop count (past
// kPathMax), so no PFC ingress account holds it (a few packets, in flight
// when the route changed). Every hop stays a hop over a link, which is
// what lets a partition across processes follow re-routes
// (fabric/parallel/parallel_run.h).
//
// Ownership: the Network (and its NICs' QPs) must outlive a Rerouting and
// its Reroutes; one thread (the engine's).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "fabric/sim/network.h"

namespace fathom::sim {

// What every Reroute of a run shares: the link directions down now, the
// bounce neighbours of the re-routes in force, and how the switches
// forward once a route has changed (a Forwarding every port whose far end
// is a switch gets at the first Down; ports point at it, so it must outlive
// the run).
class Rerouting {
 public:
  explicit Rerouting(Network* net) : net_(net) {}
  Rerouting(const Rerouting&) = delete;
  Rerouting& operator=(const Rerouting&) = delete;

  // The directions down now.
  const std::vector<Port*>& down() const { return down_; }
  bool Failed(const Port* p) const;
  // `failed` go down (bouncing through `via`, -1: none) / come back up.
  void Down(const std::vector<Port*>& failed, int32_t via);
  void Up(const std::vector<Port*>& failed, int32_t via);
  // Switch `cur`'s next hop for `flow` (`hash`: its FlowHash) come from node
  // `prev`: an ECMP next hop toward the destination that is up and does not
  // go straight back; else a port to one of `vias` (the bounce); else one
  // up a tier. One pick per flow and switch, by the hash (as ECMP does);
  // null: none.
  Port* Step(int32_t cur, int32_t prev, const QpFlow& flow, uint32_t hash,
             std::span<const int32_t> vias) const;

  // A packet off its route this many links past kPathMax is in a loop: it
  // is dropped (kNoRoute), as an IP TTL would end it (64: the TTL Linux
  // sends with by default, net.ipv4.ip_default_ttl).
  static constexpr uint32_t kOffRouteHops = kPathMax + 1 + 64;

 private:
  // Forwarding::pick (see the top of this file).
  static Port* Pick(void* self, const Port& in, const QpFlow& flow, uint32_t* hops);

  Network* net_;
  std::vector<Port*> down_;
  std::vector<int32_t> vias_;  // of the re-routes in force, in the order they started
  Forwarding forwarding_{&Rerouting::Pick, this};
  bool installed_ = false;
};

class Reroute {
 public:
  // `failed`: the egress ports (link directions) that go down; `via`: the
  // node id to bounce through (-1: none); `shared`: what every Reroute of a
  // run shares (the caller owns it).
  Reroute(Network* net, std::vector<Port*> failed, int32_t via, Rerouting* shared);

  // Rewrites the routes that cross a failed port (the link went down).
  void Apply();
  // Puts the old routes back (the link came up).
  void Restore();
  // Flows re-routed by the last Apply, and those left as they were (no
  // route found: none up, or longer than kPathMax links plus the host link
  // the last switch's table gives).
  int32_t rerouted() const { return static_cast<int32_t>(saved_.size()); }
  int32_t unrouted() const { return unrouted_; }
  // The link directions it re-routes around.
  const std::vector<Port*>& failed() const { return failed_; }
  // Flows re-routed over every Apply.
  int64_t total_rerouted() const { return total_rerouted_; }

  static void OnApply(void* self, uint64_t) { static_cast<Reroute*>(self)->Apply(); }
  static void OnRestore(void* self, uint64_t) { static_cast<Reroute*>(self)->Restore(); }

 private:
  bool Failed(const Port* p) const { return shared_->Failed(p); }
  // The new route of `flow` from hop k (the failed one) on; false: none.
  bool Route(const QpFlow& flow, size_t k, Port** path) const;

  Network* net_;
  Rerouting* shared_;
  std::vector<Port*> failed_;
  int32_t via_;
  struct Saved {
    QpFlow* flow;
    std::array<Port*, kPathMax> path;
  };
  std::vector<Saved> saved_;
  int32_t unrouted_ = 0;
  int64_t total_rerouted_ = 0;
};

}  // namespace fathom::sim
