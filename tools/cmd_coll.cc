// `fathom coll OP --backend sim|verbs`: nccl-tests for fathom's collectives.
// Flags and output follow nccl-tests (its flags -t -g -b -e -i -f -n -m -w
// -p -c -o -d -r -z -y -T -G -C -a -N -R with its defaults, -d all / -o all
// sweeps; the "# nThread ..." and "# Using devices" lines, columns size count
// type redop root time algbw busbw #wrong, out-of-place then in-place, then
// the algorithm that ran, "# Avg bus bandwidth"). Flags without a meaning
// here are accepted at their neutral value and otherwise ignored with a note
// on stderr, or refused (exit 2) where ignoring them would run something
// else. The size sweep, the per-rank data and its check
// (transport/collectives/nccl_tests.h) and the table (RunSweep,
// transport/worlds/sweep.h) are shared by both backends
// (transport/worlds/sim_backend.h, verbs_backend.h):
//  - sim: every rank runs in this process over the emulated NIC on a
//    topology (a preset, a topology file, or a scenario's topology +
//    transport + faults); time is virtual.
//  - verbs: one process per rank over real verbs (--nranks N --rank R
//    --bootstrap ADDR:PORT, rank 0 listens there; or from the launcher's
//    environment, transport/collectives/launcher_env.h); rank 0 prints the
//    table with the ranks' average time (-a: rank 0's, min, max) and every
//    rank's #wrong.
// A sweep on a terminal shows its progress on stderr (never in a pipe).
// A hang ends with the watchdog's report and exit 1; so does a completion
// error (on every rank), and any #wrong. With verbs, every rank then sends
// rank 0 where it stood, and rank 0's report ends with all of them.
// --trace writes one Chrome trace of every rank's steps; with verbs rank 0
// gathers the ranks' steps through the bootstrap after the run, or, after a
// failure, from the reports the ranks sent (VerbsBackend::WriteTrace).
// This file is the command line only: the flags, their checks, and the
// world and sweep they ask for.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "fabric/sim/fault_attach.h"
#include "fabric/sim/scenario.h"
#include "tools/command.h"
#include "topologies/builders.h"
#include "topologies/spec.h"
#include "transport/collectives/launcher_env.h"
#include "transport/collectives/nccl_tests.h"
#include "transport/verbs/verbs_device.h"
#include "transport/worlds/sim_backend.h"
#include "transport/worlds/sweep.h"
#include "transport/worlds/verbs_backend.h"

