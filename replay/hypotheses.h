// Replay's hypotheses (issue 28): the world the evidence describes
// (topology, placement, transport settings, the job's traffic) and, from the
// evidence, candidate root causes — each an explicit scenario in fathom's
// scenario language (proto/scenario.proto) with its parameters fitted to
// the evidence: which link or host, when, how long, how bad.
//
// Candidates are ranked cheaply by the evidence for and against them (the
// prior) before any is simulated; the engine (engine.h) simulates only the
// best few.
//
// Ownership: World and Candidate are values built from an Evidence.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "replay/evidence.h"
#include "replay/result.h"
#include "topologies/topology.h"

namespace fathom::replay {

// The job as the evidence describes it, in the simulator's terms.
struct World {
  std::string topology_block;   // the scenario's `topology:` body, indented two spaces
  std::string topology_source;  // "preset medium", "topology file X", "assumed: ..."
  topo::Topology topology;
  // Evidence host name -> topology host name, and back.
  std::map<std::string, std::string> sim_host;
  std::map<std::string, std::string> evidence_host;
  // The job's traffic as flows between topology hosts: the ring (rank r ->
  // rank r+1 of the log's ring order), plus every pair an error names.
  std::vector<std::pair<std::string, std::string>> flows;
  int ib_timeout = 20;  // NCCL's defaults (CASES.md "How long things take")
  int retry_cnt = 7;
  bool rxe_infinite_retry = false;   // rxe: retry_cnt 7 retries forever
  std::optional<int> path_mtu;       // the QPs' MTU, when the evidence shows it
  bool lossless = false;             // pause counters: the RoCE class is lossless (PFC)
  bool pfc_watchdog = false;         // the switches count PFC watchdog drops
  std::optional<int> traffic_class;  // NCCL_IB_TC
  // Bytes each flow carries: the hosts' transmitted bytes (ethtool
  // tx_bytes_phy, median) over their flows; 8 MiB when the evidence has none.
  uint64_t flow_bytes = 8u << 20;
  double host_rate_gbps = 400;  // the hosts' links
  // 4.096 us x 2^ib_timeout x (retry_cnt + 1): how long a QP retries an
  // unanswered packet before IBV_WC_RETRY_EXC_ERR (IBTA 9.7.6.1.3, C9-141;
  // CASES.md "How long things take"). Nominal: the ideal NIC's schedule.
  double retry_budget_s = 0;
  std::vector<std::string> notes;  // what was assumed and why
};

// Builds the world; InvalidArgument when the evidence gives nothing to build
// it from (no topology and no host), or its topology does not load.
StatusOr<World> BuildWorld(const Evidence& evidence);

// One removable part of a hypothesis, for the ablation.
struct Element {
  enum class Type { kFault, kNoReceive, kBackground };
  Type type = Type::kFault;
  std::string label;  // "link_down on leaf0-spine1"
  std::string yaml;   // kFault: the fault's flow map
  std::string host;   // kNoReceive: the host that posts no receive
  std::vector<std::pair<std::string, std::string>> flows;  // kBackground
};

// How to build a hypothesis' scenario.
struct Plan {
  std::vector<Element> elements;
  // Simulated time is evidence time (from the bundle's origin): the fault
  // starts at fault_at_us; the flows at flows_start_us (0, or shortly before
  // the fault when the evidence shows the traffic was live then).
  double fault_at_us = 0;
  double flows_start_us = 0;
  double offset_s = 0;  // evidence time = simulated time + offset_s (0 unless stated)
  double end_us = 0;
  bool send_opcode = false;  // SEND/RECV (RNR hypotheses)
  int rnr_retry = 7;
  bool swallowed = false;  // the library swallowed the errors: they show as stalls
};

struct Candidate {
  Hypothesis hypothesis;
  Plan plan;
  double prior = 0;  // 0..1: how well the evidence alone supports it
  std::vector<std::string> evidence_for, evidence_against;
};

// All hypotheses the evidence suggests, best prior first.
std::vector<Candidate> FormHypotheses(const Evidence& evidence, const World& world);

// The scenario of a plan; `keep[i]` false leaves element i out (ablation).
// `expect_block`: appended as the scenario's `expect:` body when not empty.
std::string ScenarioYaml(const World& world, const Hypothesis& hypothesis, const Plan& plan,
                         const std::vector<bool>& keep, const std::string& expect_block = "");

}  // namespace fathom::replay
