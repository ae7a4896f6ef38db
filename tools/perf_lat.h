// The latency tests of `fathom perf` (write_lat, send_lat, read_lat):
// perftest's ping-pong (or read) loop, timed with the cycle counter.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "tools/perf_session.h"
#include "transport/verbs/perf_report.h"

namespace fathom::tools::perf {

// Ping-pong latency (write_lat, send_lat) and read_lat; both sides run it.
// The loop is perftest's (run_iter_lat_write and friends): every WR is
// signaled and its completion polled before the next step, one cycle-counter
// stamp per iteration (no clock call inside the loop), and a sample is the
// time from one iteration's post to the next one's (halved for ping-pong).
StatusOr<tv::LatResult> RunLat(Session& s, const PerfFlags& f, uint64_t size);

}  // namespace fathom::tools::perf
