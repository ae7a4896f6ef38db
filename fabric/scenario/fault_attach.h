// Attaches a scenario's fault timeline (proto FaultSpec, faults/spec.h) to a
// simulated Network: resolves each fault's target in the topology (a link
// by name or endpoints, a selector such as "tier:2", a node's links, a
// host), builds one fault model per link direction it covers, and installs
// one Port impairment hook per faulty port (ports without faults keep a null
// hook: the fault-free path pays one branch). Link faults on a host's link
// also reach that host's NIC as port events (IBV_EVENT_PORT_ERR / _ACTIVE),
// and a host crash stops the host's NIC. Written by the faults owner;
// the glue lives here because faults/ must not know the simulator.
//
// Ownership: FaultAttachment owns the FaultSets and the hooks; the Network
// (and its ports) must outlive it, and it must outlive the run. One thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "fabric/sim/network.h"
#include "faults/fault_set.h"
#include "proto/faults.pb.h"
#include "proto/yaml_loader.h"

namespace fathom::sim {

class Reroute;
class Rerouting;

class FaultAttachment {
 public:
  // Validates `faults` (faults::ValidateFaults) and attaches them. `path` is
  // the repeated field's path in the scenario ("faults") so errors name the
  // line: targets that do not exist, a `from` that is not an end of the
  // link, an FEC mode the link rate does not use.
  static StatusOr<std::unique_ptr<FaultAttachment>> Attach(
      Network* network, const google::protobuf::RepeatedPtrField<proto::FaultSpec>& faults,
      uint64_t seed, const config::SourceMap& map, std::string_view path = "faults");

  FaultAttachment(const FaultAttachment&) = delete;
  FaultAttachment& operator=(const FaultAttachment&) = delete;
  ~FaultAttachment();

  // One fault of the timeline and the counters it moved, summed over every
  // place it is attached.
  struct FaultReport {
    std::string name;  // "loss#0" or the spec's name
    std::string kind;
    std::string target;  // as written: link / host, plus "from" if set
    int32_t attachments = 0;
    faults::Counters counters;
  };
  // Brings time-driven counters (link_downed) to `now` and sums them.
  std::vector<FaultReport> Report(Picoseconds now);
  // Text for the run summary: one line per fault with its non-zero counters.
  std::string Summary(Picoseconds now);

  // Faults placed at an iteration (at_iteration, training scenarios) are
  // checked by Attach (targets, parameters) but act only once armed: Arm
  // attaches faults[index] with its times counting from `origin` (when the
  // iteration posted its first collective; now or later). Once each.
  Status Arm(int index, Picoseconds origin);
  bool armed(int index) const { return armed_[static_cast<size_t>(index)]; }

  size_t faulty_ports() const { return ports_.size(); }
  // The fault set on a port direction, or null when it has none.
  const faults::FaultSet* FaultsAt(const Port* port) const;

 private:
  FaultAttachment() = default;
  struct PortFaults;
  static ImpairmentVerdict Decide(void* ctx, const Packet& p, uint32_t wire_bytes, Picoseconds at);
  PortFaults* ForPort(Port* port);
  // Resolves spec `i` and builds its models; with `install`, attaches them
  // and schedules their events (else only the checks).
  Status AttachOne(int i, Picoseconds origin, bool install);

  // A link fault on a host's link, as the host's NIC sees it: port events
  // at each transition of the flap schedule (one engine event at a time).
  struct NicFeed;
  static void OnPortTransition(void* feed, uint64_t);
  static void OnHostCrash(void* nic, uint64_t);

  std::vector<std::unique_ptr<PortFaults>> ports_;  // stable addresses: hooks point in
  std::vector<std::unique_ptr<NicFeed>> feeds_;     // stable addresses: events point in
  std::vector<proto::FaultSpec> specs_;             // the timeline, for reports
  // link_down with reroute_via, by fault index; events point in.
  std::vector<std::pair<int, std::unique_ptr<Reroute>>> reroutes_;
  // What the reroutes share (created with the first); ports point in.
  std::unique_ptr<Rerouting> rerouting_;
  // What Arm needs later.
  Network* network_ = nullptr;
  uint64_t seed_ = 0;
  config::SourceMap map_;
  std::string path_;
  std::vector<bool> armed_;  // per spec: attached (time-placed: at once)
};

}  // namespace fathom::sim
