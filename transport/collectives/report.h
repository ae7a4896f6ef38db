// The nccl-tests output of `fathom coll`: busbw factors (nccl-tests'
// PERFORMANCE.md), the table with out-of-place and in-place columns, the
// "# Avg bus bandwidth" footer, and the same rows as JSON.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "transport/collectives/reduce.h"
#include "transport/collectives/schedule.h"

namespace fathom::transport::coll {

// busbw = algbw x factor: allreduce 2(n-1)/n; allgather and reduce-scatter
// (n-1)/n with S the total size; broadcast 1 (ROCEV2.md "Tool conventions").
double BusBwFactor(CollKind kind, int nranks);

struct Measurement {
  double time_us = 0;  // per iteration
  double algbw_gbs = 0;
  double busbw_gbs = 0;
  int64_t wrong = -1;  // -1: not checked
};

struct ReportRow {
  uint64_t size_bytes = 0;
  uint64_t count = 0;
  DataType type = DataType::kFloat32;
  std::string redop;  // "sum" ..., "none" for allgather/broadcast
  int root = -1;
  Measurement out_of_place, in_place;
};

// algbw = size / time in GB/s (1e9 B/s); busbw = algbw x factor.
Measurement Measure(CollKind kind, int nranks, uint64_t size_bytes, double time_us, int64_t wrong);

std::string TableHeader();
std::string TableRow(const ReportRow& row);
// "# Out of bounds values : N OK|FAILED" and "# Avg bus bandwidth    : X".
std::string TableFooter(const std::vector<ReportRow>& rows);
double AverageBusBw(const std::vector<ReportRow>& rows);

std::string RowsToJson(const std::vector<ReportRow>& rows);

}  // namespace fathom::transport::coll
