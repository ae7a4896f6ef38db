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
#include <string>
#include <utility>
#include <vector>

#include "transport/collectives/communicator.h"
#include "transport/collectives/reduce.h"
#include "transport/collectives/schedule.h"
#include "transport/worlds/backend.h"

namespace fathom::transport::worlds {

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
};

enum class SweepResult {
  kOk,
  kFailure,  // a #wrong, a completion error or a hang (the report is on stderr)
  kUsage,    // cannot run as asked: buffers over the memory, --trace file unwritable
};

// Runs the sweep on `backend`; `comm` names the channels and chunk in the
// report's header. Every process of a verbs run calls it with the same
// options.
SweepResult RunSweep(const SweepOptions& options, Backend& backend, const coll::CommOptions& comm);

}  // namespace fathom::transport::worlds
