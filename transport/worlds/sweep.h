// RunSweep: the nccl-tests loop of `fathom coll`, the same for every
// Backend. Per (type, op) and size: out-of-place then in-place, warmup +
// timed iterations (-m collectives each), then the checked iterations; the
// whole sweep -N times over. It owns the ranks' buffers (RankBuffers, for
// this process's ranks) and prints nccl-tests' report on stdout where the
// backend prints (the "# nThread ..." and "# Using devices" lines, the
// table, "# Avg bus bandwidth"; or one JSON object), progress on stderr when
// that is a terminal, and a failure's report on stderr.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "transport/collectives/communicator.h"
#include "transport/collectives/reduce.h"
#include "transport/collectives/report.h"
#include "transport/collectives/schedule.h"
#include "transport/collectives/size_matrix.h"
#include "transport/worlds/backend.h"

namespace fathom::transport::worlds {

// What a sweep ended with, for a scenario's `expect` (coll_expect.h).
struct SweepOutcome {
  std::vector<coll::ReportRow> rows;  // the sizes that completed
  bool failed = false;                // stopped on a completion error or a hang
  bool hung = false;                  // the watchdog stopped it
  std::string error_status;           // the IBV_WC_* it stopped on; empty: none
  double error_time_us = -1;          // virtual time it stopped (sim), -1: did not
  std::vector<int> stuck_ranks;       // hung: the ranks that had not finished
};

// A sweep, validated (by `fathom coll`'s flag parsing): nccl-tests' flags
// with their meanings.
struct SweepOptions {
  coll::CollKind kind = coll::CollKind::kAllReduce;
  // (type, op) pairs in nccl-tests' order: types outer, ops inner (-d all,
  // -o all); one pair otherwise.
  std::vector<std::pair<coll::DataType, coll::RedOp>> combos;
  coll::Algorithm algo = coll::Algorithm::kAuto;  // kAuto: chosen per size
  std::vector<uint64_t> sizes;                    // bytes, ascending
  // -b -e -i -f as given, for the "# nThread ..." line.
  uint64_t min_bytes = 0, max_bytes = 0, step_bytes = 0;
  double step_factor = 1;
  int nthreads = 1, ngpus = 1;  // -t -g, for that line
  int iters = 20, warmup = 5, agg_iters = 1, check = 1;
  int run_cycles = 1;  // 0 = until stopped
  int root = 0;
  bool modelled = false;  // no data moves: nothing is checked
  bool json = false;      // one JSON object instead of the table
  // A "#  counters:" line after each row with the fabric's counters that
  // moved (Backend::FabricCounters); --json always has them.
  bool counters = false;
  std::string trace_path;  // --trace FILE; empty: none
  // alltoallv: the size matrix of each size (matrices[i] for sizes[i], in
  // bytes). The size column is its mean row, busbw its busiest rank's bytes
  // over the time (size_matrix.h).
  std::vector<std::shared_ptr<const coll::SizeMatrix>> matrices;
  SweepOutcome* outcome = nullptr;  // filled when set
};

enum class SweepResult {
  kOk,
  kFailure,  // a #wrong, a completion error or a hang (the report is on stderr)
  kUsage,    // cannot run as asked: buffers over the memory, --trace file unwritable
};

// The IBV_WC_* status a failed collective's message names (the first one:
// the driver puts the cause before flushed WRs), or "" when none.
std::string ErrorStatusIn(const std::string& message);

// Runs the sweep on `backend`; `comm` names the channels and chunk in the
// report's header. Every process of a verbs run calls it with the same
// options.
SweepResult RunSweep(const SweepOptions& options, Backend& backend, const coll::CommOptions& comm);

}  // namespace fathom::transport::worlds
