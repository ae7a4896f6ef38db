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
// --algo auto picks ring or tree per size from the alpha/beta the world
// computes (transport/collectives/cost_model.h); --profile sets the NIC/host
// profile (transport/worlds/coll_profile.h: the host's reduction time);
// --scenario honours the scenario's sections or refuses them
// (SimWorld::CreateFromScenario) and checks its expect block
// (transport/worlds/coll_expect.h); `train` runs its training loop
// (transport/worlds/training.h); --json rows carry the fabric's counters.
// --trace writes one Chrome trace of every rank's steps; with verbs rank 0
// gathers the ranks' steps through the bootstrap after the run, or, after a
// failure, from the reports the ranks sent (VerbsBackend::WriteTrace).
// This file declares the flags (tools/coll_flags.h checks them) and builds
// the world and the sweep they ask for (transport/worlds).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/rng.h"
#include "fabric/parallel/comm.h"
#include "fabric/scenario/scenario.h"
#include "fabric/sim/nic_profile.h"
#include "fabric/sim/pfc.h"
#include "fabric/sim/roce_class.h"
#include "tools/coll_alltoallv.h"
#include "tools/coll_flags.h"
#include "tools/coll_server.h"
#include "tools/command.h"
#include "tools/train_run.h"
#include "topologies/builders.h"
#include "topologies/spec.h"
#include "transport/collectives/launcher_env.h"
#include "transport/collectives/nccl_tests.h"
#include "transport/verbs/verbs_device.h"
#include "transport/worlds/coll_expect.h"
#include "transport/worlds/dist_backend.h"
#include "transport/worlds/sim_backend.h"
#include "transport/worlds/sweep.h"
#include "transport/worlds/training.h"
#include "transport/worlds/verbs_backend.h"

