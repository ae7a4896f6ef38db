// Training-loop benchmark (issue 27): ITERATIONS iterations (default 1000)
// of COMPUTE_MS of compute (default 100 ms) and one allreduce of BYTES
// (default 1 MiB) over every rank of PRESET (default medium), timing only.
// Prints the virtual time, the wall time split into the compute gaps (the
// engine jumps over them) and the collectives, and events per second.
// Usage: training_bench [ITERATIONS] [PRESET] [BYTES] [COMPUTE_MS].
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fabric/scenario/scenario.h"
#include "transport/worlds/sim_world.h"
#include "transport/worlds/training.h"

int main(int argc, char** argv) {
  using namespace fathom;
  using namespace fathom::transport::worlds;
  const long long iterations = argc > 1 ? std::atoll(argv[1]) : 1000;
  const std::string preset = argc > 2 ? argv[2] : "medium";
  const unsigned long long bytes = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 1ull << 20;
  const double compute_ms = argc > 4 ? std::atof(argv[4]) : 100;
  const std::string yaml =
      "name: training-bench\nend_time_us: 1\ntopology:\n  preset: \"" + preset +
      "\"\nworkload:\n  pattern: training\n  training:\n" +
      "    iterations: " + std::to_string(iterations) +
      "\n    compute_us: " + std::to_string(compute_ms * 1000) +
      "\n    collectives:\n      - {op: allreduce, bytes: " + std::to_string(bytes) + "}\n";
  const auto t0 = std::chrono::steady_clock::now();
  auto sc = sim::LoadScenarioString(yaml, "training_bench.yaml");
  if (!sc.ok()) {
    std::fprintf(stderr, "training_bench: %s\n", sc.status().ToString().c_str());
    return 2;
  }
  auto world = SimWorld::CreateFromScenario(sc.value(), SimWorldOptions{});
  if (!world.ok()) {
    std::fprintf(stderr, "training_bench: %s\n", world.status().ToString().c_str());
    return 2;
  }
  auto plan = TrainingPlanFromScenario(sc.value(), world.value()->nranks());
  auto runner = plan.ok() ? TrainingRunner::Create(world.value().get(), plan.value())
                          : StatusOr<std::unique_ptr<TrainingRunner>>(plan.status());
  if (!runner.ok()) {
    std::fprintf(stderr, "training_bench: %s\n", runner.status().ToString().c_str());
    return 2;
  }
  const auto t1 = std::chrono::steady_clock::now();
  const TrainingResult r = runner.value()->Run();
  const auto t2 = std::chrono::steady_clock::now();
  const double setup_s = std::chrono::duration<double>(t1 - t0).count();
  const double run_s = std::chrono::duration<double>(t2 - t1).count();
  std::printf(
      "training_bench: %lld iterations of %.1f ms compute + allreduce %llu B, %d ranks on %s: "
      "%s\n"
      "  virtual time %.3f s (%lld iterations completed)\n"
      "  wall: setup %.2f s, loop %.2f s = compute gaps %.4f s + collectives %.2f s\n"
      "  events %llu (%.2f M/s)\n",
      iterations, compute_ms, bytes, world.value()->nranks(),
      world.value()->topology().name().c_str(), r.failed ? "FAILED" : "ok",
      (r.end - r.start).seconds(), static_cast<long long>(r.completed), setup_s, run_s,
      r.idle_wall_s, run_s - r.idle_wall_s, static_cast<unsigned long long>(r.events),
      run_s > 0 ? static_cast<double>(r.events) / run_s / 1e6 : 0);
  return r.failed ? 1 : 0;
}
