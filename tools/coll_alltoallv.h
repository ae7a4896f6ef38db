// `fathom coll alltoallv`'s size matrices (transport/collectives/
// size_matrix.h) from its flags: --matrix FILE (the sizes are the file's:
// one row of the table), --skew SEED [--zipf A] (a mixture-of-experts-like
// matrix per -b/-e size, every rank sending that size in all), or neither
// (uniform: alltoall's load, size / nranks per pair).
#pragma once

#include "base/status.h"
#include "tools/coll_flags.h"
#include "transport/worlds/sweep.h"

namespace fathom::tools {

// Checks the alltoallv flags against the op (they belong to alltoallv
// only). INVALID_ARGUMENT names the flag.
Status CheckAllToAllVFlags(const CollOptions& o);

// Fills s->matrices (and s->sizes for --matrix) for `nranks` ranks; a bad
// matrix file's error names FILE:LINE.
Status AllToAllVMatrices(const CollOptions& o, int nranks, transport::worlds::SweepOptions* s);

}  // namespace fathom::tools
