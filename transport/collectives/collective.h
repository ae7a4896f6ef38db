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

  // What every Advance reads first, together: at thousands of ranks the
  // rank's collective is cold when its completion arrives, and each line
  // (each heap block) is a miss of its own.
  Communicator* comm_;
  bool done_ = false;
  bool masked_ = false;    // the communicator tracks runnable streams
                           // (Communicator::AddWaiter; at most 64 streams)
  bool modelled_ = false;  // comm_->options(), copied at Start()
  uint64_t slots_ = 0;
  size_t unfinished_ = 0;  // streams with steps left
  size_t nstreams_ = 0;    // plan_.streams.size()
  // Per stream, in one block: its step, why it waits, the step next
  // names with its connections (computed once per step, not on every
  // retry), the connection it waits on (Conn::index, -1: none) with its
  // Communicator::version then (until that changes the stream cannot run
  // and is skipped), and a step reducing. The fields one TryStream reads
  // are in its first three lines (it was ten vectors: a miss each).
  struct Current {
    bool valid = false;
    Step step;
    Conn* recv[kMaxPeers] = {nullptr, nullptr, nullptr};
    Conn* send[kMaxPeers] = {nullptr, nullptr, nullptr};
  };
  struct alignas(64) StreamState {
    uint64_t next = 0;  // next step
    uint64_t size = 0;  // its steps
    int32_t wait_conn = -1;
    uint32_t wait_version = 0;
    Block block = Block::kNone;
    int block_peer = -1;  // on whom it waits
    Picoseconds clock;    // when it last ran
    const Stream* stream = nullptr;
    Current cur;
    Pending pending;
  };
  std::vector<StreamState> streams_;
  Trace* trace_;
  double reduce_rate_ = 0;  // comm_->options().host_reduce_bytes_per_s
  // The rank's memory is busy with reductions until then (one resource:
  // the streams' reductions share its bandwidth, one after another).
  Picoseconds memory_free_;
  size_t elem_;
  const uint8_t* in_;
  uint8_t* out_;
  const MemoryRegion* in_mr_ = nullptr;
  const MemoryRegion* out_mr_ = nullptr;
  bool premul_;   // avg on a floating type: scale the local input by 1/n
  bool postdiv_;  // avg on an integer type: divide each completed sum by n
  CollSpec spec_;
  DataType type_;
  RedOp op_;
  Plan plan_;
};

}  // namespace fathom::transport::coll
