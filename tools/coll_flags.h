// The command line of `fathom coll`: its flags as typed (CollOptions), the
// settings the launcher's environment adds (ApplyCollEnvironment), and their
// checks into what to run (ParseCollFlags): the nccl-tests sweep
// (transport/worlds/sweep.h) and the communicator's options. tools/cmd_coll.cc
// declares the flags and builds the world they ask for.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "transport/collectives/communicator.h"
#include "transport/collectives/launcher_env.h"
#include "transport/collectives/reduce.h"
#include "transport/collectives/schedule.h"
#include "transport/faulty/plan.h"
#include "transport/worlds/coll_profile.h"
#include "transport/worlds/sweep.h"

namespace fathom::tools {

// Every flag of `fathom coll`, as typed (defaults: nccl-tests' and NCCL's).
struct CollOptions {
  std::string op;
  std::string backend = "sim";
  std::string topology = "small";
  std::string scenario;
  int ranks = 0;
  std::string minbytes = "32M", maxbytes = "32M", stepbytes = "1M";
  double stepfactor = 1;
  int iters = 20, warmup = 5, check = 1;
  // nccl-tests flags (see ParseCollFlags for what each means here)
  int nthreads = 1, ngpus = 1, agg_iters = 1, average = 1, parallel_init = 0, blocking = 0;
  int stream_null = 0, test_timeout_s = 0, cudagraph = 0, report_cputime = 0, run_cycles = 1;
  int local_register = 0;
  std::string redop = "sum", dtype = "float";
  int root = 0;
  std::string algo = "auto";
  int channels = 1;
  std::string chunk = "512K";
  int slots = 4;
  double timeout_s = -1;
  int ib_timeout = 14, retry_cnt = 7, mtu = 0, tc = 0;
  bool rxe = false, modelled = false, json = false;
  // sim: the NIC/host profile (coll_profile.h), the fabric's RoCE class, the
  // rank's memory bandwidth for reductions (GB/s; < 0: the profile's), and
  // the fabric's counters in the text table. The defaults are what a RoCE
  // cluster runs (issue 26): ConnectX-6 NICs (cx6: the profile whose figures
  // are cited, fabric/sim/nic_profile.cc) on the lossless RoCE class with
  // ECN and DCQCN (fabric/sim/roce_class.h); `--fabric lossy --profile
  // ideal` is the simulator's original model. With --scenario, the
  // scenario's own settings (fathom sim's defaults where it is silent) unless
  // these flags are given.
  std::string profile = "cx6";
  std::string fabric = "lossless";
  double host_mem_gbs = -1;
  bool counters = false;
  uint64_t seed = 1;
  std::string trace;
  // verbs
  int nranks = 0, rank = -1;
  std::string bootstrap = "127.0.0.1:18515";
  std::string token;
  double bootstrap_wait_s = 60;
  std::string ib_dev;
  int ib_port = 0, gid_index = -1;
  std::string cq_mode = "poll";
  // The flags the user typed (they win over the environment).
  std::set<std::string> given;
  transport::coll::HcaSpec hca;           // NCCL_IB_HCA, when --ib-dev is not given
  std::vector<std::string> verbs_faults;  // --verbs-fault, as typed (transport/faulty/plan.h)
  // sim: the server tier (topologies/server.h; tools/coll_server.cc):
  // --server auto|none|a100|h100|b200, --nvlink-gbs (GB/s one way; < 0: the
  // preset's), --gpudirect on|off, --rails (NIC of each GPU, "0,1,...").
  std::string server = "auto";
  double nvlink_gbs = -1;
  std::string gpudirect = "on";
  std::string rails;
  // alltoallv's size matrix (tools/coll_alltoallv.cc): --matrix FILE, or
  // --skew SEED (< 0: none) with --zipf A; neither: uniform.
  std::string matrix;
  int64_t skew = -1;
  double zipf = 1.0;
  // verbs: G consecutive ranks share a node (--ranks-per-node; 0: flat).
  int ranks_per_node = 0;
  // sim: --event-order schedule (default, one process) or canonical (the
  // order a run split across MPI processes takes; issue 30).
  std::string event_order;
  // sim: packet (default) or flow (fabric/sim/flow_fabric.h, docs/FLOW.md).
  std::string fabric_model = "packet";
  // NCCL's several QPs per connection (transport/collectives/multi_qp.h):
  // --qps-per-connection N (1..128; default NCCL_IB_QPS_PER_CONNECTION, else
  // 1) and --split-data-on-qps 0|1 (default NCCL_IB_SPLIT_DATA_ON_QPS, else
  // 0: whole messages round-robin).
  int qps_per_connection = 1;
  int split_data_on_qps = 0;
};

// The flags, checked and converted.
struct CollParsed {
  transport::coll::CollKind kind;
  // (type, op) pairs in nccl-tests' order: types outer, ops inner (-d all,
  // -o all); one pair otherwise.
  std::vector<std::pair<transport::coll::DataType, transport::coll::RedOp>> combos;
  transport::coll::Algorithm algo;
  std::vector<uint64_t> sizes;
  uint64_t chunk = 0;
  uint64_t min_bytes = 0, max_bytes = 0, step_bytes = 0;
  int sim_ranks = 0;  // --ranks, or nThread x nGpus
  double timeout_s = -1;
  transport::worlds::CollProfile profile;                   // --profile
  bool lossless = false;                                    // --fabric lossless
  bool flow_model = false;                                  // --fabric-model flow
  double host_reduce_bytes_per_s = 0;                       // --host-mem-gbs, else the profile's
  std::vector<transport::faulty::VerbsFault> verbs_faults;  // every --verbs-fault, in order
};

// The settings a launcher or NCCL's variables give (launcher_env.h), where
// the flags in o->given do not; the sim takes only NCCL's transport knobs,
// not ranks, bootstrap or device. Notes go to stderr.
Status ApplyCollEnvironment(CollOptions* o);

// Checks every flag (nccl-tests' with their meanings here: a note in *notes
// for accepted values that change nothing here, an error for the rest).
// INVALID_ARGUMENT names the flag and its value.
StatusOr<CollParsed> ParseCollFlags(const CollOptions& o, std::vector<std::string>* notes);

// The sweep and the communicator options the flags ask for.
transport::worlds::SweepOptions SweepFromFlags(const CollOptions& o, const CollParsed& p);
transport::coll::CommOptions CommFromFlags(const CollOptions& o, const CollParsed& p);

}  // namespace fathom::tools
