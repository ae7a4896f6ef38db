// SimWorld: every rank of a collective run inside one process over the
// emulated NIC — topology, simulated network, one Device and Communicator per
// rank, the Driver and its watchdog. `fathom coll --backend sim`, the tests
// and the benchmark use it, so they all run the same code path as verbs.
//
// Ownership: a SimWorld owns the topology, engine, network, devices and
// communicators it builds (and a scenario's faults, CreateFromScenario);
// callers own the buffers they pass to Run().
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fabric/scenario/fault_attach.h"
#include "fabric/scenario/scenario.h"
#include "fabric/sim/engine.h"
#include "fabric/sim/flow_fabric.h"
#include "fabric/sim/network.h"
#include "topologies/server.h"
#include "topologies/topology.h"
#include "transport/collectives/cost_model.h"
#include "transport/collectives/driver.h"
#include "transport/emulated/emulated.h"
#include "transport/faulty/faulty.h"
#include "transport/intranode/intranode.h"

namespace fathom::transport::worlds {

struct SimWorldOptions {
  int nranks = 0;  // ranks, placed by PlaceRanks(); 0 = as many as PlaceRanks finds
  uint64_t seed = 1;
  coll::CommOptions comm;
  emulated::EmulatedOptions emulated;
  sim::NetworkConfig network;
  // What `fathom coll --profile` / `--fabric` named (coll_profile.h), for
  // the report; the profile's settings are in `comm` and `emulated`.
  std::string profile = "ideal";
  bool lossless = false;
  // No rank progressed for this long (virtual time): the watchdog fires.
  // Zero: DefaultWatchdog(comm.qp, network.nic), after a scenario's
  // transport settings.
  Picoseconds watchdog;
  // Verbs-level faults (transport/faulty; `fathom coll --verbs-fault`): the
  // named ranks' devices are wrapped; times are virtual, from 0.
  std::vector<faulty::VerbsFault> verbs_faults;
  // The server tier (topologies/server.h): ranks are GPUs (server-major,
  // every GPU of a server before the next; nranks a multiple of the GPUs
  // per server, or at most one server's), peers on one server talk over
  // NVLink (transport/intranode), the collectives run hierarchically.
  // Unset: one rank per NIC, flat (PlaceRanks).
  std::optional<topo::ServerSpec> server;
  // The engine's canonical event order (fabric/sim/engine.h), which a run
  // split across processes needs (dist_backend.h). Off: the default order.
  bool canonical_order = false;
};

// The watchdog a sim world uses unless told: long enough for the transport
// to give up on its own, so that a real job's error (IBV_WC_RETRY_EXC_ERR
// after (retry_cnt + 1) local ACK timeouts of 4.096 us x 2^timeout, IBTA
// 1.4 C9-140 / CASES.md "How long things take") surfaces before the
// watchdog calls it a hang. The margin is one more such budget: measured
// NICs take up to 1.74x the nominal budget (CASES.md 21: ConnectX-6, T=20,
// 59.8 s against 34.4 s). At least 1 s (the former default), for transfers
// that legitimately complete nothing for a while. With rxe's infinite retry
// the same budget: past it the job hangs as it would forever. timeout 0 (no
// local ACK timer): the budget of NCCL's default exponent, 20.
Picoseconds DefaultWatchdog(const QpOptions& qp);
// The same for a NIC profile's retransmission (fabric/sim/nic_profile.h):
// at least twice its time to IBV_WC_RETRY_EXC_ERR, which a ConnectX profile
// stretches far past the nominal budget (cx6 at timeout 14: 3.66 s against
// 0.54 s), so that the NIC's error, not the watchdog, ends a run on a dead
// link.
Picoseconds DefaultWatchdog(const QpOptions& qp, const sim::NicProfile& nic);

// A scenario's verbs_faults, checked (rank and peer below `nranks`; errors
// name file:line and field), in the form SimWorldOptions takes.
StatusOr<std::vector<faulty::VerbsFault>> VerbsFaultsFromScenario(
    const sim::LoadedScenario& scenario, int nranks);

// Where ranks go: rank r on the r-th host (topology rank order) of a set of
// hosts that all reach each other, so that every pair a ring or a tree uses
// has a path. On all-pairs fabrics that is the first `nranks` hosts; on
// rail-only wiring (back-to-back, CASES.md 8) the hosts of one rail — on the
// "small" preset, rank 0 on server 0 GPU 0 and rank 1 on server 1 GPU 0.
// nranks 0 = every host of that set. INVALID_ARGUMENT, naming how many hosts
// qualify, when there are fewer than nranks.
StatusOr<std::vector<int>> PlaceRanks(const topo::Topology& topology, int nranks);

// The fabric's evidence starts from the stuck QPs (world ranks): those with
// sends outstanding go to `refs` (whose paths the evidence walks), and the
// culprit's QP gives the "fabric: the culprit's QP runs from host ..." line
// (empty without a culprit), which this returns.
std::string CulpritLine(const emulated::EmulatedFabric& fabric,
                        const std::vector<coll::StuckQp>& qps,
                        std::vector<emulated::EmulatedFabric::QpRef>* refs);

class SimWorld {
 public:
  static StatusOr<std::unique_ptr<SimWorld>> Create(topo::Topology topology,
                                                    const SimWorldOptions& options);
  // A world on a scenario, every section honoured or refused (issue 27):
  //  - topology; network block (switch_buffer_bytes, ecmp_salt, ipv6:
  //    sim::ScenarioNetworkConfig, as `fathom sim` builds it); seed when not
  //    0; faults, attached to the network and owned by the world; verbs_faults
  //    (transport/faulty) after those of `options`;
  //  - transport, where it sets them, over `options`: ib_timeout,
  //    retry_cnt, rnr_retry, min_rnr_timer, traffic_class, max_rd_atomic,
  //    qps_per_connection (QPs per connection, multi_qp.h), mtu_bytes,
  //    rxe_infinite_retry, and message_bytes as the chunk (the largest
  //    write a collective posts);
  //  - refused (INVALID_ARGUMENT naming file:line and the field): opcode
  //    send/read (collectives write with immediate), message_bytes below 8
  //    or above 64 MiB (it sizes the staging slots);
  //  - workload and end_time_us (the collective and its sweep replace them):
  //    a line in *notes says so; a training workload is the caller's
  //    (training.h); `expect` too (coll_expect.h).
  static StatusOr<std::unique_ptr<SimWorld>> CreateFromScenario(
      const sim::LoadedScenario& scenario, SimWorldOptions options,
      std::vector<std::string>* notes = nullptr);
  ~SimWorld();

