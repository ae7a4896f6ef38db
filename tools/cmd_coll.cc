// `fathom coll OP --backend sim|verbs`: nccl-tests for fathom's collectives.
// Flags and output follow nccl-tests (its flags -t -g -b -e -i -f -n -m -w
// -p -c -o -d -r -z -y -T -G -C -a -N -R with its defaults, -d all / -o all
// sweeps; the "# nThread ..." and "# Using devices" lines, columns size count
// type redop root time algbw busbw #wrong, out-of-place then in-place, then
// the algorithm that ran, "# Avg bus bandwidth"). Flags without a meaning
// here are accepted at their neutral value and otherwise ignored with a note
// on stderr, or refused (exit 2) where ignoring them would run something
// else. The size sweep, the per-rank data and its check
// (transport/collectives/nccl_tests.h) and the table are shared by both
// backends:
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
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/json.h"
#include "fabric/sim/fault_attach.h"
#include "fabric/sim/scenario.h"
#include "tools/command.h"
#include "topologies/builders.h"
#include "topologies/spec.h"
#include "transport/collectives/launcher_env.h"
#include "transport/collectives/nccl_tests.h"
#include "transport/collectives/report.h"
#include "transport/collectives/sim_world.h"
#include "transport/collectives/verbs_world.h"
#include "transport/verbs/verbs_device.h"

namespace fathom::tools {
namespace {

using namespace fathom::transport::coll;  // NOLINT: one tool, one library

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

// Progress of a sweep on stderr when it is a terminal (never in pipes or
// tests), at most 5 times a second, like `fathom sim`'s.
class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled) {}
  ~Progress() { Clear(); }
  bool enabled() const { return enabled_; }
  void Update(const std::string& text) {
    if (!enabled_) return;
    text_ = text;
    Show(text, false);
  }
  // Within one long collective (the sim's events): the last text and where
  // the collective stands.
  void Tick(const std::string& suffix) { Show(text_ + suffix, true); }
  // Before a line goes to stdout (often the same terminal).
  void Clear() {
    if (!shown_) return;
    std::fprintf(stderr, "\r%78s\r", "");
    std::fflush(stderr);
    shown_ = false;
  }

 private:
  void Show(const std::string& line, bool throttle_first) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if ((shown_ || throttle_first) && now - last_ < std::chrono::milliseconds(200)) return;
    last_ = now;
    std::fprintf(stderr, "\r[coll] %-70.70s", line.c_str());
    std::fflush(stderr);
    shown_ = true;
  }

  bool enabled_;
  bool shown_ = false;
  std::string text_;
  std::chrono::steady_clock::time_point last_;
};

// What the sweep needs from a backend: run one collective on the ranks this
// process holds, and combine per-rank figures across processes.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  virtual int nranks() const = 0;
  virtual std::vector<int> local_ranks() const = 0;
  // This process prints the table (the sim's only process, verbs' rank 0).
  virtual bool prints() const = 0;
  // "4 ranks on fat-tree k=4" / "rank 0 of 2 on rxe0".
  virtual std::string Where() const = 0;
  // The JSON members naming where it ran: "topology":"..." / "device":"...".
  virtual std::string WhereJson() const = 0;
  // nccl-tests' "# Using devices" lines, one per rank (verbs: gathered from
  // every rank; called by every rank at the same point).
  virtual std::vector<std::string> DeviceLines() = 0;
  // For the choice of algorithm by size: one link's bandwidth, the same on
  // every rank. Called once, at the same point by every rank.
  virtual BitsPerSecond link_bandwidth() = 0;
  virtual RunOutcome Run(const CollSpec& spec, DataType type, RedOp op,
                         const std::vector<const void*>& in, const std::vector<void*>& out,
                         Trace* trace) = 0;
  // Across processes: the largest per-iteration time and the sum of #wrong
  // (-1 stays -1: not checked).
  virtual Status Combine(double* time_us, int64_t* wrong) = 0;
  virtual Status Barrier() = 0;
  // Reports progress inside one collective where the backend can (the
  // sim's engine); null stops it.
  virtual void WatchProgress(Progress*) {}
  // --trace: writes `trace` (this process's ranks' steps) where the backend
  // puts it; `failed` says the run stopped on a failure. Returns an exit
  // code (kExitUsage when a file cannot be written).
  virtual int WriteTrace(const std::string& path, const Trace& trace, bool failed) = 0;
};

