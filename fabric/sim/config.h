// NetworkConfig: how a simulated fabric is built — switch buffers, ECMP,
// addressing, routes — and, as the models arrive, its traffic classes and
// the NICs' behaviour. The Network reads it once when it builds its ports,
// switches and NICs (each NIC gets it too); nothing keeps a reference.
// Scenarios (fabric/scenario) and `fathom coll` fill it.
#pragma once

#include <cstdint>

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
  // Traffic classes: DSCP -> priority, lossless (PFC) classes and their
  // thresholds (pfc.h). Default: every class lossy drop-tail.
  QosConfig qos;
};

}  // namespace fathom::sim
