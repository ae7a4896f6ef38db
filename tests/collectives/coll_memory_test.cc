// The memory a simulated collective world holds (issue 30): every rank's
// staging lives in this one process, so past a budget a slot's pages go back
// once its chunk is consumed (CommOptions::release_staging and
// staging_budget_bytes, ZeroedBuffer::Release).
// A 1 MiB tree allreduce on the large preset's server tier writes about
// 2 MiB into each rank's staging per run; without the release those pages
// stayed resident (and a new slot's each run, up to `slots` of them), which
// is what made a 1024-rank world 6.5 GB (12.6 GB checked). What may stay is
// the budget and at most a partial page per slot (chunks smaller than a
// page).
#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <vector>

#include "topologies/builders.h"
#include "topologies/server.h"
#include "transport/collectives/nccl_tests.h"
#include "transport/worlds/sim_world.h"

namespace fathom::transport::coll {
namespace {

size_t StagingResident(worlds::SimWorld& w) {
  size_t total = 0;
  for (int r = 0; r < w.nranks(); ++r) total += w.comm(r).StagingResidentBytes();
  return total;
}

TEST(CollMemoryTest, ConsumedStagingGoesBackOnTheLargePresetsServerTier) {
  worlds::SimWorldOptions o;
  o.nranks = 32;  // 4 servers of 8 GPUs
  o.server = topo::ServerPreset("h100").value();
  o.comm.channels = 8;  // one per NIC, as `fathom coll` runs it
  o.comm.staging_budget_bytes = 4 << 20;
  auto made = worlds::SimWorld::Create(topo::BuildPreset("large").value(), o);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  worlds::SimWorld& w = *made.value();
  const int n = w.nranks();
  const uint64_t count = 262144;  // 1 MiB of float
  size_t conns = 0, reserved = 0;
  for (int r = 0; r < n; ++r) {
    conns += w.comm(r).conns().size();
    reserved += w.comm(r).StagingReservedBytes();
  }
  // Each connection reserves slots x chunk of address space (2 MiB).
  EXPECT_EQ(reserved,
            conns * w.comm_options().chunk_bytes * static_cast<size_t>(w.comm_options().slots));
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t bound = (4 << 20) + conns * static_cast<size_t>(w.comm_options().slots) * page;
  std::vector<std::unique_ptr<RankBuffers>> bufs;
  std::vector<const void*> in;
  std::vector<void*> out;
  for (int r = 0; r < n; ++r) {
    bufs.push_back(
        std::make_unique<RankBuffers>(CollKind::kAllReduce, n, r, DataType::kFloat32, count));
    bufs.back()->set_gpus_per_server(w.comm_options().gpus_per_server);
  }
  CollSpec spec;
  spec.kind = CollKind::kAllReduce;
  spec.algorithm = Algorithm::kTree;
  spec.nranks = n;
  spec.count = count;
  // Runs advance every connection's slot: the second and later runs wrote
  // slots the first did not.
  for (int run = 0; run < 3; ++run) {
    in.clear();
    out.clear();
    for (auto& b : bufs) {
      b->Fill(count, false);
      in.push_back(b->in());
      out.push_back(b->out());
    }
    RunOutcome res = w.Run(spec, DataType::kFloat32, RedOp::kSum, in, out);
    ASSERT_TRUE(res.status.ok()) << res.status.ToString() << "\n" << res.report;
    int64_t wrong = 0;
    for (const auto& b : bufs) wrong += b->CountWrong(count, RedOp::kSum, 0);
    EXPECT_EQ(wrong, 0) << "run " << run;
    // Every rank received about twice the message through its staging (the
    // reduction up, the broadcast down): n x 2 MiB written, little kept.
    const size_t resident = StagingResident(w);
    EXPECT_LE(resident, bound) << "run " << run << ": " << resident << " B of staging resident, "
                               << conns << " connections";
    EXPECT_LT(resident, static_cast<size_t>(n) * count * sizeof(float) / 4) << "run " << run;
    // The world's account: within the budget, and the budget was used.
    EXPECT_LE(w.staging_budget().peak, uint64_t{4} << 20);
    EXPECT_GT(w.staging_budget().peak, uint64_t{2} << 20);
  }
}

}  // namespace
}  // namespace fathom::transport::coll
