// How a distributed run splits a fabric between processes: which process
// owns each node (a switch with the hosts cabled to it is one unit, never
// split), balanced by hosts and ports, and the lookahead that conservative
// synchronization gets from the links that cross between processes.
//
// Pure functions of the topology, the process count and the hosts the run
// uses, so every process computes the same plan without talking to the
// others.
//
// `used` (by node id; 1: a host the run's work is on, e.g. a collective's
// ranks' NICs or a scenario's flows' ends; empty: every host) weights the
// cut by the work rather than by the fabric: a run on the first 2,048 of
// 8,192 hosts is cut across those, not across all (docs/PARALLEL.md); one
// that marks every host (or none) is the plain cut. The units and their
// order are the same either way, and so is the refusal of more processes
// than units. When the used hosts lie in fewer units than there are
// processes, some processes get unused units only: they run no events and
// just take part in the exchanges (the run and its digest are the same).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/units.h"
#include "topologies/topology.h"

namespace fathom::parallel {

struct Partition {
  int32_t processes = 1;
  int32_t units = 0;            // switches (with their hosts), or switchless host groups
  std::vector<int32_t> owner;   // by node id: the process that simulates it
  std::vector<int64_t> weight;  // by process: ports it simulates, or what `used` weighs (below)
  bool Owns(int32_t process, int32_t node) const {
    return owner[static_cast<size_t>(node)] == process;
  }
};

// Splits `topology` into `processes` parts: units in node-id order (builders
// number a pod's switches together), cut into contiguous runs of about equal
// ports. `together` lists groups of nodes that must share a process (the
// NICs of one GPU server: NVLink, PXN and the server's ranks couple them
// with no link latency between them, transport/intranode/). A group of
// hosts that reaches several units (rail wiring: a server's NICs on
// different leaves) becomes its own unit, numbered by its lowest node, and
// its cables cross like any other; any other group merges the units it
// touches. Such server units are cut first, into runs of about equal hosts
// (the ranks), then the other units into runs of about equal ports; without
// them (plain wiring) the cut is by ports alone. With `used`, every unit
// weighs its used hosts instead (switches without any: nothing, they go
// with the runs around them): a collective's ranks sit in runs of hosts,
// and its rings and trees keep most hops under their leaves, so its events
// are where its hosts are; a switch-to-switch port carries only the few
// hops that climb (docs/PARALLEL.md).
// InvalidArgument when there are more processes than units (naming both),
// or none.
StatusOr<Partition> PartitionFabric(const topo::Topology& topology, int32_t processes,
                                    const std::vector<std::vector<int32_t>>& together = {},
                                    const std::vector<char>& used = {});

// The flow model's split (fabric/sim/flow_fabric.h): there the work is per
// host (its NIC, QPs and ranks) and switches carry no events, so the hosts,
// in node-id order, are cut into `processes` contiguous runs of about equal
// count; a `together` group of hosts (a GPU server) is never cut, and a
// switch goes with the process of the lowest host cabled to it (it only
// decides which cables "cross"; nothing runs on them). `weight` counts
// hosts, the used ones only with `used` (unused hosts weigh nothing, and go
// with the runs around them). InvalidArgument when there are more
// processes than host runs (hosts, with each group counted once), or none.
StatusOr<Partition> PartitionHosts(const topo::Topology& topology, int32_t processes,
                                   const std::vector<std::vector<int32_t>>& together = {},
                                   const std::vector<char>& used = {});

// The synchronization window: the least latency of any port direction,
// counting the NIC pipelines Network folds into host links (`host_extra`:
// the lesser of the tx and rx pipelines). A partition-independent grid (the run's stop rule
// uses it), and a valid lookahead because every cross-process link is at
// least this slow. InvalidArgument when a link crossing between processes
// has no latency (zero lookahead): that partition cannot run.
StatusOr<Picoseconds> SyncWindow(const topo::Topology& topology, const Partition& partition,
                                 Picoseconds host_extra);

}  // namespace fathom::parallel
