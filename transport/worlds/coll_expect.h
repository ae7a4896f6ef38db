// A scenario's `expect` block as `fathom coll --scenario` checks it (issue
// 27): per size busbw and time bounds, the ranks that stall, the error the
// run stops with and when, "no error surfaced", and for a training loop
// (training.h) the failing iteration and the iteration times. The sim's
// items (flows, QPs, counters, drops, PFC) are refused with their file:line.
// Unmet items print "expected X, got Y" as `fathom sim` does
// (fabric/scenario/expect.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "fabric/scenario/scenario.h"
#include "transport/collectives/report.h"

namespace fathom::transport::worlds {

// What a `fathom coll` run showed (a sweep's SweepOutcome or a training
// loop's TrainingResult, reduced to what expect checks).
struct CollFacts {
  std::vector<coll::ReportRow> rows;  // sweep: the sizes that completed
  bool failed = false;                // stopped on a completion error or a hang
  bool hung = false;
  std::string error_status;  // IBV_WC_* it stopped on; empty: none
  double error_time_us = -1;
  std::vector<int> stalled_ranks;  // hung: the world ranks that had not finished
  // Training loops.
  bool training = false;
  int64_t first_failed_iteration = -1;
  int64_t iterations_completed = 0;
  double iteration_p50_us = 0, iteration_p99_us = 0, iteration_max_us = 0;
};

// INVALID_ARGUMENT naming file:line and field for an item fathom sim checks
// (flows, qps, counters, drops, completion_statuses, flow counts, PFC) and
// for stalled ranks at or above `nranks`.
Status CheckCollExpectFields(const sim::LoadedScenario& scenario, int nranks);

// "expectation not met: ..." lines, one per unmet item; empty when all are
// met.
std::vector<std::string> CheckCollExpect(const proto::ExpectSpec& e, const CollFacts& f);

// Whether the block says the run is meant to fail or stall (an error
// status, a hang, stalled ranks, a failing iteration, no_error_surfaced
// false): a failed run then exits 0 when every item is met.
bool ExpectsFailure(const proto::ExpectSpec& e);

}  // namespace fathom::transport::worlds
