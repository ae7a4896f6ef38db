// The consistency checks of `fathom doctor`: given every rank's device and
// port facts, name each inconsistency that breaks or slows training — MTU
// mismatch (the classic hang, CASES.md 1-4), mixed link layers, differing
// GID types (CASES.md 5) or firmware, ports not ACTIVE (CASES.md 9-10), ranks
// without a device. Pure functions, tested without a device. Values only.
#pragma once

#include <string>
#include <vector>

#include "transport/transport.h"

namespace fathom::transport::verbs {

struct RankFacts {
  int rank = -1;
  std::string host;
  std::string error;  // non-empty when the rank could not open a device
  DeviceInfo info;
};

// One line per problem, empty when the ranks agree and every port is ACTIVE.
std::vector<std::string> FindInconsistencies(const std::vector<RankFacts>& ranks);

// The facts as a table, one row per rank.
std::string FactsTable(const std::vector<RankFacts>& ranks);

}  // namespace fathom::transport::verbs
