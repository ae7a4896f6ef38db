// NetworkConfig: how a simulated fabric is built — switch buffers, ECMP,
// addressing, routes — and, as the models arrive, its traffic classes and
// the NICs' behaviour. The Network reads it once when it builds its ports,
// switches and NICs (each NIC gets it too); nothing keeps a reference.
// Scenarios (fabric/scenario) and `fathom coll` fill it.
#pragma once

#include <cstdint>

#include "fabric/sim/dcqcn.h"
#include "fabric/sim/ecn.h"
#include "fabric/sim/nic_profile.h"
#include "fabric/sim/pfc.h"

namespace fathom::sim {

struct NetworkConfig {
  // Egress buffer of each switch port, per traffic class, in bytes.
  int64_t switch_buffer_bytes = 1 << 20;
  // Per-switch ECMP hash salt; off reproduces polarization.
  bool ecmp_salt = true;
  bool ipv6 = false;
  // QPs get their fixed route when they connect (QpFlow); off, every
  // switch looks each packet up in its table (the same routes, slower).
  bool fixed_paths = true;
  // The NICs' host/NIC timing and retransmission behaviour (nic_profile.h);
  // `ideal` is the simulator's original NIC.
  NicProfile nic;
  // RED/WRED ECN marking at switch egress, per traffic class (ecn.h).
  EcnConfig ecn;
  // DCQCN in every NIC: CNPs (notification point) and per-QP rate control
  // (reaction point); dcqcn.h.
  DcqcnConfig dcqcn;
  // Traffic classes: DSCP -> priority, lossless (PFC) classes and their
  // thresholds (pfc.h). Default: every class lossy drop-tail.
  QosConfig qos;
  // The transfer model (flow_fabric.h, docs/FLOW.md): false, packets (the
  // default); true, each message is one max-min fair flow on its route.
  bool flow_model = false;
};

}  // namespace fathom::sim