// Writes `text` to `path`; false (and a line on stderr) when it cannot.
bool WriteTextFile(const std::string& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "fathom coll: --trace %s: cannot open for writing\n", path.c_str());
    return false;
  }
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) {
    std::fprintf(stderr, "fathom coll: --trace %s: write failed\n", path.c_str());
    return false;
  }
  return true;
}

class SimBackend final : public Backend {
 public:
  explicit SimBackend(SimWorld* world) : world_(world) {}
  const char* name() const override { return "sim"; }
  int nranks() const override { return world_->nranks(); }
  std::vector<int> local_ranks() const override {
    std::vector<int> r(static_cast<size_t>(world_->nranks()));
    for (size_t i = 0; i < r.size(); ++i) r[i] = static_cast<int>(i);
    return r;
  }
  bool prints() const override { return true; }
  std::string Where() const override {
    return std::to_string(nranks()) + " ranks on " + world_->topology().name();
  }
  std::string WhereJson() const override {
    return "\"topology\":\"" + world_->topology().name() + "\"";
  }
  std::vector<std::string> DeviceLines() override {
    std::vector<std::string> lines;
    for (int r = 0; r < nranks(); ++r) {
      const std::string dev = world_->comm(r).device().info().name;
      const std::string host = dev.rfind("sim:", 0) == 0 ? dev.substr(4) : dev;
      lines.push_back(DeviceLine(r, static_cast<int>(getpid()), host, dev + " (emulated)"));
    }
    return lines;
  }
  BitsPerSecond link_bandwidth() override {
    return BitsPerSecond::Gbps(static_cast<int64_t>(world_->comm(0).device().info().active_gbps));
  }
  RunOutcome Run(const CollSpec& spec, DataType type, RedOp op, const std::vector<const void*>& in,
                 const std::vector<void*>& out, Trace* trace) override {
    return world_->Run(spec, type, op, in, out, trace);
  }
  Status Combine(double*, int64_t*) override { return Status::Ok(); }
  Status Barrier() override { return Status::Ok(); }
  void WatchProgress(Progress* progress) override {
    if (progress == nullptr || !progress->enabled()) {
      world_->engine().set_progress(nullptr, nullptr, 0);
      return;
    }
    // Every 64K events: cheap next to the events themselves.
    world_->engine().set_progress(
        [](void* ctx, const sim::Engine& e) {
          char buf[48];
          std::snprintf(buf, sizeof(buf), ", sim t=%.0fus", e.Now().us());
          static_cast<Progress*>(ctx)->Tick(buf);
        },
        progress, 1u << 16);
  }
  // Every rank is in this process, on the one virtual clock: one file as is.
  int WriteTrace(const std::string& path, const Trace& trace, bool) override {
    return WriteTextFile(path, trace.ToJson()) ? kExitOk : kExitUsage;
  }

 private:
  SimWorld* world_;
};

