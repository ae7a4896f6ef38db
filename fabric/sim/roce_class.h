// The RoCE class a RoCE cluster runs its RDMA traffic on, as one
// NetworkConfig change: priority 3 lossless with PFC (LosslessRoceQos,
// pfc.h), RED/WRED ECN marking on that priority at the switches' egress,
// and DCQCN in every NIC. `fathom coll --backend sim` runs on it by default
// (`--fabric lossless`, issue 26); the QPs must carry
// kLosslessRoceTrafficClass (DSCP 26, ECT(0)) to be on the class and be
// marked. Scenarios spell the same out in network.qos / network.ecn /
// transport.dcqcn (scenarios/headline.yaml, dcqcn_incast.yaml).
#pragma once

#include "fabric/sim/config.h"
#include "fabric/sim/pfc.h"

namespace fathom::sim {

// RED/ECN thresholds on the lossless priority, absolute, per egress queue:
// NVIDIA Onyx's `roce lossless` defaults for Spectrum switches (Onyx user
// manual, RoCE Commands, `show roce`: "Port congestion-control: Mode: ecn,
// absolute, Min: 150, Max: 1500", in KB). That table gives no marking
// probability at Kmax; Pmax is the DCQCN paper's 1% (Zhu et al.,
// SIGCOMM 2015, section 5). (The paper's own 5 KB / 200 KB were tuned for
// 40 Gb/s; at 400 Gb/s 5 KB is 100 ns of queue.)
inline constexpr int64_t kRoceEcnKminBytes = 150 * 1000;
inline constexpr int64_t kRoceEcnKmaxBytes = 1500 * 1000;
inline constexpr double kRoceEcnPmax = 0.01;

// `base` with RoCE's lossless class, ECN marking on it and DCQCN on, at the
// mlx5 defaults of DcqcnConfig (dcqcn.h); everything else kept.
inline NetworkConfig WithLosslessRoceClass(NetworkConfig base) {
  base.qos = LosslessRoceQos();
  base.ecn.enabled = true;
  base.ecn.classes[3] = EcnClassConfig{true, kRoceEcnKminBytes, kRoceEcnKmaxBytes, kRoceEcnPmax};
  base.dcqcn = DcqcnConfig{};
  base.dcqcn.enabled = true;
  return base;
}

}  // namespace fathom::sim
