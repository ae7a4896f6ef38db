#include "tools/train_run.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tools/command.h"
#include "transport/worlds/coll_expect.h"
#include "transport/worlds/dist_backend.h"
#include "transport/worlds/training.h"

namespace fathom::tools {
namespace {

using namespace fathom::transport::worlds;  // NOLINT: one report of its results

// The expectations' verdict (coll_expect.h): each unmet item on stderr;
// exit 1 when one is unmet or the run failed and the block does not say
// it should. Only where `prints` (rank 0 across processes) says so.
int Verdict(const char* tool, const proto::ExpectSpec& e, const CollFacts& f, bool json,
            bool prints) {
  const std::vector<std::string> misses = CheckCollExpect(e, f);
  for (const std::string& m : misses) {
    if (prints) std::fprintf(stderr, "%s: %s\n", tool, m.c_str());
  }
  if (!misses.empty()) return kExitFailure;
  if (f.failed && !ExpectsFailure(e)) return kExitFailure;
  if (!json && prints) std::printf("# expectations met\n");
  return kExitOk;
}

double Nearest(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  size_t idx = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  idx = idx == 0 ? 0 : idx - 1;
  return sorted[std::min(idx, sorted.size() - 1)];
}

}  // namespace

int RunTrainingScenario(const char* tool, const sim::LoadedScenario& sc, SimWorld* world, bool json,
                        const proto::ExpectSpec* expect, parallel::Comm* comm) {
  auto plan = TrainingPlanFromScenario(sc, world->nranks());
  if (!plan.ok()) {
    std::fprintf(stderr, "%s: %s\n", tool, plan.status().message().c_str());
    return kExitUsage;
  }
  const std::vector<std::string> lines = DescribePlan(plan.value());
  const TrainingPlan copy = plan.value();
  auto runner = TrainingRunner::Create(world, std::move(plan).value());
  if (!runner.ok()) {
    std::fprintf(stderr, "%s: %s\n", tool, runner.status().message().c_str());
    return kExitFailure;
  }
  // Across processes the split adopts the groups' QPs, which the runner
  // made: after it.
  std::unique_ptr<DistSimBackend> dist;
  if (comm != nullptr) {
    auto b = DistSimBackend::Create(world, comm);
    if (!b.ok()) {
      std::fprintf(stderr, "%s: %s\n", tool, b.status().message().c_str());
      return kExitUsage;
    }
    dist = std::move(b).value();
    // A training loop's groups replicate every flow everywhere (no plan).
    if (Status s = dist->AdmitWithoutPlan(); !s.ok()) {
      std::fprintf(stderr, "%s: %s\n", tool, s.message().c_str());
      return kExitUsage;
    }
  }
  // Rank 0 speaks for the run (the others' output goes nowhere).
  const bool prints = comm == nullptr || comm->rank() == 0;
  const auto wall_start = std::chrono::steady_clock::now();
  const TrainingResult r =
      dist != nullptr ? runner.value()->RunWindowed(dist.get()) : runner.value()->Run();
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  std::vector<double> us;
  us.reserve(r.iteration_times.size());
  for (Picoseconds t : r.iteration_times) us.push_back(t.us());
  std::sort(us.begin(), us.end());
  CollFacts f;
  f.training = true;
  f.failed = r.failed;
  f.hung = r.hung;
  f.error_status = r.error_status;
  f.error_time_us = r.failed ? r.failed_at.us() : -1;
  f.stalled_ranks = r.stalled_ranks;
  f.first_failed_iteration = r.failed_iteration;
  f.iterations_completed = r.completed;
  f.iteration_p50_us = Nearest(us, 0.5);
  f.iteration_p99_us = Nearest(us, 0.99);
  f.iteration_max_us = us.empty() ? 0 : us.back();
  const double virtual_s = (r.end - r.start).seconds();
  // A world in the canonical order (--event-order canonical) gives its
  // trace digest, as the other canonical runs do.
  const bool canonical = world->engine().canonical_order();
  const int processes = comm != nullptr ? comm->size() : 1;
  char digest[24];
  std::snprintf(digest, sizeof(digest), "%016llx",
                static_cast<unsigned long long>(dist != nullptr ? dist->trace_digest()
                                                                : world->engine().trace_digest()));
  const double events_per_s = wall > 0 ? static_cast<double>(r.events) / wall : 0;
  if (!prints) {
  } else if (json) {
    nlohmann::ordered_json j;
    j["op"] = "train";
    j["backend"] = "sim";
    j["nranks"] = world->nranks();
    j["topology"] = world->topology().name();
    j["scenario"] = sc.path;
    j["collectives"] = lines;
    j["iterations_completed"] = r.completed;
    j["virtual_time_s"] = virtual_s;
    j["iteration_p50_us"] = f.iteration_p50_us;
    j["iteration_p99_us"] = f.iteration_p99_us;
    j["iteration_max_us"] = f.iteration_max_us;
    j["status"] = r.failed ? (r.hung ? "hung" : "failed") : "ok";
    if (r.failed) {
      j["first_failed_iteration"] = r.failed_iteration;
      j["failed_iteration_start_us"] = r.failed_iteration_start.us();
      j["failed_collective"] = r.failed_collective;
      j["failed_group"] = r.failed_group;
      j["error_status"] = r.error_status;
      j["error_time_us"] = r.failed_at.us();
      j["stalled_ranks"] = r.stalled_ranks;
      j["report"] = r.report;
    }
    nlohmann::ordered_json armed = nlohmann::ordered_json::array();
    for (const TrainingResult::Armed& a : r.armed) {
      armed.push_back({{"name", a.name}, {"iteration", a.iteration}, {"at_us", a.at.us()}});
    }
    j["armed_faults"] = armed;
    if (canonical) {
      j["event_order"] = "canonical";
      j["processes"] = processes;
      j["trace_digest"] = digest;
    }
    j["events"] = r.events;
    j["wall_s"] = wall;
    j["idle_wall_s"] = r.idle_wall_s;
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("# %s: training loop, %d ranks on %s, scenario %s\n", tool, world->nranks(),
                world->topology().name().c_str(), sc.path.c_str());
    std::printf("# iteration: compute %.3f us", copy.compute.us());
    for (const std::string& l : lines) std::printf("; %s", l.c_str());
    if (copy.checkpoint_every > 0) {
      std::printf("; checkpoint %.3f us every %d", copy.checkpoint.us(), copy.checkpoint_every);
    }
    std::printf("\n# iterations completed %lld, virtual time %.6f s\n",
                static_cast<long long>(r.completed), virtual_s);
    std::printf("# iteration time (us): p50 %.3f  p99 %.3f  max %.3f\n", f.iteration_p50_us,
                f.iteration_p99_us, f.iteration_max_us);
    for (const TrainingResult::Armed& a : r.armed) {
      std::printf("# fault %s placed at iteration %lld: acts from t=%.3f us\n", a.name.c_str(),
                  static_cast<long long>(a.iteration), a.at.us());
    }
    for (const IterationFault& pf : copy.iteration_faults) {
      if (pf.iteration < r.completed + (r.failed ? 1 : 0)) continue;
      std::printf("# fault %s placed at iteration %lld: not reached, never acted\n",
                  pf.name.c_str(), static_cast<long long>(pf.iteration));
    }
    if (r.failed) {
      std::printf(
          "# FAILED: iteration %lld (started t=%.3f us), collective '%s' group %d: %s at t=%.3f "
          "us (virtual)\n",
          static_cast<long long>(r.failed_iteration), r.failed_iteration_start.us(),
          r.failed_collective.c_str(), r.failed_group,
          r.hung ? "no progress (the watchdog's report is on stderr)" : r.error_status.c_str(),
          r.failed_at.us());
    }
    std::printf("# wall %.3f s (compute/checkpoint gaps %.3f s), %llu events, %.0f events/s\n",
                wall, r.idle_wall_s, static_cast<unsigned long long>(r.events), events_per_s);
    if (canonical) {
      std::printf("# trace digest %s (canonical event order, %d %s)\n", digest, processes,
                  processes == 1 ? "process" : "processes");
    }
  }
  if (r.failed && prints) std::fprintf(stderr, "%s", r.report.c_str());
  if (!r.status.ok()) {
    if (prints) std::fprintf(stderr, "%s: %s\n", tool, r.status.message().c_str());
    return kExitFailure;
  }
  if (expect != nullptr) return Verdict(tool, *expect, f, json, prints);
  return r.failed ? kExitFailure : kExitOk;
}

}  // namespace fathom::tools
