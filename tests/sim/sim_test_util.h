// Helpers shared by the simulator tests: small hand-built topologies and
// impairments that drop chosen packets.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "fabric/sim/engine.h"
#include "fabric/sim/network.h"
#include "topologies/topology.h"

namespace fathom::sim::testing {

inline constexpr BitsPerSecond k100G = BitsPerSecond::Gbps(100);

// Two hosts on one cable (direct = true) or through one switch.
inline topo::Topology TwoHosts(bool direct, Picoseconds latency = Picoseconds::FromMicroseconds(1),
                               int32_t mtu = 4200) {
  topo::TopologyBuilder b(direct ? "two hosts, cable" : "two hosts, one switch");
  const int32_t h0 = b.AddHost("h0", 0, 0);
  const int32_t h1 = b.AddHost("h1", 1, 0);
  const topo::LinkParams lp{k100G, latency, mtu};
  if (direct) {
    (void)b.Connect(h0, h1, lp);
  } else {
    const int32_t sw = b.AddSwitch("leaf0", topo::kTierLeaf);
    (void)b.Connect(h0, sw, lp);
    (void)b.Connect(h1, sw, lp);
  }
  return std::move(b).Build().value();
}

// An impairment driven by a predicate: drop when it returns true.
struct DropIf {
  std::function<bool(const Packet&)> pred;
  uint64_t dropped = 0;
  Impairment hook{&DropIf::Decide, this};
  static ImpairmentVerdict Decide(void* ctx, const Packet& p, uint32_t, Picoseconds) {
    auto* self = static_cast<DropIf*>(ctx);
    if (self->pred(p)) {
      ++self->dropped;
      return {ImpairmentVerdict::kDrop, {}};
    }
    return {};
  }
};

// Connects QP pairs between rank a and rank b of `net` with the same
// attributes; returns {qpn at a, qpn at b}.
struct QpPair {
  uint32_t a = 0;
  uint32_t b = 0;
  CompletionQueue* acq = nullptr;
  CompletionQueue* bcq = nullptr;
};
inline QpPair Connect(Network& net, int32_t a, int32_t b, const QpAttr& attr, uint32_t apsn = 100,
                      uint32_t bpsn = 200) {
  QpPair p;
  Nic& na = net.nic(a);
  Nic& nb = net.nic(b);
  p.acq = na.CreateCq();
  p.bcq = nb.CreateCq();
  p.a = na.CreateQp(p.acq, p.acq, attr).value();
  p.b = nb.CreateQp(p.bcq, p.bcq, attr).value();
  const int32_t anode = net.topology().hosts()[static_cast<size_t>(a)];
  const int32_t bnode = net.topology().hosts()[static_cast<size_t>(b)];
  (void)na.ModifyToInit(p.a);
  (void)nb.ModifyToInit(p.b);
  (void)na.ModifyToRtr(p.a, bnode, p.b, bpsn);
  (void)nb.ModifyToRtr(p.b, anode, p.a, apsn);
  (void)na.ModifyToRts(p.a, apsn);
  (void)nb.ModifyToRts(p.b, bpsn);
  return p;
}

inline std::vector<Completion> Drain(CompletionQueue* cq) {
  std::vector<Completion> out(cq->size());
  out.resize(static_cast<size_t>(cq->Poll(out)));
  return out;
}

}  // namespace fathom::sim::testing
