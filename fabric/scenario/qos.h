// The scenario's traffic classes (network.qos, proto QosSpec): checked
// against the topology (bad input names file:line and the field), and turned
// into the simulator's QosConfig (fabric/sim/pfc.h).
#pragma once

#include "base/status.h"
#include "fabric/sim/pfc.h"
#include "proto/scenario.pb.h"
#include "proto/yaml_loader.h"
#include "topologies/topology.h"

namespace fathom::sim {

// Checks network.qos: priorities 0..7 and DSCPs 0..63, a lossless class's
// thresholds (XON below XOFF; dynamic needs the shared buffer), and a
// headroom of at least one MTU's round trip on every link into a switch.
Status ValidateQos(const proto::QosSpec& qos, const topo::Topology& topology,
                   const config::SourceMap& map);
// The QosConfig a validated QosSpec describes.
QosConfig QosFromSpec(const proto::QosSpec& qos);

}  // namespace fathom::sim