namespace fathom::tools {
namespace {

using namespace fathom::transport::coll;    // NOLINT: one tool, its libraries
using namespace fathom::transport::worlds;  // NOLINT

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

// The expectations' verdict on a run (coll_expect.h): prints each unmet
// item on stderr; exit 1 when one is unmet, when the run failed and the
// block does not say it should, or on a #wrong.
int ExpectVerdict(const proto::ExpectSpec& e, const CollFacts& f, bool wrong, bool json) {
  const std::vector<std::string> misses = CheckCollExpect(e, f);
  for (const std::string& m : misses) std::fprintf(stderr, "fathom coll: %s\n", m.c_str());
  if (!misses.empty() || wrong) return kExitFailure;
  if (f.failed && !ExpectsFailure(e)) return kExitFailure;
  if (!json) std::printf("# expectations met\n");
  return kExitOk;
}

// `fathom coll train --scenario FILE`: the scenario's training loop on
// `world` (tools/train_run.h, shared with `fathom sim`).
int RunTrainingLoop(const CollOptions& o, const sim::LoadedScenario& sc, SimWorld* world,
                    const proto::ExpectSpec* expect, parallel::Comm* comm) {
  return RunTrainingScenario("fathom coll", sc, world, o.json, expect, comm);
}

int RunSimOn(const CollOptions& o, const CollParsed& p, parallel::Comm* comm);

// This process's command line, for the check that every MPI process runs
// the same (/proc/self/cmdline: argv, NUL-separated).
int64_t CommandLineHash() {
  std::FILE* f = std::fopen("/proc/self/cmdline", "rb");
  uint64_t h = 0x51ed;
  if (f != nullptr) {
    for (int c = std::fgetc(f); c != EOF; c = std::fgetc(f)) h = Mix64(h ^ static_cast<uint8_t>(c));
    std::fclose(f);
  }
  return static_cast<int64_t>(h >> 1);
}

// `fathom coll --backend sim`: one process in the default event order, or
// (--event-order canonical, or under mpirun with several processes) the
// canonical order through DistSimBackend (issue 30).
int RunSim(const CollOptions& o, const CollParsed& p) {
  std::unique_ptr<parallel::Comm> comm;
  if (parallel::LaunchedByMpi()) {
    auto joined = parallel::JoinMpi();
    if (!joined.ok()) {
      std::fprintf(stderr, "fathom coll: started by an MPI launcher: %s\n",
                   joined.status().message().c_str());
      return kExitUsage;
    }
    comm = std::move(joined).value();
  }
  const int32_t procs = comm != nullptr ? comm->size() : 1;
  const bool rank0 = comm == nullptr || comm->rank() == 0;
  // Rank 0 speaks for the run; the others would repeat it.
  if (!rank0 && (std::freopen("/dev/null", "w", stdout) == nullptr ||
                 std::freopen("/dev/null", "w", stderr) == nullptr)) {
    return kExitFailure;
  }
  std::string refusal;
  if (!o.event_order.empty() && o.event_order != "schedule" && o.event_order != "canonical") {
    refusal = "--event-order '" + o.event_order + "': schedule or canonical";
  } else if (o.event_order == "schedule" && procs > 1) {
    refusal = "--event-order schedule: the schedule order needs one process (" +
              std::to_string(procs) + " were started): use canonical";
  } else if (p.flow_model && procs > 1 && !o.modelled) {
    // Each process replicates the flow model, not the ranks' buffers: a
    // message's bytes would have to cross with it (docs/FLOW.md).
    refusal = "--fabric-model flow across " + std::to_string(procs) +
              " processes moves no data between them: add --modelled (timing only), or run "
              "with data in one process";
  }
  if (comm != nullptr && procs > 1) {
    std::vector<int64_t> lo{CommandLineHash()}, hi{lo[0]};
    comm->AllMin(&lo);
    comm->AllMax(&hi);
    if (lo[0] != hi[0]) {
      refusal = "the " + std::to_string(procs) +
                " processes disagree on the run (their command lines differ): each must run the "
                "same";
    }
  }
  if (!refusal.empty()) {
    std::fprintf(stderr, "fathom coll: %s\n", refusal.c_str());
    return kExitUsage;
  }
  if (comm == nullptr && o.event_order == "canonical") {
    comm = std::make_unique<parallel::LocalComm>();
  }
  if (comm != nullptr && procs == 1 && o.event_order != "canonical") {
    comm.reset();  // one process under mpirun: as without it
  }
  const int code = RunSimOn(o, p, comm.get());
  if (comm == nullptr || comm->size() == 1) return code;
  std::vector<int64_t> agreed{code};
  comm->AllMax(&agreed);
  return static_cast<int>(agreed[0]);
}

int RunSimOn(const CollOptions& o, const CollParsed& p, parallel::Comm* comm) {
  auto usage = [](const Status& s) {
    std::fprintf(stderr, "fathom coll: %s\n", s.message().c_str());
    return kExitUsage;
  };
  SimWorldOptions wopt;
  wopt.nranks = p.sim_ranks;
  wopt.seed = o.seed;
  wopt.canonical_order = comm != nullptr;
  wopt.comm = CommFromFlags(o, p);
  // The profile: --profile, or the scenario's transport.nic_profile (both:
  // they must agree). It sets the NIC's timing (NetworkConfig::nic) and the
  // host's reduction (coll_profile.h). A scenario is the whole description
  // of its fabric, read as `fathom sim` reads it (issue 27): where it names
  // no profile and --profile is not given, the profile is fathom sim's
  // default, ideal, not coll's cx6.
  CollProfile profile = p.profile;
  double reduce_bytes_per_s = p.host_reduce_bytes_per_s;
  bool lossless = p.lossless;
  std::optional<sim::LoadedScenario> scenario;
  if (!o.scenario.empty()) {
    auto sc = sim::LoadScenario(o.scenario);
    if (!sc.ok()) return usage(sc.status());
    scenario = std::move(sc).value();
    std::string named = scenario->spec.transport().nic_profile();
    if (named.empty() && o.given.count("--profile") == 0) named = "ideal";
    // Its network block decides the class (lossy where it is silent), unless
    // --fabric is given; its network.qos/ecn and transport.dcqcn still win.
    if (o.given.count("--fabric") == 0) lossless = false;
    if (!named.empty() && named != profile.name) {
      if (o.given.count("--profile") > 0) {
        return usage(InvalidArgument("--profile " + profile.name + ": the scenario " + o.scenario +
                                     " names transport.nic_profile " + named +
                                     "; leave one out or make them agree"));
      }
      auto from_scenario = FindCollProfile(named);
      if (!from_scenario.ok()) return usage(from_scenario.status());
      profile = from_scenario.value();
      if (o.given.count("--host-mem-gbs") == 0)
        reduce_bytes_per_s = profile.host_reduce_bytes_per_s;
    }
  }
  auto nic = sim::NicProfileNamed(profile.name);
  if (!nic.ok()) return usage(nic.status().WithContext("--profile"));
  wopt.network.nic = nic.value();
  wopt.emulated.rxe_infinite_retry = o.rxe || profile.rxe_infinite_retry;
  wopt.comm.host_reduce_bytes_per_s = reduce_bytes_per_s;
  wopt.profile = profile.name;
  wopt.lossless = lossless;
  if (lossless) {
    // RoCE's lossless class (priority 3 with PFC) with ECN marking and
    // DCQCN (roce_class.h), and the QPs on it, ECN-capable, unless --tc says
    // otherwise; a scenario's network.qos, network.ecn and transport.dcqcn
    // replace their parts.
    wopt.network = sim::WithLosslessRoceClass(wopt.network);
    if (o.given.count("--tc") == 0 && std::getenv("NCCL_IB_TC") == nullptr) {
      wopt.comm.qp.traffic_class = sim::kLosslessRoceTrafficClass;
    }
  }
  if (p.timeout_s > 0) wopt.watchdog = Picoseconds::FromSeconds(p.timeout_s);
  wopt.verbs_faults = p.verbs_faults;
  if (p.flow_model) {
    wopt.network.flow_model = true;
    if (scenario && (scenario->spec.faults_size() > 0 || scenario->spec.verbs_faults_size() > 0)) {
      return usage(InvalidArgument("--fabric-model flow: the scenario " + o.scenario +
                                   " has faults, which the flow model does not model; use "
                                   "--fabric-model packet"));
    }
    if (lossless) {
      std::fprintf(stderr,
                   "fathom coll: note: --fabric-model flow: flows lose nothing and share links "
                   "max-min fairly; the lossless class's PFC pauses, ECN marks and DCQCN rates "
                   "are not modelled (docs/FLOW.md)\n");
    }
  }
  // The server tier (--server): GPUs behind their NICs, NVLink inside; one
  // channel per NIC unless --channels says otherwise.
  auto server = ServerFromFlags(o, o.scenario.empty() ? o.topology : "");
  if (!server.ok()) return usage(server.status());
  wopt.server = *server;
  if (wopt.server && o.given.count("--channels") == 0) wopt.comm.channels = wopt.server->gpus;
  // alltoall, gather, scatter: every pair of ranks connected.
  wopt.comm.all_pairs = NeedsAllPairs(p.kind);
  std::unique_ptr<SimWorld> world;
  if (scenario) {
    const sim::LoadedScenario* sc = &*scenario;
    std::vector<std::string> notes;
    auto w = SimWorld::CreateFromScenario(*sc, wopt, &notes);
    if (!w.ok()) return usage(w.status());
    for (const std::string& n : notes) std::fprintf(stderr, "fathom coll: note: %s\n", n.c_str());
    world = std::move(w).value();
  } else {
    auto t = o.topology.find(".yaml") != std::string::npos ? topo::LoadTopologyFile(o.topology)
                                                           : topo::BuildPreset(o.topology);
    if (!t.ok()) return usage(t.status().WithContext("--topology"));
    auto w = SimWorld::Create(std::move(t).value(), wopt);
    if (!w.ok()) return usage(w.status());
    world = std::move(w).value();
  }
  const proto::ExpectSpec* expect = nullptr;
  if (scenario) {
    if (Status s = CheckCollExpectFields(*scenario, world->nranks()); !s.ok()) return usage(s);
    if (scenario->spec.has_expect()) expect = &scenario->spec.expect();
    const bool training =
        scenario->spec.workload().pattern() == proto::WorkloadSpec::PATTERN_TRAINING;
    if (training && o.op != "train") {
      return usage(scenario->map.Error(
          "workload.pattern",
          "training: run its loop with fathom coll train --scenario " + o.scenario));
    }
    if (!training && o.op == "train") {
      return usage(InvalidArgument("train: the scenario " + o.scenario +
                                   " has no training workload (workload.pattern: training)"));
    }
    if (training) return RunTrainingLoop(o, *scenario, world.get(), expect, comm);
  }
  SimBackend sim_backend(world.get());
  std::unique_ptr<DistSimBackend> dist;
  if (comm != nullptr) {
    auto b = DistSimBackend::Create(world.get(), comm);
    if (!b.ok()) return usage(b.status());
    dist = std::move(b).value();
  }
  Backend& backend = dist ? static_cast<Backend&>(*dist) : sim_backend;
  SweepOptions sweep = SweepFromFlags(o, p);
  if (Status s = AllToAllVMatrices(o, world->nranks(), &sweep); !s.ok()) return usage(s);
  SweepOutcome outcome;
  sweep.outcome = &outcome;
  const SweepResult result = RunSweep(sweep, backend, world->comm_options());
  // A sweep refused as bad input (said why) prints no run statistics; the
  // processes agree on it (only rank 0 writes a trace, which may fail).
  std::vector<int64_t> usage_anywhere{result == SweepResult::kUsage ? 1 : 0};
  if (dist) comm->AllMax(&usage_anywhere);
  if (dist && usage_anywhere[0] == 0) {
    parallel::RunStats mine = dist->stats();
    std::vector<uint64_t> v{mine.windows,
                            mine.shipped,
                            mine.shipped_bytes,
                            dist->flow_posts_shipped(),
                            dist->flow_acks_shipped(),
                            dist->flow_arrivals_shipped(),
                            dist->flow_posts_kept()};
    comm->AllSum(&v);
    // Each process's own share of the work and of the waiting: the events
    // its engine ran (replicas included) and the wall time it spent in the
    // exchanges between windows (blocked on the slowest process, mostly) and
    // the CPU time it used there (polling or yielding while it waits).
    // With the flow model, the flows its replica started and how many
    // shared a link (a component re-filled) or passed outside the sharing.
    char mine_line[320];
    int at =
        std::snprintf(mine_line, sizeof(mine_line),
                      "parallel   process %d: %llu events run, %.3f s in exchanges (%.3f s of CPU)",
                      comm->rank(), static_cast<unsigned long long>(dist->local_events_run()),
                      mine.sync_wall_s, mine.sync_cpu_s);
    if (const sim::FlowModel::Stats* fs = dist->flow_stats(); fs != nullptr) {
      std::snprintf(mine_line + at, sizeof(mine_line) - static_cast<size_t>(at),
                    "; flow model: %llu flows started, %llu passes, %llu component re-fills "
                    "(largest %llu flows)",
                    static_cast<unsigned long long>(fs->flows),
                    static_cast<unsigned long long>(fs->passes),
                    static_cast<unsigned long long>(fs->recomputes),
                    static_cast<unsigned long long>(fs->largest_component));
      at = static_cast<int>(std::strlen(mine_line));
    }
    std::snprintf(mine_line + at, sizeof(mine_line) - static_cast<size_t>(at), "\n");
    const std::vector<std::string> lines = comm->Gather(mine_line);
    if (comm->rank() == 0 && !o.json) {
      std::printf("# trace digest %016llx (canonical event order, %d %s)\n",
                  static_cast<unsigned long long>(dist->trace_digest()), comm->size(),
                  comm->size() == 1 ? "process" : "processes");
      std::fflush(stdout);
      std::fprintf(stderr,
                   "parallel   %d processes, window %.3f ns: %llu windows, %llu packets (%llu "
                   "bytes) between processes\n",
                   comm->size(), dist->window().ns(),
                   static_cast<unsigned long long>(v[0] / static_cast<uint64_t>(comm->size())),
                   static_cast<unsigned long long>(v[1]), static_cast<unsigned long long>(v[2]));
      if (p.flow_model) {
        std::fprintf(stderr,
                     "parallel   flow model: %llu posted WRs and %llu ACKs between processes, "
                     "%llu arrivals; %llu one-packet posts kept in their process\n",
                     static_cast<unsigned long long>(v[3]), static_cast<unsigned long long>(v[4]),
                     static_cast<unsigned long long>(v[5]), static_cast<unsigned long long>(v[6]));
      }
      for (const std::string& l : lines) std::fputs(l.c_str(), stderr);
    }
  }
  if (expect == nullptr || result == SweepResult::kUsage) return ExitCode(result);
  CollFacts f;
  f.rows = outcome.rows;
  f.failed = outcome.failed;
  f.hung = outcome.hung;
  f.error_status = outcome.error_status;
  f.error_time_us = outcome.error_time_us;
  f.stalled_ranks = outcome.stuck_ranks;
  bool wrong = false;
  for (const ReportRow& row : outcome.rows) {
    wrong = wrong || row.out_of_place.wrong > 0 || row.in_place.wrong > 0;
  }
  return ExpectVerdict(*expect, f, wrong, o.json);
}

int RunVerbs(const CollOptions& o, const CollParsed& p) {
  auto usage = [](const std::string& s) {
    std::fprintf(stderr, "fathom coll: %s\n", s.c_str());
    return kExitUsage;
  };
  if (o.modelled || o.rxe || !o.scenario.empty() || o.counters) {
    return usage("--modelled, --rxe, --scenario and --counters are for --backend sim");
  }
  for (const char* flag : {"--profile", "--fabric", "--host-mem-gbs"}) {
    if (o.given.count(flag) > 0) {
      return usage(std::string(flag) +
                   " is for --backend sim (a real NIC and host have their own timing)");
    }
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
  // alltoall, gather, scatter: every pair of ranks connected, as on sim.
  wopt.comm.all_pairs = NeedsAllPairs(p.kind);
  // Several ranks per node: NCCL's hierarchical rings and trees
  // (schedule.h). The peers on one node talk over the node's own RDMA
  // device, QP to QP: rxe loops a packet whose destination address is its
  // own back into its receive path (rxe_net.c, rxe_loopback), a ConnectX
  // NIC turns it around in its own switch — real verbs, standing in for
  // NVLink (which a host without GPUs does not have).
  if (o.ranks_per_node < 0 || (o.ranks_per_node > 1 && o.nranks % o.ranks_per_node != 0)) {
    return usage("--ranks-per-node " + std::to_string(o.ranks_per_node) +
                 ": must divide --nranks " + std::to_string(o.nranks) +
                 " (ranks are node-major: rank = node * G + local rank; 0 or 1: flat)");
  }
  wopt.comm.gpus_per_server = o.ranks_per_node > 1 ? o.ranks_per_node : 0;
  wopt.watchdog = Picoseconds::FromSeconds(p.timeout_s > 0 ? p.timeout_s : 30);
  wopt.verbs_faults = p.verbs_faults;
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
  SweepOptions sweep = SweepFromFlags(o, p);
  if (Status s = AllToAllVMatrices(o, o.nranks, &sweep); !s.ok()) return usage(s.message());
  int rc = ExitCode(RunSweep(sweep, backend, wopt.comm));
  if (Status s = world_or.value()->Finish(); !s.ok() && rc == kExitOk) {
    std::fprintf(stderr, "fathom coll: rank %d: %s\n", o.rank, s.ToString().c_str());
    rc = kExitFailure;
  }
  return rc;
}

int Run(CollOptions o) {
  if (Status s = ApplyCollEnvironment(&o); !s.ok()) {
    std::fprintf(stderr, "fathom coll: %s\n", s.message().c_str());
    return kExitUsage;
  }
  if (o.op == "train" && (o.scenario.empty() || o.backend != "sim")) {
    std::fprintf(stderr,
                 "fathom coll: train runs a scenario's training loop: --scenario FILE.yaml "
                 "(workload.pattern: training), --backend sim\n");
    return kExitUsage;
  }
  std::vector<std::string> notes;
  // train: the other flags are checked as for a sweep (the collectives'
  // sizes and groups are the scenario's).
  CollOptions checked = o;
  if (o.op == "train") checked.op = "allreduce";
  if (Status s = CheckAllToAllVFlags(o); !s.ok()) {
    std::fprintf(stderr, "fathom coll: %s\n", s.message().c_str());
    return kExitUsage;
  }
  auto parsed = ParseCollFlags(checked, &notes);
  if (!parsed.ok()) {
    std::fprintf(stderr, "fathom coll: %s\n", parsed.status().message().c_str());
    return kExitUsage;
  }
  for (const std::string& n : notes) std::fprintf(stderr, "fathom coll: note: %s\n", n.c_str());
  if (o.backend == "sim" && o.given.count("--ranks-per-node") > 0) {
    std::fprintf(stderr,
                 "fathom coll: --ranks-per-node is for --backend verbs (sim: --server places "
                 "ranks on servers)\n");
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
        "broadcast, barrier, alltoall, alltoallv, sendrecv, reduce, gather, scatter)",
        [](CLI::App* sub) -> std::function<int()> {
          auto o = std::make_shared<CollOptions>();
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
          sub->add_option("op", o->op,
                          "allreduce|allgather|reduce_scatter|broadcast|barrier|alltoall|"
                          "alltoallv|sendrecv|reduce|gather|scatter (nccl-tests' *_perf; "
                          "alltoallv: --matrix/--skew), or train: the "
                          "--scenario's training loop (workload.pattern: training; iterations of "
                          "compute, collectives over rank groups and checkpoints, timing only; "
                          "prints the iteration times p50/p99/max, the first failing iteration "
                          "and the wall time)")
              ->required();
          sub->add_option("--backend", o->backend, "sim (default) or verbs");
          sub->add_option("--topology", o->topology,
                          "sim: PRESET or topology FILE.yaml (default small)");
          sub->add_option("--scenario", o->scenario,
                          "sim: scenario FILE.yaml: its topology, network block, transport "
                          "block (message_bytes = the chunk), faults and verbs_faults; a "
                          "send/read opcode is an error; its workload is replaced by OP (train: "
                          "its training loop runs). Its expect block is checked (coll_sizes "
                          "busbw/time bounds, stalled_ranks, coll_error, coll_hang, "
                          "first_error_us, no_error_surfaced; training: first_failed_iteration, "
                          "iterations_completed, iteration_p50_us, iteration_p99/max_at_most_us): "
                          "each miss prints expected vs got and exits 1; a failed run exits 0 "
                          "when the block expects it; fathom sim's items are refused");
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
          sub->add_option("-r,--root", o->root,
                          "root of broadcast, reduce, gather, scatter (default 0)");
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
                          "auto|ring|tree (allreduce; default NCCL_ALGO, else auto: the cheaper "
                          "by NCCL's model with the alpha/beta of this fabric, printed in the "
                          "header)");
          sub->add_option("--channels", o->channels,
                          "rings (channels): connections per peer, one RC QP each unless "
                          "--qps-per-connection (default 1; --server: one per NIC)");
          sub->add_option("--qps-per-connection", o->qps_per_connection,
                          "RC QPs per connection across the network, 1..128 (default "
                          "NCCL_IB_QPS_PER_CONNECTION, else 1, NCCL's default): each its own "
                          "UDP source port, so ECMP can put them on different paths; peers on "
                          "one server keep one");
          sub->add_option("--split-data-on-qps", o->split_data_on_qps,
                          "how a connection's messages use its QPs: 0 whole messages "
                          "round-robin (default NCCL_IB_SPLIT_DATA_ON_QPS, else 0, NCCL's "
                          "since 2.20), 1 every message split over all of them in 128-byte "
                          "multiples (NCCL 2.18/2.19's default)");
          sub->add_option("--chunk", o->chunk, "chunk / staging slot size (default 512K)");
          sub->add_option("--slots", o->slots, "staging slots per connection (default 4)");
          sub->add_option("--timeout", o->timeout_s,
                          "watchdog: seconds without progress (sim: virtual, default twice "
                          "the retry budget (retry_cnt + 1) x 4.096 us x 2^ib-timeout, or twice "
                          "the NIC profile's time to IBV_WC_RETRY_EXC_ERR when longer (cx6 at "
                          "ib-timeout 14: 3.66 s), at least 1; "
                          "verbs: wall, default 30; rank 0 prints every rank's view)");
          sub->add_option("--ib-timeout", o->ib_timeout,
                          "QP local ACK timeout (default NCCL_IB_TIMEOUT, else 14)");
          sub->add_option("--retry-cnt", o->retry_cnt,
                          "QP retry_cnt (default NCCL_IB_RETRY_CNT, else 7)");
          sub->add_option("--tc", o->tc, "GRH traffic class (default NCCL_IB_TC, else 0)");
          sub->add_option("--mtu", o->mtu, "force the path MTU in bytes (0 = negotiate)");
          sub->add_option(
                 "--verbs-fault", o->verbs_faults,
                 "inject a fault at the verbs API (repeatable; ';' separates several; a "
                 "scenario's verbs_faults list adds its own): "
                 "KIND:rank=N[,qp=I|qpn=0xN|peer=P][,at=T][,after=N][,count=N][,...]. KIND: "
                 "fail_post (the post returns error=ENOMEM|EAGAIN|EINVAL|EFAULT|EPERM, "
                 "queue=send|recv), delay_completions (delay=T), swallow_error (error "
                 "completions never reach the library: a hang the watchdog must find, "
                 "CASES.md 20), qp_error (QP to ERR: WRs flush), async_event "
                 "(event=QP_FATAL|PORT_ERR|...). qp: the rank's N-th QP; none of qp/qpn/peer: "
                 "every QP. at: from time T (ns|us|ms|s; sim: virtual, verbs: since start); "
                 "after: N posts (fail_post, qp_error, async_event) or completions pass first. "
                 "e.g. 'swallow_error:rank=3,qp=0,after=10'")
              ->allow_extra_args(false)
              ->take_all();
          sub->add_flag("--rxe", o->rxe, "sim: rxe semantics (retry_cnt 7 = forever)");
          sub->add_flag("--modelled", o->modelled,
                        "sim: move no bytes (timing only, no check; for huge runs)");
          sub->add_option("--seed", o->seed, "sim: seed (default 1)");
          sub->add_option("--profile", o->profile,
                          "sim: NIC/host profile ideal|rxe|cx6|cx7 (default cx6: ConnectX-6, "
                          "0.8 us per message; with --scenario, its transport.nic_profile, else "
                          "ideal): the NIC timing and retransmission of fathom sim's profile of "
                          "that name, and the host's reductions. ideal: no NIC or host time (the "
                          "simulator's original figures). rxe: rxe retry semantics and "
                          "reductions at a CPU socket's DRAM bandwidth (204.8 GB/s); cx6 / cx7: "
                          "reductions at an A100's (2039 GB/s) / H100's (3350 GB/s) HBM "
                          "bandwidth");
          sub->add_option(
              "--fabric", o->fabric,
              "sim: the RoCE class: lossless (default: priority 3 with PFC, ECN "
              "marking at 150-1500 KB of queue (Pmax 1%) and DCQCN at the mlx5 defaults, the QPs "
              "on DSCP 26 with ECT(0) unless --tc or NCCL_IB_TC is given) or lossy "
              "(drop-tail, no ECN: the simulator's original fabric; --fabric lossy "
              "--profile ideal gives the original figures). With --scenario, the "
              "scenario's network block (lossy where it is silent) unless --fabric is "
              "given; its network.qos/ecn and transport.dcqcn win");
          sub->add_option("--host-mem-gbs", o->host_mem_gbs,
                          "sim: a rank's memory bandwidth for reductions in GB/s (default: the "
                          "profile's; 0 = reductions take no time)");
          sub->add_flag("--counters", o->counters,
                        "sim: after each size row, the fabric's counters for that size (always "
                        "in --json)");
          sub->add_option("--server", o->server,
                          "sim: the server tier: auto (default: h100 on the small, medium and "
                          "large levels and medium:rail, large:rail, none elsewhere), none (one "
                          "rank per NIC, flat), a100, "
                          "h100, b200 (8 GPUs on NVSwitch, one NIC per GPU on its rail: ranks "
                          "are GPUs, peers on one server talk over NVLink, rings and trees are "
                          "hierarchical, --channels defaults to one per NIC; under mpirun each "
                          "server stays whole in one process)");
          sub->add_option("--nvlink-gbs", o->nvlink_gbs,
                          "sim: NVLink bandwidth per GPU, GB/s one way (default: the --server "
                          "preset's: a100 300, h100 450, b200 900)");
          sub->add_option("--gpudirect", o->gpudirect,
                          "sim: GPUDirect RDMA on (default) or off (NIC transfers bounce through "
                          "host memory over the PCIe switch's uplink)");
          sub->add_option("--rails", o->rails,
                          "sim: rail wiring, the NIC of each GPU of a server (default "
                          "0,1,...,7; -1 = none, which is an error)");
          sub->add_option("--matrix", o->matrix,
                          "alltoallv: size matrix FILE, one line per sending rank, one size per "
                          "receiving rank (bytes: 8, 64K, 1M; spaces or commas; # comments); the "
                          "size column is the mean row and busbw the busiest rank's bytes to or "
                          "from the others over the time; without --matrix or --skew: uniform, "
                          "-b/-e bytes per rank");
          sub->add_option("--skew", o->skew,
                          "alltoallv: a mixture-of-experts-like matrix from this seed for each "
                          "-b/-e size (bytes each rank sends): receivers' shares follow a Zipf "
                          "law over a seeded popularity order, jittered per sender");
          sub->add_option("--zipf", o->zipf, "alltoallv --skew: the Zipf exponent (default 1)");
          sub->add_option("--ranks-per-node", o->ranks_per_node,
                          "verbs: G consecutive ranks share a node (rank = node * G + local "
                          "rank; G divides --nranks): the rings and trees are hierarchical, as "
                          "--server's on sim, and peers on one node talk over that node's RDMA "
                          "device, QP to QP (rxe loops them back); 0 or 1: flat (default)");
          sub->add_option("--event-order", o->event_order,
                          "sim: schedule (default: ties in time go in schedule order) or "
                          "canonical (time, kind, component; the order a run split across MPI "
                          "processes takes, mpirun -np N fathom coll ... --backend sim, which "
                          "prints its trace digest; train: a collective starts at the window "
                          "boundary after the one before it, as across processes; "
                          "docs/PARALLEL.md)");
          sub->add_option("--fabric-model", o->fabric_model,
                          "sim: packet (default: every packet through ports and switches) or "
                          "flow (each message one flow on its QP's route, links shared max-min "
                          "fairly, lossless; no faults or PFC/ECN/DCQCN dynamics; under mpirun "
                          "timing only, --modelled; for thousands of ranks, docs/FLOW.md)");
          sub->add_flag("--json", o->json, "print one JSON object");
          sub->add_option("--trace", o->trace,
                          "write a Chrome trace / Perfetto JSON of every rank's steps (verbs: "
                          "rank 0 gathers every rank's into FILE, on one timeline aligned at "
                          "the setup barrier; after a failed run too, from the ranks' reports, "
                          "and each rank > 0 also writes all of its own to FILE.<rank>)");
          return [o, sub] {
            for (const char* flag :
                 {"--ranks",      "--rank",      "--nranks",       "--bootstrap", "--ib-timeout",
                  "--retry-cnt",  "--channels",  "--gid-index",    "--tc",        "--ib-dev",
                  "--ib-port",    "--algo",      "--timeout",      "-b",          "-e",
                  "--profile",    "--fabric",    "--host-mem-gbs", "--chunk",     "--server",
                  "--nvlink-gbs", "--gpudirect", "--rails",        "--matrix",    "--skew",
                  "--zipf"}) {
              if (sub->count(flag) > 0) o->given.insert(flag);
            }
            if (sub->count("--ranks-per-node") > 0) o->given.insert("--ranks-per-node");
            for (const char* flag : {"--qps-per-connection", "--split-data-on-qps"}) {
              if (sub->count(flag) > 0) o->given.insert(flag);
            }
            return Run(*o);
          };
        },
        40});

}  // namespace fathom::tools
