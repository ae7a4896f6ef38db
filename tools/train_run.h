// A training scenario's loop (workload.pattern: training, issue 27) run and
// reported for the command line: `fathom coll train --scenario FILE` and
// `fathom sim FILE` both come here, so one scenario gives one report (the
// iteration times, any fault placed at an iteration, the first failure,
// wall time and events) and one verdict on its expect block.
#pragma once

#include "fabric/parallel/comm.h"
#include "fabric/scenario/scenario.h"
#include "transport/worlds/sim_world.h"

namespace fathom::tools {

// Runs `sc`'s training loop on `world` (built from `sc`), prints the report
// on stdout (text, or one JSON object with `json`; with the world's engine
// in the canonical order, also its canonical trace digest) and the failure's
// watchdog report on stderr, then checks `expect` (null: none). Returns the
// exit code: 0, 1 for a failed run or an unmet expectation, 2 for a plan the
// world cannot run. Messages start with `tool` ("fathom sim").
// With `comm` (the world in the canonical order: one process, LocalComm,
// or mpirun's), the windowed loop across its processes
// (TrainingRunner::RunWindowed); rank 0 prints, every process returns the
// same code.
int RunTrainingScenario(const char* tool, const sim::LoadedScenario& sc,
                        transport::worlds::SimWorld* world, bool json,
                        const proto::ExpectSpec* expect, parallel::Comm* comm = nullptr);

}  // namespace fathom::tools
