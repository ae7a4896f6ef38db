// Collective scale benchmark (issues 30 and 31): one allreduce on a big
// simulated world, with the world's memory. Prints what ran (timing only or
// real data), the wall and CPU time of the setup and of the run, the peak
// RSS, the events, the virtual time and the bus bandwidth; with real data,
// the staging each rank reserves and keeps and its buffers; asserts
// nothing.
//
// Usage: coll_scale_bench [BYTES] [PRESET] [RANKS] [ALGO] [SERVER] [FABRIC] [DATA] [MODEL]
//                         [PROFILE] [ORDER]
//   BYTES   per rank (default 1073741824, 1 GiB)
//   PRESET  topology preset (default large: 1024 GPUs on a k=16 fat-tree)
//   RANKS   0 = every GPU of the preset (default 0)
//   ALGO    ring|tree (default ring)
//   SERVER  h100 (8 GPUs per server on NVLink, one NIC each, hierarchical
//           rings and trees, 8 channels) or none (one rank per NIC, 1
//           channel) (default h100)
//   FABRIC  lossy|lossless (default lossless: RoCE priority 3 with PFC)
//   DATA    modelled (timing only: no bytes move, nothing is checked) or data
//           (nccl-tests' buffers on every rank, moved and checked)
//           (default modelled)
//   MODEL   packet|flow: the NICs packetize (default), or move each message
//           as one max-min fair flow (fabric/sim/flow_fabric.h, docs/FLOW.md)
//   PROFILE ideal|rxe|cx6|cx7: the NIC/host profile, as `fathom coll
//           --profile` sets it (the NIC's timing, the reduction's memory
//           bandwidth, rxe's retry) (default ideal, which the figures in
//           docs/PERFORMANCE.md before it existed ran; `fathom coll`'s
//           default is cx6)
//   ORDER   schedule|canonical: the engine's event order, as `fathom coll
//           --event-order` runs it in one process: schedule through the
//           world's driver, canonical through the distributed backend's
//           windows over one local process (dist_backend.h) (default
//           schedule)
//
// Across MPI processes (issue 30): `mpirun -np N coll_scale_bench ...` runs
// the same allreduce split as `mpirun -np N fathom coll ... --backend sim`
// does (transport/worlds/dist_backend.h), in the canonical order whatever
// ORDER says (the flow model across processes needs a PROFILE with a
// post-to-wire delay: cx6); under mpirun with one process, as without it.
// In the canonical order (ORDER canonical, or N > 1 processes) rank 0
// prints the run's lines (rank 0's own wall, CPU and RSS), the canonical
// trace digest, the events (each counted once), the windows and one line
// per process: the events its engine ran, its wall and CPU of the run, the
// time it spent in the exchanges between windows and its peak RSS.
//
// Why modelled by default: nccl-tests on 1024 GPUs gives each GPU its own
// send and receive buffers in its own HBM; one process holding all of them
// would need 1024 x 2 x 1 GiB = 2 TiB. The simulator's modelled mode moves
// the same packets and completions with no payload, which is what the time
// and bus bandwidth depend on.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "base/huge_pages.h"
#include "fabric/parallel/comm.h"
#include "fabric/sim/nic_profile.h"
#include "fabric/sim/pfc.h"
#include "topologies/builders.h"
#include "topologies/server.h"
#include "transport/collectives/nccl_tests.h"
#include "transport/collectives/report.h"
#include "transport/worlds/coll_profile.h"
#include "transport/worlds/dist_backend.h"
#include "transport/worlds/sim_world.h"

namespace {

double CpuSeconds(const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; }

struct Usage {
  double wall = 0, user = 0, sys = 0;
};

Usage Now() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return {
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(),
      CpuSeconds(ru.ru_utime), CpuSeconds(ru.ru_stime)};
}

