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
// Packets in flight keep their hop count: a route is rewritten only from
// the failing hop on, and the packets already past that hop are on the far
// end's egress (in a two-tier leaf-spine, the last switch's, which
// delivers to a NIC without reading the route). Deeper fabrics may
// misdirect those few packets; the scenarios use leaf-spine.
//
// Ownership: the Network (and its NICs' QPs) must outlive a Reroute; one
// thread (the engine's).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "fabric/sim/network.h"

namespace fathom::sim {

class Reroute {
 public:
  // `failed`: the egress ports (link directions) that go down; `via`: the
  // node id to bounce through (-1: none); `down`: the directions down now,
  // shared by every Reroute of a run (the caller owns it).
  Reroute(Network* net, std::vector<Port*> failed, int32_t via, std::vector<Port*>* down);

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
  bool Failed(const Port* p) const;
  // The new route of `flow` from hop k (the failed one) on; false: none.
  bool Route(const QpFlow& flow, size_t k, Port** path) const;

  Network* net_;
  std::vector<Port*>* down_;
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
