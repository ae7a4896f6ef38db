// `fathom coll OP --backend sim|verbs`: nccl-tests for fathom's collectives.
// Flags and table follow nccl-tests (-b -e -f -i -n -w -c -o -d, columns
// size count type redop root time algbw busbw #wrong, out-of-place then
// in-place, "# Avg bus bandwidth"). With --backend sim every rank runs in
// this process over the emulated NIC on a topology (a preset, a topology
// file, or a scenario's topology + transport + faults) and time is virtual.
// A hang ends with the watchdog's report and exit 1; so does a completion
// error, and any #wrong.
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "fabric/sim/fault_attach.h"
#include "fabric/sim/scenario.h"
#include "tools/command.h"
#include "topologies/builders.h"
#include "topologies/spec.h"
#include "transport/collectives/report.h"
#include "transport/collectives/sim_world.h"

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
};

StatusOr<uint64_t> ParseBytes(const std::string& flag, const std::string& s) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  uint64_t mult = 1;
  if (end != nullptr && *end != '\0') {
    const char c = static_cast<char>(std::toupper(static_cast<unsigned char>(*end)));
    mult = c == 'K' ? 1024 : c == 'M' ? 1u << 20 : c == 'G' ? 1u << 30 : 0;
    if (mult == 0 || end[1] != '\0') {
      return InvalidArgument(flag + " '" + s + "': expected a size like 8, 64K, 32M, 1G");
    }
  }
  if (end == s.c_str() || v < 0) {
    return InvalidArgument(flag + " '" + s + "': expected a size like 8, 64K, 32M, 1G");
  }
  return static_cast<uint64_t>(v * static_cast<double>(mult));
}

double Tolerance(DataType t, int n) {
  const double eps = t == DataType::kFloat16 ? 0x1.0p-10 : t == DataType::kBfloat16 ? 0x1.0p-7 : 0;
  return eps * 3.0 * n * n;
}

// Inputs are small integers (exact in every type for sums of few ranks).
double InputValue(int rank, uint64_t i) {
  return static_cast<double>(static_cast<int64_t>((rank * 3 + i * 5) % 7) - 3);
}

struct Buffers {
  std::vector<std::vector<uint8_t>> mem;
  std::vector<std::vector<uint8_t>> out_mem;
  std::vector<const void*> in;
  std::vector<void*> out;
};

void Fill(Buffers& b, CollKind kind, int n, uint64_t count, DataType type, bool in_place) {
  const size_t es = DataTypeSize(type);
  const uint64_t nn = static_cast<uint64_t>(n);
  const bool gather = kind == CollKind::kAllGather, scatter = kind == CollKind::kReduceScatter;
  const uint64_t in_count = scatter ? count * nn : count;
  const uint64_t out_count = gather ? count * nn : count;
  b.mem.resize(n);
  b.out_mem.resize(n);
  b.in.assign(n, nullptr);
  b.out.assign(n, nullptr);
  for (int r = 0; r < n; ++r) {
    b.mem[r].assign(std::max(in_count, out_count) * es + 8, 0);
    uint8_t* inp = b.mem[r].data() + (gather && in_place ? r * count * es : 0);
    for (uint64_t i = 0; i < in_count; ++i) StoreElement(inp, i, type, InputValue(r, i));
    b.in[r] = inp;
    if (in_place) {
      b.out[r] = b.mem[r].data() + (scatter ? r * count * es : 0);
    } else {
      b.out_mem[r].assign(out_count * es + 8, 0);
      b.out[r] = b.out_mem[r].data();
    }
  }
}

int64_t CountWrong(const Buffers& b, CollKind kind, int n, uint64_t count, DataType type, RedOp op,
                   int root) {
  int64_t wrong = 0;
  const double tol = Tolerance(type, n);
  const uint64_t out_count = kind == CollKind::kAllGather ? count * n : count;
  for (int r = 0; r < n; ++r) {
    for (uint64_t i = 0; i < out_count; ++i) {
      double want = 0;
      if (kind == CollKind::kAllReduce || kind == CollKind::kReduceScatter) {
        const uint64_t j = kind == CollKind::kReduceScatter ? r * count + i : i;
        want = InputValue(0, j);
        for (int q = 1; q < n; ++q) {
          const double v = InputValue(q, j);
          want = op == RedOp::kSum    ? want + v
                 : op == RedOp::kProd ? want * v
                 : op == RedOp::kMin  ? std::min(want, v)
                                      : std::max(want, v);
        }
      } else if (kind == CollKind::kAllGather) {
        want = InputValue(static_cast<int>(i / count), i % count);
      } else {
        want = InputValue(root, i);
      }
      uint8_t tmp[8];
      StoreElement(tmp, 0, type, want);
      const double got = LoadElement(b.out[r], i, type);
      const double ref = LoadElement(tmp, 0, type);
      if (!(std::fabs(got - ref) <= tol * std::max(1.0, std::fabs(ref)))) ++wrong;
    }
  }
  return wrong;
}