// PROFILE and ORDER applied to the world's options as `fathom coll
// --profile P --event-order O` applies them (tools/cmd_coll.cc); false
// (after a line on stderr) for a name it does not know.
bool ApplyProfileAndOrder(const std::string& profile, const std::string& order,
                          fathom::transport::worlds::SimWorldOptions* opt) {
  auto coll = fathom::transport::worlds::FindCollProfile(profile);
  auto nic = fathom::sim::NicProfileNamed(profile);
  if (!coll.ok() || !nic.ok() || (order != "schedule" && order != "canonical")) {
    std::fprintf(stderr, "coll_scale_bench: PROFILE %s, ORDER schedule|canonical\n",
                 std::string(fathom::transport::worlds::kCollProfileNames).c_str());
    return false;
  }
  opt->network.nic = nic.value();
  opt->emulated.rxe_infinite_retry = coll->rxe_infinite_retry;
  opt->comm.host_reduce_bytes_per_s = coll->host_reduce_bytes_per_s;
  opt->profile = coll->name;
  opt->canonical_order = order == "canonical";
  return true;
}

double PeakRssMiB() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;
}

// The run split across processes (or the canonical order in one):
// ORDER canonical in one process, or the MPI job when mpirun started us.
struct Distributed {
  std::unique_ptr<fathom::parallel::Comm> comm;  // null: the default order, one process
  std::unique_ptr<fathom::transport::worlds::DistSimBackend> backend;  // after the world
  bool rank0 = true;
  bool refused = false;  // DistSimBackend refused the world (bad input: exit 2)
};

// Joins the MPI job when an MPI launcher started this process (its
// processes run the canonical order, `opt`'s canonical_order), or takes
// one local process for ORDER canonical, and silences every rank but 0.
// Exit code (2) on bad input, else -1. Real data (`data`) stays in one
// process: each process would hold only its ranks' buffers (`fathom coll`
// refuses it with the flow model too).
int SetUpDistributed(bool data, const std::string& order,
                     fathom::transport::worlds::SimWorldOptions* opt, Distributed* d) {
  using namespace fathom;
  if (parallel::LaunchedByMpi()) {
    auto joined = parallel::JoinMpi();
    if (!joined.ok()) {
      std::fprintf(stderr, "coll_scale_bench: started by an MPI launcher: %s\n",
                   joined.status().ToString().c_str());
      return 2;
    }
    d->comm = std::move(joined).value();
    d->rank0 = d->comm->rank() == 0;
    // Rank 0 speaks for the run; the others would repeat it.
    if (!d->rank0 && (std::freopen("/dev/null", "w", stdout) == nullptr ||
                      std::freopen("/dev/null", "w", stderr) == nullptr)) {
      return 1;
    }
    if (d->comm->size() == 1 && order != "canonical") d->comm.reset();  // as without mpirun
    if (d->comm != nullptr && d->comm->size() > 1 && data) {
      std::fprintf(stderr,
                   "coll_scale_bench: DATA data across %d processes: use modelled, or run with "
                   "data in one process\n",
                   d->comm->size());
      return 2;
    }
  } else if (order == "canonical") {
    d->comm = std::make_unique<parallel::LocalComm>();
  }
  opt->canonical_order = d->comm != nullptr;
  return -1;
}

// One allreduce through DistSimBackend: every process calls it.
fathom::transport::coll::RunOutcome RunDistributed(fathom::transport::worlds::SimWorld& world,
                                                   const fathom::transport::coll::CollSpec& spec,
                                                   const std::vector<const void*>& in,
                                                   const std::vector<void*>& out, Distributed* d) {
  using namespace fathom::transport;
  auto b = worlds::DistSimBackend::Create(&world, d->comm.get());
  if (!b.ok()) {
    coll::RunOutcome failed;
    failed.status = b.status();
    d->refused = true;
    return failed;
  }
  d->backend = std::move(b).value();
  if (fathom::Status s = d->backend->Admit(spec); !s.ok()) {
    coll::RunOutcome failed;
    failed.status = s;
    d->refused = true;
    return failed;
  }
  // One process (the only one with data): its local ranks are every rank.
  return d->backend->Run(spec, coll::DataType::kFloat32, coll::RedOp::kSum, in, out, nullptr);
}

