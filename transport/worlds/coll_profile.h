// The NIC/host profile a `fathom coll --backend sim` run takes (`--profile
// ideal|rxe|cx6|cx7`, issue 26): what the collectives' side of a profile
// sets — the rank's memory bandwidth for its reductions and, for rxe, rxe's
// retry semantics. The NIC's own timing (doorbell, WQE fetch, pipelines,
// DMA, CQE; adaptive retransmission) belongs to the NIC profile of
// sim::NetworkConfig::nic (h/nicprof); SimWorld reads its per-message
// figures for `--algo auto` (sim_world.cc, NicFiguresFor).
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace fathom::transport::worlds {

struct CollProfile {
  std::string name;
  // Memory bandwidth one rank reduces at, bytes/s; 0 = reductions take no
  // time (ideal: today's figures and digests).
  double host_reduce_bytes_per_s = 0;
  bool rxe_infinite_retry = false;  // rxe: retry_cnt 7 retries forever
};

// "ideal|rxe|cx6|cx7", for help and error texts.
inline constexpr std::string_view kCollProfileNames = "ideal|rxe|cx6|cx7";

// INVALID_ARGUMENT naming the value and the valid names for anything else.
StatusOr<CollProfile> FindCollProfile(std::string_view name);

}  // namespace fathom::transport::worlds
