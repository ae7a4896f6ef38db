// The parts of a scenario that `fathom coll --scenario` runs and `fathom
// sim` does not (issue 27): the training-loop workload (workload.training,
// pattern: training) and the collective expectations (expect.coll_*,
// stalled_ranks, the iteration items). scenario.cc checks them against the
// file and the topology when it loads a scenario; transport/worlds runs and
// checks them (training.h, coll_expect.h). Each runner refuses the other's
// items with the field's file:line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "fabric/scenario/scenario.h"

namespace fathom::sim {

// The collectives a training step may name, as `fathom coll` spells them.
inline constexpr std::string_view kTrainingOps =
    "allreduce|allgather|reduce_scatter|broadcast|barrier";

// At most this many iterations in one run (the report keeps each one's time).
inline constexpr int64_t kMaxTrainingIterations = 10'000'000;

// workload.training against the file: iterations or duration_us given and
// in range, times finite and >= 0, every collective's op, bytes and algo,
// groups of >= 2 distinct ranks below the topology's host count that do not
// overlap within one collective. Errors name file:line and field.
Status ValidateTraining(const LoadedScenario& sc);

// Faults placed at an iteration (faults[i].at_iteration,
// verbs_faults[i].at_iteration; training.h arms them): only in a training
// scenario, an iteration >= 0 and below workload.training.iterations (when
// set), not together with a time (start_us / at_us), an offset
// (iteration_offset_us) finite, >= 0 and only with at_iteration. Errors
// name file:line and field. Checked for every scenario.
Status ValidateIterationFaults(const LoadedScenario& sc);

// The collective expectations against the file: times, stalled ranks below
// the host count, coll_error an IBV_WC_* name or "none", bounds ordered.
Status ValidateCollExpect(const LoadedScenario& sc);

// The first expect field only `fathom coll` checks ("expect.coll_sizes"),
// or "" when none is set.
std::string CollOnlyExpectField(const proto::ExpectSpec& e);
// The first expect field only `fathom sim` checks ("expect.flows"), or "".
std::string SimOnlyExpectField(const proto::ExpectSpec& e);

}  // namespace fathom::sim
