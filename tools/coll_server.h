// `fathom coll`'s server tier flags (--server, --nvlink-gbs, --gpudirect,
// --rails) into the ServerSpec a SimWorld runs on (topologies/server.h).
#pragma once

#include <optional>
#include <string>

#include "base/status.h"
#include "tools/coll_flags.h"
#include "topologies/server.h"

namespace fathom::tools {

// The server spec the flags ask for on `topology_name` (the --topology
// value, or "" for a scenario): --server auto means the h100 preset where
// topo::ServerTierByDefault says, none elsewhere. nullopt: no
// server tier (one rank per NIC). INVALID_ARGUMENT names the flag.
StatusOr<std::optional<topo::ServerSpec>> ServerFromFlags(const CollOptions& o,
                                                          const std::string& topology_name);

}  // namespace fathom::tools
