// Simulator throughput: a permutation of RDMA WRITE flows on a k-ary
// fat-tree at 100 Gb/s, MTU 4096, one core. Prints packet-hops per wall
// second (a packet crossing one link is one hop), simulated seconds per wall
// second, events, peak packets in flight and peak RSS. A plain main: it
// measures and prints, it asserts nothing.
//
//   sim_bench                      k=8 and k=16, 2 MiB flows
//   sim_bench K BYTES [PRESET]     one run; PRESET (e.g. "large") replaces the
//                                  fat-tree and its 400 Gb/s links
//   sim_bench K BYTES - FAULT      one run with FAULT on every link of one core switch,
//                                  e.g. "kind: loss, rate: 1e-4" (the cost of
//                                  faults: compare with the same run without)
//   sim_bench --lossless ...       the same runs as a RoCE fabric runs them: DSCP 26
//                                  + ECT(0) (TOS 106) on priority 3, lossless with
//                                  PFC (XOFF 64 KiB, XON 32 KiB per ingress port;
//                                  fabric/sim/pfc.h), RED ECN marking of that class
//                                  (the DCQCN paper's Kmin 5 KB, Kmax 200 KB, Pmax
//                                  1%; ecn.h) and DCQCN in every NIC (the mlx5
//                                  defaults; dcqcn.h)
//   sim_bench --lossless --no-ecn / --no-dcqcn ...
//                                  the lossless class without ECN marking / without
//                                  DCQCN: what each part of the lossless fabric costs
//   sim_bench --lossless --no-pause ...
//                                  the lossless class's per-frame accounting
//                                  (admission, release) with XOFF 128 MiB in 256 MiB
//                                  switch buffers: no PAUSE is ever sent, so the
//                                  flows run as --deep's do (with --deep: what the
//                                  accounting costs alone, without PFC's pauses)
//   sim_bench --deep ...           switch buffers of 256 MiB, so the lossy fabric
//                                  drops nothing: its flows run as concurrently as
//                                  the lossless fabric's (a lossy run's timeouts
//                                  spread its flows over ~100x the virtual time)
//   sim_bench --compare ...        each run lossy and lossless, alternating (with
//                                  --repeat N: N of each, lossy first), each mode's
//                                  figures, and the ratio of their packet-hops/s at
//                                  the median wall time (issue 26's target: >= 75%);
//                                  with --no-ecn / --no-dcqcn the lossless mode is
//                                  without that part, and the ratio line says so
//   sim_bench --kinds ...          each run's events per packet-hop by kind (arrival,
//                                  NIC pump, QP timer, user: PFC's and DCQCN's timers
//                                  are kQpTimer and kUser), counted by a tracer that
//                                  slows the run: not for timing
//   sim_bench --repeat N ...       each run N times over (a fresh network each
//                                  time), then its min / median / max wall time:
//                                  a shared machine's noise is several percent.
//                                  The runs must agree on events, hops and trace
//                                  digest (determinism), or the bench fails.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "base/huge_pages.h"
#include "fabric/scenario/fault_attach.h"
#include "fabric/scenario/workload.h"
#include "fabric/sim/engine.h"
#include "fabric/sim/network.h"
#include "proto/faults.pb.h"
#include "proto/yaml_loader.h"
#include "topologies/builders.h"

