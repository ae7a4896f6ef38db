// PFC across processes (issue 30): what a distributed run (parallel_run.h)
// does so that a lossless fabric runs split as it runs in one process.
//
// Where PFC state lives. A switch S's ingress account for the port U that
// delivers to it lives in U's Port object (pfc.h), but only S's egress
// ports read and write it, so it is S's state: the process that owns S
// keeps it in its copy of U, the other copies never move. A PAUSE is a
// frame on the reverse link: it crosses like any packet, with the link's
// latency (so within the lookahead), and the far end's process applies it
// to its own egress port at its arrival, the event one process runs.
//
// Two things do not cross as they did for lossy fabrics:
// - a PAUSE pulls back the frames queued behind the one in progress, and a
//   paused class's frames wait: a port whose far end is elsewhere may not
//   ship an entry when it queues it, only once it started serializing
//   (Port::ShipStarted at each window's end; what starts in a window
//   arrives in a later one);
// - a sending port's entries leave its account (a lossless one releases
//   bytes of S's ingress accounts, which may send XON) at their arrival
//   events, which run in the far end's process: the sending process runs
//   settle events with the same key, and their digests and count are
//   taken out of its sum (Port::settle_digest).
//
// PFC's report (per-port PAUSE counters, the summary's PAUSE frames by
// tier) is merged on rank 0 from each process's own ports. The PFC
// watchdog polls each process's switches by switch, and the deadlock
// check gathers every process's part of the waits at the windows' ends
// (fabric/scenario/pfc_field.h: PfcField::Split; DistributedRun wires it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "fabric/scenario/scenario.h"
#include "fabric/sim/network.h"
#include "proto/scenario.pb.h"

namespace fathom::parallel {

// The flow number of a MAC control frame (PAUSE) in a shipped entry: it
// has no QP flow.
inline constexpr uint32_t kMacControlFlowId = 0xFFFFFFFFu;
// What a PAUSE frame delivered from another process points at (no route).
const sim::QpFlow* MacControlFlow();

// Whether the network asserts PFC (a lossless class): remote ports then
// ship deferred.
bool UsesPfc(const sim::Network& net);

// The settle events' digests and count over `ports` (remote ports).
uint64_t SettleDigest(const std::vector<sim::Port*>& ports);
uint64_t SettleEvents(const std::vector<sim::Port*>& ports);

// The report's PFC part, for the merge: each process reports the ports it
// owns (the per-port counters are keyed by port name, the summary's PAUSE
// line is rebuilt from the merged tiers).
std::string EncodePfcReport(const sim::RunReport& r);
bool DecodePfcReport(const std::string& bytes, sim::RunReport* r);
// Adds `b`'s PFC counters to `a` (ports by name, in name order as
// RunScenario lists them), and rebuilds the summary's PAUSE line.
void MergePfcReport(sim::RunReport* a, const sim::RunReport& b);

}  // namespace fathom::parallel
