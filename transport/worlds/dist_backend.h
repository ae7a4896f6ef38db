// DistSimBackend: `fathom coll --backend sim` in the canonical event order,
// in one process or split across MPI processes (issue 30; `mpirun -np N
// fathom coll ... --backend sim`). Every process builds the whole SimWorld
// (the same QPs everywhere) and simulates the part of the fabric its
// partition owns (fabric/parallel/); a collective rank's state machine runs
// in the process that owns its host. Time advances in windows of the least
// link latency, as in `fathom sim`'s distributed run; within a window each
// process advances its ranks at their completions and reductions, as the
// Driver does.
//
// The rules that make the result the same for any number of processes
// (rows, #wrong, the canonical trace digest, the watchdog's verdict):
//  - a collective ends when its last rank finishes (the reported end), and
//    the next starts at the following window boundary;
//  - a completion error stops the run at the end of the window it happened
//    in (the earliest error is the one reported, ranks keep running to the
//    window end as every process's do);
//  - the watchdog fires when no rank anywhere progressed for the timeout
//    (progress agreed between windows), at that deadline.
//
// Ownership: borrows the world and the Comm (the caller keeps both alive);
// owns the DistributedRun that splits the network. One thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fabric/parallel/comm.h"
#include "fabric/parallel/parallel_run.h"
#include "fabric/sim/flow_model.h"
#include "transport/worlds/backend.h"
#include "transport/worlds/sim_backend.h"
#include "transport/worlds/sim_world.h"

namespace fathom::transport::worlds {

class DistSimBackend final : public Backend {
 public:
  // `world` must be built with SimWorldOptions::canonical_order. A server
  // tier's servers stay whole, each in one process (the partition keeps a
  // server's NICs together); verbs faults act where their rank's NIC is.
  // The flow model (SimWorld::flow) is replicated where its flows can share
  // a link (flow_fabric.h, Split and Plan). Across processes, a post of a
  // class of flows that spans processes crosses, with the NIC profile's
  // post-to-wire delay as its lookahead; with a profile that has none
  // (ideal), Admit refuses a collective where a post would cross.
  static StatusOr<std::unique_ptr<DistSimBackend>> Create(SimWorld* world, parallel::Comm* comm);

  const char* name() const override { return "sim"; }
  int nranks() const override { return world_->nranks(); }
  std::vector<int> local_ranks() const override { return local_; }
  bool prints() const override { return comm_->rank() == 0; }
  std::string Where() const override;
  std::string WhereJson() const override;
  std::vector<std::string> DeviceLines() override { return base_.DeviceLines(); }
  BitsPerSecond link_bandwidth() override { return base_.link_bandwidth(); }
  coll::AlphaBeta AlgoModel() override { return base_.AlgoModel(); }
  // Summed over the processes (each counts what it simulates).
  Counters FabricCounters() override;
  coll::RunOutcome Run(const coll::CollSpec& spec, coll::DataType type, coll::RedOp op,
                       const std::vector<const void*>& in, const std::vector<void*>& out,
                       coll::Trace* trace) override;
  // InvalidArgument when the NIC profile posts with no delay, several
  // processes run, and a collective of `spec` would have a post cross
  // between them (its data QPs' flows share a link across processes: a
  // tree's, an alltoall's); Ok otherwise. Every process calls it alike, while
  // no collective runs; Run refuses the same.
  Status Admit(const coll::CollSpec& spec) override;
  // The same for what runs without a plan (every flow replicated
  // everywhere: a training loop's groups): InvalidArgument across
  // processes with a profile that posts with no delay.
  Status AdmitWithoutPlan() const;
  Status Combine(double* time_us, int64_t* wrong) override;
  Status Barrier() override { return Status::Ok(); }
  // Rank 0 writes every process's ranks' steps, in (start, rank, stream,
  // name) order; the others write nothing.
  bool WriteTrace(const std::string& path, const coll::Trace& trace, bool failed) override;

