#include "transport/worlds/coll_profile.h"

namespace fathom::transport::worlds {

StatusOr<CollProfile> FindCollProfile(std::string_view name) {
  CollProfile p;
  p.name = std::string(name);
  if (name == "ideal") return p;
  if (name == "rxe") {
    // rxe is a software NIC on a CPU host: the collective's reduction runs
    // on the CPU from DRAM. One socket of 8 DDR4-3200 channels: 3200 MT/s x
    // 8 bytes = 25.6 GB/s per channel (JEDEC JESD79-4 DDR4-3200), 204.8 GB/s.
    p.host_reduce_bytes_per_s = 8 * 25.6e9;
    p.rxe_infinite_retry = true;  // as --rxe (EmulatedOptions, TESTBED.md)
    return p;
  }
  if (name == "cx6") {
    // ConnectX-6 as in the DGX A100, one NIC per A100 GPU: the reduction
    // runs on the GPU at its HBM2e bandwidth, 2,039 GB/s (NVIDIA A100
    // Tensor Core GPU datasheet, A100 80GB SXM).
    p.host_reduce_bytes_per_s = 2039e9;
    return p;
  }
  if (name == "cx7") {
    // ConnectX-7 as in the DGX H100, one NIC per H100 GPU: HBM3 at 3.35 TB/s
    // (NVIDIA H100 Tensor Core GPU datasheet, H100 SXM).
    p.host_reduce_bytes_per_s = 3.35e12;
    return p;
  }
  return InvalidArgument("--profile '" + std::string(name) + "': expected one of " +
                         std::string(kCollProfileNames));
}

}  // namespace fathom::transport::worlds
