// Runs every scenarios/faults/*.yaml through the scenario engine (what `fathom
// sim` runs): each must meet its own `expect` block, and its fault must show
// its signature in the report (which flows fail or stall, with which status,
// which fault counters moved).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "fabric/scenario/scenario.h"

namespace fathom::sim {
namespace {

struct Case {
  const char* file;
  // Signature: how many flows fail / stall (-1: some, 0: none), the status
  // the failures carry, and a fault counter that must move.
  int failed;
  int stalled;
  const char* counter;
};

class FaultScenario : public ::testing::TestWithParam<Case> {};

uint64_t Counter(const std::string& summary, const std::string& name) {
  const size_t at = summary.find(" " + name + "=");
  if (at == std::string::npos) return 0;
  return std::stoull(summary.substr(at + name.size() + 2));
}

TEST_P(FaultScenario, MeetsExpectationsAndShowsItsSignature) {
  const Case& c = GetParam();
  const std::string path = std::string(FATHOM_SOURCE_DIR) + "/scenarios/faults/" + c.file;
  auto loaded = LoadScenario(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  auto report = RunScenario(*loaded, RunOptions{});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  std::printf("%s", FormatSummary(*report).c_str());
  for (const std::string& m : CheckExpectations(loaded->spec, *report)) ADD_FAILURE() << m;
  if (c.failed < 0) {
    EXPECT_GT(report->flows_failed, 0);
    EXPECT_GT(report->completion_statuses["IBV_WC_RETRY_EXC_ERR"], 0u);
  } else {
    EXPECT_EQ(report->flows_failed, c.failed);
  }
  if (c.stalled < 0) {
    EXPECT_GT(report->flows_stalled, 0);
  } else {
    EXPECT_EQ(report->flows_stalled, c.stalled);
  }
  // The flows the fault does not reach complete.
  EXPECT_GT(report->flows_completed, 0);
  EXPECT_GT(Counter(report->faults_summary, c.counter), 0u) << c.counter << " did not move:\n"
                                                            << report->faults_summary;
}

INSTANTIATE_TEST_SUITE_P(
    Hangs, FaultScenario,
    ::testing::Values(Case{"mtu_mismatch.yaml", -1, 0, "port_xmit_discards"},
                      Case{"mtu_mismatch_rxe.yaml", 0, -1, "port_xmit_discards"},
                      Case{"flap_short.yaml", 0, 0, "link_downed"},
                      Case{"link_down_long.yaml", -1, 0, "link_downed"},
                      Case{"fec_kp4_below_limit.yaml", 0, 0, "fec_corrected_blocks"},
                      Case{"fec_kp4_past_limit.yaml", -1, 0, "fec_uncorrectable_blocks"},
                      Case{"loss_0_1pct.yaml", 0, 0, "frames_dropped"},
                      Case{"loss_1pct.yaml", 0, 0, "frames_dropped"},
                      Case{"loss_5pct.yaml", 0, 0, "frames_dropped"},
                      Case{"black_hole_ecmp_qps1.yaml", -1, 0, "frames_dropped"},
                      Case{"black_hole_ecmp_qps4.yaml", -1, 0, "frames_dropped"}),
    [](const ::testing::TestParamInfo<Case>& info) {
      std::string name = info.param.file;
      name = name.substr(0, name.find('.'));
      return name;
    });

}  // namespace
}  // namespace fathom::sim