int Run(const Options& o) {
  auto usage = [](const Status& s) {
    std::fprintf(stderr, "fathom coll: %s\n", s.message().c_str());
    return kExitUsage;
  };
  auto kind_or = ParseCollKind(o.op);
  if (!kind_or.ok()) return usage(kind_or.status());
  const CollKind kind = kind_or.value();
  if (o.backend == "verbs") {
    std::fprintf(stderr,
                 "fathom coll: --backend verbs is not wired in yet (needs transport/bootstrap); "
                 "use --backend sim\n");
    return kExitUsage;
  }
  if (o.backend != "sim") return usage(InvalidArgument("--backend '" + o.backend + "': sim|verbs"));
  auto type_or = ParseDataType(o.dtype);
  if (!type_or.ok()) return usage(type_or.status().WithContext("-d"));
  auto op_or = ParseRedOp(o.redop);
  if (!op_or.ok()) return usage(op_or.status().WithContext("-o"));
  auto algo_or = ParseAlgorithm(o.algo);
  if (!algo_or.ok()) return usage(algo_or.status().WithContext("--algo"));
  auto minb = ParseBytes("-b", o.minbytes), maxb = ParseBytes("-e", o.maxbytes),
       stepb = ParseBytes("-i", o.stepbytes), chunk = ParseBytes("--chunk", o.chunk);
  for (auto* s : {&minb, &maxb, &stepb, &chunk}) {
    if (!s->ok()) return usage(s->status());
  }
  if (o.iters < 1 || o.warmup < 0 || o.stepfactor < 1 ||
      (o.stepfactor == 1 && stepb.value() == 0)) {
    return usage(InvalidArgument("-n must be >= 1, -w >= 0, -f >= 1 (and -i > 0 when -f is 1)"));
  }
  const DataType type = type_or.value();
  const RedOp op = op_or.value();

  SimWorldOptions wopt;
  wopt.nranks = o.ranks;
  wopt.seed = o.seed;
  wopt.comm.channels = o.channels;
  wopt.comm.chunk_bytes = chunk.value();
  wopt.comm.slots = o.slots;
  wopt.comm.modelled = o.modelled;
  wopt.comm.qp.timeout = o.ib_timeout;
  wopt.comm.qp.retry_cnt = o.retry_cnt;
  wopt.comm.qp.path_mtu = o.mtu;
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
  const int n = world.nranks();
  const size_t es = DataTypeSize(type);
  const uint64_t unit = es * ((kind == CollKind::kAllGather || kind == CollKind::kReduceScatter)
                                  ? static_cast<uint64_t>(n)
                                  : 1);
  const Picoseconds alpha = Picoseconds::FromMicroseconds(2);
  const BitsPerSecond bw = BitsPerSecond::Gbps(
      static_cast<int64_t>(world.fabric().OpenDevice(0).value()->info().active_gbps));
  Trace trace;
  std::vector<ReportRow> rows;
  const bool rooted = kind == CollKind::kBroadcast;
  const bool reduces = kind == CollKind::kAllReduce || kind == CollKind::kReduceScatter;
  if (!o.json) {
    std::printf("# fathom coll %s: backend sim, %d ranks on %s, %s, channels %d, chunk %llu B%s\n",
                std::string(CollKindName(kind)).c_str(), n, world.topology().name().c_str(),
                std::string(DataTypeName(type)).c_str(), wopt.comm.channels,
                static_cast<unsigned long long>(wopt.comm.chunk_bytes),
                o.modelled ? ", modelled bytes (no data, no check)" : "");
    std::printf("%s", TableHeader().c_str());
  }
  int exit_code = kExitOk;
  std::string failure;
  for (uint64_t size = minb.value(); size <= maxb.value();
       size = o.stepfactor > 1 ? static_cast<uint64_t>(
                                     std::max<double>(size + 1, std::floor(size * o.stepfactor)))
                               : size + stepb.value()) {
    const uint64_t count = size / unit;
    ReportRow row;
    row.size_bytes = count * unit;
    row.count = count;
    row.type = type;
    row.redop = reduces ? std::string(RedOpName(op)) : "none";
    row.root = rooted ? o.root : -1;
    CollSpec spec;
    spec.kind = kind;
    spec.nranks = n;
    spec.count = count;
    spec.root = o.root;
    spec.algorithm = algo_or.value() == Algorithm::kAuto
                         ? ChooseAlgorithm(kind, row.size_bytes, n, alpha, bw)
                         : algo_or.value();
    if (kind != CollKind::kAllReduce) spec.algorithm = Algorithm::kRing;
    for (int place = 0; place < 2 && exit_code == kExitOk; ++place) {
      Buffers b;
      if (!o.modelled) Fill(b, kind, n, count, type, place == 1);
      double total_us = 0;
      for (int it = 0; it < o.warmup + o.iters + (o.check && !o.modelled ? 1 : 0); ++it) {
        const bool checking = it == o.warmup + o.iters;
        if (checking) Fill(b, kind, n, count, type, place == 1);
        Trace* t = (!o.trace.empty() && place == 0 && it == o.warmup) ? &trace : nullptr;
        RunOutcome res = world.Run(spec, type, op, b.in, b.out, t);
        if (!res.status.ok()) {
          failure = res.report.empty() ? res.status.message() : res.report;
          exit_code = kExitFailure;
          break;
        }
        if (it >= o.warmup && !checking) total_us += (res.end - res.start).us();
      }
      if (exit_code != kExitOk) break;
      const int64_t wrong =
          (o.check && !o.modelled) ? CountWrong(b, kind, n, count, type, op, o.root) : -1;
      if (wrong > 0) exit_code = kExitFailure;
      (place == 0 ? row.out_of_place : row.in_place) =
          Measure(kind, n, row.size_bytes, total_us / o.iters, wrong);
    }
    if (exit_code != kExitOk && !failure.empty()) break;
    rows.push_back(row);
    if (!o.json) {
      std::printf("%s", TableRow(row).c_str());
      std::fflush(stdout);
    }
    if (size == maxb.value() || (o.stepfactor > 1 ? false : stepb.value() == 0)) break;
  }
  if (!o.trace.empty()) {
    FILE* f = std::fopen(o.trace.c_str(), "w");
    if (f == nullptr) return usage(IoError("--trace " + o.trace + ": cannot open for writing"));
    const std::string j = trace.ToJson();
    std::fwrite(j.data(), 1, j.size(), f);
    std::fclose(f);
  }
  if (o.json) {
    std::string esc;
    for (char c : failure) {
      if (c == '"' || c == '\\') esc += '\\';
      if (c == '\n') {
        esc += "\\n";
        continue;
      }
      esc += c;
    }
    std::printf(
        "{\"op\":\"%s\",\"backend\":\"sim\",\"nranks\":%d,\"topology\":\"%s\",\"rows\":%s,"
        "\"avg_busbw_gbs\":%g,\"status\":\"%s\",\"report\":\"%s\"}\n",
        std::string(CollKindName(kind)).c_str(), n, world.topology().name().c_str(),
        RowsToJson(rows).c_str(), AverageBusBw(rows),
        failure.empty() ? (exit_code == kExitOk ? "ok" : "wrong") : "failed", esc.c_str());
  } else {
    std::printf("%s", TableFooter(rows).c_str());
    if (!failure.empty()) std::printf("# %s: run stopped\n", "FAILED");
  }
  if (!failure.empty()) std::fprintf(stderr, "%s", failure.c_str());
  return exit_code;
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
          sub->add_option("--ranks", o->ranks, "sim: ranks on the first hosts (0 = all)");
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
                          "watchdog: seconds without progress (sim: virtual, default 1)");
          sub->add_option("--ib-timeout", o->ib_timeout, "QP local ACK timeout (default 14)");
          sub->add_option("--retry-cnt", o->retry_cnt, "QP retry_cnt (default 7)");
          sub->add_option("--mtu", o->mtu, "force the path MTU in bytes (0 = negotiate)");
          sub->add_flag("--rxe", o->rxe, "sim: rxe semantics (retry_cnt 7 = forever)");
          sub->add_flag("--modelled", o->modelled,
                        "sim: move no bytes (timing only, no check; for huge runs)");
          sub->add_option("--seed", o->seed, "sim: seed (default 1)");
          sub->add_flag("--json", o->json, "print one JSON object");
          sub->add_option("--trace", o->trace,
                          "write a Chrome trace / Perfetto JSON of every rank's steps");
          return [o] { return Run(*o); };
        },
        40});

}  // namespace fathom::tools