namespace fathom::tools {
namespace {

using namespace fathom::transport::coll;    // NOLINT: one tool, its libraries
using namespace fathom::transport::worlds;  // NOLINT

struct Options {
  std::string op;
  std::string backend = "sim";
  std::string topology = "small";
  std::string scenario;
  int ranks = 0;
  std::string minbytes = "32M", maxbytes = "32M", stepbytes = "1M";
  double stepfactor = 1;
  int iters = 20, warmup = 5, check = 1;
  // nccl-tests flags (see Validate for what each means here)
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
  HcaSpec hca;  // NCCL_IB_HCA, when --ib-dev is not given
};

struct Parsed {
  CollKind kind;
  // (type, op) pairs in nccl-tests' order: types outer, ops inner (-d all,
  // -o all); one pair otherwise.
  std::vector<std::pair<DataType, RedOp>> combos;
  Algorithm algo;
  std::vector<uint64_t> sizes;
  uint64_t chunk = 0;
  uint64_t min_bytes = 0, max_bytes = 0, step_bytes = 0;
  int sim_ranks = 0;  // --ranks, or nThread x nGpus
  double timeout_s = -1;
};

// nccl-tests' flags: the values that mean something here, a note (stderr)
// for the accepted values that change nothing here, an error for the rest.
Status CheckNcclTestsFlags(const Options& o, Parsed* p, std::vector<std::string>* notes) {
  auto range = [](const char* flag, int v, int lo, int hi) -> Status {
    if (v < lo || v > hi) {
      return InvalidArgument(std::string(flag) + " " + std::to_string(v) + ": expected " +
                             std::to_string(lo) + ".." + std::to_string(hi));
    }
    return Status::Ok();
  };
  constexpr int kBig = 1 << 30;
  FATHOM_RETURN_IF_ERROR(range("-t", o.nthreads, 1, kBig));
  FATHOM_RETURN_IF_ERROR(range("-g", o.ngpus, 1, kBig));
  FATHOM_RETURN_IF_ERROR(range("-m", o.agg_iters, 1, kBig));
  FATHOM_RETURN_IF_ERROR(range("-a", o.average, 0, 3));
  FATHOM_RETURN_IF_ERROR(range("-p", o.parallel_init, 0, 1));
  FATHOM_RETURN_IF_ERROR(range("-z", o.blocking, 0, 1));
  FATHOM_RETURN_IF_ERROR(range("-y", o.stream_null, 0, 1));
  FATHOM_RETURN_IF_ERROR(range("-T", o.test_timeout_s, 0, kBig));
  FATHOM_RETURN_IF_ERROR(range("-G", o.cudagraph, 0, kBig));
  FATHOM_RETURN_IF_ERROR(range("-C", o.report_cputime, 0, 1));
  FATHOM_RETURN_IF_ERROR(range("-N", o.run_cycles, 0, kBig));
  FATHOM_RETURN_IF_ERROR(range("-R", o.local_register, 0, 2));
  FATHOM_RETURN_IF_ERROR(range("-c", o.check, 0, kBig));
  if (static_cast<int64_t>(o.iters) * o.agg_iters + o.warmup + o.check > kBig) {
    return InvalidArgument("-n x -m + -w + -c: more than " + std::to_string(kBig) +
                           " collectives per size");
  }
  // Ranks: nccl-tests makes nThread x nGpus ranks in each process. The sim
  // holds every rank in this process, so -t/-g give its rank count; over
  // verbs each process is one rank.
  const int64_t tg = static_cast<int64_t>(o.nthreads) * o.ngpus;
  p->sim_ranks = o.ranks;
  if (o.given.count("--ranks") > 0 && o.ranks < 1) {
    return InvalidArgument("--ranks " + std::to_string(o.ranks) +
                           ": expected at least 1 (leave it out for every host that reaches the "
                           "others)");
  }
  if (tg > 1) {
    if (o.backend == "verbs") {
      return InvalidArgument("-t " + std::to_string(o.nthreads) + " -g " + std::to_string(o.ngpus) +
                             ": --backend verbs runs one rank per process (-t 1 -g 1); start "
                             "one process per rank (mpirun -np N, srun, torchrun)");
    }
    if (tg > (1 << 20)) return InvalidArgument("-t x -g: too many ranks");
    if (o.given.count("--ranks") > 0 && o.ranks != tg) {
      return InvalidArgument("-t " + std::to_string(o.nthreads) + " x -g " +
                             std::to_string(o.ngpus) + " = " + std::to_string(tg) +
                             " ranks, but --ranks " + std::to_string(o.ranks));
    }
    p->sim_ranks = static_cast<int>(tg);
  }
  auto ignored = [&](bool cond, const std::string& what) {
    if (cond) notes->push_back(what);
  };
  ignored(o.parallel_init == 1,
          "-p 1 ignored: the ranks here have no NCCL communicators to initialize in parallel");
  ignored(o.blocking == 1,
          "-z 1 changes nothing: each collective here completes before the next one starts");
  ignored(o.stream_null == 1, "-y 1 ignored: no CUDA streams here");
  ignored(o.cudagraph > 0, "-G " + std::to_string(o.cudagraph) +
                               " ignored: no CUDA graphs here (collectives run on the host)");
  ignored(o.report_cputime == 1,
          "-C 1 ignored: the time column is the collective's time (sim: virtual, verbs: wall)");
  ignored(o.local_register > 0,
          "-R " + std::to_string(o.local_register) +
              " ignored: buffers are always registered once and cached by the communicator");
  ignored(o.average != 1 && o.backend == "sim",
          "-a " + std::to_string(o.average) +
              " changes nothing with --backend sim: every rank runs on one virtual clock");
  p->timeout_s = o.timeout_s;
  if (o.test_timeout_s > 0 && o.given.count("--timeout") == 0) {
    p->timeout_s = o.test_timeout_s;
  }
  return Status::Ok();
}

StatusOr<Parsed> ParseFlags(const Options& o, std::vector<std::string>* notes) {
  Parsed p;
  FATHOM_ASSIGN_OR_RETURN(p.kind, ParseCollKind(o.op));
  const bool reduces = p.kind == CollKind::kAllReduce || p.kind == CollKind::kReduceScatter;
  std::vector<DataType> types;
  if (o.dtype == "all") {
    types.assign(std::begin(kAllDataTypes), std::end(kAllDataTypes));
  } else {
    auto type_or = ParseDataType(o.dtype);
    if (!type_or.ok()) return type_or.status().WithContext("-d");
    types.push_back(type_or.value());
  }
  std::vector<RedOp> ops;
  if (o.redop == "all") {
    ops.assign(std::begin(kAllRedOps), std::end(kAllRedOps));
  } else {
    auto op_or = ParseRedOp(o.redop);
    if (!op_or.ok()) return op_or.status().WithContext("-o");
    ops.push_back(op_or.value());
  }
  if (!reduces) ops = {RedOp::kSum};  // printed "none", as nccl-tests does
  bool skipped_avg = false;
  for (DataType t : types) {
    for (RedOp op : ops) {
      if (reduces && op == RedOp::kAvg && !IsFloatingType(t)) {
        if (types.size() == 1 && ops.size() == 1) {
          return InvalidArgument("-o avg -d " + std::string(DataTypeName(t)) +
                                 ": avg on integer types (NCCL: sum, then divide) is not "
                                 "implemented; use a floating type (half, float, double, "
                                 "bfloat16)");
        }
        skipped_avg = true;
        continue;
      }
      p.combos.emplace_back(t, op);
    }
  }
  if (skipped_avg) {
    notes->push_back(
        "-o avg skipped for integer types: integer avg (NCCL: sum, then divide) is not "
        "implemented here");
  }
  auto algo_or = ParseAlgorithm(o.algo);
  if (!algo_or.ok()) return algo_or.status().WithContext("--algo");
  p.algo = algo_or.value();
  FATHOM_ASSIGN_OR_RETURN(p.min_bytes, ParseBytes("-b", o.minbytes));
  FATHOM_ASSIGN_OR_RETURN(p.max_bytes, ParseBytes("-e", o.maxbytes));
  FATHOM_ASSIGN_OR_RETURN(p.step_bytes, ParseBytes("-i", o.stepbytes));
  FATHOM_ASSIGN_OR_RETURN(p.chunk, ParseBytes("--chunk", o.chunk));
  if (p.min_bytes > p.max_bytes) {
    return InvalidArgument("invalid sizes: -b " + std::to_string(p.min_bytes) + " > -e " +
                           std::to_string(p.max_bytes) + " (minbytes must not exceed maxbytes)");
  }
  if (o.iters < 1 || o.warmup < 0 || o.stepfactor < 1 ||
      (o.stepfactor == 1 && p.step_bytes == 0 && p.min_bytes != p.max_bytes)) {
    return InvalidArgument("-n must be >= 1, -w >= 0, -f >= 1 (and -i > 0 when -f is 1)");
  }
  FATHOM_RETURN_IF_ERROR(CheckNcclTestsFlags(o, &p, notes));
  if (p.kind == CollKind::kBarrier) {
    // A barrier moves no data: one zero-byte row, as nccl-tests shows a
    // zero-byte size.
    if (o.given.count("-b") + o.given.count("-e") > 0) {
      notes->push_back("-b/-e ignored for barrier: it moves no data (one row of size 0)");
    }
    p.min_bytes = p.max_bytes = 0;
    p.sizes = {0};
  } else {
    p.sizes = SizeSweep(p.min_bytes, p.max_bytes, p.step_bytes, o.stepfactor);
  }
  return p;
}

// The sweep as the flags ask for it.
SweepOptions SweepFromFlags(const Options& o, const Parsed& p) {
  SweepOptions s;
  s.kind = p.kind;
  s.combos = p.combos;
  s.algo = p.algo;
  s.sizes = p.sizes;
  s.min_bytes = p.min_bytes;
  s.max_bytes = p.max_bytes;
  s.step_bytes = p.step_bytes;
  s.step_factor = o.stepfactor;
  s.nthreads = o.nthreads;
  s.ngpus = o.ngpus;
  s.iters = o.iters;
  s.warmup = o.warmup;
  s.agg_iters = o.agg_iters;
  s.check = o.check;
  s.run_cycles = o.run_cycles;
  s.root = o.root;
  s.modelled = o.modelled;
  s.json = o.json;
  s.trace_path = o.trace;
  return s;
}

int ExitCode(SweepResult r) {
  switch (r) {
    case SweepResult::kOk:
      return kExitOk;
    case SweepResult::kFailure:
      return kExitFailure;
    case SweepResult::kUsage:
      return kExitUsage;
  }
  return kExitFailure;
}

CommOptions CommFromFlags(const Options& o, const Parsed& p) {
  CommOptions c;
  c.channels = o.channels;
  c.chunk_bytes = p.chunk;
  c.slots = o.slots;
  c.modelled = o.modelled;
  c.qp.timeout = o.ib_timeout;
  c.qp.retry_cnt = o.retry_cnt;
  c.qp.path_mtu = o.mtu;
  c.qp.traffic_class = o.tc;
  return c;
}

int RunSim(const Options& o, const Parsed& p) {
  auto usage = [](const Status& s) {
    std::fprintf(stderr, "fathom coll: %s\n", s.message().c_str());
    return kExitUsage;
  };
  SimWorldOptions wopt;
  wopt.nranks = p.sim_ranks;
  wopt.seed = o.seed;
  wopt.comm = CommFromFlags(o, p);
  wopt.emulated.rxe_infinite_retry = o.rxe;
  if (p.timeout_s > 0) wopt.watchdog = Picoseconds::FromSeconds(p.timeout_s);
  topo::Topology topology;
  std::unique_ptr<sim::LoadedScenario> scenario;
  if (!o.scenario.empty()) {
    auto sc = sim::LoadScenario(o.scenario);
    if (!sc.ok()) return usage(sc.status());
    scenario = std::make_unique<sim::LoadedScenario>(std::move(sc).value());
    topology = scenario->topology;
    const auto& t = scenario->spec.transport();
    if (t.has_ib_timeout()) wopt.comm.qp.timeout = t.ib_timeout();
    if (t.has_retry_cnt()) wopt.comm.qp.retry_cnt = t.retry_cnt();
    if (t.has_qps_per_connection()) wopt.comm.channels = t.qps_per_connection();
    if (t.has_mtu_bytes()) wopt.comm.qp.path_mtu = t.mtu_bytes();
    if (t.rxe_infinite_retry()) wopt.emulated.rxe_infinite_retry = true;
    if (scenario->spec.seed() != 0) wopt.seed = scenario->spec.seed();
  } else {
    auto t = o.topology.find(".yaml") != std::string::npos ? topo::LoadTopologyFile(o.topology)
                                                           : topo::BuildPreset(o.topology);
    if (!t.ok()) return usage(t.status().WithContext("--topology"));
    topology = std::move(t).value();
  }
  auto world_or = SimWorld::Create(std::move(topology), wopt);
  if (!world_or.ok()) return usage(world_or.status());
  auto& world = *world_or.value();
  std::unique_ptr<sim::FaultAttachment> faults;
  if (scenario && scenario->spec.faults_size() > 0) {
    auto f = sim::FaultAttachment::Attach(&world.network(), scenario->spec.faults(), wopt.seed,
                                          scenario->map);
    if (!f.ok()) return usage(f.status());
    faults = std::move(f).value();
  }
  SimBackend backend(&world);
  return ExitCode(RunSweep(SweepFromFlags(o, p), backend, wopt.comm));
}

int RunVerbs(const Options& o, const Parsed& p) {
  auto usage = [](const std::string& s) {
    std::fprintf(stderr, "fathom coll: %s\n", s.c_str());
    return kExitUsage;
  };
  if (o.modelled || o.rxe || !o.scenario.empty()) {
    return usage("--modelled, --rxe and --scenario are for --backend sim");
  }
  if (o.nranks < 1 || o.rank < 0 || o.rank >= o.nranks) {
    return usage(
        "--backend verbs needs --nranks N and --rank R with 0 <= R < N, or a launcher "
        "that sets them (mpirun: OMPI_COMM_WORLD_RANK/SIZE, torchrun: RANK/WORLD_SIZE, "
        "PMI_RANK/PMI_SIZE, srun: SLURM_PROCID/SLURM_NTASKS) (got --nranks " +
        std::to_string(o.nranks) + " --rank " + std::to_string(o.rank) + ")");
  }
  VerbsWorldOptions wopt;
  wopt.nranks = o.nranks;
  wopt.rank = o.rank;
  const size_t colon = o.bootstrap.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return usage("--bootstrap '" + o.bootstrap + "': expected ADDRESS:PORT (rank 0 listens there)");
  }
  wopt.bootstrap_address = o.bootstrap.substr(0, colon);
  const int port = std::atoi(o.bootstrap.c_str() + colon + 1);
  if (port < 1 || port > 65535) {
    return usage("--bootstrap '" + o.bootstrap + "': port outside 1..65535");
  }
  wopt.bootstrap_port = static_cast<uint16_t>(port);
  wopt.token = o.token;
  wopt.bootstrap_timeout = Picoseconds::FromSeconds(o.bootstrap_wait_s);
  wopt.device.name = o.ib_dev;
  wopt.device.port = o.ib_port;
  if (!o.hca.entries.empty()) {
    // With no device at all, OpenDevice says so below.
    auto names = transport::verbs::ListDeviceNames();
    if (names.ok() && !names->empty()) {
      auto pick = PickDevice(o.hca, *names);
      if (!pick.ok()) return usage(pick.status().message());
      wopt.device.name = pick->first;
      if (o.given.count("--ib-port") == 0 && pick->second > 0) wopt.device.port = pick->second;
      std::fprintf(stderr, "fathom coll: rank %d: --ib-dev %s from NCCL_IB_HCA='%s'\n", o.rank,
                   pick->first.c_str(), o.hca.text.c_str());
    }
  }
  if (o.gid_index >= 0) wopt.device.gid = {transport::verbs::GidMode::kIndex, o.gid_index};
  if (o.cq_mode == "events") {
    wopt.device.cq_mode = transport::verbs::CqMode::kEvents;
  } else if (o.cq_mode != "poll") {
    return usage("--cq-mode '" + o.cq_mode + "': poll|events");
  }
  wopt.comm = CommFromFlags(o, p);
  wopt.watchdog = Picoseconds::FromSeconds(p.timeout_s > 0 ? p.timeout_s : 30);
  auto world_or = VerbsWorld::Create(wopt);
  if (!world_or.ok()) {
    std::fprintf(stderr, "fathom coll: rank %d: %s\n", o.rank,
                 world_or.status().ToString().c_str());
    // No such device (or a bad device setting): it cannot run as asked, as
    // `fathom perf` says too.
    const StatusCode code = world_or.status().code();
    return code == StatusCode::kNotFound || code == StatusCode::kInvalidArgument ? kExitUsage
                                                                                 : kExitFailure;
  }
  VerbsBackend backend(world_or.value().get(), o.average);
  int rc = ExitCode(RunSweep(SweepFromFlags(o, p), backend, wopt.comm));
  if (Status s = world_or.value()->Finish(); !s.ok() && rc == kExitOk) {
    std::fprintf(stderr, "fathom coll: rank %d: %s\n", o.rank, s.ToString().c_str());
    rc = kExitFailure;
  }
  return rc;
}

// The settings a launcher or NCCL's variables give (launcher_env.h); the
// sim takes only NCCL's transport knobs, not ranks, bootstrap or device.
Status ApplyEnvironment(Options* o) {
  LaunchSettings flags;
  flags.rank = o->rank;
  flags.nranks = o->nranks;
  flags.bootstrap = o->bootstrap;
  flags.ib_timeout = o->ib_timeout;
  flags.retry_cnt = o->retry_cnt;
  flags.channels = o->channels;
  flags.gid_index = o->gid_index;
  flags.traffic_class = o->tc;
  flags.ib_dev = o->ib_dev;
  flags.ib_port = o->ib_port;
  flags.algo = o->algo;
  std::set<std::string> given = o->given;
  if (o->backend != "verbs") {
    given.insert({"--rank", "--nranks", "--bootstrap", "--ib-dev", "--ib-port", "--gid-index"});
  }
  std::vector<std::string> notes;
  FATHOM_ASSIGN_OR_RETURN(LaunchSettings s,
                          ResolveLaunch(flags, given, ProcessEnvironment(), &notes));
  o->rank = s.rank;
  o->nranks = s.nranks;
  o->bootstrap = s.bootstrap;
  o->ib_timeout = s.ib_timeout;
  o->retry_cnt = s.retry_cnt;
  o->channels = s.channels;
  o->gid_index = s.gid_index;
  o->tc = s.traffic_class;
  o->ib_dev = s.ib_dev;
  o->ib_port = s.ib_port;
  o->algo = s.algo;
  o->hca = s.hca;
  for (const std::string& n : notes) std::fprintf(stderr, "fathom coll: %s\n", n.c_str());
  return Status::Ok();
}

int Run(Options o) {
  if (Status s = ApplyEnvironment(&o); !s.ok()) {
    std::fprintf(stderr, "fathom coll: %s\n", s.message().c_str());
    return kExitUsage;
  }
  std::vector<std::string> notes;
  auto parsed = ParseFlags(o, &notes);
  if (!parsed.ok()) {
    std::fprintf(stderr, "fathom coll: %s\n", parsed.status().message().c_str());
    return kExitUsage;
  }
  for (const std::string& n : notes) std::fprintf(stderr, "fathom coll: note: %s\n", n.c_str());
  if (o.backend == "sim") return RunSim(o, parsed.value());
  if (o.backend == "verbs") return RunVerbs(o, parsed.value());
  std::fprintf(stderr, "fathom coll: --backend '%s': sim|verbs\n", o.backend.c_str());
  return kExitUsage;
}

}  // namespace

