// Merging the reports of a distributed run on rank 0 (issue 30): each
// process reports what it simulated (the counters of the ports it sends
// on, the QPs of its hosts, its flows' outcomes as its hosts saw them);
// rank 0 adds them up and recomputes what depends on the whole (flow
// outcomes from both ends, FCT percentiles, goodput, the digest), so that
// the merged report equals the one a single process gives in the same
// event order. Not partition-independent: peak_packets (the largest
// number in flight in one process) and wall_s (the slowest process).
#pragma once

#include <string>
#include <vector>

#include "fabric/parallel/parallel_run.h"
#include "fabric/parallel/partition.h"
#include "fabric/scenario/scenario.h"

namespace fathom::parallel {

// One process's report and figures as bytes (the same binary everywhere).
std::string EncodeReport(const sim::RunReport& report, const RunStats& stats);
Status DecodeReport(const std::string& bytes, sim::RunReport* report, RunStats* stats);

// The whole run's report from every process's (by rank), and the summed
// figures. `topology` names the requester host of each QP row, whose
// process holds its state.
sim::RunReport MergeReports(const std::vector<sim::RunReport>& reports,
                            const std::vector<RunStats>& stats, const Partition& partition,
                            const topo::Topology& topology, RunStats* total);

}  // namespace fathom::parallel
