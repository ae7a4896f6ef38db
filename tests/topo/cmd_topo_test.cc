// `fathom topo`: exit codes, text and JSON output (run as a subprocess of
// topo_cli, the fathom program with the topo subcommand).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <string>

#include "tests/cli_run.h"

namespace {

using ::testing::HasSubstr;

using Result = fathom::test_util::CommandResult;

Result RunTopo(const std::string& args) {
  return fathom::test_util::RunCommand(std::string(FATHOM_TOPO_CLI) + " topo " + args);
}

TEST(CmdTopoTest, PresetTextSummary) {
  const Result r = RunTopo("medium");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("hosts:            128 NICs in 16 servers"));
  EXPECT_THAT(r.out, HasSubstr("tier 1 leaf: 8, tier 2 spine: 4"));
  EXPECT_THAT(r.out, HasSubstr("bisection:        25600 Gb/s"));
  EXPECT_THAT(r.out, HasSubstr("diameter:         4 hops"));
  EXPECT_THAT(r.out, HasSubstr("validation:       ok"));
}

TEST(CmdTopoTest, JsonHasEveryKey) {
  const Result r = RunTopo("fat-tree:k=4 --json");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  for (const char* key :
       {"\"name\":\"fat-tree k=4\"", "\"hosts\":16", "\"servers\":2", "\"switches\":{\"total\":20",
        "\"tier3\":4", "\"links\":{\"total\":48", "{\"tier\":1,\"count\":16,\"rate_gbps\":400",
        "\"bisection_gbps\":3200", "\"diameter_hops\":6", "\"oversubscription\":{\"tier1\":1",
        "\"latency_ns\":5}",
        "\"mtu\":{\"min_bytes\":4200,\"max_bytes\":4200,\"asymmetric_links\":0}",
        "\"reachability\":\"all_pairs\"", "\"valid\":true", "\"validation\":\"ok\""}) {
    EXPECT_THAT(r.out, HasSubstr(key));
  }
  EXPECT_EQ(r.out.front(), '{');
  EXPECT_EQ(r.out.substr(r.out.size() - 2), "}\n");
}

TEST(CmdTopoTest, RailOnlyIsReportedAsSuch) {
  const Result r = RunTopo("small --json");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("\"reachability\":\"same_rail\""));
}

TEST(CmdTopoTest, FileInput) {
  const Result r = RunTopo(std::string(FATHOM_SOURCE_DIR) + "/scenarios/topologies/large.yaml");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("1024 NICs in 128 servers"));
}

TEST(CmdTopoTest, ReportsMtuMismatch) {
  const Result r =
      RunTopo(std::string(FATHOM_SOURCE_DIR) + "/scenarios/topologies/mtu_mismatch.yaml");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(
      r.out,
      HasSubstr("mtu:              1500..4200 bytes (1 link(s) with a different MTU each way)"));
}

TEST(CmdTopoTest, BadPresetIsUsageError) {
  const Result r = RunTopo("fat-tree:k=7");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.out, HasSubstr("fathom topo: BuildFatTree: k = 7"));
}

TEST(CmdTopoTest, BadFileIsUsageErrorNamingTheLine) {
  const std::string path = testing::TempDir() + "/bad_topo.yaml";
  std::ofstream(path) << "fat_tree:\n  k: eight\n";
  const Result r = RunTopo(path);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.out, HasSubstr(path + ":2:6: fat_tree.k: expected an integer, got 'eight'"));
  const Result missing = RunTopo("/nonexistent/topo.yaml");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.out, HasSubstr("/nonexistent/topo.yaml"));
}

TEST(CmdTopoTest, MissingArgumentIsUsageError) { EXPECT_EQ(RunTopo("").exit_code, 2); }

}  // namespace