class VerbsBackend final : public Backend {
 public:
  // `average`: nccl-tests' -a, how rank 0 reports the ranks' times: 0 rank
  // 0's, 1 their average, 2 the minimum, 3 the maximum.
  VerbsBackend(VerbsWorld* world, int average) : world_(world), average_(average) {}
  const char* name() const override { return "verbs"; }
  int nranks() const override { return world_->nranks(); }
  std::vector<int> local_ranks() const override { return {world_->rank()}; }
  bool prints() const override { return world_->rank() == 0; }
  std::string Where() const override {
    return std::to_string(nranks()) + " ranks (one per process), rank " +
           std::to_string(world_->rank()) + " on " + world_->device_info().name + " (" +
           world_->device_info().gid_type + ", active_mtu " +
           std::to_string(world_->device_info().active_mtu) + ")";
  }
  std::string WhereJson() const override {
    return "\"device\":\"" + world_->device_info().name +
           "\",\"rank\":" + std::to_string(world_->rank());
  }
  std::vector<std::string> DeviceLines() override {
    char host[256] = "?";
    gethostname(host, sizeof(host) - 1);
    const auto& d = world_->device_info();
    const std::string mine =
        DeviceLine(world_->rank(), static_cast<int>(getpid()), host,
                   d.name + " port " + std::to_string(d.port) + " (" + d.gid_type + ", " +
                       d.link_layer + ", active_mtu " + std::to_string(d.active_mtu) + ")");
    auto all = world_->bootstrap().AllGather(mine);
    if (!all.ok()) return {mine};
    return *all;
  }
  // The slowest rank's port speed: every rank must pick the same algorithm
  // for a size (ring and tree use different QPs), so they agree on the input.
  BitsPerSecond link_bandwidth() override {
    double g = world_->device_info().active_gbps;
    auto all = world_->bootstrap().AllGather(std::to_string(g));
    if (all.ok()) {
      for (const std::string& s : *all) g = std::min(g, std::atof(s.c_str()));
    }
    return BitsPerSecond(static_cast<int64_t>((g > 0 ? g : 10) * 1e9));
  }
  RunOutcome Run(const CollSpec& spec, DataType type, RedOp op, const std::vector<const void*>& in,
                 const std::vector<void*>& out, Trace* trace) override {
    return world_->Run(spec, type, op, in.at(0), out.at(0), trace);
  }
  Status Combine(double* time_us, int64_t* wrong) override {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.17g %lld", *time_us, static_cast<long long>(*wrong));
    FATHOM_ASSIGN_OR_RETURN(auto all, world_->bootstrap().AllGather(buf));
    double sum = 0, lo = 0, hi = 0, first = 0;
    int64_t w = -1;
    for (size_t i = 0; i < all.size(); ++i) {
      const std::string& s = all[i];
      double rt = 0;
      long long rw = -1;
      if (std::sscanf(s.c_str(), "%lf %lld", &rt, &rw) != 2) {
        return InvalidArgument("fathom coll: malformed per-rank result '" + s + "'");
      }
      if (i == 0) first = lo = hi = rt;
      sum += rt;
      lo = std::min(lo, rt);
      hi = std::max(hi, rt);
      if (rw >= 0) w = (w < 0 ? 0 : w) + rw;
    }
    *time_us = average_ == 0   ? first
               : average_ == 2 ? lo
               : average_ == 3 ? hi
                               : sum / static_cast<double>(std::max<size_t>(1, all.size()));
    *wrong = w;
    return Status::Ok();
  }
  Status Barrier() override { return world_->bootstrap().Barrier(); }

  // Rank 0 writes one file with every rank's steps, gathered through the
  // bootstrap, each rank's clock shifted to the reference they all read
  // after the setup barrier (VerbsWorld::trace_origin). The other ranks
  // write nothing, except what would otherwise be lost, on their own host:
  //  - FILE.<rank> with this rank's whole trace when it was over its share
  //    of the gather (rank 0's file then has its first events and says so);
  //  - when the gather cannot run (a failed run aborts the bootstrap for
  //    every rank, or the gather itself fails): rank 0 writes FILE with its
  //    own steps and each other rank FILE.<rank> with its own, all on the
  //    common timeline, and each says so on stderr.
  int WriteTrace(const std::string& path, const Trace& trace, bool failed) override {
    const int me = world_->rank();
    const std::string own_path = path + "." + std::to_string(me);
    std::vector<std::string> notes = {kAlignmentNote};
    std::string why;
    if (failed) {
      // After a failure the bootstrap is usually aborted: then the gather
      // would only fail (or wait for ranks that will not come). The ranks
      // sent their steps with their reports instead.
      if (Status s = world_->bootstrap().PollAbort(); !s.ok()) why = s.message();
    }
    const RankTrace mine = world_->OwnSteps(trace);
    if (!why.empty() && me != 0) {
      // This rank's steps went to rank 0 with its report; all of them here.
      std::fprintf(stderr,
                   "fathom coll: rank %d: --trace: the run failed; %zu of %zu events went to "
                   "rank 0 with this rank's report, all of them are in %s\n",
                   me, world_->reported_trace_events(), trace.events.size(), own_path.c_str());
      notes.push_back("rank " + std::to_string(me) + "'s steps only, all of them; rank 0's " +
                      path + " has every rank's that reached it");
      return WriteTextFile(own_path, MergedTraceJson({mine}, notes)) ? kExitOk : kExitUsage;
    }
    if (!why.empty()) {
      auto all = world_->TracesAfterFailure(trace);
      if (all.ok() && all->size() > 1) {
        notes.push_back("the run failed (" + why +
                        "); the other ranks sent their steps with their reports");
        for (const RankTrace& r : *all) {
          if (r.events.size() < r.total_events) {
            notes.push_back("rank " + std::to_string(r.rank) + ": the first " +
                            std::to_string(r.events.size()) + " of " +
                            std::to_string(r.total_events) + " events; all of them are in " + path +
                            "." + std::to_string(r.rank) + " on rank " + std::to_string(r.rank) +
                            "'s host");
          }
        }
        if (all->size() < static_cast<size_t>(nranks())) {
          notes.push_back(std::to_string(nranks() - static_cast<int>(all->size())) +
                          " rank(s) sent no steps (their process may be gone)");
        }
        return WriteTextFile(path, MergedTraceJson(*all, notes)) ? kExitOk : kExitUsage;
      }
      if (!all.ok()) why += "; " + all.status().message();
    }
    if (why.empty()) {
      size_t sent = 0;
      auto all = world_->GatherTrace(trace, kTraceGatherBudgetBytes, &sent);
      if (all.ok()) {
        int rc = kExitOk;
        if (sent < trace.events.size()) {
          std::fprintf(stderr,
                       "fathom coll: rank %d: --trace: %zu of %zu events went to rank 0 (%zu "
                       "bytes per rank at most); all of them are in %s\n",
                       me, sent, trace.events.size(),
                       kTraceGatherBudgetBytes / static_cast<size_t>(std::max(1, nranks() - 1)),
                       own_path.c_str());
          if (!WriteTextFile(own_path, MergedTraceJson({mine}, notes))) rc = kExitUsage;
        }
        if (me != 0) return rc;
        for (const RankTrace& r : *all) {
          if (r.events.size() < r.total_events) {
            notes.push_back(
                "rank " + std::to_string(r.rank) + ": the first " +
                std::to_string(r.events.size()) + " of " + std::to_string(r.total_events) +
                " events (the gather's share per rank is full); all of them are in " + path + "." +
                std::to_string(r.rank) + " on rank " + std::to_string(r.rank) + "'s host");
            std::fprintf(stderr, "fathom coll: --trace %s: %s\n", path.c_str(),
                         notes.back().c_str());
          }
        }
        return WriteTextFile(path, MergedTraceJson(*all, notes)) ? rc : kExitUsage;
      }
      why = all.status().message();
    }
    const std::string where = me == 0 ? path : own_path;
    notes.push_back("rank " + std::to_string(me) +
                    "'s steps only: the ranks' traces could not be gathered (" + why +
                    "); rank 0 writes " + path + ", each other rank " + path +
                    ".<rank> on its own host, all on this timeline");
    std::fprintf(stderr,
                 "fathom coll: rank %d: --trace: cannot gather every rank's steps on rank 0 "
                 "(%s); wrote this rank's to %s\n",
                 me, why.c_str(), where.c_str());
    return WriteTextFile(where, MergedTraceJson({mine}, notes)) ? kExitOk : kExitUsage;
  }