  int nranks() const { return static_cast<int>(comms_.size()); }
  sim::Engine& engine() { return *engine_; }
  sim::Network& network() { return *network_; }
  emulated::EmulatedFabric& fabric() { return *fabric_; }
  const topo::Topology& topology() const { return *topology_; }
  coll::Communicator& comm(int rank) { return *comms_[static_cast<size_t>(rank)]; }
  // What the ranks' communicators were built with (a scenario's settings
  // applied).
  const coll::CommOptions& comm_options() const { return comm_options_; }
  // The network the world was built with (a scenario's network block
  // applied).
  const sim::NetworkConfig& network_config() const { return network_config_; }
  // The alpha/beta of this fabric for `--algo auto` (cost_model.h): the
  // slowest path a ring or tree neighbour pair of the placed ranks uses
  // (its hops, link latencies, bottleneck rate, frame sizes at the path
  // MTU) and the NIC's per-message latency.
  const coll::AlphaBeta& alpha_beta() const { return alpha_beta_; }
  const std::string& profile() const { return profile_; }
  bool lossless() const { return lossless_; }
  // Rank `rank`'s device (wrapped by the verbs-fault injector when there
  // are verbs faults): other communicators on the same hosts (training.h).
  Device& device(int rank) { return *devices_[static_cast<size_t>(rank)]; }
  // The watchdog timeout and fabric evidence the world's driver runs with,
  // for drivers of such communicators. The evidence callback takes the
  // world's ranks.
  const coll::DriverOptions& driver_options() const { return driver_options_; }
  // The server tier and its NVLink fabric (null without one).
  const intranode::ServerFabric* server() const { return server_.get(); }
  // The flow model (null with the packet model).
  sim::FlowFabric* flow() { return flow_.get(); }
  // The verbs-level fault injector (null without verbs faults).
  const faulty::FaultInjector* verbs_faults() const { return injector_.get(); }
  // A fabric split across processes (dist_backend.h): the verbs faults of
  // the ranks `local` accepts act here, the others' wake-ups are dropped
  // (their process runs them). No-op without verbs faults.
  void SplitVerbsFaults(std::function<bool(int rank)> local);
  // Arms the scenario's faults[index] (verbs: verbs_faults[index]) placed
  // at an iteration (training.h) to act from `at` (virtual time, >= now).
  Status ArmScenarioFault(bool verbs, int index, Picoseconds at);
  // The ranks' staging kept resident under CommOptions::staging_budget_bytes
  // (now and at its peak).
  const coll::StagingBudget& staging_budget() const { return *staging_budget_; }

  // Runs one collective on all ranks; in[r] / out[r] are rank r's buffers
  // (null in modelled mode). spec.algorithm must be resolved.
  coll::RunOutcome Run(const coll::CollSpec& spec, coll::DataType type, coll::RedOp op,
                       const std::vector<const void*>& in, const std::vector<void*>& out,
                       coll::Trace* trace = nullptr);

 private:
  SimWorld() = default;

  std::unique_ptr<topo::Topology> topology_;
  std::unique_ptr<sim::Engine> engine_;
  std::unique_ptr<sim::Network> network_;
  // The flow model (options.network.flow_model; fabric/sim/flow_fabric.h),
  // destroyed before the network.
  std::unique_ptr<sim::FlowFabric> flow_;
  std::unique_ptr<emulated::EmulatedFabric> fabric_;
  std::unique_ptr<intranode::ServerFabric> server_;  // after fabric_: destroyed first
  std::vector<std::unique_ptr<Device>> devices_;
  std::vector<std::unique_ptr<coll::Communicator>> comms_;
  std::unique_ptr<coll::Driver> driver_;
  coll::DriverOptions driver_options_;
  coll::CommOptions comm_options_;
  sim::NetworkConfig network_config_;
  coll::AlphaBeta alpha_beta_;
  std::string profile_ = "ideal";
  bool lossless_ = false;
  std::unique_ptr<sim::FaultAttachment> faults_;  // a scenario's; on network_
  // Verbs-level faults: the injector (outlives devices_) and the engine
  // events that wake the driver for delayed completions and timed faults.
  class Waker;
  std::unique_ptr<Waker> waker_;
  std::unique_ptr<faulty::FaultInjector> injector_;
  size_t scenario_verbs_base_ = 0;  // the plan index of verbs_faults[0]
  // The ranks' resident staging (CommOptions::staging_budget); the
  // communicators use it only while a collective runs.
  std::unique_ptr<coll::StagingBudget> staging_budget_;
};

}  // namespace fathom::transport::worlds
