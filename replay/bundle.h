// Evidence bundles from simulator runs (issue 28): what a field engineer
// would have collected had the scenario's job run on real hardware, written
// in exactly the formats ReadEvidence parses, so the replay can be measured
// blind on simulated faults (corpus.h) and its parsers round-trip.
//
// Layout (every host is one node with one NIC, rank = host index):
//   topology.yaml                       the scenario's TopologySpec (JSON, valid YAML)
//   fabric/neighbors.csv                host,nic,switch,port
//   fabric/switch_counters.csv          port,counter,value (switch ports that moved)
//   fabric/link_events.txt              "ISO-TIME LINK down|up" from the fault timeline
//   hosts/HOST/nccl.log                 NCCL_DEBUG=INFO with timestamps on every level
//   hosts/HOST/rdma_statistic.txt       `rdma statistic show` (mlx5 or rxe names)
//   hosts/HOST/ethtool_S.txt            `ethtool -S` (packets, pause, FEC when moved)
//   hosts/HOST/ip_addr.txt              `ip -d addr` (`ip -d link` plus addresses)
//   hosts/HOST/ibv_devinfo.txt          `ibv_devinfo -v` (port 1, GID table)
//   hosts/HOST/show_gids.txt            show_gids table
// Wall-clock times are `epoch_s` + the run's virtual time, so the bundle's
// time origin (the init lines) is virtual time 0.
#pragma once

#include <string>

#include "base/status.h"
#include "fabric/scenario/scenario.h"

namespace fathom::replay {

struct BundleOptions {
  double epoch_s = 1764932400;  // 2025-12-05 11:00:00 UTC stands for virtual time 0
  // Counter names: "mlx5" or "rxe"; empty: rxe for nic_profile rxe, else mlx5.
  std::string driver;
  std::string nccl_version = "2.21.5+cuda12.4";
  int gid_index = 3;  // NCCL_IB_GID_INDEX: the RoCE v2 IPv4 GID of the table written
};

// Writes the bundle of `report` (a run of `scenario`) into `dir` (created;
// existing files are overwritten). IoError naming the file on a write failure.
Status WriteBundle(const sim::LoadedScenario& scenario, const sim::RunReport& report,
                   const std::string& dir, const BundleOptions& options = {});

// The address WriteBundle gives host index `i` (10.x.y.z), for tests.
std::string BundleHostAddress(int i);

}  // namespace fathom::replay