namespace fathom::sim {
namespace {

// What one run measured; the repeats of a run must agree on all but wall.
struct Figures {
  double wall = 0;
  uint64_t events = 0;
  uint64_t hops = 0;
  uint64_t digest = 0;
};

// --lossless: the network and the flows' traffic class.
bool g_lossless = false;
// --no-ecn, --no-dcqcn: the lossless class without that part; --deep: switch
// buffers no permutation fills.
bool g_no_ecn = false;
bool g_no_dcqcn = false;
bool g_deep = false;
// --no-pause: the lossless class's accounting without its pauses (XOFF past
// any queue, in 256 MiB switch buffers).
bool g_no_pause = false;
// --kinds: count events by kind (EventKind's values, 1 to 6).
bool g_kinds = false;
void CountKind(void* ctx, Picoseconds /*at*/, EventKind kind, uint32_t /*component*/) {
  ++static_cast<uint64_t*>(ctx)[static_cast<size_t>(kind) & 7];
}

NetworkConfig BenchConfig() {
  NetworkConfig nc;
  if (g_deep || (g_lossless && g_no_pause)) nc.switch_buffer_bytes = int64_t{256} << 20;
  if (g_lossless) {
    nc.qos.classes[3].lossless = true;
    nc.qos.classes[3].xoff_bytes = 64 * 1024;
    nc.qos.classes[3].xon_bytes = 32 * 1024;
    if (g_no_pause) {
      nc.qos.classes[3].xoff_bytes = int64_t{128} << 20;
      nc.qos.classes[3].xon_bytes = int64_t{64} << 20;
    }
    // ECN on the lossless class with the thresholds of the DCQCN paper
    // (Zhu et al., SIGCOMM 2015, section 5), as scenarios/dcqcn_incast.yaml.
    if (!g_no_ecn) {
      nc.ecn.enabled = true;
      nc.ecn.classes[3] = EcnClassConfig{true, 5 * 1024, 200 * 1024, 0.01};
    }
    nc.dcqcn.enabled = !g_no_dcqcn;
  }
  return nc;
}

int RunOnce(const topo::Topology& topo, uint64_t flow_bytes, std::string label,
            const std::string& fault, Figures* out) {
  Engine engine(1);
  Network net(&engine, &topo, BenchConfig());
  if (g_lossless) label += " lossless";
  if (g_lossless && g_no_ecn) label += " no-ecn";
  if (g_lossless && g_no_dcqcn) label += " no-dcqcn";
  if (g_lossless && g_no_pause) label += " no-pause";
  if (g_deep) label += " deep";
  std::unique_ptr<FaultAttachment> faults;
  if (!fault.empty()) {
    // Every link of one top-tier switch (links are numbered bottom up, so
    // the last link's far end is one): a single core link may carry no
    // flow of the permutation, the 16 links of a core switch carry several.
    const std::string target = topo.node(topo.links().back().b).name;
    const std::string yaml = "faults:\n  - {link: \"" + target + "\", " + fault + "}\n";
    proto::FaultTimeline timeline;
    config::SourceMap map("sim_bench");
    config::YamlLoadOptions lo;
    lo.source_map = &map;
    Status s = config::LoadYamlString(yaml, "sim_bench", &timeline, lo);
    auto attached = s.ok() ? FaultAttachment::Attach(&net, timeline.faults(), 1, map)
                           : StatusOr<std::unique_ptr<FaultAttachment>>(s);
    if (!attached.ok()) {
      std::fprintf(stderr, "sim_bench: %s\n", attached.status().ToString().c_str());
      return 2;
    }
    faults = std::move(attached).value();
    label += " +fault on " + target + "'s links";
  }
  Rng rng = engine.MakeRng(1);
  FlowOptions fo;
  fo.qp.path_mtu_bytes = 4096;
  fo.qp.timeout = 14;
  if (g_lossless) fo.qp.traffic_class = 26 << 2 | 2;  // DSCP 26 (priority 3), ECT(0)
  FlowDriver driver(&net, PermutationFlows(net.host_count(), flow_bytes, Picoseconds(0), rng), fo);
  Status s = driver.Setup();
  if (!s.ok()) {
    std::fprintf(stderr, "sim_bench: %s\n", s.ToString().c_str());
    return 1;
  }
  uint64_t kinds[8] = {};
  if (g_kinds) engine.set_tracer(&CountKind, kinds);
  struct rusage before {};
  getrusage(RUSAGE_SELF, &before);
  const auto t0 = std::chrono::steady_clock::now();
  engine.Run();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  uint64_t hops = 0;
  for (const auto& p : net.ports()) hops += p->counters().port_xmit_packets;
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  // The kernel's share of the run: first touches of packet and ring memory.
  auto secs = [](const timeval& tv) { return tv.tv_sec + tv.tv_usec / 1e6; };
  const double sys_s = secs(ru.ru_stime) - secs(before.ru_stime);
  const long page_faults = ru.ru_minflt - before.ru_minflt;
  const double sim_s = engine.Now().seconds();
  const QpCounters q = net.TotalQpCounters();
  if (g_lossless) {
    // What the congestion control did: PAUSE frames sent, CE marks, CNPs.
    uint64_t pauses = 0;
    for (const auto& p : net.ports()) {
      if (auto c = p->pfc_counters()) {
        for (uint64_t n : c->tx_pause) pauses += n;
      }
    }
    const DcqcnCounters d = net.TotalDcqcnCounters();
    label += " (pause " + std::to_string(pauses) + " ce " +
             std::to_string(net.TotalEcnMarkedPackets()) + " cnp " + std::to_string(d.np_cnp_sent) +
             " drops " + std::to_string(net.drops().total()) + ")";
  }
  if (g_kinds) {
    char buf[160];
    const double h = hops > 0 ? static_cast<double>(hops) : 1;
    uint64_t other = std::accumulate(std::begin(kinds), std::end(kinds), uint64_t{0});
    auto per_hop = [&](EventKind k) {
      const uint64_t n = kinds[static_cast<size_t>(k)];
      other -= n;
      return static_cast<double>(n) / h;
    };
    const double arrival = per_hop(EventKind::kArrival), pump = per_hop(EventKind::kNicPump),
                 timer = per_hop(EventKind::kQpTimer), user = per_hop(EventKind::kUser);
    std::snprintf(buf, sizeof buf,
                  " (events per hop: arrival %.3f pump %.3f qp-timer %.3f user %.3f other %.3f)",
                  arrival, pump, timer, user, static_cast<double>(other) / h);
    label += buf;
  }
  std::printf(
      "%-28s hosts %5d  flows %5d done %5d  sim %.3f ms  wall %.3f s  events %llu  "
      "packet-hops %llu  %.1f M hops/s  %.4f sim-s/wall-s  peak in-flight %zu pkts  "
      "peak events %zu  retx %llu  peak RSS %.1f MiB  sys %.3f s (%ld page faults)\n",
      label.c_str(), net.host_count(), static_cast<int>(driver.flows().size()), driver.completed(),
      sim_s * 1e3, wall, static_cast<unsigned long long>(engine.events_dispatched()),
      static_cast<unsigned long long>(hops), hops / wall / 1e6, sim_s / wall,
      net.pool().peak_in_use(), engine.peak_pending(),
      static_cast<unsigned long long>(q.retransmitted_packets), ru.ru_maxrss / 1024.0, sys_s,
      page_faults);
  *out = Figures{wall, engine.events_dispatched(), hops, engine.trace_digest()};
  return 0;
}

// Whether run `f` agrees with `first` on everything but wall time; prints
// the difference when not.
bool SameRun(const std::string& label, int i, const Figures& f, const Figures& first) {
  if (f.events == first.events && f.hops == first.hops && f.digest == first.digest) return true;
  std::fprintf(stderr,
               "sim_bench: %s: run %d differs from run 1 (events %llu vs %llu, hops %llu vs "
               "%llu, digest %016llx vs %016llx): the simulator is not deterministic\n",
               label.c_str(), i, static_cast<unsigned long long>(f.events),
               static_cast<unsigned long long>(first.events),
               static_cast<unsigned long long>(f.hops), static_cast<unsigned long long>(first.hops),
               static_cast<unsigned long long>(f.digest),
               static_cast<unsigned long long>(first.digest));
  return false;
}

// The packet-hops/s of `runs` at their median wall time (printing min /
// median / max when there are several).
double Summarize(const std::string& label, const std::vector<Figures>& runs) {
  std::vector<double> walls;
  for (const Figures& f : runs) walls.push_back(f.wall);
  std::sort(walls.begin(), walls.end());
  const size_t n = walls.size();
  const double median = n % 2 == 1 ? walls[n / 2] : (walls[n / 2 - 1] + walls[n / 2]) / 2;
  const double hops = static_cast<double>(runs[0].hops);
  if (n > 1) {
    std::printf(
        "%-28s %zu runs: wall min %.4f s  median %.4f s  max %.4f s  ->  %.1f M hops/s at the "
        "median (%.1f M at the min)\n",
        label.c_str(), n, walls.front(), median, walls.back(), hops / median / 1e6,
        hops / walls.front() / 1e6);
  }
  return median > 0 ? hops / median : 0;
}

// `repeat` runs in the mode g_lossless says; their rate at the median.
int RunMode(const topo::Topology& topo, uint64_t flow_bytes, const std::string& label, int repeat,
            const std::string& fault, double* hops_per_s) {
  std::vector<Figures> runs;
  for (int i = 0; i < repeat; ++i) {
    Figures f;
    if (int rc = RunOnce(topo, flow_bytes, label, fault, &f); rc != 0) return rc;
    if (!runs.empty() && !SameRun(label, i + 1, f, runs[0])) return 1;
    runs.push_back(f);
  }
  *hops_per_s = Summarize(label + (g_lossless ? " lossless" : ""), runs);
  return 0;
}

// --compare: lossy and lossless runs alternating (a drift of the shared
// machine's speed hits both alike), then the ratio of their rates.
bool g_compare = false;

int Run(const topo::Topology& topo, uint64_t flow_bytes, const std::string& label, int repeat,
        const std::string& fault = "") {
  if (!g_compare) {
    double rate = 0;
    return RunMode(topo, flow_bytes, label, repeat, fault, &rate);
  }
  std::vector<Figures> runs[2];  // [0] lossy, [1] lossless
  for (int i = 0; i < repeat; ++i) {
    for (int mode = 0; mode < 2; ++mode) {
      g_lossless = mode == 1;
      Figures f;
      int rc = RunOnce(topo, flow_bytes, label, fault, &f);
      g_lossless = false;
      if (rc != 0) return rc;
      if (!runs[mode].empty() && !SameRun(label, i + 1, f, runs[mode][0])) return 1;
      runs[mode].push_back(f);
    }
  }
  const double lossy = Summarize(label, runs[0]);
  const double lossless = Summarize(label + " lossless", runs[1]);
  // The lossless mode's parts, as --no-pause, --no-ecn and --no-dcqcn left them.
  std::string parts = g_no_pause ? "PFC accounts, no pause" : "PFC";
  if (!g_no_ecn) parts += "+ECN";
  if (!g_no_dcqcn) parts += "+DCQCN";
  std::printf("%-28s lossless (%s) / lossy packet-hops/s: %.1f / %.1f M = %.1f%%\n", label.c_str(),
              parts.c_str(), lossless / 1e6, lossy / 1e6, lossy > 0 ? 100 * lossless / lossy : 0.0);
  return 0;
}

topo::Topology FatTree(int k) {
  topo::FatTreeOptions o;
  o.k = k;
  const topo::LinkParams l{BitsPerSecond::Gbps(100), Picoseconds::FromNanoseconds(5), 4200};
  o.host_link = o.edge_link = o.core_link = l;
  return topo::BuildFatTree(o).value();
}

}  // namespace
}  // namespace fathom::sim