  // The windowed loop of Run, for any collectives (the training loop's
  // groups, transport/worlds/training.h): colls[i] runs on comms[i], this
  // process's; ids[i] names it among `total` across every process (the
  // error's order, the stuck set: RunOutcome::stuck_ranks holds ids). It
  // starts at the clock's time and leaves the clock at the window boundary
  // after the end (RunOutcome::end: the last finish, agreed); at the
  // deadline on a hang. Every process calls it.
  //
  // On a hang the report is the Driver's watchdog report (Driver::
  // WatchdogReport), merged from every process's ranks on rank 0: each
  // stuck rank's wait and QPs in id order, the QP lines, the culprit over
  // every process's wait graph, the async events, the fabric's evidence
  // (EmulatedFabric::CollectEvidence: each process's counters for the
  // nodes it simulates, summed) and the verbs faults' report. `to_world`
  // (may be empty) maps the stuck QPs' ranks and peers to the world's for
  // the fabric's evidence (a training group's ranks: training.cc).
  coll::RunOutcome RunWindows(
      const std::vector<coll::Communicator*>& comms,
      const std::vector<coll::RankCollective*>& colls, const std::vector<int>& ids, int total,
      const std::function<void(std::vector<coll::StuckQp>*)>& to_world = nullptr);
  // Lets virtual time pass to `until` with no new traffic, window by window
  // where some process has an event, skipping to the agreed next event
  // otherwise. Every process calls it.
  void Idle(Picoseconds until);
  // Agrees on the trace digest of everything run so far (trace_digest).
  // Every process calls it; Run does.
  void UpdateDigest();
  // The events every process dispatched so far, each counted once (the
  // same for any number of processes). Every process calls it.
  uint64_t EventsSum();
  // Whether this process runs `rank`'s state machine (its host is here).
  bool Owns(int rank) const;
  // Keeps the events scheduled since setup (a fault armed mid-run) only
  // where their node is, as the setup's are (DistributedRun::AdoptQps).
  void RetainArmed() { run_->RetainOwnEvents(world_->network()); }

  // The canonical trace digest of everything run so far, every process's
  // events (the same for any number of processes).
  uint64_t trace_digest() const { return sim::Engine::CanonicalDigest(digest_sum_); }
  const parallel::RunStats& stats() const { return run_->stats(); }
  parallel::Comm* comm() const { return comm_; }
  Picoseconds window() const { return Picoseconds(window_ps_); }
  // The flow model's crossings (flow_fabric.h, Split): posts, ACKs and
  // arrivals this process sent to others.
  uint64_t flow_posts_shipped() const;
  uint64_t flow_acks_shipped() const;
  uint64_t flow_arrivals_shipped() const;
  uint64_t flow_posts_kept() const;  // one-packet posts no other process needed
  // The events this process's engine dispatched, its replicas' included
  // (with the flow model the posts, starts and finishes of the data flows
  // that can share a link with its own): against one process's count, the
  // work replicated.
  uint64_t local_events_run() const { return world_->engine().events_dispatched(); }
  // This process's flow model counters (flows started, re-fills of shared
  // components), or null without the flow model.
  const sim::FlowModel::Stats* flow_stats() const;

 private:
  DistSimBackend(SimWorld* world, parallel::Comm* comm);
  // One exchange between windows: `next_local` (this process's earliest
  // wake-up) and `words`, returned as their least over every process
  // ([0]: the earliest event anywhere, then `words`).
  std::vector<int64_t> ExchangeWindow(int64_t next_local, const std::vector<int64_t>& words,
                                      bool window_ran);
  // The hang's report after its head, merged on rank 0 (RunWindows);
  // `stuck` gets every process's stuck QPs (the culprit marked). Every
  // process calls it.
  std::string HangReport(const std::vector<coll::Communicator*>& comms,
                         const std::vector<coll::RankCollective*>& colls,
                         const std::vector<int>& ids, Picoseconds now,
                         const std::function<void(std::vector<coll::StuckQp>*)>& to_world,
                         std::vector<coll::StuckQp>* stuck);
  // The async events of the ranks' devices, every process's on rank 0 in
  // id order (Driver::AsyncEventLines). Every process calls it.
  std::string AsyncEventLines(const std::vector<coll::Communicator*>& comms,
                              const std::vector<int>& ids);
  // The world's evidence for `qps` (world ranks): SimWorld's
  // fabric_evidence, each process's counters for its nodes summed.
  std::string FabricEvidence(const std::vector<coll::StuckQp>& qps);
  // Before a collective of `spec` (Run): its data QPs decide which flows
  // each process replicates (FlowFabric::Plan). Every process calls it.
  Status PlanFlows(const coll::CollSpec& spec);
  // Under the current plan: InvalidArgument when a post could cross with no
  // lookahead (no_post_lookahead_ and a class spanning processes).
  Status NoPostCrosses() const;
  // Runs the engine to `stop_at`, past the completions that stop it.
  void RunUntil(int64_t stop_at);

  SimWorld* world_;
  parallel::Comm* comm_;
  SimBackend base_;
  proto::Scenario no_spec_;  // the DistributedRun's checks of a flow scenario: none here
  std::unique_ptr<parallel::DistributedRun> run_;
  std::vector<int> local_;  // the ranks whose hosts this process owns
  uint64_t digest_sum_ = 0;
  // The sync window: the least link latency, and with the flow model at
  // most the NIC profile's post-to-wire delay (the posts' lookahead).
  int64_t window_ps_ = 0;
  // The flow model across processes with a profile that posts with no
  // delay: only collectives whose posts stay home may run (Admit).
  bool no_post_lookahead_ = false;
};

}  // namespace fathom::transport::worlds