FATHOM_REGISTER_COMMAND(
    coll,
    Command{
        "coll",
        "Run a collective nccl-tests style (allreduce, allgather, reduce_scatter, "
        "broadcast, barrier)",
        [](CLI::App* sub) -> std::function<int()> {
          auto o = std::make_shared<Options>();
          sub->footer(
              "nccl-tests' flags are accepted with its meanings and defaults; -p, -z, -y, -G, "
              "-C, -R change nothing here (a note says so). --backend verbs takes its rank, rank "
              "count and bootstrap from mpirun (OMPI_COMM_WORLD_RANK/SIZE), torchrun "
              "(RANK/WORLD_SIZE, MASTER_ADDR/MASTER_PORT, +1 when its agent holds that port), PMI "
              "(PMI_RANK/PMI_SIZE) or srun "
              "(SLURM_PROCID/SLURM_NTASKS) when --rank/--nranks/--bootstrap are not given; "
              "across hosts, pass --bootstrap RANK0IP:PORT (or export MASTER_ADDR, an IP address "
              "of rank 0's host, and MASTER_PORT, e.g. mpirun -x). NCCL_IB_TIMEOUT, "
              "NCCL_IB_RETRY_CNT, "
              "NCCL_IB_QPS_PER_CONNECTION, NCCL_IB_GID_INDEX, NCCL_IB_HCA, NCCL_IB_TC and "
              "NCCL_ALGO set --ib-timeout, --retry-cnt, --channels, --gid-index, --ib-dev/"
              "--ib-port, --tc and --algo; flags win.");
          sub->add_option("op", o->op, "allreduce|allgather|reduce_scatter|broadcast|barrier")
              ->required();
          sub->add_option("--backend", o->backend, "sim (default) or verbs");
          sub->add_option("--topology", o->topology,
                          "sim: PRESET or topology FILE.yaml (default small)");
          sub->add_option("--scenario", o->scenario,
                          "sim: scenario FILE.yaml (topology, transport, network, faults)");
          sub->add_option("--ranks", o->ranks,
                          "sim: ranks (>= 1), on hosts that all reach each other (default: all "
                          "such hosts, or -t x -g)");
          sub->add_option("--nranks", o->nranks,
                          "verbs: number of ranks (processes; default: from the launcher)");
          sub->add_option("--rank", o->rank,
                          "verbs: this process's rank (0 hosts the bootstrap; default: from the "
                          "launcher)");
          sub->add_option("--bootstrap", o->bootstrap,
                          "verbs: ADDRESS:PORT of rank 0's bootstrap (rank 0 binds it; "
                          "default MASTER_ADDR:MASTER_PORT, else 127.0.0.1:18515)");
          sub->add_option("--token", o->token, "verbs: shared bootstrap token");
          sub->add_option("--bootstrap-wait", o->bootstrap_wait_s,
                          "verbs: seconds to wait for every rank to join (default 60)");
          sub->add_option("--ib-dev", o->ib_dev,
                          "verbs: RDMA device (default: NCCL_IB_HCA's first, else first ACTIVE)");
          sub->add_option("--ib-port", o->ib_port, "verbs: device port (default: first ACTIVE)");
          sub->add_option("--gid-index", o->gid_index,
                          "verbs: GID index (default: NCCL_IB_GID_INDEX, else RoCE v2 "
                          "IPv4-mapped)");
          sub->add_option("--cq-mode", o->cq_mode,
                          "verbs: poll (busy-poll the CQ, default) or events (sleep on the "
                          "completion channel: leaves the CPU to a software NIC)");
          sub->add_option("-t,--nthreads", o->nthreads,
                          "nccl-tests: threads per process; ranks = -t x -g (sim: ranks in this "
                          "process; verbs: 1 only)");
          sub->add_option("-g,--ngpus", o->ngpus, "nccl-tests: GPUs per thread (see -t)");
          sub->add_option("-b,--minbytes", o->minbytes, "smallest size (default 32M)");
          sub->add_option("-e,--maxbytes", o->maxbytes,
                          "largest size (default 32M; bounded by the memory available)");
          sub->add_option("-i,--stepbytes", o->stepbytes, "size increment (default 1M)");
          sub->add_option("-f,--stepfactor", o->stepfactor, "size multiplier (default 1)");
          sub->add_option("-n,--iters", o->iters, "timed iterations (default 20)");
          sub->add_option("-m,--agg_iters", o->agg_iters,
                          "collectives per timed iteration, one after another (default 1)");
          sub->add_option("-w,--warmup_iters", o->warmup, "warmup iterations (default 5)");
          sub->add_option("-c,--check", o->check,
                          "checked iterations after the timed ones (default 1, 0 = no check)");
          sub->add_option("-o,--op", o->redop, "sum|prod|max|min|avg|all (default sum)");
          sub->add_option("-d,--datatype", o->dtype,
                          "int8|uint8|int32|uint32|int64|uint64|half|float|double|bfloat16|all "
                          "(default float)");
          sub->add_option("-r,--root", o->root, "broadcast root (default 0)");
          sub->add_option("-a,--average", o->average,
                          "verbs: rank 0 reports the ranks' time as 0 rank 0's, 1 their average "
                          "(default), 2 min, 3 max");
          sub->add_option("-N,--run_cycles", o->run_cycles,
                          "run the whole sweep this many times (default 1, 0 = until stopped)");
          sub->add_option("-T", o->test_timeout_s,
                          "nccl-tests' timeout in seconds: sets the watchdog's --timeout when "
                          "that is not given (0 = default)");
          sub->add_option("-p,--parallel_init", o->parallel_init, "nccl-tests: 0|1, no effect");
          sub->add_option("-z,--blocking", o->blocking,
                          "nccl-tests: 0|1; collectives here always complete one by one");
          sub->add_option("-y,--stream_null", o->stream_null, "nccl-tests: 0|1, no effect");
          sub->add_option("-G,--cudagraph", o->cudagraph, "nccl-tests: graph launches, no effect");
          sub->add_option("-C,--report_cputime", o->report_cputime, "nccl-tests: 0|1, no effect");
          sub->add_option("-R,--local_register", o->local_register,
                          "nccl-tests: 0|1|2, no effect (buffers are always registered)");
          sub->add_option("--algo", o->algo,
                          "auto|ring|tree (allreduce; default NCCL_ALGO, else auto)");
          sub->add_option("--channels", o->channels,
                          "QPs per peer (default NCCL_IB_QPS_PER_CONNECTION, else 1)");
          sub->add_option("--chunk", o->chunk, "chunk / staging slot size (default 512K)");
          sub->add_option("--slots", o->slots, "staging slots per connection (default 4)");
          sub->add_option("--timeout", o->timeout_s,
                          "watchdog: seconds without progress (sim: virtual, default 1; "
                          "verbs: wall, default 30; rank 0 prints every rank's view)");
          sub->add_option("--ib-timeout", o->ib_timeout,
                          "QP local ACK timeout (default NCCL_IB_TIMEOUT, else 14)");
          sub->add_option("--retry-cnt", o->retry_cnt,
                          "QP retry_cnt (default NCCL_IB_RETRY_CNT, else 7)");
          sub->add_option("--tc", o->tc, "GRH traffic class (default NCCL_IB_TC, else 0)");
          sub->add_option("--mtu", o->mtu, "force the path MTU in bytes (0 = negotiate)");
          sub->add_flag("--rxe", o->rxe, "sim: rxe semantics (retry_cnt 7 = forever)");
          sub->add_flag("--modelled", o->modelled,
                        "sim: move no bytes (timing only, no check; for huge runs)");
          sub->add_option("--seed", o->seed, "sim: seed (default 1)");
          sub->add_flag("--json", o->json, "print one JSON object");
          sub->add_option("--trace", o->trace,
                          "write a Chrome trace / Perfetto JSON of every rank's steps (verbs: "
                          "rank 0 gathers every rank's into FILE, on one timeline aligned at "
                          "the setup barrier; after a failed run too, from the ranks' reports, "
                          "and each rank > 0 also writes all of its own to FILE.<rank>)");
          return [o, sub] {
            for (const char* flag : {"--ranks", "--rank", "--nranks", "--bootstrap", "--ib-timeout",
                                     "--retry-cnt", "--channels", "--gid-index", "--tc", "--ib-dev",
                                     "--ib-port", "--algo", "--timeout", "-b", "-e"}) {
              if (sub->count(flag) > 0) o->given.insert(flag);
            }
            return Run(*o);
          };
        },
        40});

}  // namespace fathom::tools
