// `fathom coll OP --backend sim|verbs`: nccl-tests for fathom's collectives.
// Flags and table follow nccl-tests (-b -e -f -i -n -w -c -o -d, columns
// size count type redop root time algbw busbw #wrong, out-of-place then
// in-place, "# Avg bus bandwidth"). The size sweep, the per-rank data and
// its check (transport/collectives/nccl_tests.h) and the table are shared by
// both backends:
//  - sim: every rank runs in this process over the emulated NIC on a
//    topology (a preset, a topology file, or a scenario's topology +
//    transport + faults); time is virtual.
//  - verbs: one process per rank over real verbs (--nranks N --rank R
//    --bootstrap ADDR:PORT, rank 0 listens there); rank 0 prints the table
//    with the slowest rank's time and every rank's #wrong.
// A hang ends with the watchdog's report and exit 1; so does a completion
// error (on every rank), and any #wrong. With verbs, every rank then sends
// rank 0 where it stood, and rank 0's report ends with all of them.
// --trace writes one Chrome trace of every rank's steps; with verbs rank 0
// gathers the ranks' steps through the bootstrap after the run, or, after a
// failure, from the reports the ranks sent (VerbsBackend::WriteTrace).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "base/json.h"
#include "fabric/sim/fault_attach.h"
#include "fabric/sim/scenario.h"
#include "tools/command.h"
#include "topologies/builders.h"
#include "topologies/spec.h"
#include "transport/collectives/nccl_tests.h"
#include "transport/collectives/report.h"
#include "transport/collectives/sim_world.h"
#include "transport/collectives/verbs_world.h"

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
  int iters = 20, warmup = 1, check = 1;
  std::string redop = "sum", dtype = "float";
  int root = 0;
  std::string algo = "auto";
  int channels = 1;
  std::string chunk = "512K";
  int slots = 4;
  double timeout_s = -1;
  int ib_timeout = 14, retry_cnt = 7, mtu = 0;
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
  BitsPerSecond link_bandwidth() override {
    return BitsPerSecond::Gbps(static_cast<int64_t>(world_->comm(0).device().info().active_gbps));
  }
  RunOutcome Run(const CollSpec& spec, DataType type, RedOp op, const std::vector<const void*>& in,
                 const std::vector<void*>& out, Trace* trace) override {
    return world_->Run(spec, type, op, in, out, trace);
  }
  Status Combine(double*, int64_t*) override { return Status::Ok(); }
  Status Barrier() override { return Status::Ok(); }
  // Every rank is in this process, on the one virtual clock: one file as is.
  int WriteTrace(const std::string& path, const Trace& trace, bool) override {
    return WriteTextFile(path, trace.ToJson()) ? kExitOk : kExitUsage;
  }

 private:
  SimWorld* world_;
};

class VerbsBackend final : public Backend {
 public:
  explicit VerbsBackend(VerbsWorld* world) : world_(world) {}
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
    double t = 0;
    int64_t w = -1;
    for (const std::string& s : all) {
      double rt = 0;
      long long rw = -1;
      if (std::sscanf(s.c_str(), "%lf %lld", &rt, &rw) != 2) {
        return InvalidArgument("fathom coll: malformed per-rank result '" + s + "'");
      }
      t = std::max(t, rt);
      if (rw >= 0) w = (w < 0 ? 0 : w) + rw;
    }
    *time_us = t;
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
};

struct Parsed {
  CollKind kind;
  DataType type;
  RedOp op;
  Algorithm algo;
  std::vector<uint64_t> sizes;
  uint64_t chunk = 0;
};

StatusOr<Parsed> ParseFlags(const Options& o) {
  Parsed p;
  FATHOM_ASSIGN_OR_RETURN(p.kind, ParseCollKind(o.op));
  auto type_or = ParseDataType(o.dtype);
  if (!type_or.ok()) return type_or.status().WithContext("-d");
  p.type = type_or.value();
  auto op_or = ParseRedOp(o.redop);
  if (!op_or.ok()) return op_or.status().WithContext("-o");
  p.op = op_or.value();
  auto algo_or = ParseAlgorithm(o.algo);
  if (!algo_or.ok()) return algo_or.status().WithContext("--algo");
  p.algo = algo_or.value();
  FATHOM_ASSIGN_OR_RETURN(uint64_t minb, ParseBytes("-b", o.minbytes));
  FATHOM_ASSIGN_OR_RETURN(uint64_t maxb, ParseBytes("-e", o.maxbytes));
  FATHOM_ASSIGN_OR_RETURN(uint64_t stepb, ParseBytes("-i", o.stepbytes));
  FATHOM_ASSIGN_OR_RETURN(p.chunk, ParseBytes("--chunk", o.chunk));
  if (o.iters < 1 || o.warmup < 0 || o.stepfactor < 1 || (o.stepfactor == 1 && stepb == 0)) {
    return InvalidArgument("-n must be >= 1, -w >= 0, -f >= 1 (and -i > 0 when -f is 1)");
  }
  p.sizes = SizeSweep(minb, maxb, stepb, o.stepfactor);
  return p;
}