int main(int argc, char** argv) {
  fathom::PreferHugePages(argv);  // base/huge_pages.h: as fathom itself runs
  using namespace fathom;
  int repeat = 1;
  while (argc >= 2) {
    const std::string flag = argv[1];
    bool* set = flag == "--lossless"   ? &sim::g_lossless
                : flag == "--compare"  ? &sim::g_compare
                : flag == "--kinds"    ? &sim::g_kinds
                : flag == "--no-ecn"   ? &sim::g_no_ecn
                : flag == "--no-dcqcn" ? &sim::g_no_dcqcn
                : flag == "--deep"     ? &sim::g_deep
                : flag == "--no-pause" ? &sim::g_no_pause
                                       : nullptr;
    if (set == nullptr) break;
    *set = true;
    argv[1] = argv[0];
    ++argv;
    --argc;
  }
  if (argc >= 2 && std::string(argv[1]) == "--repeat") {
    char* end = nullptr;
    const long n = argc >= 3 ? std::strtol(argv[2], &end, 10) : 0;
    if (argc < 3 || *end != '\0' || n < 1 || n > 1000) {
      std::fprintf(stderr, "sim_bench: --repeat takes a count from 1 to 1000, got '%s'\n",
                   argc >= 3 ? argv[2] : "");
      return 2;
    }
    repeat = static_cast<int>(n);
    argv[2] = argv[0];
    argv += 2;
    argc -= 2;
  }
  if (argc >= 3) {
    const uint64_t bytes = std::strtoull(argv[2], nullptr, 10);
    if (argc >= 5 && std::string(argv[3]) == "-") {
      const int k = std::atoi(argv[1]);
      return sim::Run(sim::FatTree(k), bytes, "fat-tree k=" + std::to_string(k), repeat, argv[4]);
    }
    if (argc >= 4) {
      auto topo = topo::BuildPreset(argv[3]);
      if (!topo.ok()) {
        std::fprintf(stderr, "sim_bench: %s\n", topo.status().ToString().c_str());
        return 2;
      }
      return sim::Run(*topo, bytes, std::string("preset ") + argv[3], repeat);
    }
    const int k = std::atoi(argv[1]);
    return sim::Run(sim::FatTree(k), bytes, "fat-tree k=" + std::to_string(k), repeat);
  }
  int rc = 0;
  for (int k : {8, 16}) {
    rc |= sim::Run(sim::FatTree(k), 2 << 20, "fat-tree k=" + std::to_string(k), repeat);
  }
  return rc;
}
