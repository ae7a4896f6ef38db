// Training loops on the sim world (issue 27): `fathom coll train --scenario`
// runs a scenario's workload.training — N iterations (or a duration) of
// compute, then collectives over rank groups (data, tensor or pipeline
// parallel), then an optional checkpoint — on the emulated NIC, with the
// scenario's faults on their virtual-time timeline, or armed when the
// iteration they name posts its first collective (IterationFault). A fault
// hours into the run hits the iteration running then: the loop stops at the first
// collective that fails (a completion error) or stalls (the watchdog), and
// says which iteration, which collective and group, and the watchdog's
// report.
//
// Long runs are cheap: compute and checkpoints move no traffic, and the
// event-driven engine jumps over them (Engine::Run to a time with no event
// before it costs nothing per picosecond), so wall time follows the
// collectives' events. Collectives are modelled (no bytes move, nothing is
// reduced: CommOptions::modelled); their timing is the sweep's.
//
// Ownership: a TrainingRunner borrows the SimWorld (which must outlive it)
// and owns the communicators and drivers of its groups, on the world's
// devices (so verbs faults and scenario faults apply to them).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/units.h"
#include "fabric/scenario/scenario.h"
#include "transport/collectives/communicator.h"
#include "transport/collectives/driver.h"
#include "transport/collectives/schedule.h"
#include "transport/worlds/sim_world.h"

namespace fathom::transport::worlds {

class DistSimBackend;

struct TrainingCollective {
  std::string name;  // "dp", or "<op>#<index>"
  coll::CollKind kind = coll::CollKind::kAllReduce;
  coll::Algorithm algo = coll::Algorithm::kAuto;  // kAuto: by size (allreduce)
  uint64_t bytes = 0;                             // per rank, nccl-tests' size
  std::vector<std::vector<int>> groups;           // world ranks; run at once
};

// A fault placed at an iteration (the scenario's faults[index] or
// verbs_faults[index] with at_iteration). It is armed when that iteration
// posts its first collective, i.e. when its compute ends, and acts `offset`
// later. Not at the start of the compute: compute moves no traffic, so a
// fault there would hit the iteration or not depending on compute_us; from
// the first post on, offset 0 means "the iteration's first packet sees it",
// whatever the compute time.
struct IterationFault {
  bool verbs = false;
  int index = 0;
  std::string name;  // "link_down#0", "verbs_faults[1] qp_error"
  int64_t iteration = 0;
  Picoseconds offset;
};

struct TrainingPlan {
  int64_t iterations = -1;  // -1: until `duration`
  Picoseconds duration;     // zero: `iterations` only
  Picoseconds compute;
  std::vector<TrainingCollective> collectives;
  int checkpoint_every = 0;  // 0: no checkpoint
  Picoseconds checkpoint;
  std::vector<IterationFault> iteration_faults;
};

// The scenario's workload.training for a run of `nranks` ranks: groups
// naming ranks at or above nranks are INVALID_ARGUMENT with file:line and
// field (the rest was checked when the scenario loaded).
StatusOr<TrainingPlan> TrainingPlanFromScenario(const sim::LoadedScenario& scenario, int nranks);

// One line per collective, e.g. "allreduce 'dp' 64M x 2 groups of 4 ranks".
std::vector<std::string> DescribePlan(const TrainingPlan& plan);

struct TrainingResult {
  int64_t completed = 0;                     // iterations that finished
  std::vector<Picoseconds> iteration_times;  // each completed iteration's
  Picoseconds start, end;                    // virtual
  // The first failure, when there is one.
  bool failed = false;
  bool hung = false;              // the watchdog stopped it (else a completion error)
  int64_t failed_iteration = -1;  // 0-based
  Picoseconds failed_iteration_start;
  std::string failed_collective;   // its name
  int failed_group = -1;           // index in its groups
  Picoseconds failed_at;           // when the collective stopped
  std::string error_status;        // IBV_WC_*; empty for a hang
  std::vector<int> stalled_ranks;  // world ranks, hung only
  std::string report;              // the driver's report, group ranks named
  uint64_t events = 0;             // engine events the loop dispatched
  // Faults placed at an iteration that the run reached, when armed.
  struct Armed {
    std::string name;
    int64_t iteration = 0;
    Picoseconds at;  // virtual: the iteration's first post + offset
  };
  std::vector<Armed> armed;
  Status status;  // not ok: a fault could not be armed (the loop stopped)
  // Wall time spent letting compute and checkpoint time pass (the rest of
  // the loop's wall time is the collectives'), seconds.
  double idle_wall_s = 0;
};

class TrainingRunner {
 public:
  static StatusOr<std::unique_ptr<TrainingRunner>> Create(SimWorld* world, TrainingPlan plan);
  ~TrainingRunner();

  // Runs the loop to its end or its first failure.
  TrainingResult Run();
  // The same loop in the canonical order, in one process or split across
  // MPI processes (`dist`, created after this runner so that it adopts the
  // groups' QPs; the world's engine in the canonical order). A collective
  // starts at the window boundary after the one before it ended (the
  // windowed rule of DistSimBackend), so the results are the same for any
  // number of processes; an iteration's compute and checkpoint start at the
  // agreed end of its last collective. Every process calls it and gets the
  // same result (TrainingResult::events: every process's, summed).
  TrainingResult RunWindowed(DistSimBackend* dist);

 private:
  struct Entry;
  TrainingRunner() = default;
  // Lets virtual time pass to `until` with no new traffic (events due in
  // between, a fault's or a late completion's, still run); across
  // processes through `dist` (DistSimBackend::Idle).
  void Idle(Picoseconds until, DistSimBackend* dist = nullptr);
  // Arms the faults placed at `iteration` from now on (each at its offset
  // past the iteration's first post: IterationFault), noting them in
  // res->armed; false (res->status set) when one cannot be armed.
  bool ArmIterationFaults(int64_t iteration, TrainingResult* res);
  // The first failure of an entry's run, in `res` (both loops).
  void NoteFailure(const Entry& e, int64_t iteration, Picoseconds iteration_start,
                   const coll::RunOutcome& out, int failed_group, std::vector<int> stalled,
                   TrainingResult* res) const;
  double idle_wall_s_ = 0;

  SimWorld* world_ = nullptr;
  TrainingPlan plan_;
  std::vector<std::unique_ptr<Entry>> entries_;
};

}  // namespace fathom::transport::worlds
