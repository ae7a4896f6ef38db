// SimBackend: the Backend of `fathom coll --backend sim` — every rank of the
// collective in this process, on a SimWorld (the emulated NIC over a
// simulated topology); time is virtual, so the times it reports are the
// same on every run. It borrows the world: the caller owns the SimWorld and
// keeps it alive while the backend is used.
#pragma once

#include "transport/worlds/backend.h"
#include "transport/worlds/sim_world.h"

namespace fathom::transport::worlds {

class SimBackend final : public Backend {
 public:
  explicit SimBackend(SimWorld* world) : world_(world) {}
  const char* name() const override { return "sim"; }
  int nranks() const override { return world_->nranks(); }
  std::vector<int> local_ranks() const override;
  bool prints() const override { return true; }
  std::string Where() const override;
  std::string WhereJson() const override;
  std::vector<std::string> DeviceLines() override;
  BitsPerSecond link_bandwidth() override;
  coll::AlphaBeta AlgoModel() override { return world_->alpha_beta(); }
  // Drops by reason (drops_<reason>), the ports' packets, discards and
  // errors summed over every port, and the QPs' transport counters summed
  // (their mlx5 names, as `fathom sim` reports them).
  Counters FabricCounters() override;
  bool has_links() const override { return true; }
  void MarkLinks() override;
  std::vector<coll::HotLinkRow> HotLinksSinceMark() override;
  coll::RunOutcome Run(const coll::CollSpec& spec, coll::DataType type, coll::RedOp op,
                       const std::vector<const void*>& in, const std::vector<void*>& out,
                       coll::Trace* trace) override {
    return world_->Run(spec, type, op, in, out, trace);
  }
  // One process, one virtual clock: nothing to combine or wait for.
  Status Combine(double*, int64_t*) override { return Status::Ok(); }
  Status Barrier() override { return Status::Ok(); }
  void WatchProgress(Progress* progress) override;
  // Every rank is in this process, on the one virtual clock: one file as is.
  bool WriteTrace(const std::string& path, const coll::Trace& trace, bool failed) override;

 private:
  SimWorld* world_;
  std::vector<uint64_t> link_mark_;  // PortBytes at MarkLinks()
};

}  // namespace fathom::transport::worlds