// The nccl-tests loop, the same for both backends: per size, out-of-place
// then in-place, warmup + timed iterations, then one checked iteration.
int RunSweep(const Options& o, const Parsed& p, Backend& backend, const CommOptions& comm) {
  const int n = backend.nranks();
  const std::vector<int> local = backend.local_ranks();
  const uint64_t unit = CountUnitBytes(p.kind, n, p.type);
  const Picoseconds alpha = Picoseconds::FromMicroseconds(2);
  const BitsPerSecond bw = backend.link_bandwidth();
  const bool check = o.check != 0 && !o.modelled;
  const bool rooted = p.kind == CollKind::kBroadcast;
  const bool reduces = p.kind == CollKind::kAllReduce || p.kind == CollKind::kReduceScatter;
  const bool print = backend.prints();
  std::vector<std::unique_ptr<RankBuffers>> bufs;
  if (!o.modelled) {
    const uint64_t max_count = p.sizes.empty() ? 0 : p.sizes.back() / unit;
    for (int r : local) {
      bufs.push_back(std::make_unique<RankBuffers>(p.kind, n, r, p.type, max_count));
    }
  }
  Trace trace;
  std::vector<ReportRow> rows;
  if (print && !o.json) {
    std::printf("# fathom coll %s: backend %s, %s, %s, channels %d, chunk %llu B%s\n",
                std::string(CollKindName(p.kind)).c_str(), backend.name(), backend.Where().c_str(),
                std::string(DataTypeName(p.type)).c_str(), comm.channels,
                static_cast<unsigned long long>(comm.chunk_bytes),
                o.modelled ? ", modelled bytes (no data, no check)" : "");
    std::printf("%s", TableHeader().c_str());
    std::fflush(stdout);
  }
  int exit_code = kExitOk;
  std::string failure;
  for (uint64_t size : p.sizes) {
    const uint64_t count = size / unit;
    ReportRow row;
    row.size_bytes = count * unit;
    row.count = count;
    row.type = p.type;
    row.redop = reduces ? std::string(RedOpName(p.op)) : "none";
    row.root = rooted ? o.root : -1;
    CollSpec spec;
    spec.kind = p.kind;
    spec.nranks = n;
    spec.count = count;
    spec.root = o.root;
    spec.algorithm =
        p.algo == Algorithm::kAuto ? ChooseAlgorithm(p.kind, row.size_bytes, n, alpha, bw) : p.algo;
    if (p.kind != CollKind::kAllReduce) spec.algorithm = Algorithm::kRing;
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
      if (!o.modelled) fill();
      if (Status s = backend.Barrier(); !s.ok()) {
        failure = s.message() + "\n";
        break;
      }
      double total_us = 0;
      for (int it = 0; it < o.warmup + o.iters + (check ? 1 : 0); ++it) {
        const bool checking = it == o.warmup + o.iters;
        if (checking) fill();
        Trace* t = (!o.trace.empty() && place == 0 && it == o.warmup) ? &trace : nullptr;
        RunOutcome res = backend.Run(spec, p.type, p.op, in, out, t);
        if (!res.status.ok()) {
          failure = res.report.empty() ? res.status.message() + "\n" : res.report;
          break;
        }
        if (it >= o.warmup && !checking) total_us += (res.end - res.start).us();
      }
      if (!failure.empty()) break;
      double time_us = total_us / o.iters;
      int64_t wrong = -1;
      if (check) {
        wrong = 0;
        for (const auto& b : bufs) wrong += b->CountWrong(count, p.op, o.root);
      }
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
      std::printf("%s", TableRow(row).c_str());
      std::fflush(stdout);
    }
  }
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
  return c;
}

