// What `fathom coll` shares between its backends, after nccl-tests: the size
// sweep (-b -e -i -f), each rank's input pattern and the check of each
// rank's result. A rank's check needs only its own buffers and the pattern's
// formula, so one process per rank (verbs) checks exactly what one process
// holding every rank (sim) checks.
//
// Ownership: RankBuffers owns its memory, allocated once for the largest
// size of a sweep. That matters over verbs: the communicator caches memory
// registrations by address, and memory freed and allocated again at the
// same address would meet a registration that still pins the old pages.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "transport/collectives/reduce.h"
#include "transport/collectives/schedule.h"

namespace fathom::transport::coll {

// "8", "64K", "32M", "1G" (K = 1024). Errors name the flag and the text;
// sizes above kMaxSweepBytes are errors too.
StatusOr<uint64_t> ParseBytes(const std::string& flag, const std::string& text);
inline constexpr uint64_t kMaxSweepBytes = uint64_t{1} << 50;  // 1 PiB

// Memory this process can still allocate: /proc/meminfo's MemAvailable
// (physical pages x page size where there is no such line).
uint64_t AvailableMemoryBytes();

// nccl-tests' sizes: from min_bytes, times `factor` when it is > 1, else
// plus `step_bytes`, while <= max_bytes (one size when both say "no step").
std::vector<uint64_t> SizeSweep(uint64_t min_bytes, uint64_t max_bytes, uint64_t step_bytes,
                                double factor);

// The size of one element of the "count" column: allgather and
// reduce-scatter sizes are totals over all ranks (nccl-tests).
uint64_t CountUnitBytes(CollKind kind, int nranks, DataType type);

// Rank r's input element i: a small integer, exact in every type for sums,
// products, minima and maxima of a few ranks. Periodic in i with period
// kInputPeriod (for i < 2^61), which lets a check compute its reference
// once per residue (RankBuffers::CountWrong).
inline constexpr uint64_t kInputPeriod = 7;
double InputValue(int rank, uint64_t i);

// One rank's input and output for every size of a sweep.
class RankBuffers {
 public:
  // Room for `max_count` (the "count" column's largest value).
  RankBuffers(CollKind kind, int nranks, int rank, DataType type, uint64_t max_count);

  // What the constructor allocates for those arguments (both buffers).
  static uint64_t BytesFor(CollKind kind, int nranks, DataType type, uint64_t max_count);

  // The ranks' server layout (CommOptions::gpus_per_server), for the check
  // of sendrecv: a rank receives from its predecessor on channel 0's ring.
  void set_gpus_per_server(int g) { gpus_per_server_ = g; }

  // alltoallv: the size matrix in elements of the current type
  // (CollSpec::counts), set before Fill(); the constructor's max_count is
  // then the largest row or column sum in elements. Both columns run out of
  // place (MPI_IN_PLACE alltoallv needs a symmetric matrix).
  void set_counts(std::shared_ptr<const std::vector<uint64_t>> counts) {
    counts_ = std::move(counts);
  }

  // Reuses the memory for another type (-d all): the sweep's sizes are in
  // bytes, so a buffer built for the smallest type (int8) holds every type's
  // count. Fill() checks that the count fits.
  void SetType(DataType type) { type_ = type; }
  DataType type() const { return type_; }

  // Writes the rank's input for `count` elements and zeroes its output. In
  // place, input and output share one buffer the way nccl-tests lays them
  // out (allgather, gather: the input is the rank's slice of the output;
  // reduce-scatter, scatter: the output is the rank's slice of the input;
  // the others: one buffer).
  void Fill(uint64_t count, bool in_place);
  const void* in() const { return in_; }
  void* out() const { return out_; }

  // Output elements that differ from the reference (computed from
  // InputValue) by more than the type's tolerance; integer types exactly,
  // wrapping as the type does. A barrier moves no data: 0.
  int64_t CountWrong(uint64_t count, RedOp op, int root) const;

 private:
  CollKind kind_;
  int nranks_, rank_;
  DataType type_;
  int gpus_per_server_ = 0;
  std::shared_ptr<const std::vector<uint64_t>> counts_;
  std::vector<uint8_t> mem_, out_mem_;
  const void* in_ = nullptr;
  void* out_ = nullptr;
};

}  // namespace fathom::transport::coll
