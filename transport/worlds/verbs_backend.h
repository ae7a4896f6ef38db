// VerbsBackend: the Backend of `fathom coll --backend verbs` — this
// process's one rank of the collective, on a VerbsWorld (real verbs, the
// other ranks in other processes met through the bootstrap). Figures are
// combined through the bootstrap and rank 0 prints them; with --trace, rank 0
// gathers every rank's steps into one file (WriteTrace). It borrows the
// world: the caller owns the VerbsWorld and keeps it alive while the backend
// is used.
#pragma once

#include <cstddef>

#include "transport/worlds/backend.h"
#include "transport/worlds/verbs_world.h"

namespace fathom::transport::worlds {

class VerbsBackend final : public Backend {
 public:
  // `average`: nccl-tests' -a, how rank 0 reports the ranks' times: 0 rank
  // 0's, 1 their average, 2 the minimum, 3 the maximum.
  VerbsBackend(VerbsWorld* world, int average) : world_(world), average_(average) {}
  const char* name() const override { return "verbs"; }
  int nranks() const override { return world_->nranks(); }
  std::vector<int> local_ranks() const override { return {world_->rank()}; }
  bool prints() const override { return world_->rank() == 0; }
  std::string Where() const override;
  std::string WhereJson() const override;
  // ", G ranks per node (...)" with --ranks-per-node G > 1; "" when flat.
  std::string PerNode() const;
  std::vector<std::string> DeviceLines() override;
  // The slowest rank's port speed: every rank must pick the same algorithm
  // for a size (ring and tree use different QPs), so they agree on the input.
  BitsPerSecond link_bandwidth() override;
  coll::RunOutcome Run(const coll::CollSpec& spec, coll::DataType type, coll::RedOp op,
                       const std::vector<const void*>& in, const std::vector<void*>& out,
                       coll::Trace* trace) override;
  Status Combine(double* time_us, int64_t* wrong) override;
  Status Barrier() override { return world_->bootstrap().Barrier(); }

  // Rank 0 writes one file with every rank's steps, gathered through the
  // bootstrap, each rank's clock shifted to the reference they all read
  // after the setup barrier (VerbsWorld::trace_origin). The other ranks
  // write nothing, except what would otherwise be lost, on their own host:
  //  - FILE.<rank> with this rank's whole trace when it was over its share
  //    of the gather (rank 0's file then has its first events and says so);
  //  - when the gather cannot run (a failed run aborts the bootstrap for
  //    every rank, or the gather itself fails): rank 0 writes FILE with its
  //    own steps and each other rank FILE.<rank> with its own, all on the
  //    common timeline, and each says so on stderr.
  bool WriteTrace(const std::string& path, const coll::Trace& trace, bool failed) override;

 private:
  // What every rank downloads for the gather at most (every round goes to
  // every rank): rank r > 0 may send budget / (nranks - 1) bytes, about
  // 60 bytes an event.
  static constexpr size_t kTraceGatherBudgetBytes = size_t{64} << 20;
  static constexpr const char* kAlignmentNote =
      "ts 0 = each rank's exit from the bootstrap barrier after connecting; ranks are aligned to "
      "that barrier's skew";
  VerbsWorld* world_;
  int average_;
};

}  // namespace fathom::transport::worlds
