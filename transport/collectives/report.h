// The nccl-tests output of `fathom coll`: busbw factors (nccl-tests'
// PERFORMANCE.md), the parameter and "# Using devices" lines, the table with
// out-of-place and in-place columns (plus the algorithm that ran, last, so
// that nccl-tests parsers reading columns by position still work), the
// "# Avg bus bandwidth" footer, and the same rows as JSON.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "transport/collectives/reduce.h"
#include "transport/collectives/schedule.h"

namespace fathom::transport::coll {

// busbw = algbw x factor: allreduce 2(n-1)/n; allgather and reduce-scatter
// (n-1)/n with S the total size; broadcast 1 (ROCEV2.md "Tool conventions");
// alltoall, gather, scatter (n-1)/n of the total; sendrecv, reduce 1.
double BusBwFactor(CollKind kind, int nranks);

struct Measurement {
  double time_us = 0;  // per iteration
  double algbw_gbs = 0;
  double busbw_gbs = 0;
  int64_t wrong = -1;  // -1: not checked
};

// A link direction that carried well above its share (worlds/hot_links.h).
struct HotLinkRow {
  std::string link;  // "leaf1->spine3"
  uint64_t bytes = 0;
  double x_mean = 0;  // bytes / mean of the switch-to-switch directions
};

struct ReportRow {
  uint64_t size_bytes = 0;
  uint64_t count = 0;
  DataType type = DataType::kFloat32;
  std::string redop;  // "sum" ..., "none" for allgather/broadcast
  int root = -1;
  std::string algo;  // "ring", "tree"
  Measurement out_of_place, in_place;
  // The fabric's counters that moved during this size (sim backend; name,
  // delta), every one the backend has: RowsToJson writes them as "counters".
  std::vector<std::pair<std::string, uint64_t>> counters;
  // The hot links of this size (sim backend: has_hot_links; none may be
  // hot). Text: a "#  hot links:" line; JSON: "hot_links".
  bool has_hot_links = false;
  std::vector<HotLinkRow> hot_links;
};

// "#  hot links (>= 1.5x the mean switch link): leaf1->spine3 12.6 MB (4.0x), ...\n", or
// "" when none is hot.
std::string HotLinksLine(const ReportRow& row);

// What nccl-tests' first line reports.
struct SweepParams {
  int nthreads = 1;
  int ngpus = 1;
  uint64_t min_bytes = 0, max_bytes = 0;
  uint64_t step_bytes = 0;
  double step_factor = 1;  // > 1: the step is a factor
  int warmup_iters = 5, iters = 20, agg_iters = 1;
  int check = 1;
  int graph = 0;
};

// "# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup
// iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0".
std::string ParamsLine(const SweepParams& p);
// One "# Using devices" line: "#  Rank  0 Group  0 Pid   1234 on   host device rxe0 ...".
std::string DeviceLine(int rank, int pid, const std::string& host, const std::string& device);

// algbw = size / time in GB/s (1e9 B/s); busbw = algbw x factor.
Measurement Measure(CollKind kind, int nranks, uint64_t size_bytes, double time_us, int64_t wrong);

std::string TableHeader();
std::string TableRow(const ReportRow& row);
// "# Out of bounds values : N OK|FAILED" and "# Avg bus bandwidth    : X".
std::string TableFooter(const std::vector<ReportRow>& rows);
double AverageBusBw(const std::vector<ReportRow>& rows);

std::string RowsToJson(const std::vector<ReportRow>& rows);

}  // namespace fathom::transport::coll
