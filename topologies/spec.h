// Builds a Topology from its Protobuf description (proto/topology.proto), as
// found in topology files and embedded in scenario files. Semantic errors
// ("k must be even") name the file, line and field through the SourceMap the
// YAML loader filled, e.g. "net.yaml:3:6: fat_tree.k: 7 is odd; k must be even".
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "proto/topology.pb.h"
#include "proto/yaml_loader.h"
#include "topologies/topology.h"

namespace fathom::topo {

// `source_map` may be null (errors then carry the field path only);
// `path_prefix` is where the spec sits in its file ("" for a topology file,
// "topology" when a scenario embeds it under that key).
//
// cluster_network: builds the scale level named by spec.level, or the first
// listed when level is empty; node_type must be "compute-<N>gpu" and
// gpu_count must equal servers * N. Its features (rdma_enabled, ipv6_support)
// do not change the graph; they are left in the spec for the simulator.
// link_overrides apply in order after the build.
StatusOr<Topology> BuildTopology(const fathom::proto::TopologySpec& spec,
                                 const config::SourceMap* source_map = nullptr,
                                 std::string_view path_prefix = "");

// Loads a YAML topology file (a TopologySpec at its root) and builds it.
StatusOr<Topology> LoadTopologyFile(const std::string& path);

}  // namespace fathom::topo
