// The server tier: what is inside one GPU server of the seed's
// "compute-8gpu" kind — GPUs on an NVSwitch fabric (NVLink), PCIe switches
// joining each GPU to its NIC, one NIC per GPU on its rail, NUMA placement.
// A Topology models the network between servers (its hosts are the NICs);
// a ServerTier says which GPU sits behind which NIC and how the GPUs of one
// server reach each other. transport/intranode times NVLink transfers from
// it; `fathom topo` and `fathom coll` describe it.
//
// Ownership: plain values. A ServerTier borrows nothing from the Topology it
// was checked against (it keeps host node ids, valid for that topology).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/units.h"
#include "topologies/topology.h"

namespace fathom::topo {

// One server's hardware. Rates are per direction.
struct ServerSpec {
  std::string gpu;  // the preset it came from: "a100", "h100", "b200" (or "custom")
  int32_t gpus = 8;
  // NVLink: each GPU's aggregate NVLink bandwidth into the NVSwitch fabric,
  // one direction; NVSwitch is non-blocking, so a GPU's own links are the
  // only contention point (NVIDIA HGX whitepapers).
  std::string nvlink_generation;
  int32_t nvlink_links = 0;
  BitsPerSecond nvlink_rate;
  // One NVLink transfer's fixed cost: GPU -> NVSwitch -> GPU, issue to
  // data visible at the peer.
  Picoseconds nvlink_latency;
  // PCIe between a GPU, its PCIe switch and its NIC (and up to the CPU).
  int32_t pcie_gen = 5;
  int32_t pcie_lanes = 16;
  BitsPerSecond pcie_rate;   // one x16 link, one direction, after 128b/130b
  Picoseconds pcie_latency;  // one traversal of a PCIe switch
  int32_t gpus_per_pcie_switch = 2;
  // GPUDirect RDMA: the NIC reads and writes GPU memory through the PCIe
  // switch. Off: each transfer bounces through host memory (a copy GPU ->
  // host before the NIC sends, host -> GPU after it receives), over the
  // PCIe switch's uplink to the CPU, which its GPU-NIC pairs share.
  bool gpudirect_rdma = true;
  int32_t numa_nodes = 2;  // CPU sockets; GPUs split evenly, in order
  // Rail wiring: nic_of_gpu[g] is the NIC (index in the server, = its rail)
  // GPU g uses; empty = GPU g uses NIC g. -1 = none.
  std::vector<int32_t> nic_of_gpu;
};

// "a100", "h100", "b200": the HGX/DGX 8-GPU boards, each figure cited in
// server.cc. Error lists the known names.
StatusOr<ServerSpec> ServerPreset(std::string_view gpu);
// "a100, h100, b200"
std::string ServerPresetNames();

// Where one GPU is.
struct GpuPlace {
  int32_t server = 0;
  int32_t gpu = 0;          // index in its server
  int32_t nic = 0;          // NIC index in the server (its rail)
  int32_t host = -1;        // the NIC's host index in Topology::hosts()
  int32_t pcie_switch = 0;  // in the server
  int32_t numa = 0;
  int32_t nic_numa = 0;  // NUMA node of its NIC (the NIC's PCIe switch's)
};

// The GPUs of a topology's servers. GPU ids are server-major (server *
// gpus + gpu): the rank order collectives use.
struct ServerTier {
  ServerSpec spec;
  int32_t servers = 0;
  std::vector<GpuPlace> gpus;  // by GPU id
  int32_t gpu_count() const { return static_cast<int32_t>(gpus.size()); }
};

// Checks `spec` (positive rates, a NIC for every GPU, one GPU per NIC) and
// places the GPUs of every server of `topology` behind their NICs.
// INVALID_ARGUMENT names the field and value, or the server and GPU left
// without a NIC.
StatusOr<ServerTier> BuildServerTier(const Topology& topology, const ServerSpec& spec);

// NCCL's PXN (PCI x NVLink, NCCL 2.12+): when the NICs of GPUs `a` and `b`
// (GPU ids, different servers) have no path between them (rail-only
// wiring), a's data go over NVLink to the GPU of a's server whose NIC is
// on b's rail, and from that NIC over the rail to b's NIC. Returns that
// proxy GPU's id, or -1 when a direct path exists, the GPUs share a server,
// or no GPU of a's server has a NIC with a path to b's.
int32_t PxnProxyGpu(const Topology& topology, const ServerTier& tier, int32_t a, int32_t b);

// The tier as text lines ("server tier: ...") and as a JSON object.
std::string DescribeServerTier(const ServerTier& tier);
std::string ServerTierJson(const ServerTier& tier);

// The GPU generation `fathom coll` and `fathom topo` assume for the seed's
// scale levels (small, medium, large: 400 Gb/s NICs, ConnectX-7 class, as
// on HGX H100).
inline constexpr std::string_view kDefaultServerGpu = "h100";

// Whether a --topology value gets that server tier by default (`--server
// auto` in `fathom coll` and `fathom topo`): the seed's levels and their
// rail-optimized wirings (medium:rail, large:rail).
inline bool ServerTierByDefault(std::string_view topology_name) {
  return topology_name == "small" || topology_name == "medium" || topology_name == "large" ||
         topology_name == "medium:rail" || topology_name == "large:rail";
}

}  // namespace fathom::topo
