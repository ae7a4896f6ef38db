// The hot links of a run (issue 31): which links of the fabric carried
// well above their share. With ECMP polarization (NetworkConfig::ecmp_salt
// off) every switch hashes a flow alike, so flows that met on one uplink
// meet again downstream and a few links carry what many should; `fathom
// coll` names them after each size (text: a "#  hot links:" line; --json:
// a row's "hot_links").
//
// A link direction is hot when it carried at least kHotRatio times the mean
// of the switch-to-switch link directions that carried anything in the same
// interval (host links are the NICs' own: their load is the traffic
// matrix's, not the routing's).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fabric/sim/network.h"

namespace fathom::transport::worlds {

inline constexpr double kHotRatio = 1.5;

struct LinkLoad {
  std::string name;    // "leaf1->spine3" (topology link name, with its direction)
  uint64_t bytes = 0;  // frames transmitted in the interval (port_xmit_data)
  double ratio = 0;    // bytes / the mean of the switch-to-switch directions
};

// Every port's port_xmit_data now, by position in Network::ports().
std::vector<uint64_t> PortBytes(const sim::Network& net);

// The hot link directions between two PortBytes snapshots, hottest first, at
// most `limit` of them.
std::vector<LinkLoad> HotLinks(const sim::Network& net, const std::vector<uint64_t>& before,
                               const std::vector<uint64_t>& after, size_t limit);

// "leaf1->spine3" for the port's direction of its link.
std::string PortLinkName(const sim::Network& net, const sim::Port& port);

}  // namespace fathom::transport::worlds