// Rank 0 prints the digest, the events summed over the processes, the
// windows, and each process's line (`run_wall`, `run_cpu`: its own run's).
// Every process calls it.
void PrintDistributed(Distributed* d, double run_wall, double run_cpu) {
  using namespace fathom;
  if (d->backend == nullptr) return;
  const uint64_t events = d->backend->EventsSum();
  const parallel::RunStats& st = d->backend->stats();
  char line[320];
  std::snprintf(line, sizeof(line),
                "  process %d: %llu events run, run wall %.2f s, cpu %.2f s; in exchanges "
                "%.2f s wall (%.2f s cpu); peak RSS %.1f MiB\n",
                d->comm->rank(), static_cast<unsigned long long>(d->backend->local_events_run()),
                run_wall, run_cpu, st.sync_wall_s, st.sync_cpu_s, PeakRssMiB());
  const std::vector<std::string> lines = d->comm->Gather(line);
  if (!d->rank0) return;
  std::printf(
      "  canonical order, %d %s: trace digest %016llx, %llu events (each once), %llu windows "
      "of %.3f ns\n",
      d->comm->size(), d->comm->size() == 1 ? "process" : "processes",
      static_cast<unsigned long long>(d->backend->trace_digest()),
      static_cast<unsigned long long>(events), static_cast<unsigned long long>(st.windows),
      d->backend->window().ns());
  for (const std::string& l : lines) std::fputs(l.c_str(), stdout);
}

// The exit code every process returns: the worst of them. The backend goes
// first (it borrows the world, which main drops before `d`).
int FinishDistributed(Distributed* d, int code) {
  d->backend.reset();
  if (d->refused) code = 2;
  if (d->comm == nullptr || d->comm->size() == 1) return code;
  std::vector<int64_t> v{code};
  d->comm->AllMax(&v);
  return static_cast<int>(v[0]);
}

}  // namespace

