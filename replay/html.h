// Replay's HTML report (issue 28): one self-contained page a field engineer
// can mail or attach to a ticket — no external script, style, font or image.
// It shows the verdict and the ranked causes (evidence for and against,
// the signature matches, the ablation, the reproducing scenario), the fabric
// drawn as SVG with the suspect links and switches highlighted, a per-rank
// timeline of the job's last seconds, the counter tables and what was read
// from the bundle.
//
// The page carries one small inline script; when it has run it sets
// data-rendered="ok" on <body>, so a headless browser can tell a page that
// rendered from one that broke (tests/replay/html_test.cc).
#pragma once

#include <string>

#include "base/status.h"
#include "replay/result.h"
#include "topologies/topology.h"

namespace fathom::replay {

// The fabric the evidence names: the topology file it came with
// (evidence.topology_path, when that file exists) or a preset name
// (evidence.topology, e.g. "medium" or "fat-tree:k=8"). NotFound when the
// evidence names none.
StatusOr<topo::Topology> EvidenceTopology(const Evidence& evidence);

// The page for `result`, drawing `topology` (may be null: the fabric section
// then says the evidence named no fabric).
std::string RenderHtml(const ReplayResult& result, const topo::Topology* topology);

// The same, with the topology from EvidenceTopology(result.evidence); a
// topology that cannot be built is named in the fabric section.
std::string RenderHtml(const ReplayResult& result);

}  // namespace fathom::replay
