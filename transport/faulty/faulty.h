// Verbs-level fault injection: a Device / QueuePair / CompletionQueue that
// forwards to any backend (transport/emulated or transport/verbs) and, as a
// plan (plan.h) says, fails posts, delays completions, swallows error
// completions, moves QPs to ERR and raises async events — the failures a
// communication library sees at the verbs API, whatever the fabric does.
// The idea is LevelDB's Env wrapper (a fault-injecting Env over the real
// one): the code under test runs unchanged over the wrapper.
//
// Swallowing an error is CASES.md 20 (aws-ofi-nccl PR #347: completion
// errors never passed up the stack, so jobs hung with no error): the caller
// never sees the error completion, its WRs stay outstanding as far as it can
// tell, and only a watchdog finds the hang.
//
// Ownership: the FaultInjector holds the plan and what each fault did; it
// must outlive every Device it wrapped. A wrapped Device owns the backend's
// Device; each wrapped CQ / QP owns the backend's. transport.h's rules hold.
// Threading: one thread, as transport.h says.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "transport/faulty/plan.h"
#include "transport/transport.h"

namespace fathom::transport::faulty {

// What the wrappers need from the world they run in.
struct FaultEnv {
  Clock* clock = nullptr;  // Now(): virtual on sim, wall on verbs
  Picoseconds origin;      // `at` counts from here (sim 0; verbs: when opened)
  // Runs `fn` at time `at` for rank `rank`'s device and returns control to
  // the driver (the sim: an engine event that then stops Run(), as a
  // completion does; the rank says which process runs it when the fabric
  // is split across processes). Null (verbs): the driver polls every CQ
  // each turn, and Poll() releases what is due.
  std::function<void(int rank, Picoseconds at, std::function<void()> fn)> wake_at;
};

class FaultyDevice;

class FaultInjector {
 public:
  FaultInjector(std::vector<VerbsFault> plan, FaultEnv env);
  ~FaultInjector();
  FaultInjector(const FaultInjector&) = delete;
  FaultInjector& operator=(const FaultInjector&) = delete;

  // Wraps rank `rank`'s device. Devices of ranks the plan does not name are
  // wrapped too (cheaply) so that every rank runs the same code.
  std::unique_ptr<Device> Wrap(std::unique_ptr<Device> device, int rank);

  // What each fault did, one line per fault: "verbs fault swallow_error:rank=3,qp=0:
  // swallowed 4 error completions on rank 3 qpn 0x11, the first IBV_WC_RETRY_EXC_ERR at 0.54 s".
  std::string Report() const;

  // Per fault, in plan order.
  struct Stats {
    uint64_t seen = 0;   // matching operations
    uint64_t acted = 0;  // times it acted
    Picoseconds first;   // when it first acted (since origin)
    std::string first_detail;
  };
  const std::vector<Stats>& stats() const { return stats_; }

  // A fault placed at an iteration (a training scenario's at_iteration,
  // transport/worlds/training.h) is in the plan with `at` =
  // Picoseconds::Max(): it never acts until armed here, when its iteration
  // comes, to act from `at` (since origin) on.
  void Arm(size_t i, Picoseconds at);
  const std::vector<VerbsFault>& plan() const { return plan_; }

  // A fabric split across processes (transport/worlds/dist_backend.h): only
  // the ranks `local` accepts run here, so only their faults are woken
  // here (the caller drops wake-ups already scheduled for the others). Null:
  // every rank is local.
  void set_local(std::function<bool(int rank)> local) { local_ = std::move(local); }
  // What this process's faults did (those on its local ranks), for the
  // process that reports: a JSON array, an object per fault.
  std::string EncodeLocalStats() const;
  // Report() with each fault's stats from the process that ran its rank:
  // `parts` are every process's EncodeLocalStats(). The same text as one
  // process's Report().
  std::string MergedReport(const std::vector<std::string>& parts) const;
  const FaultEnv& env() const { return env_; }

 private:
  friend class FaultyDevice;
  friend class FaultyCq;
  friend class FaultyQp;
  // Notes that fault `i` acted now; `detail` says on what.
  void Acted(size_t i, const std::string& detail);
  bool IsLocal(int rank) const { return !local_ || local_(rank); }
  static std::string ReportOf(const std::vector<VerbsFault>& plan, const std::vector<Stats>& stats);

  std::vector<VerbsFault> plan_;
  FaultEnv env_;
  std::vector<Stats> stats_;
  std::function<bool(int rank)> local_;
  // The wrapped devices (and whether each is alive), for Arm's wake-ups.
  std::vector<std::pair<std::weak_ptr<bool>, FaultyDevice*>> devices_;
};

}  // namespace fathom::transport::faulty
