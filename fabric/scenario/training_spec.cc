#include "fabric/scenario/training_spec.h"

#include <cmath>
#include <set>
#include <tuple>
#include <utility>

#include "base/verbs_types.h"
#include "fabric/scenario/expect.h"

namespace fathom::sim {
namespace {

// Virtual time is int64 picoseconds (scenario.cc's bound).
constexpr double kMaxTimeUs = 9.0e12;
// A collective's size: what nccl-tests' -e may ask of one rank here.
constexpr uint64_t kMaxCollBytes = uint64_t{1} << 40;

Status CheckUs(const config::SourceMap& m, const std::string& path, double us) {
  if (!std::isfinite(us) || us < 0 || us > kMaxTimeUs) {
    return m.Error(path, UsText(us) + " us must be a finite time in [0, 9e12] us");
  }
  return Status::Ok();
}

bool IsOp(const std::string& op) {
  std::string_view rest = kTrainingOps;
  while (!rest.empty()) {
    const size_t bar = rest.find('|');
    if (rest.substr(0, bar) == op) return true;
    rest = bar == std::string_view::npos ? std::string_view() : rest.substr(bar + 1);
  }
  return false;
}

}  // namespace

Status ValidateTraining(const LoadedScenario& sc) {
  const config::SourceMap& m = sc.map;
  const proto::WorkloadSpec& w = sc.spec.workload();
  const proto::TrainingSpec& t = w.training();
  const int hosts = static_cast<int>(sc.topology.hosts().size());
  if (!w.has_training()) {
    return m.Error("workload.training", "pattern training needs a training block");
  }
  if (w.flows_size() > 0) return m.Error("workload.flows", "only with pattern: flows");
  if (!t.has_iterations() && !t.has_duration_us()) {
    return m.Error("workload.training",
                   "set iterations, duration_us or both (the loop stops at the first reached)");
  }
  if (t.has_iterations() && (t.iterations() < 1 || t.iterations() > kMaxTrainingIterations)) {
    return m.Error("workload.training.iterations", std::to_string(t.iterations()) +
                                                       " must be in 1.." +
                                                       std::to_string(kMaxTrainingIterations));
  }
  if (t.has_duration_us()) {
    FATHOM_RETURN_IF_ERROR(CheckUs(m, "workload.training.duration_us", t.duration_us()));
    if (t.duration_us() <= 0) return m.Error("workload.training.duration_us", "must be > 0");
  }
  FATHOM_RETURN_IF_ERROR(CheckUs(m, "workload.training.compute_us", t.compute_us()));
  FATHOM_RETURN_IF_ERROR(CheckUs(m, "workload.training.checkpoint_us", t.checkpoint_us()));
  if (t.checkpoint_every() < 0) {
    return m.Error("workload.training.checkpoint_every", "must not be negative");
  }
  if (t.checkpoint_us() > 0 && t.checkpoint_every() == 0) {
    return m.Error("workload.training.checkpoint_every",
                   "checkpoint_us needs checkpoint_every (every how many iterations)");
  }
  if (t.collectives_size() == 0 && t.compute_us() == 0) {
    return m.Error("workload.training.collectives",
                   "an iteration with no compute and no collective does nothing");
  }
  for (int i = 0; i < t.collectives_size(); ++i) {
    const proto::TrainingCollectiveSpec& c = t.collectives(i);
    const std::string p = "workload.training.collectives[" + std::to_string(i) + "]";
    if (!IsOp(c.op())) {
      return m.Error(p + ".op", "'" + c.op() + "' is not one of " + std::string(kTrainingOps));
    }
    if (c.op() != "barrier" && c.bytes() == 0) return m.Error(p + ".bytes", "must be > 0");
    if (c.bytes() > kMaxCollBytes) {
      return m.Error(p + ".bytes", std::to_string(c.bytes()) + " is more than 2^40 (1 TiB)");
    }
    if (!c.algo().empty() && c.algo() != "auto" && c.algo() != "ring" && c.algo() != "tree") {
      return m.Error(p + ".algo", "'" + c.algo() + "' is not one of auto, ring, tree");
    }
    if (c.algo() == "tree" && c.op() != "allreduce") {
      return m.Error(p + ".algo", "tree is for allreduce only (" + c.op() + " runs as a ring)");
    }
    std::set<int> seen;
    for (int g = 0; g < c.groups_size(); ++g) {
      const std::string gp = p + ".groups[" + std::to_string(g) + "]";
      const proto::RankGroupSpec& group = c.groups(g);
      if (group.ranks_size() < 2) {
        return m.Error(gp + ".ranks", "a group needs at least 2 ranks");
      }
      std::set<int> mine;
      for (int r = 0; r < group.ranks_size(); ++r) {
        const int rank = group.ranks(r);
        const std::string rp = gp + ".ranks[" + std::to_string(r) + "]";
        if (rank < 0 || rank >= hosts) {
          return m.Error(rp, "rank " + std::to_string(rank) + " does not exist: topology '" +
                                 sc.topology.name() + "' has " + std::to_string(hosts) +
                                 " hosts (ranks 0.." + std::to_string(hosts - 1) + ")");
        }
        if (!mine.insert(rank).second) {
          return m.Error(rp, "rank " + std::to_string(rank) + " twice in one group");
        }
        if (!seen.insert(rank).second) {
          return m.Error(rp, "rank " + std::to_string(rank) +
                                 " is in an earlier group of this collective: groups of one "
                                 "collective run at once and must not overlap");
        }
      }
    }
  }
  return Status::Ok();
}

Status ValidateIterationFaults(const LoadedScenario& sc) {
  const config::SourceMap& m = sc.map;
  const bool training = sc.spec.workload().pattern() == proto::WorkloadSpec::PATTERN_TRAINING;
  const proto::TrainingSpec& t = sc.spec.workload().training();
  // One check for both lists: (path, at_iteration set, its value, offset,
  // the time field's name, the time).
  auto check = [&](const std::string& p, bool has, int64_t it, double offset_us,
                   const char* time_field, double time_us) -> Status {
    if (!has) {
      if (offset_us != 0 || m.Find(p + ".iteration_offset_us")) {
        return m.Error(p + ".iteration_offset_us", "needs at_iteration");
      }
      return Status::Ok();
    }
    if (!training) {
      return m.Error(p + ".at_iteration",
                     "places a fault at an iteration of a training loop, but the workload is "
                     "not one (workload.pattern: training); use " +
                         std::string(time_field));
    }
    if (time_us != 0 || m.Find(p + "." + time_field)) {
      return m.Error(p + "." + time_field, std::string("set ") + time_field +
                                               " (a time) or at_iteration (an iteration), "
                                               "not both");
    }
    if (it < 0) {
      return m.Error(p + ".at_iteration",
                     std::to_string(it) + " is negative (iterations count from 0)");
    }
    if (t.has_iterations() && it >= t.iterations()) {
      return m.Error(p + ".at_iteration", "iteration " + std::to_string(it) +
                                              " never runs: the job has " +
                                              std::to_string(t.iterations()) + " iterations (0.." +
                                              std::to_string(t.iterations() - 1) + ")");
    }
    if (it >= kMaxTrainingIterations) {
      return m.Error(p + ".at_iteration", "beyond the " + std::to_string(kMaxTrainingIterations) +
                                              " iterations a run may have");
    }
    return CheckUs(m, p + ".iteration_offset_us", offset_us);
  };
  for (int i = 0; i < sc.spec.faults_size(); ++i) {
    const proto::FaultSpec& f = sc.spec.faults(i);
    FATHOM_RETURN_IF_ERROR(check("faults[" + std::to_string(i) + "]", f.has_at_iteration(),
                                 f.at_iteration(), f.iteration_offset_us(), "start_us",
                                 f.start_us()));
  }
  for (int i = 0; i < sc.spec.verbs_faults_size(); ++i) {
    const proto::VerbsFaultSpec& f = sc.spec.verbs_faults(i);
    FATHOM_RETURN_IF_ERROR(check("verbs_faults[" + std::to_string(i) + "]", f.has_at_iteration(),
                                 f.at_iteration(), f.iteration_offset_us(), "at_us", f.at_us()));
  }
  return Status::Ok();
}

Status ValidateCollExpect(const LoadedScenario& sc) {
  const config::SourceMap& m = sc.map;
  const proto::ExpectSpec& e = sc.spec.expect();
  const int hosts = static_cast<int>(sc.topology.hosts().size());
  for (int i = 0; i < e.coll_sizes_size(); ++i) {
    const proto::CollSizeExpect& s = e.coll_sizes(i);
    const std::string p = "expect.coll_sizes[" + std::to_string(i) + "]";
    if (!s.has_busbw_at_least_gbs() && !s.has_busbw_at_most_gbs() && !s.has_time_at_least_us() &&
        !s.has_time_at_most_us()) {
      return m.Error(p,
                     "checks nothing: set busbw_at_least_gbs, busbw_at_most_gbs, "
                     "time_at_least_us or time_at_most_us");
    }
    for (const auto& [field, has, v] :
         {std::tuple{".busbw_at_least_gbs", s.has_busbw_at_least_gbs(), s.busbw_at_least_gbs()},
          std::tuple{".busbw_at_most_gbs", s.has_busbw_at_most_gbs(), s.busbw_at_most_gbs()},
          std::tuple{".time_at_least_us", s.has_time_at_least_us(), s.time_at_least_us()},
          std::tuple{".time_at_most_us", s.has_time_at_most_us(), s.time_at_most_us()}}) {
      if (has && (!std::isfinite(v) || v < 0 || v > kMaxTimeUs)) {
        return m.Error(p + field, UsText(v) + " must be finite and >= 0");
      }
    }
    if (s.has_busbw_at_least_gbs() && s.has_busbw_at_most_gbs() &&
        s.busbw_at_least_gbs() > s.busbw_at_most_gbs()) {
      return m.Error(p + ".busbw_at_least_gbs", "is above busbw_at_most_gbs");
    }
    if (s.has_time_at_least_us() && s.has_time_at_most_us() &&
        s.time_at_least_us() > s.time_at_most_us()) {
      return m.Error(p + ".time_at_least_us", "is above time_at_most_us");
    }
  }
  std::set<int> stalled;
  for (int i = 0; i < e.stalled_ranks_size(); ++i) {
    const int r = e.stalled_ranks(i);
    const std::string p = "expect.stalled_ranks[" + std::to_string(i) + "]";
    if (r < 0 || r >= hosts) {
      return m.Error(p, "rank " + std::to_string(r) + " does not exist (topology '" +
                            sc.topology.name() + "' has " + std::to_string(hosts) + " hosts)");
    }
    if (!stalled.insert(r).second) return m.Error(p, "rank " + std::to_string(r) + " twice");
  }
  if (!e.coll_error().empty() && e.coll_error() != "none") {
    bool known = false;
    for (int s = 0; s <= static_cast<int>(WcStatus::kGeneralErr); ++s) {
      known = known || WcStatusName(static_cast<WcStatus>(s)) == e.coll_error();
    }
    if (!known || e.coll_error() == "IBV_WC_SUCCESS") {
      return m.Error("expect.coll_error", "'" + e.coll_error() +
                                              "' is not an error status name (e.g. "
                                              "IBV_WC_RETRY_EXC_ERR) or none");
    }
  }
  if (e.has_first_failed_iteration() && e.first_failed_iteration() < -1) {
    return m.Error("expect.first_failed_iteration", "-1 (none) or an iteration index >= 0");
  }
  if (e.has_iterations_completed() && e.iterations_completed() < 0) {
    return m.Error("expect.iterations_completed", "must not be negative");
  }
  FATHOM_RETURN_IF_ERROR(ValidateTimeExpect(m, "expect.iteration_p50_us", e.iteration_p50_us()));
  if (e.has_iteration_p99_at_most_us()) {
    FATHOM_RETURN_IF_ERROR(
        CheckUs(m, "expect.iteration_p99_at_most_us", e.iteration_p99_at_most_us()));
  }
  if (e.has_iteration_max_at_most_us()) {
    FATHOM_RETURN_IF_ERROR(
        CheckUs(m, "expect.iteration_max_at_most_us", e.iteration_max_at_most_us()));
  }
  const bool training = sc.spec.workload().pattern() == proto::WorkloadSpec::PATTERN_TRAINING;
  if (!training) {
    for (const auto& [field, has] :
         {std::pair{"expect.first_failed_iteration", e.has_first_failed_iteration()},
          std::pair{"expect.iterations_completed", e.has_iterations_completed()},
          std::pair{"expect.iteration_p50_us", e.has_iteration_p50_us()},
          std::pair{"expect.iteration_p99_at_most_us", e.has_iteration_p99_at_most_us()},
          std::pair{"expect.iteration_max_at_most_us", e.has_iteration_max_at_most_us()}}) {
      if (has) return m.Error(field, "is for a training workload (workload.pattern: training)");
    }
  } else if (e.coll_sizes_size() > 0) {
    return m.Error("expect.coll_sizes",
                   "is for a size sweep; a training run checks its iterations "
                   "(iteration_p50_us, iteration_p99_at_most_us, iteration_max_at_most_us)");
  }
  return Status::Ok();
}

std::string CollOnlyExpectField(const proto::ExpectSpec& e) {
  if (e.coll_sizes_size() > 0) return "expect.coll_sizes";
  if (e.stalled_ranks_size() > 0) return "expect.stalled_ranks";
  if (!e.coll_error().empty()) return "expect.coll_error";
  if (e.has_coll_hang()) return "expect.coll_hang";
  if (e.has_first_failed_iteration()) return "expect.first_failed_iteration";
  if (e.has_iterations_completed()) return "expect.iterations_completed";
  if (e.has_iteration_p50_us()) return "expect.iteration_p50_us";
  if (e.has_iteration_p99_at_most_us()) return "expect.iteration_p99_at_most_us";
  if (e.has_iteration_max_at_most_us()) return "expect.iteration_max_at_most_us";
  return "";
}

std::string SimOnlyExpectField(const proto::ExpectSpec& e) {
  if (e.has_flows_completed()) return "expect.flows_completed";
  if (e.has_flows_failed()) return "expect.flows_failed";
  if (e.has_flows_stalled()) return "expect.flows_stalled";
  if (!e.completion_statuses().empty()) return "expect.completion_statuses";
  if (e.flows_size() > 0) return "expect.flows";
  if (e.qps_size() > 0) return "expect.qps";
  if (e.counters_size() > 0) return "expect.counters";
  if (!e.drops().empty()) return "expect.drops";
  if (e.has_pfc_deadlock()) return "expect.pfc_deadlock";
  if (!e.pfc_deadlock_cycle().empty()) return "expect.pfc_deadlock_cycle";
  if (e.has_pfc_watchdog_storms()) return "expect.pfc_watchdog_storms";
  if (e.has_pfc_watchdog_restored()) return "expect.pfc_watchdog_restored";
  return "";
}

}  // namespace fathom::sim
