// The intra-node transport: GPUs of one server reach each other over NVLink
// through the NVSwitch (a copy engine writing into the peer GPU's memory),
// behind the same transport API (transport.h) as the NIC. A ServerFabric
// opens, for each rank (a GPU), a Device whose QPs to peers on the same
// server go over NVLink and whose QPs to other servers are the emulated
// NIC's, with one CQ for both: the collectives never learn which a peer is.
//
// Timing model (why not packets): NVLink/NVSwitch is a lossless,
// credit-flow-controlled fabric with no ECMP, PFC or RoCE semantics inside
// the server, and the NVSwitch is non-blocking, so the only places a
// transfer waits are the sending GPU's NVLink egress and the receiving
// GPU's ingress. Each is modelled as a FIFO serializer at the GPU's NVLink
// rate (topo::ServerSpec); a transfer of B bytes posted at t starts at the
// sender's egress when it is free, its head reaches the receiver one NVLink
// latency later and streams in at the rate once the receiver's ingress is
// free; it completes (data visible, both completions) when its last byte is
// in. One engine event per transfer on the simulator's engine, so NVLink
// and the network share one virtual clock; packet-level modelling would
// multiply the events by ~B/4 KiB for no difference in what a collective
// sees. Messages of at most kSmallMessageBytes (credits, flags) are not
// queued behind bulk copies: NVLink interleaves them at flit granularity.
//
// PCIe: with GPUDirect RDMA off (ServerSpec::gpudirect_rdma), a NIC QP's
// data bounce through host memory: the payload is copied GPU -> host over
// the PCIe switch's uplink (shared by its GPU-NIC pairs: one FIFO per
// switch and direction at the PCIe rate) before the NIC sends it, and a
// received payload is copied host -> GPU before its completion is seen.
// With GPUDirect on, the NIC's own profile (sim::NicProfile) times its DMA.
//
// PXN (topo::PxnProxyGpu): a QP to a peer on another server whose NIC has
// no path from this rank's NIC (rail-only wiring) is two RC QPs. Sends go
// over NVLink to the proxy GPU (this server's GPU on the peer's rail) into
// a staging buffer there, and the proxy's NIC writes them to the peer's NIC
// (NCCL 2.12's PXN: the proxy's NIC reads the data from the proxy GPU's
// memory). Receives arrive at this rank's own NIC from the peer's proxy.
// GPUDirect off does not add PCIe bounces to the PXN hop.
//
// Ownership: the caller owns the EmulatedFabric (and its network, engine,
// topology), which must outlive the ServerFabric; the ServerFabric must
// outlive every Device it opened; transport.h's rules hold for what a
// Device hands out. Threading: the engine's thread.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "topologies/server.h"
#include "transport/emulated/emulated.h"
#include "transport/transport.h"

namespace fathom::transport::intranode {

inline constexpr uint32_t kSmallMessageBytes = 64;

// What one GPU's NVLink ports and one PCIe uplink carried.
struct NvlinkCounters {
  uint64_t tx_bytes = 0;
  uint64_t rx_bytes = 0;
  uint64_t transfers = 0;
};

class ServerFabric {
 public:
  // gpu_of_rank[r] is rank r's GPU id in `tier` (its NIC is the emulated
  // fabric's host for rank r: the caller placed it there).
  ServerFabric(emulated::EmulatedFabric* nic_fabric, topo::ServerTier tier,
               std::vector<int32_t> gpu_of_rank);
  ~ServerFabric();
  ServerFabric(const ServerFabric&) = delete;
  ServerFabric& operator=(const ServerFabric&) = delete;

  const topo::ServerTier& tier() const { return tier_; }
  int nranks() const { return static_cast<int>(gpu_of_rank_.size()); }
  const topo::GpuPlace& place(int rank) const {
    return tier_.gpus[static_cast<size_t>(gpu_of_rank_[static_cast<size_t>(rank)])];
  }
  bool SameServer(int a, int b) const { return place(a).server == place(b).server; }

  // Rank `rank`'s device: the NIC's, with NVLink QPs to its server's peers.
  StatusOr<std::unique_ptr<Device>> OpenDevice(int rank);

  // NVLink traffic of rank `rank`'s GPU so far.
  const NvlinkCounters& counters(int rank) const {
    return counters_[static_cast<size_t>(gpu_of_rank_[static_cast<size_t>(rank)])];
  }

