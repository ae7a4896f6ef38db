#include "tools/coll_flags.h"

#include <cstdio>
#include <iterator>

#include "transport/collectives/multi_qp.h"
#include "transport/collectives/nccl_tests.h"

namespace fathom::tools {

using namespace fathom::transport::coll;    // NOLINT: the flags are its vocabulary
using namespace fathom::transport::worlds;  // NOLINT

namespace {

// nccl-tests' flags: the values that mean something here, a note (stderr)
// for the accepted values that change nothing here, an error for the rest.
Status CheckNcclTestsFlags(const CollOptions& o, CollParsed* p, std::vector<std::string>* notes) {
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

}  // namespace

Status ApplyCollEnvironment(CollOptions* o) {
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
  flags.qps_per_connection = o->qps_per_connection;
  flags.split_data_on_qps = o->split_data_on_qps;
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
  o->qps_per_connection = s.qps_per_connection;
  o->split_data_on_qps = s.split_data_on_qps;
  for (const std::string& n : notes) std::fprintf(stderr, "fathom coll: %s\n", n.c_str());
  return Status::Ok();
}

StatusOr<CollParsed> ParseCollFlags(const CollOptions& o, std::vector<std::string>* notes) {
  CollParsed p;
  FATHOM_ASSIGN_OR_RETURN(p.kind, ParseCollKind(o.op));
  const bool reduces = p.kind == CollKind::kAllReduce || p.kind == CollKind::kReduceScatter ||
                       p.kind == CollKind::kReduce;
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
  for (DataType t : types) {
    for (RedOp op : ops) p.combos.emplace_back(t, op);
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
  if (o.qps_per_connection < 1 || o.qps_per_connection > kMaxQpsPerConnection) {
    return InvalidArgument("--qps-per-connection " + std::to_string(o.qps_per_connection) +
                           ": expected 1.." + std::to_string(kMaxQpsPerConnection) +
                           " (NCCL_IB_QPS_PER_CONNECTION's range)");
  }
  if (o.split_data_on_qps != 0 && o.split_data_on_qps != 1) {
    return InvalidArgument("--split-data-on-qps " + std::to_string(o.split_data_on_qps) +
                           ": expected 0 (round-robin) or 1 (split)");
  }
  FATHOM_ASSIGN_OR_RETURN(p.profile, transport::worlds::FindCollProfile(o.profile));
  if (o.fabric != "lossy" && o.fabric != "lossless") {
    return InvalidArgument("--fabric '" + o.fabric + "': expected lossy or lossless");
  }
  p.lossless = o.fabric == "lossless";
  if (o.fabric_model != "packet" && o.fabric_model != "flow") {
    return InvalidArgument("--fabric-model '" + o.fabric_model + "': expected packet or flow");
  }
  p.flow_model = o.fabric_model == "flow";
  if (p.flow_model) {
    // What the flow model does not model (docs/FLOW.md).
    if (o.backend != "sim") {
      return InvalidArgument(
          "--fabric-model flow: only with --backend sim (it is a model of the "
          "simulated fabric), not --backend " +
          o.backend);
    }
    if (!o.verbs_faults.empty()) {
      return InvalidArgument(
          "--fabric-model flow: faults are not modelled (--verbs-fault); use "
          "--fabric-model packet");
    }
  }
  if (o.given.count("--host-mem-gbs") > 0 && !(o.host_mem_gbs >= 0)) {
    return InvalidArgument("--host-mem-gbs " + std::to_string(o.host_mem_gbs) +
                           ": expected >= 0 (GB/s; 0 = reductions take no time)");
  }
  p.host_reduce_bytes_per_s =
      o.host_mem_gbs >= 0 ? o.host_mem_gbs * 1e9 : p.profile.host_reduce_bytes_per_s;
  for (const std::string& text : o.verbs_faults) {
    FATHOM_ASSIGN_OR_RETURN(std::vector<transport::faulty::VerbsFault> faults,
                            transport::faulty::ParseVerbsFaults(text));
    p.verbs_faults.insert(p.verbs_faults.end(), faults.begin(), faults.end());
  }
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

SweepOptions SweepFromFlags(const CollOptions& o, const CollParsed& p) {
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
  s.counters = o.counters;
  s.trace_path = o.trace;
  return s;
}

CommOptions CommFromFlags(const CollOptions& o, const CollParsed& p) {
  CommOptions c;
  c.channels = o.channels;
  c.chunk_bytes = p.chunk;
  c.slots = o.slots;
  c.modelled = o.modelled;
  c.qp.timeout = o.ib_timeout;
  c.qp.retry_cnt = o.retry_cnt;
  c.qp.path_mtu = o.mtu;
  c.qp.traffic_class = o.tc;
  c.qps_per_connection = o.qps_per_connection;
  c.split_data_on_qps = o.split_data_on_qps == 1;
  return c;
}

}  // namespace fathom::tools
