// The PFC watchdog and deadlock check split for a distributed run
// (PfcField::Split, issue 30), in one process (LocalComm): the per-switch
// polls and the deferred checks decided at the windows' ends find what the
// unsplit field finds in the default order: the same storms at the same
// polls, the same deadlock cycle, closed and declared at the same times.
// (Across 2-4 MPI processes: parallel_mpi_test's MpiPfcTest.)
#include <gtest/gtest.h>

#include <string>

#include "fabric/parallel/parallel_run.h"
#include "fabric/scenario/scenario.h"

namespace fathom::parallel {
namespace {

// The summary lines that name a storm's detection or restoration, the
// watchdog's totals, or the deadlock (TX DROP counts may differ by a
// frame: the orders differ on ties).
std::string FieldLines(const std::string& summary) {
  std::string out;
  for (size_t at = 0; at < summary.size();) {
    const size_t nl = summary.find('\n', at);
    const std::string line = summary.substr(at, nl - at);
    if (line.find("pfcwd") == 0 || line.find(" storm ") != std::string::npos ||
        line.find("PFC deadlock") == 0) {
      out += line + "\n";
    }
    at = nl == std::string::npos ? summary.size() : nl + 1;
  }
  return out;
}

struct Runs {
  sim::RunReport plain, split;
};

Runs RunBoth(const std::string& path) {
  Runs r;
  auto sc = sim::LoadScenario(path);
  EXPECT_TRUE(sc.ok()) << sc.status().message();
  if (!sc.ok()) return r;
  auto plain = sim::RunScenario(*sc, sim::RunOptions{});
  EXPECT_TRUE(plain.ok()) << plain.status().message();
  LocalComm comm;
  DistributedRun run(&comm, &sc->topology, &sc->spec);
  sim::RunOptions opts;
  opts.hooks = &run;
  auto split = sim::RunScenario(*sc, opts);
  EXPECT_TRUE(split.ok()) << split.status().message();
  if (plain.ok()) r.plain = *plain;
  if (split.ok()) r.split = *split;
  return r;
}

TEST(PfcFieldSplitTest, WatchdogPollsBySwitchStormAsOnePoll) {
  const Runs r =
      RunBoth(std::string(FATHOM_SOURCE_DIR) + "/tests/parallel/scenarios/pfc_storm.yaml");
  EXPECT_EQ(r.plain.pfc_watchdog_storms, 4u);
  EXPECT_EQ(r.split.pfc_watchdog_storms, 4u);
  EXPECT_EQ(r.split.pfc_watchdog_restored, 4u);
  EXPECT_EQ(r.split.flows_completed, 6);
  const std::string lines = FieldLines(r.split.pfc_field_summary);
  EXPECT_NE(lines.find("3.000 ms spine0:0 prio 3 storm detected"), std::string::npos) << lines;
  EXPECT_EQ(lines, FieldLines(r.plain.pfc_field_summary));
}

TEST(PfcFieldSplitTest, DeferredDeadlockChecksFindTheCycleAtTheSameTimes) {
  const Runs r = RunBoth(std::string(FATHOM_SOURCE_DIR) + "/scenarios/faults/pfc_deadlock.yaml");
  EXPECT_TRUE(r.split.pfc_deadlock);
  EXPECT_EQ(r.split.pfc_deadlock_cycle, "leaf1:3 -> spine1:2 -> leaf2:2 -> spine0:1 -> leaf1:3");
  const std::string lines = FieldLines(r.split.pfc_field_summary);
  EXPECT_NE(lines.find("declared at 3.000 ms"), std::string::npos) << lines;
  EXPECT_EQ(lines, FieldLines(r.plain.pfc_field_summary));
}

}  // namespace
}  // namespace fathom::parallel
