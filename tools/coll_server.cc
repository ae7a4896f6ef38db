#include "tools/coll_server.h"

#include <cstdlib>

namespace fathom::tools {

StatusOr<std::optional<topo::ServerSpec>> ServerFromFlags(const CollOptions& o,
                                                          const std::string& topology_name) {
  std::string gpu = o.server;
  if (gpu == "auto") {
    gpu = topo::ServerTierByDefault(topology_name) ? std::string(topo::kDefaultServerGpu) : "none";
  }
  if (gpu == "none") {
    for (const char* f : {"--nvlink-gbs", "--gpudirect", "--rails"}) {
      if (o.given.count(f) > 0) {
        return InvalidArgument(std::string(f) + " needs a server tier (--server " +
                               topo::ServerPresetNames() + ")");
      }
    }
    return std::optional<topo::ServerSpec>();
  }
  auto spec = topo::ServerPreset(gpu);
  if (!spec.ok()) return spec.status().WithContext("--server");
  if (o.given.count("--nvlink-gbs") > 0) {
    if (!(o.nvlink_gbs > 0) || o.nvlink_gbs > 1e6) {
      return InvalidArgument("--nvlink-gbs " + std::to_string(o.nvlink_gbs) +
                             ": NVLink needs a positive rate in GB/s (one way per GPU, e.g. 450)");
    }
    spec->nvlink_rate = BitsPerSecond(static_cast<int64_t>(o.nvlink_gbs * 8e9));
  }
  if (o.gpudirect != "on" && o.gpudirect != "off") {
    return InvalidArgument("--gpudirect '" + o.gpudirect + "': on|off");
  }
  spec->gpudirect_rdma = o.gpudirect == "on";
  if (!o.rails.empty()) {
    spec->nic_of_gpu.clear();
    size_t at = 0;
    while (at <= o.rails.size()) {
      const size_t comma = o.rails.find(',', at);
      const std::string item =
          o.rails.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
      char* end = nullptr;
      const long v = std::strtol(item.c_str(), &end, 10);
      if (item.empty() || end == nullptr || *end != '\0' || v < -1 || v > 1 << 20) {
        return InvalidArgument("--rails '" + o.rails + "': '" + item +
                               "' is not a NIC index (-1 = none); expected e.g. 0,1,2,3,4,5,6,7");
      }
      spec->nic_of_gpu.push_back(static_cast<int32_t>(v));
      if (comma == std::string::npos) break;
      at = comma + 1;
    }
  }
  return std::optional<topo::ServerSpec>(std::move(spec).value());
}

}  // namespace fathom::tools