int RunSim(const Options& o, const Parsed& p) {
  auto usage = [](const Status& s) {
    std::fprintf(stderr, "fathom coll: %s\n", s.message().c_str());
    return kExitUsage;
  };
  SimWorldOptions wopt;
  wopt.nranks = o.ranks;
  wopt.seed = o.seed;
  wopt.comm = CommFromFlags(o, p);
  wopt.emulated.rxe_infinite_retry = o.rxe;
  if (o.timeout_s > 0) wopt.watchdog = Picoseconds::FromSeconds(o.timeout_s);
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
    return usage("--backend verbs needs --nranks N and --rank R with 0 <= R < N (got --nranks " +
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
  if (o.gid_index >= 0) wopt.device.gid = {transport::verbs::GidMode::kIndex, o.gid_index};
  if (o.cq_mode == "events") {
    wopt.device.cq_mode = transport::verbs::CqMode::kEvents;
  } else if (o.cq_mode != "poll") {
    return usage("--cq-mode '" + o.cq_mode + "': poll|events");
  }
  wopt.comm = CommFromFlags(o, p);
  wopt.watchdog = Picoseconds::FromSeconds(o.timeout_s > 0 ? o.timeout_s : 30);
  auto world_or = VerbsWorld::Create(wopt);
  if (!world_or.ok()) {
    std::fprintf(stderr, "fathom coll: rank %d: %s\n", o.rank,
                 world_or.status().ToString().c_str());
    return kExitFailure;
  }
  VerbsBackend backend(world_or.value().get());
  int rc = RunSweep(o, p, backend, wopt.comm);
  if (Status s = world_or.value()->Finish(); !s.ok() && rc == kExitOk) {
    std::fprintf(stderr, "fathom coll: rank %d: %s\n", o.rank, s.ToString().c_str());
    rc = kExitFailure;
  }
  return rc;
}

int Run(const Options& o) {
  auto parsed = ParseFlags(o);
  if (!parsed.ok()) {
    std::fprintf(stderr, "fathom coll: %s\n", parsed.status().message().c_str());
    return kExitUsage;
  }
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
        "broadcast)",
        [](CLI::App* sub) -> std::function<int()> {
          auto o = std::make_shared<Options>();
          sub->add_option("op", o->op, "allreduce|allgather|reduce_scatter|broadcast")->required();
          sub->add_option("--backend", o->backend, "sim (default) or verbs");
          sub->add_option("--topology", o->topology,
                          "sim: PRESET or topology FILE.yaml (default small)");
          sub->add_option("--scenario", o->scenario,
                          "sim: scenario FILE.yaml (topology, transport, network, faults)");
          sub->add_option("--ranks", o->ranks,
                          "sim: ranks, on hosts that all reach each other (0 = all such hosts)");
          sub->add_option("--nranks", o->nranks, "verbs: number of ranks (processes)");
          sub->add_option("--rank", o->rank, "verbs: this process's rank (0 hosts the bootstrap)");
          sub->add_option("--bootstrap", o->bootstrap,
                          "verbs: ADDRESS:PORT of rank 0's bootstrap (rank 0 binds it; "
                          "default 127.0.0.1:18515)");
          sub->add_option("--token", o->token, "verbs: shared bootstrap token");
          sub->add_option("--bootstrap-wait", o->bootstrap_wait_s,
                          "verbs: seconds to wait for every rank to join (default 60)");
          sub->add_option("--ib-dev", o->ib_dev, "verbs: RDMA device (default: first ACTIVE)");
          sub->add_option("--ib-port", o->ib_port, "verbs: device port (default: first ACTIVE)");
          sub->add_option("--gid-index", o->gid_index,
                          "verbs: GID index (default: RoCE v2 IPv4-mapped)");
          sub->add_option("--cq-mode", o->cq_mode,
                          "verbs: poll (busy-poll the CQ, default) or events (sleep on the "
                          "completion channel: leaves the CPU to a software NIC)");
          sub->add_option("-b,--minbytes", o->minbytes, "smallest size (default 32M)");
          sub->add_option("-e,--maxbytes", o->maxbytes, "largest size (default 32M)");
          sub->add_option("-i,--stepbytes", o->stepbytes, "size increment (default 1M)");
          sub->add_option("-f,--stepfactor", o->stepfactor, "size multiplier (default 1)");
          sub->add_option("-n,--iters", o->iters, "timed iterations (default 20)");
          sub->add_option("-w,--warmup_iters", o->warmup, "warmup iterations (default 1)");
          sub->add_option("-c,--check", o->check, "check results (default 1)");
          sub->add_option("-o,--op", o->redop, "sum|prod|min|max (default sum)");
          sub->add_option("-d,--datatype", o->dtype,
                          "float|half|bfloat16|int32|int64 (default float)");
          sub->add_option("-r,--root", o->root, "broadcast root (default 0)");
          sub->add_option("--algo", o->algo, "auto|ring|tree (allreduce; default auto)");
          sub->add_option("--channels", o->channels, "QPs per peer (default 1)");
          sub->add_option("--chunk", o->chunk, "chunk / staging slot size (default 512K)");
          sub->add_option("--slots", o->slots, "staging slots per connection (default 4)");
          sub->add_option("--timeout", o->timeout_s,
                          "watchdog: seconds without progress (sim: virtual, default 1; "
                          "verbs: wall, default 30; rank 0 prints every rank's view)");
          sub->add_option("--ib-timeout", o->ib_timeout, "QP local ACK timeout (default 14)");
          sub->add_option("--retry-cnt", o->retry_cnt, "QP retry_cnt (default 7)");
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
          return [o] { return Run(*o); };
        },
        40});

}  // namespace fathom::tools
