// Replay's engine (issue 28): from an Evidence to a ranked list of root
// causes. It builds the world (hypotheses.h), forms the hypotheses and ranks
// them by the evidence alone, simulates the best `top` of them — in worker
// processes when jobs > 1 — scores each simulated signature against the
// evidence's (signature.h; Match weights: hosts with an error 3, error
// status 2, first error time 1, stalled hosts 3, each counter class 1 on
// hosts and 1.5 on links), ablates the best reproducing ones (each element
// removed, rerun, the symptom must go) and ranks: reproducing and confirmed
// by ablation first, then 0.8 x score + 0.2 x prior.
//
// A cause "reproduces" when its simulation shows the symptom (an error on an
// erring host, a stall on a stalled host, or the evidence's counters) and
// scores at least kReproduceScore. Background congestion (which ECMP
// collisions drop packets) differs between the evidence's run and the
// simulation, so the counter rows rarely match fully even for the true
// cause: on the seeded medium corpus the true causes score 0.46-0.67.
//
// Ownership: Replay returns a value; nothing is kept between calls.
#pragma once

#include <string>

#include "base/status.h"
#include "replay/evidence.h"
#include "replay/result.h"

namespace fathom::replay {

inline constexpr double kReproduceScore = 0.45;

// `fathom replay`'s exit codes: a cause found, none reproduces, unusable input.
inline constexpr int kExitCauseFound = 0;
inline constexpr int kExitNoCause = 1;
inline constexpr int kExitUnusable = 2;

struct ReplayOptions {
  int jobs = 1;    // simulations at once; > 1 runs them in forked worker processes
  int top = 8;     // hypotheses simulated (best prior first)
  int ablate = 3;  // reproducing causes ablated
  // Where each simulated hypothesis' scenario is written ("" = nowhere);
  // the reproducing one carries an expect block of its simulated outcome.
  std::string scenario_out;
};

// InvalidArgument when the evidence cannot give a world (no topology and no
// host, or a topology that does not load): exit kExitUnusable.
StatusOr<ReplayResult> Replay(const Evidence& evidence, const ReplayOptions& options);

// The exit code for a result: kExitCauseFound when found, else kExitNoCause.
int ExitCode(const ReplayResult& result);

}  // namespace fathom::replay