  // Internal to the transport (intranode.cc's objects use them).
  struct Transfer;
  class NvlinkQp;
  class PxnQp;
  class ServerCq;
  // The rank of PXN's proxy GPU for sends from `rank` to `peer`, or -1 when
  // they need none (topo::PxnProxyGpu).
  int PxnProxy(int rank, int peer) const;
  // The emulated NIC device of rank `rank` (opened once, owned here): PXN
  // QPs and their staging memory live on their proxy's NIC.
  StatusOr<Device*> NicDevice(int rank);
  void AddPxn(int rank, uint32_t qpn, PxnQp* qp) { Slot(qpn) = {rank, nullptr, qp}; }
  void RemovePxn(int /*rank*/, uint32_t qpn) { Slot(qpn) = QpSlot{}; }
  PxnQp* FindPxn(int rank, uint32_t qpn) const {
    const QpSlot* s = FindSlot(rank, qpn);
    return s == nullptr ? nullptr : s->pxn;
  }
  // Reserves an NVLink transfer of `bytes` from rank src to rank dst posted
  // at `now`; returns when its last byte is at dst.
  Picoseconds ReserveNvlink(int src, int dst, uint64_t bytes, Picoseconds now);
  // Reserves a copy of `bytes` over rank's PCIe switch uplink, toward the
  // host (up) or toward the GPU (down), from `now`; returns its end.
  Picoseconds ReservePcie(int rank, bool up, uint64_t bytes, Picoseconds now);
  // Runs fn at `at` on the engine (the rare paths: PXN relays, PCIe
  // bounces).
  void At(Picoseconds at, std::function<void()> fn);
  // Delivers `wr` of NVLink QP `qp` at `at`, if the QP still exists: one
  // engine event per transfer, its record in a reused slot (no allocation
  // or hashing per transfer: a 1024-GPU allreduce makes millions). The
  // event's object is the record, which the engine fetches a few events
  // ahead; the record points at the QP (QP numbers are never reused, and a
  // QP destroyed with deliveries in flight clears their records).
  void DeliverAt(Picoseconds at, NvlinkQp* qp, const SendWr& wr);
  // The QP is going away: its deliveries in flight are dropped.
  void DropDeliveries(NvlinkQp* qp);
  emulated::EmulatedFabric& nic_fabric() { return *nic_fabric_; }
  uint32_t NextQpn() { return next_qpn_++; }
  void AddQp(int rank, uint32_t qpn, NvlinkQp* qp);
  void RemoveQp(int rank, uint32_t qpn);
  NvlinkQp* FindQp(int rank, uint32_t qpn) const {
    const QpSlot* s = FindSlot(rank, qpn);
    return s == nullptr ? nullptr : s->nvlink;
  }
  // Registered memory of rank `rank` by rkey (for NVLink writes).
  struct Region {
    uint64_t addr = 0;
    uint64_t length = 0;
  };
  void AddRegion(int rank, uint32_t key, Region r);
  void RemoveRegion(int rank, uint32_t key);
  const Region* FindRegion(int rank, uint32_t key) const;

 private:
  static void Fire(void* obj, uint64_t id);
  static void FireDelivery(void* obj, uint64_t unused);
  // NVLink and PXN QPs by QP number (NextQpn hands them out densely from
  // kFirstQpn, across the fabric), with the rank that owns each.
  static constexpr uint32_t kFirstQpn = 0x800000;  // above the NIC's
  struct QpSlot {
    int rank = -1;
    NvlinkQp* nvlink = nullptr;
    PxnQp* pxn = nullptr;
  };
  QpSlot& Slot(uint32_t qpn) {
    const size_t i = qpn - kFirstQpn;
    if (qp_slots_.size() <= i) qp_slots_.resize(i + 1);
    return qp_slots_[i];
  }
  const QpSlot* FindSlot(int rank, uint32_t qpn) const {
    if (qpn < kFirstQpn || qpn - kFirstQpn >= qp_slots_.size()) return nullptr;
    const QpSlot& s = qp_slots_[qpn - kFirstQpn];
    return s.rank == rank ? &s : nullptr;
  }
  // Two cache lines, aligned: the engine fetches both ahead of the event.
  struct alignas(64) Delivery {
    ServerFabric* fabric = nullptr;
    NvlinkQp* qp = nullptr;  // null: dropped (the QP was destroyed)
    SendWr wr;
  };
  static uint64_t Key(int rank, uint32_t v) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(rank)) << 32) | v;
  }

  emulated::EmulatedFabric* nic_fabric_;
  topo::ServerTier tier_;
  std::vector<int32_t> gpu_of_rank_;
  // Per GPU id: NVLink egress and ingress free times, counters.
  std::vector<Picoseconds> tx_free_, rx_free_;
  std::vector<NvlinkCounters> counters_;
  // Per (server, PCIe switch): the uplink's two directions.
  std::vector<Picoseconds> pcie_up_free_, pcie_down_free_;
  int32_t switches_per_server_ = 1;
  std::vector<QpSlot> qp_slots_;
  std::deque<Delivery> deliveries_;                   // stable addresses
  std::vector<Delivery*> free_deliveries_;            // records to reuse
  std::vector<int32_t> rank_of_gpu_;                  // -1: no rank on that GPU
  std::vector<std::unique_ptr<Device>> nic_devices_;  // by rank, opened on demand
  std::unordered_map<uint64_t, Region> regions_;
  std::unordered_map<uint64_t, std::function<void()>> pending_;
  uint64_t next_event_ = 0;
  uint32_t next_qpn_ = kFirstQpn;
};

}  // namespace fathom::transport::intranode
