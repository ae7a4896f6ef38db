// A scenario run split across processes (issue 30): each process builds
// the whole fabric and workload (the same setup everywhere, so QPs, flows
// and random streams agree) but simulates only the nodes its partition
// owns (partition.h). A port whose far end another process owns ships each
// packet it puts on the cable there, with its arrival time; the far end's
// copy of the port delivers it. Conservative synchronization in windows of
// the least link latency (SyncWindow): what is sent in a window arrives in
// a later one, so after each window the processes exchange the window's
// packets in one batch and agree on the next event time and on whether
// every flow has finished. The engine runs in the canonical order, which
// the partition does not change (docs/PARALLEL.md), and so neither do the
// digest, the counters or the flow table.
//
// Ownership: holds the Comm (not owned) and the partition; RunScenario
// calls the hooks on one thread. Supported: flow workloads with WRITE,
// READ or SEND, drop-tail (lossy) and lossless (PFC) fabrics, ECN/DCQCN, port faults (loss,
// FEC, corruption, delay, black holes, flaps, link down), host crashes, and
// collective worlds (AdoptQps; transport/worlds/dist_backend.h), and
// re-routing (a link_down's reroute_via): every process applies the route
// change at its virtual time, in its canonical place among that process's
// events (the routes are every process's copy), and the processes that do
// not own the fault's node take its event out of their digest and event
// count, so the merged figures count it once (a collective world's digest
// too: LocalDigestSum). Lossless classes (PFC) cross (pfc_cross.h), with the PFC watchdog and
// the deadlock check (OnPfcField). Refused with more than one process
// (InvalidArgument): the receive model (planned receives). A switch
// forwards a packet by its own current route even when routes change
// under packets in flight (reroute.h), so every hop crosses a link, and a
// hop between processes is a message with the link's latency as any other;
// a packet handed to a port another process sends on would be a bug
// (CheckNoHandOff: an internal error, abort).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fabric/parallel/capture_merge.h"
#include "fabric/parallel/comm.h"
#include "fabric/parallel/partition.h"
#include "fabric/parallel/pfc_cross.h"
#include "fabric/scenario/scenario.h"
#include "fabric/sim/network.h"

namespace fathom::parallel {

// What one process measured of the run, for the merge and the figures.
struct RunStats {
  uint64_t digest_sum = 0;     // Engine::digest_sum
  uint64_t windows = 0;        // synchronization rounds
  uint64_t shipped = 0;        // packets (entries) sent to other processes
  uint64_t shipped_bytes = 0;  // bytes of those batches
  uint64_t events = 0;
  double sync_wall_s = 0;  // wall time in exchanges and reductions
  // CPU time (user and system, this thread) in ExchangeWindow: a waiting
  // process polls (or yields) for its peers' messages, so its CPU time is
  // not all simulation.
  double sync_cpu_s = 0;
};

class DistributedRun final : public sim::RunHooks {
 public:
  // Also raises glibc's heap trim threshold for the process (parallel_run.cc:
  // the windows' batches would otherwise be fresh pages every window).
  DistributedRun(Comm* comm, const topo::Topology* topology, const proto::Scenario* spec);
  Status OnNetwork(sim::Network& net) override;
  Status OnWorkload(sim::Network& net, sim::FlowDriver& driver) override;
  void Run(sim::Network& net, sim::FlowDriver& driver, Picoseconds end) override;
  // The PFC watchdog and deadlock check (pfc_field.h): split by this
  // process's switches; Run decides the deferred checks after each window,
  // and stops once only their periodic events are pending anywhere.
  void OnPfcField(sim::PfcField* field) override;

  // A collective world (transport/worlds/dist_backend.h) instead of a flow
  // workload: after OnNetwork, once the world's QPs exist. Numbers the QPs
  // (the same in every process) and keeps the pending events of the nodes
  // this process owns. Packets that move real bytes ship them along.
  Status AdoptQps(sim::Network& net);
  // Between two windows of a collective world, and before its first
  // (`window_ran` false): one Comm::Exchange carries this window's packets,
  // the caller's batch `extra[p]` for process p (after the packets; the flow
  // model's posts and ACKs) and the caller's words `agree`, which come back
  // reduced to their least over every process. agree[0] is the caller's
  // next time (its earliest wake-up and the least time its extra batches
  // schedule anywhere); it is lowered here to this process's NextTime and
  // the least arrival it shipped, so the least over all is the earliest
  // event anywhere once everything is delivered (as Sync does for Run).
  // Delivers the packets sent here and returns the extra batches, by
  // sender. Every process calls it, with as many words.
  std::vector<std::string> ExchangeWindow(sim::Network& net, std::vector<int64_t>* agree,
                                          const std::vector<std::string>& extra, bool window_ran);
  // After the last window: the ports that shipped settle their accounts,
  // and no port another process sends on took a packet (CheckNoHandOff).
  void Settle();
  // Keeps the events scheduled since AdoptQps (a fault armed mid-run, as a
  // training loop arms them: transport/worlds/training.h) only where their
  // node is, as AdoptQps did with the setup's.
  void RetainOwnEvents(sim::Network& net);
  // The events this process dispatched, less those one process does not
  // run (as LocalDigestSum): their sum over the processes is one's count.
  uint64_t LocalEvents(const sim::Engine& engine) const;
  // This process's canonical digest sum, less the events one process does
  // not run (pfc_cross.h).
  uint64_t LocalDigestSum(const sim::Engine& engine) const;
  // The earliest of the engine's next event and the start of the oldest
  // entry a deferred remote port has not shipped (pfc_cross.h): where the
  // next window must begin.
  int64_t NextTime(sim::Engine& engine) const;

