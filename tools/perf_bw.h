// The bandwidth tests of `fathom perf` (write_bw, read_bw, send_bw): the
// sender's loop, perftest's (tx_depth in flight, CQ moderation, post lists,
// -n iterations or -D seconds), and the send_bw server's receive loop.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "tools/perf_session.h"
#include "transport/verbs/perf_report.h"

namespace fathom::tools::perf {

// The bandwidth sender: keeps tx_depth WRs in flight per QP, one signaled
// every cq_mod (perftest's scheme), posted post_list at a time (-l), for
// `iters` per QP or `duration` seconds. With `receive` (send_bw -b) it also
// reposts the peer's sends as they land, and finishes only once the peer's
// done marker has come too.
StatusOr<tv::BwResult> RunBw(Session& s, const PerfFlags& f, uint64_t size, bool receive);

// The send_bw server: reposts receives until the client's done marker.
Status RunSendBwServer(Session& s, const PerfFlags& f, uint64_t size);

}  // namespace fathom::tools::perf
