// Root and rank options for bootstrap tests on loopback: any free port (tests
// run in parallel) and deadlines long enough for a loaded CI machine.
#pragma once

#include "base/units.h"
#include "transport/bootstrap/bootstrap.h"

namespace fathom::transport::bootstrap::test_util {

inline RootOptions RootOpts(int n) {
  RootOptions o;
  o.port = 0;
  o.world_size = n;
  o.accept_timeout = Picoseconds::FromSeconds(60);
  return o;
}

inline RankOptions RankOpts(const Root& root, int rank, int n) {
  RankOptions o;
  o.root_port = root.port();
  o.rank = rank;
  o.world_size = n;
  o.connect_timeout = Picoseconds::FromSeconds(20);
  o.op_timeout = Picoseconds::FromSeconds(30);
  return o;
}

}  // namespace fathom::transport::bootstrap::test_util