 private:
  // What every rank downloads for the gather at most (every round goes to
  // every rank): rank r > 0 may send budget / (nranks - 1) bytes, about
  // 60 bytes an event.
  static constexpr size_t kTraceGatherBudgetBytes = size_t{64} << 20;
  static constexpr const char* kAlignmentNote =
      "ts 0 = each rank's exit from the bootstrap barrier after connecting; ranks are aligned to "
      "that barrier's skew";
  VerbsWorld* world_;
  int average_;
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

std::string SizeText(uint64_t bytes) {
  char buf[32];
  if (bytes >= (uint64_t{1} << 30) && bytes % (uint64_t{1} << 30) == 0) {
    std::snprintf(buf, sizeof(buf), "%lluG", static_cast<unsigned long long>(bytes >> 30));
  } else if (bytes >= (uint64_t{1} << 20) && bytes % (uint64_t{1} << 20) == 0) {
    std::snprintf(buf, sizeof(buf), "%lluM", static_cast<unsigned long long>(bytes >> 20));
  } else if (bytes >= 1024 && bytes % 1024 == 0) {
    std::snprintf(buf, sizeof(buf), "%lluK", static_cast<unsigned long long>(bytes >> 10));
  } else {
    std::snprintf(buf, sizeof(buf), "%llu", static_cast<unsigned long long>(bytes));
  }
  return buf;
}

double GiB(uint64_t bytes) { return static_cast<double>(bytes) / static_cast<double>(1u << 30); }

// The nccl-tests loop, the same for both backends: per (type, op) and size,
// out-of-place then in-place, warmup + timed iterations (-m collectives
// each), then the checked iterations; -N times over.
int RunSweep(const Options& o, const Parsed& p, Backend& backend, const CommOptions& comm) {
  const int n = backend.nranks();
  const std::vector<int> local = backend.local_ranks();
  const Picoseconds alpha = Picoseconds::FromMicroseconds(2);
  const BitsPerSecond bw = backend.link_bandwidth();
  const int checks = o.modelled ? 0 : o.check;
  const bool rooted = p.kind == CollKind::kBroadcast;
  const bool reduces = p.kind == CollKind::kAllReduce || p.kind == CollKind::kReduceScatter;
  const bool print = backend.prints();
  // One set of buffers for every type: sizes are bytes, so buffers built for
  // the smallest element hold every type's count.
  DataType smallest = p.combos.front().first;
  for (const auto& c : p.combos) {
    if (DataTypeSize(c.first) < DataTypeSize(smallest)) smallest = c.first;
  }
  std::vector<std::unique_ptr<RankBuffers>> bufs;
  if (!o.modelled) {
    const uint64_t unit = CountUnitBytes(p.kind, n, smallest);
    const uint64_t max_count = p.sizes.empty() ? 0 : p.sizes.back() / unit;
    const uint64_t need =
        static_cast<uint64_t>(local.size()) * RankBuffers::BytesFor(p.kind, n, smallest, max_count);
    const uint64_t avail = AvailableMemoryBytes();
    if (avail > 0 && need > avail) {
      std::fprintf(
          stderr,
          "fathom coll: -e %s: the buffers of the %zu rank(s) in this process need %.1f "
          "GiB, more than the %.1f GiB of memory available here (MemAvailable); lower "
          "-e%s\n",
          SizeText(p.sizes.back()).c_str(), local.size(), GiB(need), GiB(avail),
          std::string(backend.name()) == "sim" ? ", or add --modelled (timing only, no data)" : "");
      return kExitUsage;
    }
    for (int r : local) {
      bufs.push_back(std::make_unique<RankBuffers>(p.kind, n, r, smallest, max_count));
    }
  }
  Progress progress(!o.json && isatty(STDERR_FILENO) != 0);
  backend.WatchProgress(&progress);
  Trace trace;
  std::vector<ReportRow> rows;
  if (!o.json) {
    const std::vector<std::string> devices = backend.DeviceLines();  // every rank takes part
    if (print) {
      SweepParams sp;
      sp.nthreads = o.nthreads;
      sp.ngpus = o.ngpus;
      sp.min_bytes = p.min_bytes;
      sp.max_bytes = p.max_bytes;
      sp.step_bytes = p.step_bytes;
      sp.step_factor = o.stepfactor;
      sp.warmup_iters = o.warmup;
      sp.iters = o.iters;
      sp.agg_iters = o.agg_iters;
      sp.check = checks;
      sp.graph = 0;
      std::printf("%s#\n# Using devices\n", ParamsLine(sp).c_str());
      for (const std::string& d : devices) std::printf("%s", d.c_str());
      std::printf("#\n");
      std::string types;
      for (const auto& c : p.combos) {
        const std::string t(DataTypeName(c.first));
        if (types.find(t) == std::string::npos) types += (types.empty() ? "" : ",") + t;
      }
      std::printf("# fathom coll %s: backend %s, %s, %s, channels %d, chunk %llu B%s\n",
                  std::string(CollKindName(p.kind)).c_str(), backend.name(),
                  backend.Where().c_str(), types.c_str(), comm.channels,
                  static_cast<unsigned long long>(comm.chunk_bytes),
                  o.modelled ? ", modelled bytes (no data, no check)" : "");
      std::printf("#\n%s", TableHeader().c_str());
      std::fflush(stdout);
    }
  }
  int exit_code = kExitOk;
  std::string failure;
  for (int cycle = 0; failure.empty() && (o.run_cycles == 0 || cycle < o.run_cycles); ++cycle) {
    for (const auto& [type, op] : p.combos) {
      if (!failure.empty()) break;
      for (auto& b : bufs) b->SetType(type);
      const uint64_t unit = CountUnitBytes(p.kind, n, type);
      for (size_t si = 0; si < p.sizes.size() && failure.empty(); ++si) {
        const uint64_t size = p.sizes[si];
        const uint64_t count = size / unit;
        ReportRow row;
        row.size_bytes = count * unit;
        row.count = count;
        row.type = type;
        row.redop = reduces ? std::string(RedOpName(op)) : "none";
        row.root = rooted ? o.root : -1;
        CollSpec spec;
        spec.kind = p.kind;
        spec.nranks = n;
        spec.count = count;
        spec.root = o.root;
        spec.algorithm = p.algo == Algorithm::kAuto
                             ? ChooseAlgorithm(p.kind, row.size_bytes, n, alpha, bw)
                             : p.algo;
        if (p.kind != CollKind::kAllReduce) spec.algorithm = Algorithm::kRing;
        // What ran: BuildPlan runs a barrier as a tree, a broadcast as a chain.
        row.algo = p.kind == CollKind::kBarrier     ? "tree"
                   : p.kind == CollKind::kBroadcast ? "chain"
                                                    : std::string(AlgorithmName(spec.algorithm));
        for (int place = 0; place < 2 && failure.empty(); ++place) {
          std::vector<const void*> in(local.size(), nullptr);
          std::vector<void*> out(local.size(), nullptr);
          auto fill = [&] {
            for (size_t i = 0; i < bufs.size(); ++i) {
              bufs[i]->Fill(count, place == 1);
              in[i] = bufs[i]->in();
              out[i] = bufs[i]->out();
            }
          };
          fill();
          if (Status s = backend.Barrier(); !s.ok()) {
            failure = s.message() + "\n";
            break;
          }
          const int timed = o.iters * o.agg_iters;
          const int total = o.warmup + timed + checks;
          double total_us = 0;
          int64_t wrong = checks > 0 ? 0 : -1;
          for (int it = 0; it < total; ++it) {
            const bool checking = it >= o.warmup + timed;
            if (checking) fill();
            char what[160];
            std::snprintf(what, sizeof(what), "%s %s %s %s (%zu/%zu) %s %s %d/%d",
                          std::string(CollKindName(p.kind)).c_str(),
                          std::string(DataTypeName(type)).c_str(), row.redop.c_str(),
                          SizeText(size).c_str(), si + 1, p.sizes.size(),
                          place == 0 ? "out-of-place" : "in-place",
                          it < o.warmup ? "warmup"
                          : checking    ? "check"
                                        : "iter",
                          it < o.warmup ? it + 1
                          : checking    ? it - o.warmup - timed + 1
                                        : it - o.warmup + 1,
                          it < o.warmup ? o.warmup
                          : checking    ? checks
                                        : timed);
            progress.Update(what);
            Trace* t = (!o.trace.empty() && place == 0 && it == o.warmup) ? &trace : nullptr;
            RunOutcome res = backend.Run(spec, type, op, in, out, t);
            if (!res.status.ok()) {
              failure = res.report.empty() ? res.status.message() + "\n" : res.report;
              break;
            }
            if (it >= o.warmup && !checking) total_us += (res.end - res.start).us();
            if (checking) {
              for (const auto& b : bufs) wrong += b->CountWrong(count, op, o.root);
            }
          }
          if (!failure.empty()) break;
          double time_us = total_us / timed;
          if (Status s = backend.Combine(&time_us, &wrong); !s.ok()) {
            failure = s.message() + "\n";
            break;
          }
          if (wrong > 0) exit_code = kExitFailure;
          (place == 0 ? row.out_of_place : row.in_place) =
              Measure(p.kind, n, row.size_bytes, time_us, wrong);
        }
        if (!failure.empty()) break;
        rows.push_back(row);
        if (print && !o.json) {
          progress.Clear();
          std::printf("%s", TableRow(row).c_str());
          std::fflush(stdout);
        }
      }
    }
  }
  backend.WatchProgress(nullptr);
  progress.Clear();
  if (!failure.empty()) exit_code = kExitFailure;
  if (!o.trace.empty()) {
    if (int rc = backend.WriteTrace(o.trace, trace, !failure.empty()); rc != kExitOk) return rc;
  }
  if (o.json && (print || !failure.empty())) {
    std::printf(
        "{\"op\":\"%s\",\"backend\":\"%s\",\"nranks\":%d,%s,\"rows\":%s,"
        "\"avg_busbw_gbs\":%g,\"status\":\"%s\",\"report\":\"%s\"}\n",
        std::string(CollKindName(p.kind)).c_str(), backend.name(), n, backend.WhereJson().c_str(),
        RowsToJson(rows).c_str(), AverageBusBw(rows),
        failure.empty() ? (exit_code == kExitOk ? "ok" : "wrong") : "failed",
        JsonEscape(failure).c_str());
  } else if (print && !o.json) {
    std::printf("%s", TableFooter(rows).c_str());
    if (!failure.empty()) std::printf("# %s: run stopped\n", "FAILED");
  }
  if (!failure.empty()) std::fprintf(stderr, "%s", failure.c_str());
  return exit_code;
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
  return RunSweep(o, p, backend, wopt.comm);
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
  int rc = RunSweep(o, p, backend, wopt.comm);
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
