// fathom replay end to end (issue 28): a scenario with a staged fault runs
// in the simulator, its evidence bundle is written (bundle.h) and read back
// (ReadEvidence), and the replay must name the staged fault first; the CLI
// on the real rxe evidence in testdata/replay names the MTU mismatch and
// exits 0.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "fabric/scenario/scenario.h"
#include "replay/bundle.h"
#include "replay/corpus.h"
#include "replay/engine.h"
#include "replay/evidence.h"
#include "replay/report.h"
#include "tests/cli_run.h"
#include "tests/scratch_dir.h"

namespace fathom::replay {
namespace {

namespace fs = std::filesystem;

// The staged fault of corpus entry `index` (seed 1, medium preset): run,
// bundled, read back and replayed blind.
void ReplayCorpusEntry(int index, const std::string& kind) {
  CorpusTruth truth = CorpusScenario("medium", 1, index);
  ASSERT_EQ(truth.kind, kind);
  auto scenario = sim::LoadScenarioString(truth.scenario_yaml, "staged.yaml");
  ASSERT_TRUE(scenario.ok()) << scenario.status().ToString();
  auto report = sim::RunScenario(*scenario, {});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  test_util::ScratchDir tmp;
  const fs::path dir = tmp.File("bundle");
  ASSERT_TRUE(WriteBundle(*scenario, *report, dir.string()).ok());
  auto evidence = ReadEvidence(dir.string());
  ASSERT_TRUE(evidence.ok()) << evidence.status().ToString();
  ReplayOptions options;
  options.top = 6;
  options.ablate = 1;
  auto result = Replay(*evidence, options);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_FALSE(result->causes.empty()) << FormatText(*result);
  EXPECT_EQ(result->causes[0].hypothesis.kind, truth.kind) << FormatText(*result);
  EXPECT_EQ(result->causes[0].hypothesis.target, truth.target) << FormatText(*result);
  EXPECT_TRUE(result->found) << FormatText(*result);
  EXPECT_TRUE(result->causes[0].ablation_confirms) << FormatText(*result);
}

TEST(ReplayEndToEnd, StagedMtuMismatchIsTopOne) { ReplayCorpusEntry(0, "mtu_mismatch"); }

TEST(ReplayEndToEnd, StagedFecPastItsLimitIsTopOne) { ReplayCorpusEntry(4, "fec_past_limit"); }

TEST(ReplayCli, RealRxeMtuMismatchExitsZeroWithTheCause) {
  const std::string fathom = std::string(FATHOM_BINARY_DIR) + "/tools/fathom";
  if (!fs::exists(fathom)) GTEST_SKIP() << "no " << fathom << " (build the fathom target)";
  test_util::ScratchDir tmp;
  const fs::path out = tmp.File("scenarios");
  auto r = test_util::RunCommand(fathom + " replay " + FATHOM_SOURCE_DIR +
                                     "/testdata/replay/rxe-mtu-mismatch --jobs 2 --json - "
                                     "--scenario-out " +
                                     out.string(),
                                 /*merge_stderr=*/false);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_TRUE(j["found"].get<bool>());
  EXPECT_EQ(j["causes"][0]["kind"], "mtu_mismatch");
  // The reproducing scenario is written and runs as a regression test.
  const std::string scenario = j["scenario"].get<std::string>();
  ASSERT_TRUE(fs::exists(scenario)) << scenario;
  auto sim = test_util::RunCommand(fathom + " sim " + scenario + " --quiet");
  EXPECT_EQ(sim.exit_code, 0) << sim.out;
}

// The real lossy-link evidence (1% random loss in the testbed's switch; the
// job completed, slowly): a lossy link comes first, and the HTML report is
// written.
TEST(ReplayCli, RealRxeLossyLinkIsTheFirstCause) {
  const std::string fathom = std::string(FATHOM_BINARY_DIR) + "/tools/fathom";
  if (!fs::exists(fathom)) GTEST_SKIP() << "no " << fathom << " (build the fathom target)";
  test_util::ScratchDir tmp;
  const fs::path out = tmp.File("out");
  fs::create_directories(out);
  auto r =
      test_util::RunCommand(fathom + " replay " + FATHOM_SOURCE_DIR +
                                "/testdata/replay/rxe-lossy-link --jobs 2 --json - --html " +
                                (out / "report.html").string() + " --scenario-out " + out.string(),
                            /*merge_stderr=*/false);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["causes"][0]["kind"], "lossy_link");
  std::ifstream html(out / "report.html");
  std::stringstream page;
  page << html.rdbuf();
  EXPECT_NE(page.str().find("Root cause: lossy_link"), std::string::npos);
}

TEST(ReplayCli, MissingBundleIsUnusableInput) {
  const std::string fathom = std::string(FATHOM_BINARY_DIR) + "/tools/fathom";
  if (!fs::exists(fathom)) GTEST_SKIP() << "no " << fathom << " (build the fathom target)";
  auto r = test_util::RunCommand(fathom + " replay /nonexistent/bundle");
  EXPECT_EQ(r.exit_code, 2) << r.out;
}

}  // namespace
}  // namespace fathom::replay
