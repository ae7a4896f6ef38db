// Settings of `fathom coll --backend verbs` that come from the environment a
// launcher or a user already set, so that one command line serves every
// rank: `mpirun -np 4 fathom coll allreduce --backend verbs`.
//  - rank and rank count: Open MPI (OMPI_COMM_WORLD_RANK/SIZE), torchrun
//    (RANK/WORLD_SIZE), PMI (PMI_RANK/PMI_SIZE: MPICH's hydra, srun
//    --mpi=pmi2), Slurm (SLURM_PROCID/SLURM_NTASKS), first found in that
//    order (the innermost launcher first: torchrun under srun sees both);
//  - the bootstrap address: MASTER_ADDR:MASTER_PORT (torchrun; MASTER_PORT+1
//    when torchrun's agent serves its store there, TORCHELASTIC_USE_AGENT_STORE);
//    rank 0 binds it, so MASTER_ADDR must be an IP address of rank 0's host;
//  - NCCL's variables for the same knobs: NCCL_IB_TIMEOUT, NCCL_IB_RETRY_CNT,
//    NCCL_IB_QPS_PER_CONNECTION, NCCL_IB_SPLIT_DATA_ON_QPS, NCCL_IB_GID_INDEX,
//    NCCL_IB_HCA, NCCL_IB_TC, NCCL_ALGO.
// A flag the user typed always wins. Pure logic over an environment map, so
// that tests need no processes.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"

namespace fathom::transport::coll {

using EnvMap = std::map<std::string, std::string>;

// This process's environment.
EnvMap ProcessEnvironment();

// NCCL_IB_HCA as NCCL reads it: "mlx5_0:1,mlx5_1:1" (devices by name prefix,
// optional port), "=mlx5_0" (exact names), "^mlx5_1" (every device but).
struct HcaSpec {
  std::string text;  // the variable's value; empty: not set
  bool exclude = false;
  bool exact = false;
  std::vector<std::pair<std::string, int>> entries;  // name, port (0: any)
};

// The settings, with the flag defaults of `fathom coll`.
struct LaunchSettings {
  int rank = -1;   // --rank
  int nranks = 0;  // --nranks
  std::string bootstrap = "127.0.0.1:18515";
  int ib_timeout = 14;        // --ib-timeout
  int retry_cnt = 7;          // --retry-cnt
  int channels = 1;           // --channels (rings: connections per peer)
  int gid_index = -1;         // --gid-index (-1: RoCE v2 IPv4-mapped)
  int traffic_class = 0;      // --tc
  std::string ib_dev;         // --ib-dev ("" = first ACTIVE)
  int ib_port = 0;            // --ib-port (0 = first ACTIVE)
  std::string algo = "auto";  // --algo
  HcaSpec hca;                // NCCL_IB_HCA when --ib-dev is not given: see PickDevice

  // NCCL's QPs per connection (multi_qp.h): --qps-per-connection and
  // --split-data-on-qps.
  int qps_per_connection = 1;
  int split_data_on_qps = 0;
};

// `flags` holds what the command line says; `given` names the flags the
// user typed ("--rank", "--nranks", "--bootstrap", "--ib-timeout",
// "--retry-cnt", "--channels", "--gid-index", "--tc", "--ib-dev",
// "--ib-port", "--algo", "--qps-per-connection", "--split-data-on-qps").
// Every other setting comes from `env` when a variable sets it. `notes` get one line per variable
// used. INVALID_ARGUMENT names the variable and its value when it does not parse or is out of range
// (or, for NCCL_IB_HCA and NCCL_ALGO, asks for what cannot run here).
StatusOr<LaunchSettings> ResolveLaunch(const LaunchSettings& flags,
                                       const std::set<std::string>& given, const EnvMap& env,
                                       std::vector<std::string>* notes);

// The device (and port, 0 = first ACTIVE) NCCL_IB_HCA selects among
// `devices` (ibv_get_device_list order): the first that its first matching
// entry names, or the first not excluded. One device per rank here, where
// NCCL would use every match. INVALID_ARGUMENT naming the variable when
// nothing matches.
StatusOr<std::pair<std::string, int>> PickDevice(const HcaSpec& hca,
                                                 const std::vector<std::string>& devices);

}  // namespace fathom::transport::coll