int main(int argc, char** argv) {
  fathom::PreferHugePages(argv);  // base/huge_pages.h: as fathom itself runs
  using namespace fathom;
  using namespace fathom::transport::coll;
  using fathom::transport::worlds::SimWorld;
  using fathom::transport::worlds::SimWorldOptions;
  const uint64_t bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : uint64_t{1} << 30;
  const std::string preset = argc > 2 ? argv[2] : "large";
  const int ranks = argc > 3 ? std::atoi(argv[3]) : 0;
  const std::string algo = argc > 4 ? argv[4] : "ring";
  const std::string server = argc > 5 ? argv[5] : "h100";
  const std::string fabric = argc > 6 ? argv[6] : "lossless";
  const bool data = argc > 7 && std::string(argv[7]) == "data";
  const std::string model = argc > 8 ? argv[8] : "packet";
  const std::string profile = argc > 9 ? argv[9] : "ideal";
  const std::string order = argc > 10 ? argv[10] : "schedule";
  auto algorithm = ParseAlgorithm(algo);
  if (!algorithm.ok() || algorithm.value() == Algorithm::kAuto ||
      (fabric != "lossy" && fabric != "lossless") || (model != "packet" && model != "flow")) {
    std::fprintf(stderr,
                 "coll_scale_bench: ALGO ring|tree, FABRIC lossy|lossless, MODEL packet|flow\n");
    return 2;
  }
  const Usage u0 = Now();
  auto topology = topo::BuildPreset(preset);
  if (!topology.ok()) {
    std::fprintf(stderr, "coll_scale_bench: %s\n", topology.status().ToString().c_str());
    return 2;
  }
  SimWorldOptions opt;
  opt.nranks = ranks;
  opt.comm.modelled = !data;
  if (server != "none") {
    auto spec = topo::ServerPreset(server);
    if (!spec.ok()) {
      std::fprintf(stderr, "coll_scale_bench: %s\n", spec.status().ToString().c_str());
      return 2;
    }
    opt.server = spec.value();
    opt.comm.channels = spec->gpus;  // one channel per NIC, as `fathom coll` runs it
  }
  if (fabric == "lossless") {
    opt.lossless = true;
    opt.network.qos = sim::LosslessRoceQos();
    opt.comm.qp.traffic_class = sim::kLosslessRoceTrafficClass;
  }
  opt.network.flow_model = model == "flow";
  if (!ApplyProfileAndOrder(profile, order, &opt)) return 2;
  Distributed dist;
  if (const int code = SetUpDistributed(data, order, &opt, &dist); code >= 0) return code;
  auto world_or = SimWorld::Create(std::move(topology).value(), opt);
  if (!world_or.ok()) {
    std::fprintf(stderr, "coll_scale_bench: %s\n", world_or.status().ToString().c_str());
    return 2;
  }
  SimWorld& world = *world_or.value();
  const int n = world.nranks();
  CollSpec spec;
  spec.kind = CollKind::kAllReduce;
  spec.algorithm = algorithm.value();
  spec.nranks = n;
  spec.count = bytes / 4;
  std::vector<std::unique_ptr<RankBuffers>> bufs;
  std::vector<const void*> in;
  std::vector<void*> out;
  if (data) {
    for (int r = 0; r < n; ++r) {
      bufs.push_back(std::make_unique<RankBuffers>(CollKind::kAllReduce, n, r, DataType::kFloat32,
                                                   spec.count));
      bufs.back()->set_gpus_per_server(world.comm_options().gpus_per_server);
      bufs.back()->Fill(spec.count, false);
      in.push_back(bufs.back()->in());
      out.push_back(bufs.back()->out());
    }
  }
  const Usage u1 = Now();
  RunOutcome res = dist.comm != nullptr ? RunDistributed(world, spec, in, out, &dist)
                                        : world.Run(spec, DataType::kFloat32, RedOp::kSum, in, out);
  const Usage u2 = Now();
  int64_t wrong = -1;
  size_t reserved = 0, resident = 0, conns = 0;
  if (data) {
    wrong = 0;
    for (const auto& b : bufs) wrong += b->CountWrong(spec.count, RedOp::kSum, 0);
    for (int r = 0; r < n; ++r) {
      reserved += world.comm(r).StagingReservedBytes();
      resident += world.comm(r).StagingResidentBytes();
      conns += world.comm(r).conns().size();
    }
  }
  const double virt_us = (res.end - res.start).us();
  const Measurement m = Measure(CollKind::kAllReduce, n, bytes, virt_us, -1);
  std::printf(
      "coll_scale_bench: %s allreduce of %llu B per rank, %d ranks on %s, server %s, %s, "
      "channels %d, %s model, profile %s, %s order: status %s\n",
      algo.c_str(), static_cast<unsigned long long>(bytes), n, world.topology().name().c_str(),
      server.c_str(), fabric.c_str(), world.comm_options().channels, model.c_str(), profile.c_str(),
      dist.comm != nullptr ? "canonical" : "schedule",
      res.status.ok() ? "ok" : res.status.ToString().c_str());
  if (data) {
    std::printf("  real data: every rank's buffers in this process and moved; #wrong %lld\n",
                static_cast<long long>(wrong));
    const double mib = 1024.0 * 1024.0;
    std::printf(
        "  memory per rank: buffers %.2f MiB, staging reserved %.2f MiB (%.1f connections),"
        " staging resident after the run %.3f MiB\n",
        static_cast<double>(
            RankBuffers::BytesFor(CollKind::kAllReduce, n, DataType::kFloat32, spec.count)) /
            mib,
        static_cast<double>(reserved) / n / mib, static_cast<double>(conns) / n,
        static_cast<double>(resident) / n / mib);
  } else {
    std::printf(
        "  modelled: timing only, no payload moves and nothing is checked (nccl-tests' "
        "buffers for every rank would be %.1f GiB)\n",
        static_cast<double>(n) * 2.0 * static_cast<double>(bytes) / (1u << 30));
  }
  std::printf("  virtual time %.1f us, algbw %.2f GB/s, busbw %.2f GB/s\n", virt_us, m.algbw_gbs,
              m.busbw_gbs);
  std::printf("  setup: wall %.2f s, cpu %.2f s (user %.2f, sys %.2f)\n", u1.wall - u0.wall,
              (u1.user - u0.user) + (u1.sys - u0.sys), u1.user - u0.user, u1.sys - u0.sys);
  std::printf(
      "  run:   wall %.2f s, cpu %.2f s (user %.2f, sys %.2f); events %llu (%.2f M per cpu "
      "s)\n",
      u2.wall - u1.wall, (u2.user - u1.user) + (u2.sys - u1.sys), u2.user - u1.user,
      u2.sys - u1.sys, static_cast<unsigned long long>(world.engine().events_dispatched()),
      static_cast<double>(world.engine().events_dispatched()) /
          std::max(1e-9, (u2.user - u1.user) + (u2.sys - u1.sys)) / 1e6);
  std::printf("  peak RSS %.1f MiB\n", PeakRssMiB());
  PrintDistributed(&dist, u2.wall - u1.wall, (u2.user - u1.user) + (u2.sys - u1.sys));
  return FinishDistributed(&dist, res.status.ok() && wrong <= 0 ? 0 : 1);
}
