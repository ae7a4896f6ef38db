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
  // When a step's reduction (CommOptions::host_reduce_bytes_per_s) ends and
  // its result can be sent: the driver advances the rank again then.
  // Picoseconds::Max() when no reduction is in progress.
  Picoseconds next_wake() const;
  const CollSpec& spec() const { return spec_; }

  // For the watchdog: "allreduce(ring) stream 0 step 5/15: waiting for data
  // from rank 3 (channel 0: 2 arrived, 2 consumed)". One line per unfinished
  // stream. Fills *peers with the peers it waits for.
  std::vector<std::string> DescribeWait(std::vector<int>* peers) const;

 private:
  enum class Block { kNone, kData, kCredit, kLocal, kReduce };
  Status TryStream(size_t si, Picoseconds now, bool* ran);
  // The second half of a step whose reduction takes time: at `ready` it
  // returns the receive slots' credits and posts the result.
  struct Pending {
    bool active = false;
    Picoseconds ready;
    Conn* recv[kMaxPeers] = {nullptr, nullptr, nullptr};
    Conn* send[kMaxPeers] = {nullptr, nullptr, nullptr};
    const uint8_t* src = nullptr;
    uint32_t lkey = 0;
    uint64_t bytes = 0;
  };
  // Stream si waits on connection `conn` (Conn::index) as it stands now.
  void Wait(size_t si, size_t conn);
  Status FinishStep(size_t si, Conn* const recv[kMaxPeers], Conn* const send[kMaxPeers],
                    const uint8_t* src, uint32_t lkey, uint64_t bytes, Picoseconds now);

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
  std::vector<Pending> pending_;           // per stream: a step reducing
  // Per stream, the step next_ names and its connections, computed once per
  // step (not on every retry), and the connection it waits on (Conn::index,
  // -1: none) with its Communicator::version then: until that changes the
  // stream cannot run and is skipped.
  struct Current {
    bool valid = false;
    Step step;
    Conn* recv[kMaxPeers] = {nullptr, nullptr, nullptr};
    Conn* send[kMaxPeers] = {nullptr, nullptr, nullptr};
  };
  std::vector<Current> current_;
  std::vector<uint64_t> size_;  // per stream: its steps
  std::vector<int64_t> wait_conn_;
  std::vector<uint32_t> wait_version_;
  // The rank's memory is busy with reductions until then (one resource:
  // the streams' reductions share its bandwidth, one after another).
  Picoseconds memory_free_;
  bool done_ = false;
  size_t unfinished_ = 0;  // streams with steps left
  bool masked_ = false;    // the communicator tracks runnable streams
  // (Communicator::AddWaiter; at most 64 streams)
};

}  // namespace fathom::transport::coll
