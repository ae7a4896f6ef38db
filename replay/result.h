// Replay's outcome (issue 28): the hypotheses formed from the evidence, each
// run in the simulator and scored against it, ablated, and ranked. The text,
// JSON and HTML reports (report.h, html.h) render this value.
//
// Ownership: ReplayResult is a value; the engine (engine.h) fills it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "replay/evidence.h"

namespace fathom::replay {

// One candidate root cause, as an explicit scenario.
struct Hypothesis {
  // mtu_mismatch, link_down, link_flap, lossy_link, fec_past_limit,
  // pfc_storm, gid_misconfig, rnr, swallowed_error, congestion
  std::string kind;
  std::string target;   // the link, port, host or setting it blames ("leaf0->spine1", "h3")
  std::string summary;  // one line a field engineer reads
  std::map<std::string, std::string> params;  // fitted values (at_s, duration_s, mtu, rate, ...)
  std::string scenario_yaml;                  // the reproducing scenario, runnable by `fathom sim`
};

// How one piece of the symptom compared between evidence and simulation.
struct Match {
  std::string what;      // "rank 3 status", "first error time", "counter out_of_sequence on h3"
  std::string expected;  // from the evidence
  std::string got;       // from the simulation
  double weight = 1;
  double score = 0;  // 0..1
};

struct Cause {
  Hypothesis hypothesis;
  bool ran = false;  // the simulation ran (else `error` says why)
  std::string error;
  bool reproduces = false;  // the simulated signature matches the symptom
  double score = 0;         // 0..1, the weighted mean of `matches`
  std::vector<Match> matches;
  std::vector<std::string> evidence_for, evidence_against;
  // Ablation: each element removed and whether the symptom disappeared
  // ("without the fault on leaf0->spine1: all flows complete").
  std::vector<std::string> ablation;
  bool ablation_confirms = false;
  double sim_wall_s = 0;
  // Appended by the engine (h/replay): the evidence-only rank (0..1) that
  // chose it for simulation, and where its scenario was written ("" when not).
  double prior = 0;
  std::string scenario_path;
};

// A per-rank timeline row for the report: what each rank did last.
struct TimelineEvent {
  std::string host;
  int rank = -1;
  double time_s = -1;
  std::string what;
  bool error = false;
};

struct ReplayResult {
  Evidence evidence;
  std::vector<std::string> symptoms;  // the symptom as the engine understood it, one line each
  std::vector<Cause> causes;          // ranked, best first
  bool found = false;                 // causes[0] reproduces the symptom
  std::vector<TimelineEvent> timeline;
  // Suspect fabric elements to highlight: link or port names with a weight 0..1.
  std::map<std::string, double> suspects;
  double wall_s = 0;
  // Appended by the engine (h/replay): what the world assumed (defaults taken,
  // hosts placed), the verdict in one plain sentence, the hypotheses formed but
  // not simulated (ranked below the top N), and the best reproducing scenario.
  std::vector<std::string> notes;
  std::string verdict;
  std::vector<std::string> not_simulated;
  std::string scenario_path;
  int hypotheses_formed = 0;
  int simulations = 0;
};

}  // namespace fathom::replay
