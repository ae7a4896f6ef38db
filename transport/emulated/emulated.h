// The transport API (transport.h) over the emulated RoCEv2 NIC of the
// simulator (fabric/sim): a Device per emulated host, its memory regions,
// CQs and RC QPs, and a Clock in virtual time whose Progress() runs the
// engine until the next completion or the deadline. Collectives and tools
// written against transport.h run on it unchanged, at 1024 ranks and more,
// deterministically.
//
// Ownership: the caller owns the sim::Network (and its Engine and Topology),
// which must outlive the EmulatedFabric; the fabric must outlive every
// Device it opened, and transport.h's rules hold for what a Device hands out.
// Threading: everything runs on the engine's thread.
//
// As on verbs, CreateQp() leaves the QP in INIT (receives may be posted
// before Connect()). Differences from real verbs, on purpose: path MTU is chosen when the QP is
// created (the simulated NIC takes it then), from the peer's active MTU that
// the fabric knows, and Connect() checks the peer's record agrees; lkey/rkey
// 0 mean "modelled bytes" (timed and counted, no data moved).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fabric/sim/network.h"
#include "transport/transport.h"

namespace fathom::transport::emulated {

struct EmulatedOptions {
  // rxe semantics: retry_cnt 7 means retry forever (TESTBED.md: the silent
  // MTU hang). Off = IBTA / hardware: 7 retries, then IBV_WC_RETRY_EXC_ERR.
  bool rxe_infinite_retry = false;
  // Requester asks for an ACK at least every this many packets.
  int ack_every_packets = 64;
  // Placement: hosts[r] is the host (its index in Topology::hosts()) of rank
  // r. Empty: rank r on host r, one rank per host.
  std::vector<int> hosts;
};

// verbs active_mtu for an Ethernet MTU, as rxe derives it: the largest of
// 256..4096 that fits with RoCE headers (80 bytes) (CASES.md 4: 4200 -> 4096,
// 2200 -> 2048, 1500 -> 1024). 0 if none fits.
int ActiveMtuForEthernetMtu(int eth_mtu);

class EmulatedFabric;

// Virtual time of the fabric's engine.
class SimClock final : public Clock {
 public:
  explicit SimClock(EmulatedFabric* fabric) : fabric_(fabric) {}
  Picoseconds Now() override;
  bool Progress(Picoseconds until) override;

 private:
  EmulatedFabric* fabric_;
};

class EmulatedFabric {
 public:
  EmulatedFabric(sim::Network* network, const EmulatedOptions& options);
  EmulatedFabric(const EmulatedFabric&) = delete;
  EmulatedFabric& operator=(const EmulatedFabric&) = delete;

  sim::Network& network() { return *network_; }
  sim::Engine& engine() { return network_->engine(); }
  const EmulatedOptions& options() const { return options_; }
  int nranks() const {
    return options_.hosts.empty() ? network_->host_count()
                                  : static_cast<int>(options_.hosts.size());
  }
  // The host (index in Topology::hosts() and sim::Network::nic()) of `rank`.
  int HostOf(int rank) const {
    return options_.hosts.empty() ? rank : options_.hosts[static_cast<size_t>(rank)];
  }
  // The topology node id of `rank`'s host.
  int32_t NodeOf(int rank) const {
    return network_->topology().hosts()[static_cast<size_t>(HostOf(rank))];
  }
  // The active MTU of rank `rank`'s port (from its host link's MTU).
  int ActiveMtu(int rank) const;
  Clock& clock() { return clock_; }

  // The device of rank `rank` (on host HostOf(rank)).
  StatusOr<std::unique_ptr<Device>> OpenDevice(int rank);

  // Called by CQs when a completion arrives: stops the engine's Run() so that
  // Progress() returns to the driver.
  void OnCompletion();
  bool TakeCompletionFlag() {
    const bool f = completion_flag_;
    completion_flag_ = false;
    return f;
  }

  // Text for the watchdog: for each (rank -> peer, qpn) the QP counters that
  // show trouble and every port on the ECMP paths between the two hosts whose
  // drop counters moved.
  struct QpRef {
    int rank;
    int peer;
    uint32_t qpn;
  };
  std::string Evidence(const std::vector<QpRef>& qps);
  // What Evidence reads, in the order it reads it: per QP its four error
  // counters; per port on the QPs' paths (their order is the topology's,
  // the same in every process) its discards, its peer's receive errors, its
  // transmitted packets and its fault models' text; then the network's
  // drops by reason. A fabric split across processes (DistSimBackend)
  // collects with `owns` (which nodes this process simulates): the values
  // of the others are zero and their texts empty, so the counts summed over
  // the processes, and each text from its node's process, are what one
  // process reads; FormatEvidence makes Evidence's text of them.
  struct EvidenceFacts {
    std::vector<uint64_t> counts;
    std::vector<std::string> texts;  // per port on a path
  };
  EvidenceFacts CollectEvidence(const std::vector<QpRef>& qps,
                                const std::function<bool(int32_t node)>& owns);
  std::string FormatEvidence(const std::vector<QpRef>& qps, const EvidenceFacts& facts) const;
  // Text about a port's fault models for Evidence (who attached them knows
  // them: SimWorld's scenario faults); empty when none dropped or corrupted.
  void set_port_evidence(std::function<std::string(const sim::Port&)> fn) {
    port_evidence_ = std::move(fn);
  }
  // The host a rank runs on, for reports ("h3").
  std::string HostName(int rank) const;

 private:
  sim::Network* network_;
  EmulatedOptions options_;
  SimClock clock_;
  bool completion_flag_ = false;
  std::function<std::string(const sim::Port&)> port_evidence_;

  // Calls on_qp(q) per QP, then on_port(q, node, port) per port on a
  // shortest path q.rank -> q.peer and back, in Evidence's order.
  void VisitEvidencePaths(const std::vector<QpRef>& qps,
                          const std::function<void(const QpRef&)>& on_qp,
                          const std::function<void(int32_t, int32_t)>& on_port) const;
};

}  // namespace fathom::transport::emulated
