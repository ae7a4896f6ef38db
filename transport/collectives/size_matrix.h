// All-to-allv's size matrix (issue 31): bytes[i * n + j] is what rank i
// sends rank j (rows = senders, columns = receivers), as MPI_Alltoallv's
// sendcounts row i / recvcounts column j. Loaded from a text file (`fathom
// coll alltoallv --matrix FILE`) or generated with a seeded skew, the load a
// mixture-of-experts layer puts on its all-to-all (a few popular experts
// receive most tokens).
//
// busbw for alltoallv (stated in README and --help): the bytes of the
// busiest rank, max over ranks of max(bytes it sends to others, bytes it
// receives from others), divided by the time. For a uniform matrix of
// blocks B it is (n - 1) B / t, nccl-tests' alltoall busbw.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace fathom::transport::coll {

struct SizeMatrix {
  int n = 0;
  std::vector<uint64_t> bytes;  // n x n, row-major
  std::string source;           // "FILE" or "skew seed S zipf A"

  uint64_t At(int i, int j) const {
    return bytes[static_cast<size_t>(i) * static_cast<size_t>(n) + static_cast<size_t>(j)];
  }
  uint64_t RowBytes(int i) const;  // everything rank i sends (itself included)
  uint64_t ColBytes(int j) const;  // everything rank j receives
  // busbw's numerator (above).
  uint64_t BusiestRankBytes() const;
  // The size column: the mean of the rows (what one rank sends on average,
  // its own block included, as alltoall's size).
  uint64_t MeanRowBytes() const;
  // The largest row or column sum: a rank's buffer.
  uint64_t MaxRowOrColBytes() const;
  // The matrix in elements of `elem_bytes` (each entry rounded down).
  std::vector<uint64_t> Elements(uint64_t elem_bytes) const;
};

// Reads FILE: one line per sender, n non-negative sizes (8, 64K, 1M, 1G;
// K = 1024) separated by spaces, tabs or commas; '#' starts a comment;
// blank lines are skipped. INVALID_ARGUMENT names FILE:LINE and what is
// wrong (a row of the wrong length, a negative or non-numeric entry, too
// few or too many rows).
StatusOr<SizeMatrix> LoadSizeMatrix(const std::string& path, int nranks);

// A mixture-of-experts-like load: every rank sends `row_bytes` in all,
// split over the ranks (experts) by a Zipf law of exponent `zipf` over a
// popularity order drawn from `seed` (the same for every sender: a few
// experts are hot for everyone), each sender's weights jittered by a
// factor in [0.5, 1.5) from the seed too; entries are whole `granule`
// bytes (the element size), the rounding remainder going to the sender's
// hottest expert, so every row sums to row_bytes rounded to granules.
SizeMatrix SkewMatrix(int nranks, uint64_t row_bytes, uint64_t seed, double zipf, uint64_t granule);

}  // namespace fathom::transport::coll
