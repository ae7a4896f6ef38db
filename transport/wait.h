// Deadline-bounded waits on the transport API, shared by every driver
// (perf, doctor, collectives, tests) and both worlds (wall-clock verbs,
// virtual-time simulator; see Clock in transport.h). A wait never hangs
// silently: when its deadline passes it returns DEADLINE_EXCEEDED naming the
// peer rank, the QP number, the outstanding work requests and the last
// completion seen — the facts a field engineer needs first.
#pragma once

#include <string>
#include <vector>

#include "transport/transport.h"

namespace fathom::transport {

// "rank 3 qpn 0x2a" — how every message names a QP.
std::string DescribeQp(const QueuePair& qp);

// NCCL-like text of a completion, e.g. "completion IBV_WC_RETRY_EXC_ERR (12:
// transport retry counter exceeded) opcode IBV_WC_SEND len 0 wr_id 0x7
// vendor_err 0x81 on rank 3 qpn 0x2a".
std::string DescribeCompletion(const Completion& c);

// OK for IBV_WC_SUCCESS, otherwise ABORTED with DescribeCompletion().
Status CompletionStatus(const Completion& c);

// Polls `cq` until `count` completions have arrived (appended to `out`,
// errors included: the caller decides what an error status means) or until
// `timeout` has passed on `clock`. `qp` is the QP the caller waits on (its
// peer, QPN and queue depths go into the deadline error). `last` (optional)
// carries the last completion seen across calls, for the error text.
Status WaitForCompletions(Clock& clock, CompletionQueue& cq, const QueuePair& qp, int count,
                          Picoseconds timeout, std::vector<Completion>* out,
                          Completion* last = nullptr);

// A Clock on the process's monotonic wall clock (for real verbs).
class WallClock final : public Clock {
 public:
  WallClock();
  Picoseconds Now() override;
  bool Progress(Picoseconds until) override;

 private:
  int64_t origin_ns_;
};

}  // namespace fathom::transport
