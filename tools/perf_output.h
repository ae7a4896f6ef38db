// What `fathom perf` prints besides perftest's result tables (those are
// transport/verbs/perf_report.h): the banner after setup (device, QPs, MTU,
// GID, depths, the local addresses), and the -W port counters, read from
// sysfs before the run and reported as their change after it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "tools/perf_session.h"

namespace fathom::tools::perf {

// perftest's banner: the device, the connection and the local QP addresses.
void PrintBanner(const Session& s, const PerfFlags& f);

// -W: the counters to watch, relative to /sys/class/infiniband/DEV/ports/PORT/
// ("counters/port_xmit_data,hw_counters/out_of_buffer", as perftest).
struct Counter {
  std::string name, path;
  uint64_t before = 0;
};

StatusOr<uint64_t> ReadCounter(const std::string& path, const std::string& name);
// Parses -W's comma-separated list and reads each counter's value before.
StatusOr<std::vector<Counter>> OpenCounters(const std::string& list,
                                            const transport::DeviceInfo& info);

}  // namespace fathom::tools::perf
