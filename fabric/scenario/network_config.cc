#include "fabric/scenario/network_config.h"

#include "fabric/scenario/congestion_spec.h"
#include "fabric/scenario/qos.h"
#include "fabric/sim/nic_profile.h"

namespace fathom::sim {

StatusOr<NetworkConfig> ScenarioNetworkConfig(const proto::Scenario& s, NetworkConfig base) {
  NetworkConfig nc = base;
  if (s.network().has_switch_buffer_bytes()) {
    nc.switch_buffer_bytes = static_cast<int64_t>(s.network().switch_buffer_bytes());
  }
  if (s.network().has_ecmp_salt()) nc.ecmp_salt = s.network().ecmp_salt();
  if (s.network().has_ipv6()) {
    nc.ipv6 = s.network().ipv6();
  } else if (s.topology().has_cluster_network()) {
    for (const auto& f : s.topology().cluster_network().features()) {
      if (f.has_ipv6_support() && f.ipv6_support()) nc.ipv6 = true;
    }
  }
  if (!s.transport().nic_profile().empty()) {
    FATHOM_ASSIGN_OR_RETURN(nc.nic, NicProfileNamed(s.transport().nic_profile()));
  }
  // network.ecn and transport.dcqcn (congestion_spec.h).
  ApplyCongestion(s, &nc);
  // network.qos: traffic classes and PFC (qos.h).
  if (s.network().has_qos()) nc.qos = QosFromSpec(s.network().qos());
  return nc;
}

}  // namespace fathom::sim
