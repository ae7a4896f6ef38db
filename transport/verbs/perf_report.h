// Figures and tables of `fathom perf`, in perftest's conventions (ROCEV2.md,
// "Tool conventions"): bandwidth in MB/sec (2^20 bytes per second, as
// perftest) or Gb/sec with --report_gbits, message rate in Mpps, latency in
// usec with perftest's columns. Pure functions over measured samples, so the
// arithmetic and the formats are tested without a device. Values only.
#pragma once

#include <string>
#include <vector>

namespace fathom::transport::verbs {

struct BwResult {
  uint64_t bytes = 0;       // message size
  uint64_t iterations = 0;  // messages completed
  double peak = 0;          // MB/sec or Gb/sec (see units)
  double average = 0;
  double msg_rate_mpps = 0;
};

// From the message size, the number of messages and the elapsed seconds;
// `peak_seconds_per_msg` is the shortest per-message interval seen (0 = use
// the average). `gbits` selects Gb/sec (1e9 bits) instead of MB/sec (2^20 B).
BwResult ComputeBw(uint64_t bytes, uint64_t iterations, double seconds, double peak_seconds_per_msg,
                   bool gbits);

struct LatResult {
  uint64_t bytes = 0;
  uint64_t iterations = 0;
  double t_min = 0, t_max = 0, t_typical = 0, t_avg = 0, t_stdev = 0;  // usec
  double p99 = 0, p999 = 0;                                            // usec
};

// From per-iteration latencies in usec (one-way for write/send ping-pong,
// round trip for read). t_typical is the median, as in perftest.
LatResult ComputeLat(uint64_t bytes, std::vector<double> samples_usec);

// perftest-style tables: a dashed rule, the header line, one line per size.
std::string BwHeader(bool gbits);
std::string BwLine(const BwResult& r);
std::string LatHeader();
std::string LatLine(const LatResult& r);
std::string Rule();

// {"test":"write_bw","unit":"MB/sec","results":[{...}, ...]} — one object per size.
std::string BwJson(const std::string& test, const std::vector<BwResult>& results, bool gbits);
std::string LatJson(const std::string& test, const std::vector<LatResult>& results);

}  // namespace fathom::transport::verbs
