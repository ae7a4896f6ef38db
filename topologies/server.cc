// Server presets (each figure with its source), the tier's placement checks
// and its description.
#include "topologies/server.h"

#include <sstream>

#include "base/json.h"

namespace fathom::topo {
namespace {

std::string Str(int64_t v) { return std::to_string(v); }

// GB/s (1e9 bytes) per direction -> bits per second.
constexpr BitsPerSecond GBps(int64_t gigabytes) { return BitsPerSecond(gigabytes * 8'000'000'000); }

// PCIe x16 payload rate per direction after line coding: Gen4 16 GT/s and
// Gen5 32 GT/s per lane, 128b/130b (PCI Express Base Specification 4.0
// sec. 4.2.2 and 5.0 sec. 4.2.2): 16 lanes x rate x 128/130 / 8 bits.
constexpr BitsPerSecond PcieX16(int64_t gt_per_s) {
  return BitsPerSecond(16 * gt_per_s * 1'000'000'000 / 130 * 128);
}

// One traversal of a PCIe switch: Broadcom's PEX switch product briefs give
// port-to-port (cut-through) latencies of about 100-150 ns; the upper end is
// used.
constexpr Picoseconds kPcieSwitchLatency = Picoseconds::FromNanoseconds(150);

// One NVLink transfer's fixed cost: NCCL's own tuning table puts the
// hardware latency of an NVLink ring step at 0.47 us (src/graph/tuning.cc
// in github:NVIDIA/nccl, hwLat[NCCL_HW_NVLINK], Ring, LL protocol), the
// figure NVIDIA's library uses for GPU -> NVSwitch -> GPU. The same for
// every generation: NVIDIA publishes no per-generation NVSwitch latency.
constexpr Picoseconds kNvlinkLatency = Picoseconds::FromNanoseconds(470);

}  // namespace

std::string ServerPresetNames() { return "a100, h100, b200"; }

StatusOr<ServerSpec> ServerPreset(std::string_view gpu) {
  ServerSpec s;
  s.gpu = std::string(gpu);
  s.gpus = 8;
  s.pcie_latency = kPcieSwitchLatency;
  s.nvlink_latency = kNvlinkLatency;
  s.gpus_per_pcie_switch = 2;
  s.numa_nodes = 2;
  if (gpu == "a100") {
    // NVIDIA A100 Tensor Core GPU datasheet: "NVLink: 600 GB/s" (third
    // generation, 12 links of 50 GB/s both directions: 300 GB/s each way).
    // HGX A100 8-GPU: six NVSwitches, PCIe Gen4 (NVIDIA A100 Tensor Core GPU
    // Architecture whitepaper); DGX A100: four PCIe switches of two GPUs and
    // two NICs each, two CPU sockets (DGX A100 System Architecture
    // whitepaper).
    s.nvlink_generation = "NVLink3";
    s.nvlink_links = 12;
    s.nvlink_rate = GBps(300);
    s.pcie_gen = 4;
    s.pcie_rate = PcieX16(16);
  } else if (gpu == "h100") {
    // NVIDIA H100 Tensor Core GPU datasheet (SXM5): "NVLink: 900 GB/s"
    // (fourth generation, 18 links of 50 GB/s both directions: 450 GB/s each
    // way); HGX H100: four NVSwitches, PCIe Gen5 (NVIDIA H100 Tensor Core
    // GPU Architecture whitepaper); DGX H100: eight ConnectX-7 400 Gb/s NICs,
    // one per GPU, two CPU sockets (DGX H100 User Guide).
    s.nvlink_generation = "NVLink4";
    s.nvlink_links = 18;
    s.nvlink_rate = GBps(450);
    s.pcie_gen = 5;
    s.pcie_rate = PcieX16(32);
  } else if (gpu == "b200") {
    // NVIDIA DGX B200 datasheet: fifth-generation NVLink, 1.8 TB/s per GPU
    // (18 links of 100 GB/s both directions: 900 GB/s each way); eight
    // ConnectX-7 400 Gb/s NICs on PCIe Gen5, two CPU sockets.
    s.nvlink_generation = "NVLink5";
    s.nvlink_links = 18;
    s.nvlink_rate = GBps(900);
    s.pcie_gen = 5;
    s.pcie_rate = PcieX16(32);
  } else {
    return InvalidArgument("server GPU '" + std::string(gpu) + "': known presets are " +
                           ServerPresetNames());
  }
  return s;
}

StatusOr<ServerTier> BuildServerTier(const Topology& topology, const ServerSpec& spec) {
  const std::string ctx = "server tier (" + spec.gpu + ")";
  if (spec.gpus < 1 || spec.gpus > 1024) {
    return InvalidArgument(ctx + ": gpus = " + Str(spec.gpus) + ", must be 1..1024");
  }
  if (spec.nvlink_rate.bps() <= 0) {
    return InvalidArgument(ctx + ": nvlink rate = " + Str(spec.nvlink_rate.bps()) +
                           " b/s; NVLink needs a positive rate");
  }
  if (spec.nvlink_latency.ps() < 0) {
    return InvalidArgument(ctx + ": nvlink latency = " + Str(spec.nvlink_latency.ps()) +
                           " ps, must be >= 0");
  }
  if (spec.pcie_rate.bps() <= 0 || spec.pcie_latency.ps() < 0) {
    return InvalidArgument(ctx + ": pcie rate " + Str(spec.pcie_rate.bps()) +
                           " b/s must be positive and latency " + Str(spec.pcie_latency.ps()) +
                           " ps >= 0");
  }
  if (spec.gpus_per_pcie_switch < 1 || spec.numa_nodes < 1) {
    return InvalidArgument(ctx + ": gpus_per_pcie_switch " + Str(spec.gpus_per_pcie_switch) +
                           " and numa_nodes " + Str(spec.numa_nodes) + " must be >= 1");
  }
  if (!spec.nic_of_gpu.empty() && static_cast<int32_t>(spec.nic_of_gpu.size()) != spec.gpus) {
    return InvalidArgument(ctx + ": the rail wiring names " + Str(spec.nic_of_gpu.size()) +
                           " GPUs, the server has " + Str(spec.gpus));
  }
  const int32_t servers = topology.servers();
  if (servers < 1) return InvalidArgument(ctx + ": the topology has no servers");
  // NICs of each server, by their index (the host's gpu field is its NIC).
  std::vector<std::vector<int32_t>> nics(static_cast<size_t>(servers));
  const auto& hosts = topology.hosts();
  for (size_t h = 0; h < hosts.size(); ++h) {
    const Node& n = topology.node(hosts[h]);
    if (n.server < 0 || n.server >= servers || n.gpu < 0) continue;
    auto& row = nics[static_cast<size_t>(n.server)];
    if (row.size() <= static_cast<size_t>(n.gpu)) row.resize(static_cast<size_t>(n.gpu) + 1, -1);
    row[static_cast<size_t>(n.gpu)] = static_cast<int32_t>(h);
  }
  ServerTier tier;
  tier.spec = spec;
  tier.servers = servers;
  tier.gpus.reserve(static_cast<size_t>(servers) * static_cast<size_t>(spec.gpus));
  const int32_t switches = (spec.gpus + spec.gpus_per_pcie_switch - 1) / spec.gpus_per_pcie_switch;
  auto numa_of_switch = [&](int32_t sw) {
    return static_cast<int32_t>(int64_t{sw} * spec.numa_nodes / switches);
  };
  for (int32_t s = 0; s < servers; ++s) {
    const auto& row = nics[static_cast<size_t>(s)];
    std::vector<int32_t> owner(row.size(), -1);
    for (int32_t g = 0; g < spec.gpus; ++g) {
      const int32_t nic = spec.nic_of_gpu.empty() ? g : spec.nic_of_gpu[static_cast<size_t>(g)];
      if (nic < 0 || static_cast<size_t>(nic) >= row.size() || row[static_cast<size_t>(nic)] < 0) {
        return InvalidArgument(ctx + ": server " + Str(s) + " GPU " + Str(g) +
                               " has no NIC (the rail wiring gives it NIC " + Str(nic) +
                               "; the server has " + Str(row.size()) + " NIC(s) in " +
                               topology.name() + "): every GPU needs a NIC on its rail");
      }
      if (owner[static_cast<size_t>(nic)] >= 0) {
        return InvalidArgument(ctx + ": server " + Str(s) + " GPUs " +
                               Str(owner[static_cast<size_t>(nic)]) + " and " + Str(g) +
                               " share NIC " + Str(nic) + "; the model has one NIC per GPU");
      }
      owner[static_cast<size_t>(nic)] = g;
      GpuPlace p;
      p.server = s;
      p.gpu = g;
      p.nic = nic;
      p.host = row[static_cast<size_t>(nic)];
      p.pcie_switch = g / spec.gpus_per_pcie_switch;
      p.numa = numa_of_switch(p.pcie_switch);
      p.nic_numa = numa_of_switch(std::min(nic, spec.gpus - 1) / spec.gpus_per_pcie_switch);
      tier.gpus.push_back(p);
    }
  }
  return tier;
}

std::string DescribeServerTier(const ServerTier& t) {
  const ServerSpec& s = t.spec;
  std::ostringstream o;
  o << "server tier:      " << t.servers << " servers x " << s.gpus << " GPUs (" << s.gpu
    << ") = " << t.gpu_count() << " GPUs, one NIC per GPU on its rail\n"
    << "  nvlink:         " << s.nvlink_generation << ", " << s.nvlink_links << " links, "
    << s.nvlink_rate.gbps() / 8 << " GB/s per GPU each way through NVSwitch, "
    << s.nvlink_latency.ns() << " ns per transfer\n"
    << "  pcie:           Gen" << s.pcie_gen << " x" << s.pcie_lanes << " "
    << s.pcie_rate.gbps() / 8 << " GB/s each way, " << s.pcie_latency.ns() << " ns per switch, "
    << s.gpus_per_pcie_switch << " GPU-NIC pairs per switch\n"
    << "  gpudirect rdma: "
    << (s.gpudirect_rdma ? "on (the NIC reads and writes GPU memory through the PCIe switch)"
                         : "off (every transfer bounces through host memory)")
    << "\n  numa:           " << s.numa_nodes << " nodes;";
  if (!t.gpus.empty()) {
    for (int32_t g = 0; g < s.gpus && g < t.gpu_count(); ++g) {
      const GpuPlace& p = t.gpus[static_cast<size_t>(g)];
      o << " gpu" << g << ":nic" << p.nic << "/pcie" << p.pcie_switch << "/numa" << p.numa;
    }
  }
  o << "\n";
  return o.str();
}

std::string ServerTierJson(const ServerTier& t) {
  const ServerSpec& s = t.spec;
  std::ostringstream o;
  o << "{\"gpu\":\"" << JsonEscape(s.gpu) << "\",\"servers\":" << t.servers
    << ",\"gpus_per_server\":" << s.gpus << ",\"gpus\":" << t.gpu_count()
    << ",\"nvlink\":{\"generation\":\"" << s.nvlink_generation << "\",\"links\":" << s.nvlink_links
    << ",\"gbytes_per_s\":" << s.nvlink_rate.gbps() / 8
    << ",\"latency_ns\":" << s.nvlink_latency.ns() << "},\"pcie\":{\"gen\":" << s.pcie_gen
    << ",\"lanes\":" << s.pcie_lanes << ",\"gbytes_per_s\":" << s.pcie_rate.gbps() / 8
    << ",\"switch_latency_ns\":" << s.pcie_latency.ns()
    << ",\"gpus_per_switch\":" << s.gpus_per_pcie_switch
    << "},\"gpudirect_rdma\":" << (s.gpudirect_rdma ? "true" : "false")
    << ",\"numa_nodes\":" << s.numa_nodes << ",\"placement\":[";
  for (int32_t g = 0; g < s.gpus && g < t.gpu_count(); ++g) {
    const GpuPlace& p = t.gpus[static_cast<size_t>(g)];
    o << (g ? "," : "") << "{\"gpu\":" << g << ",\"nic\":" << p.nic
      << ",\"pcie_switch\":" << p.pcie_switch << ",\"numa\":" << p.numa
      << ",\"nic_numa\":" << p.nic_numa << "}";
  }
  o << "]}";
  return o.str();
}

int32_t PxnProxyGpu(const Topology& topology, const ServerTier& tier, int32_t a, int32_t b) {
  const GpuPlace& pa = tier.gpus[static_cast<size_t>(a)];
  const GpuPlace& pb = tier.gpus[static_cast<size_t>(b)];
  if (pa.server == pb.server) return -1;
  auto node = [&](const GpuPlace& p) { return topology.hosts()[static_cast<size_t>(p.host)]; };
  const int32_t hb = node(pb);
  if (topology.Reachable(node(pa), hb)) return -1;
  // The GPU on b's rail first (NCCL picks the NIC local to the peer's
  // rail), then any other GPU whose NIC reaches b's.
  const int32_t g = tier.spec.gpus;
  int32_t other = -1;
  for (int32_t i = 0; i < g; ++i) {
    const int32_t id = pa.server * g + i;
    const GpuPlace& p = tier.gpus[static_cast<size_t>(id)];
    if (!topology.Reachable(node(p), hb)) continue;
    if (p.nic == pb.nic) return id;
    if (other < 0) other = id;
  }
  return other;
}

}  // namespace fathom::topo
