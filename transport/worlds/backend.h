// Backend: where the ranks of a collective run, as the nccl-tests sweep
// (sweep.h) sees it — run one collective on the ranks this process holds,
// and combine per-rank figures across processes. Two implementations:
//  - SimBackend (sim_backend.h): every rank in this process over the
//    emulated NIC, on a SimWorld; time is virtual;
//  - VerbsBackend (verbs_backend.h): this process's one rank over real
//    verbs, on a VerbsWorld; the others are other processes.
// A Backend borrows its world: the caller owns the world and keeps it alive
// while the backend is used. One thread uses it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "base/units.h"
#include "transport/collectives/cost_model.h"
#include "transport/collectives/driver.h"
#include "transport/collectives/report.h"
#include "transport/collectives/trace.h"
#include "transport/worlds/progress.h"

namespace fathom::transport::worlds {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  virtual int nranks() const = 0;
  virtual std::vector<int> local_ranks() const = 0;
  // This process prints the table (the sim's only process, verbs' rank 0).
  virtual bool prints() const = 0;
  // "4 ranks on fat-tree k=4" / "rank 0 of 2 on rxe0".
  virtual std::string Where() const = 0;
  // The JSON members naming where it ran: "topology":"..." / "device":"...".
  virtual std::string WhereJson() const = 0;
  // nccl-tests' "# Using devices" lines, one per rank (verbs: gathered from
  // every rank; called by every rank at the same point).
  virtual std::vector<std::string> DeviceLines() = 0;
  // For the choice of algorithm by size: one link's bandwidth, the same on
  // every rank. Called once, at the same point by every rank.
  virtual BitsPerSecond link_bandwidth() = 0;
  // The alpha/beta `--algo auto` chooses by (cost_model.h). The default: one
  // hop at link_bandwidth() with NCCL-class per-step latency of 2 us (a real
  // NIC and host, which this process cannot compute); the sim computes it
  // from its topology. Called once, at the same point by every rank.
  virtual coll::AlphaBeta AlgoModel();
  // The fabric's counters so far (name, cumulative value), in a fixed order:
  // the sweep reports each size's deltas. Empty where the backend sees no
  // fabric (verbs).
  using Counters = std::vector<std::pair<std::string, uint64_t>>;
  virtual Counters FabricCounters() { return {}; }
  // The hot links (hot_links.h) since the last MarkLinks(); a backend that
  // sees no links returns false from has_links().
  virtual bool has_links() const { return false; }
  virtual void MarkLinks() {}
  virtual std::vector<coll::HotLinkRow> HotLinksSinceMark() { return {}; }
  // Runs one collective on this process's ranks; in[i] / out[i] are the
  // buffers of local_ranks()[i] (null in modelled mode).
  virtual coll::RunOutcome Run(const coll::CollSpec& spec, coll::DataType type, coll::RedOp op,
                               const std::vector<const void*>& in, const std::vector<void*>& out,
                               coll::Trace* trace) = 0;
  // Whether a collective of `spec` can run here at all (bad input: a sweep
  // checks every size's before its first; exit 2). Ok by default.
  virtual Status Admit(const coll::CollSpec&) { return Status::Ok(); }
  // Across processes: the per-iteration time to report (verbs: as -a
  // says) and the sum of #wrong (-1 stays -1: not checked).
  virtual Status Combine(double* time_us, int64_t* wrong) = 0;
  virtual Status Barrier() = 0;
  // Reports progress inside one collective where the backend can (the
  // sim's engine); null stops it.
  virtual void WatchProgress(Progress*) {}
  // --trace: writes `trace` (this process's ranks' steps) where the backend
  // puts it; `failed` says the run stopped on a failure. False when a file
  // cannot be written (bad usage: the path).
  virtual bool WriteTrace(const std::string& path, const coll::Trace& trace, bool failed) = 0;
};
// Writes `text` to the --trace file `path`; false (and a line on stderr
// naming the file) when it cannot.
bool WriteTraceFile(const std::string& path, const std::string& text);

}  // namespace fathom::transport::worlds
