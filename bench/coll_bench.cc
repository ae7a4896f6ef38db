// Collective benchmark in the simulator: ring allreduce of SIZE over a preset
// (default: 1 GiB over the seed's large level, 1024 ranks on a k=16 fat-tree)
// in modelled-bytes mode. Prints wall time, peak memory, virtual time,
// events and the bus bandwidth. Usage: coll_bench [BYTES] [PRESET] [ALGO].
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "topologies/builders.h"
#include "transport/collectives/report.h"
#include "transport/worlds/sim_world.h"

int main(int argc, char** argv) {
  using namespace fathom;
  using namespace fathom::transport::coll;
  using fathom::transport::worlds::SimWorld;
  using fathom::transport::worlds::SimWorldOptions;
  const uint64_t bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : uint64_t{1} << 30;
  const std::string preset = argc > 2 ? argv[2] : "large";
  const std::string algo = argc > 3 ? argv[3] : "ring";
  const auto t0 = std::chrono::steady_clock::now();
  auto topology = topo::BuildPreset(preset);
  if (!topology.ok()) {
    std::fprintf(stderr, "coll_bench: %s\n", topology.status().ToString().c_str());
    return 2;
  }
  SimWorldOptions opt;
  opt.comm.modelled = true;
  opt.comm.chunk_bytes = 1 << 20;
  auto world_or = SimWorld::Create(std::move(topology).value(), opt);
  if (!world_or.ok()) {
    std::fprintf(stderr, "coll_bench: %s\n", world_or.status().ToString().c_str());
    return 2;
  }
  SimWorld& world = *world_or.value();
  const auto t1 = std::chrono::steady_clock::now();
  CollSpec spec;
  spec.kind = CollKind::kAllReduce;
  spec.algorithm = ParseAlgorithm(algo).value();
  spec.nranks = world.nranks();
  spec.count = bytes / 4;
  RunOutcome res = world.Run(spec, DataType::kFloat32, RedOp::kSum, {}, {});
  const auto t2 = std::chrono::steady_clock::now();
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  const double setup_s = std::chrono::duration<double>(t1 - t0).count();
  const double run_s = std::chrono::duration<double>(t2 - t1).count();
  const double virt_us = (res.end - res.start).us();
  const Measurement m = Measure(CollKind::kAllReduce, world.nranks(), bytes, virt_us, -1);
  std::printf(
      "coll_bench: %s allreduce of %llu B, %d ranks on %s: status %s\n"
      "  virtual time %.1f us, algbw %.2f GB/s, busbw %.2f GB/s\n"
      "  wall: setup %.2f s, run %.2f s; events %llu (%.2f M/s); peak pending events %zu; "
      "peak RSS %.1f MiB\n",
      algo.c_str(), static_cast<unsigned long long>(bytes), world.nranks(),
      world.topology().name().c_str(), res.status.ok() ? "ok" : res.status.ToString().c_str(),
      virt_us, m.algbw_gbs, m.busbw_gbs, setup_s, run_s,
      static_cast<unsigned long long>(world.engine().events_dispatched()),
      static_cast<double>(world.engine().events_dispatched()) / run_s / 1e6,
      world.engine().peak_pending(), static_cast<double>(ru.ru_maxrss) / 1024.0);
  return res.status.ok() ? 0 : 1;
}
