// `mpirun -np N fathom sim` (issue 30): the same trace digest and report
// for 1, 2, 3 and 4 processes (oversubscribed on these 2-core machines),
// and the launch errors rank 0 reports with exit 2.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli_run.h"

namespace fathom {
namespace {

const std::string kFathom = std::string(FATHOM_BINARY_DIR) + "/tools/fathom";
const std::string kScenarios = std::string(FATHOM_SOURCE_DIR) + "/tests/parallel/scenarios/";

// Open MPI in a container: oversubscribe the cores, root allowed, shared
// memory between the local processes only.
std::string Mpirun(int processes) {
  std::string cmd =
      std::string("OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none ") +
      "OMPI_MCA_rmaps_base_oversubscribe=1 " + FATHOM_MPIRUN + " --oversubscribe";
  if (geteuid() == 0) cmd += " --allow-run-as-root";
  return cmd + " -np " + std::to_string(processes) + " ";
}

// The report without what is not partition-independent (wall time; the
// peak of packets in flight is per process).
nlohmann::json Report(const std::string& cmd) {
  const test_util::CommandResult r = test_util::RunCommand(cmd, /*merge_stderr=*/false);
  EXPECT_EQ(r.exit_code, 0) << cmd << "\n" << r.out;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << cmd << "\n" << r.out;
  if (j.is_object()) {
    j.erase("wall_s");
    j.erase("peak_packets");
  }
  return j;
}

class MpiRunTest : public testing::TestWithParam<const char*> {};

TEST_P(MpiRunTest, SameDigestAndReportForOneToFourProcesses) {
  const std::string scenario = kScenarios + GetParam();
  const nlohmann::json one =
      Report(kFathom + " sim " + scenario + " --json --event-order canonical");
  ASSERT_TRUE(one.is_object());
  // The run did something worth comparing.
  EXPECT_GT(one["flows_completed"].get<int>() + one["flows_failed"].get<int>(), 0) << one.dump();
  for (int n = 2; n <= 4; ++n) {
    const nlohmann::json many = Report(Mpirun(n) + kFathom + " sim " + scenario + " --json");
    EXPECT_EQ(many["trace_digest"], one["trace_digest"]) << n << " processes";
    EXPECT_EQ(many, one) << n << " processes: " << nlohmann::json::diff(one, many).dump();
  }
}

INSTANTIATE_TEST_SUITE_P(Scenarios, MpiRunTest,
                         testing::Values("permutation.yaml", "incast.yaml", "fault.yaml"));

TEST(MpiLaunchTest, MoreProcessesThanPartitionsIsExit2OnRank0) {
  const test_util::CommandResult r =
      test_util::RunCommand(Mpirun(3) + kFathom + " sim " + kScenarios + "two_units.yaml");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("more processes (3) than partitions (2"), std::string::npos) << r.out;
}

TEST(MpiLaunchTest, MismatchedScenariosAreExit2OnRank0) {
  std::string cmd = Mpirun(1) + kFathom + " sim " + kScenarios + "incast.yaml : -np 1 " + kFathom +
                    " sim " + kScenarios + "permutation.yaml";
  const test_util::CommandResult r = test_util::RunCommand(cmd);
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("processes disagree on the run"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace fathom