  // Groups of nodes one process must simulate together (PartitionFabric's
  // `together`: a GPU server's NICs, transport/worlds/dist_backend.cc);
  // before OnNetwork.
  void set_keep_together(std::vector<std::vector<int32_t>> groups) {
    together_ = std::move(groups);
  }
  // Split by hosts (PartitionHosts) instead of by switch units: the flow
  // model's work is per host and its switches carry no events. Before
  // OnNetwork.
  void set_partition_by_hosts(bool on) { by_hosts_ = on; }
  // The hosts the run's work is on (partition.h's `used`: by node id; empty,
  // the default: every host), which the partition balances: a collective's
  // ranks' hosts (transport/worlds/dist_backend.cc). Before OnNetwork.
  void set_used_hosts(std::vector<char> used) { used_ = std::move(used); }
  // A scenario's flows (host ranks), before OnNetwork: their ends are the
  // used hosts.
  void OnFlows(const std::vector<sim::Flow>& flows) override;

  // Captures and trace merged on rank 0 (capture_merge.h; not owned): Run
  // attaches them, flushes them after each window and finishes them.
  void set_outputs(OutputMerge* outputs) { outputs_ = outputs; }

  const Partition& partition() const { return partition_; }
  Picoseconds window() const { return window_; }
  const RunStats& stats() const { return stats_; }

 private:
  static void Ship(void* ctx, const sim::Port& port, uint64_t w0, uint64_t w1, bool alone);
  static void FreeShippedData(void* ctx, sim::Packet* p);
  // Ships what the deferred remote ports started by now (pfc_cross.h).
  void ShipStarted(sim::Network& net);
  void NumberFlows(sim::Network& net);
  void Deliver(sim::Network& net, std::string_view batch);
  // Whether every flow is decided, given how many decisions every process
  // counts in all (Agreement::decided).
  bool AllDecided(const sim::FlowDriver& driver, uint64_t decided_sum);
  // What each process says of itself after a window, ahead of its packets
  // to every process (Sync).
  struct Control {
    int64_t next = 0;      // its next event, or the least arrival it shipped
    uint64_t decided = 0;  // flows decided (FlowResult not pending) here
    int64_t idle = 0;      // 1: only the PFC field's periodic events pending
  };
  // What every process agrees on from all the Controls.
  struct Agreement {
    int64_t next = 0;  // the earliest event anywhere
    uint64_t decided = 0;
    bool idle = false;  // every process idle
  };
  // The end of a window of Run (after ShipStarted), and before the first:
  // ships this window's packets with this process's Control, delivers what the others sent, and
  // returns the agreement. One Comm::Exchange.
  Agreement Sync(sim::Network& net, const sim::FlowDriver& driver);
  // The least arrival time among the entries shipped since the last Sync.
  int64_t shipped_arrival_ = INT64_MAX;

  Comm* comm_;
  const topo::Topology* topology_;
  const proto::Scenario* spec_;
  Partition partition_;
  std::vector<std::vector<int32_t>> together_;  // set_keep_together
  bool by_hosts_ = false;                       // set_partition_by_hosts
  std::vector<char> used_;                      // set_used_hosts, OnFlows
  Picoseconds window_;
  sim::RemoteLink link_{&DistributedRun::Ship, this};
  std::vector<std::string> outbox_;  // by destination process
  // Flows (QpFlow) by number, the same in every process: NIC by NIC in
  // host-rank order, each NIC's QPs in order.
  std::vector<const sim::QpFlow*> flows_;
  std::unordered_map<const sim::QpFlow*, uint32_t> flow_ids_;
  std::vector<sim::Port*> remote_ports_;
  sim::Packet* last_alone_ = nullptr;  // the packet an alone-entry refers to
  RunStats stats_;
  sim::Network* net_ = nullptr;
  std::vector<int32_t> host_index_;  // by node id: its index among the hosts, -1: a switch
  // A RETH's address relative to its region (Ship) and back (Deliver).
  bool RelativeVa(const sim::Packet& p, uint64_t* va) const;
  void AbsoluteVa(sim::Packet* p, uint64_t offset) const;
  // Payloads that arrived with packets (AdoptQps), until the packet is freed.
  std::unordered_map<const sim::Packet*, std::string> shipped_data_;
  OutputMerge* outputs_ = nullptr;
  // The scenario re-routes (reroute_via): the hand-off check watches.
  bool reroutes_ = false;
  // The re-route events this process runs for another's node: their time
  // and component, taken out of the digest and event count (Run).
  std::vector<std::pair<int64_t, uint32_t>> foreign_reroutes_;
  bool KeepReroute(const sim::Event& e);
  // Whether a pending event is this process's to run (AdoptQps).
  bool KeepHere(const sim::Event& e);
  void DropForeignReroutes(int64_t last_until);
  // The PFC field (not owned; null: none or not split).
  sim::PfcField* pfc_field_ = nullptr;
  // Whether this process has nothing but the PFC field's periodic events
  // pending, no stormed queue, and nothing to ship.
  bool OnlyPeriodicPending(sim::Engine& engine) const;
  // The ports whose sending node another process owns (with re-routes):
  // none may send here. CheckNoHandOff (after the last window) aborts,
  // naming the port, if one did.
  std::vector<const sim::Port*> foreign_ports_;
  void CheckNoHandOff() const;
};

}  // namespace fathom::parallel
