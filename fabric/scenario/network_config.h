// The NetworkConfig a scenario asks for (its `network` block, and the
// cluster network's IPv6 feature): one function, so that `fathom sim`
// (RunScenario) and `fathom coll --scenario` (transport/worlds/sim_world)
// build the same fabric from the same scenario (issue 27: one scenario
// model for sim and coll). The scenario is already validated (LoadScenario).
#pragma once

#include "base/status.h"
#include "fabric/sim/config.h"
#include "proto/scenario.pb.h"

namespace fathom::sim {

// What the scenario sets, over `base` (which keeps everything it leaves
// unset: a caller's NIC profile, say). Fails only on what LoadScenario
// lets through by construction (an unknown NIC profile name).
StatusOr<NetworkConfig> ScenarioNetworkConfig(const proto::Scenario& s, NetworkConfig base = {});

}  // namespace fathom::sim
