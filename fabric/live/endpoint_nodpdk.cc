// The DPDK entry points of a build without libdpdk (pkg-config found none):
// dpdk: endpoints are refused with a message that says so.
#include "fabric/live/endpoint.h"

namespace fathom::live {

bool DpdkBuilt() { return false; }

Status StartDpdk(const std::vector<std::string>& vdevs, const DpdkOptions& /*options*/) {
  if (vdevs.empty()) return Status::Ok();
  return Unavailable("endpoint dpdk:" + vdevs.front() +
                     ": this fathom was built without DPDK (pkg-config libdpdk found nothing)");
}

void StopDpdk() {}

StatusOr<std::unique_ptr<Endpoint>> OpenDpdkEndpoint(const std::string& spec,
                                                     const std::string& /*vdev*/) {
  return Unavailable("endpoint " + spec + ": this fathom was built without DPDK");
}

}  // namespace fathom::live
