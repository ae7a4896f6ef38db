// One rank's part of one collective: a completion-driven state machine over
// a Communicator. Start() builds the rank's plan (schedule.h); Advance()
// executes every step whose inputs have arrived and whose destinations have
// credit, posting RDMA writes and credit returns, and never waits. Whoever
// drives the rank (driver.h) calls Communicator::Poll() and then Advance()
// whenever the rank's CQ has completions.
//
// Ownership: borrows the Communicator and the caller's buffers, which must
// outlive it; `trace` (optional) is borrowed too.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "transport/collectives/communicator.h"
#include "transport/collectives/reduce.h"
#include "transport/collectives/schedule.h"
#include "transport/collectives/trace.h"

namespace fathom::transport::coll {

class RankCollective {
 public:
  // `in` / `out` may alias (in-place). For modelled communicators both may be
  // null.
  RankCollective(Communicator* comm, const CollSpec& spec, DataType type, RedOp op, const void* in,
                 void* out, Trace* trace = nullptr);

  Status Start(Picoseconds now);
  // Runs every ready step. Returns true in *progressed when a step ran.
  Status Advance(Picoseconds now, bool* progressed);
  bool done() const { return done_; }
  const CollSpec& spec() const { return spec_; }

  // For the watchdog: "allreduce(ring) stream 0 step 5/15: waiting for data
  // from rank 3 (channel 0: 2 arrived, 2 consumed)". One line per unfinished
  // stream. Fills *peers with the peers it waits for.
  std::vector<std::string> DescribeWait(std::vector<int>* peers) const;

 private:
  enum class Block { kNone, kData, kCredit, kLocal };
  Status TryStream(size_t si, Picoseconds now, bool* ran);

  Communicator* comm_;
  CollSpec spec_;
  DataType type_;
  RedOp op_;
  const uint8_t* in_;
  uint8_t* out_;
  Trace* trace_;
  size_t elem_;
  bool premul_;   // avg on a floating type: scale the local input by 1/n
  bool postdiv_;  // avg on an integer type: divide each completed sum by n
  Plan plan_;
  const MemoryRegion* in_mr_ = nullptr;
  const MemoryRegion* out_mr_ = nullptr;
  std::vector<uint64_t> next_;             // per stream: next step
  std::vector<Block> block_;               // per stream: why it waits
  std::vector<int> block_peer_;            // per stream: on whom
  std::vector<Picoseconds> stream_clock_;  // per stream: when it last ran
  bool done_ = false;
};

}  // namespace fathom::transport::coll
