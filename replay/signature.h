// A symptom's signature, in one shape for both sides of a replay (issue 28):
// what the evidence shows and what a simulated hypothesis shows — which
// hosts saw an error completion and with which status, when the first error
// came, which hosts stalled, and which counter classes moved on which hosts
// and links. Compare() turns the two into the scored Match rows of
// result.h.
//
// Counter names differ by driver (mlx5, rxe, ethtool, IB switch ports) and
// from the simulator's; both sides are mapped to the same small set of
// classes (CounterClass) so they can be compared.
//
// Ownership: Signature is a value; hosts are the topology's host names and
// links the topology's link names ("leaf0-spine1", "h3-leaf0").
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "fabric/scenario/scenario.h"
#include "replay/evidence.h"
#include "replay/result.h"
#include "topologies/topology.h"

namespace fathom::replay {

struct World;

struct Signature {
  // Hosts that saw a completion error (not a flush) or whose peer did.
  std::set<std::string> error_hosts;
  std::set<std::string> statuses;  // IBV_WC_* names, flush errors left out
  double first_error_s = -1;       // evidence time; -1: none
  std::set<std::string> stalled_hosts;
  // Counter class -> hosts / links where it moved (CounterClass names).
  std::map<std::string, std::set<std::string>> host_classes;
  std::map<std::string, std::set<std::string>> link_classes;
  // The run's outcome (simulated signatures only), for the scenario's expect block.
  int flows_completed = 0, flows_failed = 0, flows_stalled = 0;
  std::map<std::string, uint64_t> completion_statuses;
  bool simulated = false;

  bool HasErrors() const { return !error_hosts.empty(); }
  bool HasStalls() const { return !stalled_hosts.empty(); }
  // Anything to explain: errors, stalls, or a counter that moved.
  bool HasSymptom() const;
};

// The class a counter name belongs to, by its name in any of the drivers'
// or the simulator's vocabularies; empty when it says nothing about a fault.
// Classes: timeouts (local ACK timer), sequence (NAKs, out-of-sequence,
// retransmissions), rnr, pause, phy_errors (CRC, symbol, uncorrectable
// FEC), fec_corrected, oversize, link_down, discards (congestion drops),
// ecn (marks, CNPs).
std::string CounterClass(const std::string& name);

// The IBV_WC_* name of a verbs completion status code (ibv_wc_status).
std::string StatusName(int code);

// The topology link a port or link reference names: "leaf0-spine1",
// "leaf0->spine1", "leaf0->spine1#5", "leaf0:3", "spine1-leaf0"; -1 when it
// names none.
int32_t ResolveLink(const topo::Topology& topology, const std::string& name);

// The evidence's signature, in the world's host names. `observable`
// receives the classes the evidence could have shown (the sources it has),
// as "host:CLASS@HOST" (a counter of that class is listed for that host)
// and "link:CLASS" (the switch counters list one).
Signature EvidenceSignature(const Evidence& evidence, const World& world,
                            std::set<std::string>* observable);

// A simulation's signature. `offset_s` maps simulated time to evidence time
// (evidence = sim + offset); `swallowed`: the library swallowed error
// completions, so failed flows show as stalls and no error is seen.
Signature RunSignature(const sim::RunReport& report, const topo::Topology& topology,
                       double offset_s, bool swallowed);

// Scores `sim` against `evidence`: one Match per compared part, weights
// as documented in engine.h. Counter classes that move in `baseline` (the
// world simulated without any fault; may be null) are background on both
// sides and left out.
std::vector<Match> Compare(const Signature& evidence, const Signature& sim,
                           const std::set<std::string>& observable,
                           const Signature* baseline = nullptr);
double WeightedScore(const std::vector<Match>& matches);

// Whether the simulation shows the evidence's symptom at all: an error on
// an erring host, a stall on a stalled host, or (neither in the evidence)
// a counter class moving where the evidence shows it, beyond `baseline`'s.
bool ShowsSymptom(const Signature& evidence, const Signature& sim,
                  const Signature* baseline = nullptr);

// `s` without the counter classes' members that `baseline` shows too.
Signature Residual(const Signature& s, const Signature& baseline);

// JSON round trip (the worker processes hand signatures back this way).
std::string SignatureToJson(const Signature& s);
bool SignatureFromJson(const std::string& text, Signature* s);

}  // namespace fathom::replay
