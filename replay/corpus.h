// The synthetic replay corpus (issue 28): seeded scenarios on the medium or
// large preset with ring-collective-like traffic and one random fault each,
// run in the simulator and written as evidence bundles (bundle.h), each with
// its hidden ground truth, so `fathom replay`'s top-1/top-3 accuracy can be
// measured blind.
//
// Traffic: NCCL's inter-node ring on each rail — host g of server s sends to
// host g of server s+1 (mod servers), one flow per host.
// Layout: DIR/NNN/ is the bundle; DIR/NNN/.truth.json holds {"kind",
// "target", "params", "scenario"} and is never read by ReadEvidence (hidden
// files are skipped).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"

namespace fathom::replay {

// Ground truth of one corpus bundle. `kind` is one of Hypothesis::kind's
// names (result.h): mtu_mismatch, link_down, link_flap, lossy_link,
// fec_past_limit, pfc_storm, rnr, congestion.
struct CorpusTruth {
  std::string kind;
  std::string target;  // a link name ("h12-leaf0") or host ("h3")
  std::map<std::string, std::string> params;
  std::string scenario_yaml;  // the scenario that made the bundle
};

// The fault kinds, in the order MakeCorpus cycles through them.
const std::vector<std::string>& CorpusKinds();

// The scenario of corpus entry `index` under `seed` on `preset` ("medium",
// "large"): entry i has kind CorpusKinds()[i % size], its link/host, time
// and size drawn from (seed, i).
CorpusTruth CorpusScenario(const std::string& preset, uint64_t seed, int index);

struct CorpusOptions {
  std::string dir;
  int count = 50;
  uint64_t seed = 1;
  std::string preset = "medium";
  bool progress = false;  // a line per bundle on stderr
};

// Runs each scenario and writes DIR/NNN (bundle + .truth.json). Fails on
// the first scenario that does not load or run, or a write error.
StatusOr<std::vector<CorpusTruth>> MakeCorpus(const CorpusOptions& options);

// Reads DIR/NNN/.truth.json back (for the accuracy benchmark).
StatusOr<CorpusTruth> ReadCorpusTruth(const std::string& bundle_dir);

}  // namespace fathom::replay
