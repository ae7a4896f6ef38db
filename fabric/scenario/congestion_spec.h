// The scenario keys of ECN marking (network.ecn) and DCQCN
// (transport.dcqcn): their checks (errors name file:line and field) and
// what they set in NetworkConfig. Both blocks are off when absent.
#pragma once

#include "base/status.h"
#include "fabric/sim/config.h"
#include "proto/scenario.pb.h"
#include "proto/yaml_loader.h"
#include "topologies/topology.h"

namespace fathom::sim {

// Checks network.ecn and transport.dcqcn against each other and the
// topology (a rate above the hosts' line rate is an error).
Status ValidateCongestion(const proto::Scenario& s, const topo::Topology& topo,
                          const config::SourceMap& map);

// Fills config->ecn and config->dcqcn from a validated scenario.
void ApplyCongestion(const proto::Scenario& s, NetworkConfig* config);

}  // namespace fathom::sim
