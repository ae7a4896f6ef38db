// `fathom topo`: exit codes, text and JSON output, the link list and the
// DOT graph (run as a subprocess of topo_cli, the fathom program with the
// topo subcommand); every listed link name is then given to the full
// `fathom sim --fault link=NAME` (issue 24).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/cli_run.h"
#include "tests/json_reader.h"
#include "tests/scratch_dir.h"

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

// The rail-optimized levels are the seed's levels rewired: `--server auto`
// shows their server tier as `fathom coll` runs it; other presets have none.
TEST(CmdTopoTest, RailLevelsShowTheServerTierByDefault) {
  for (const char* preset : {"medium:rail", "large:rail", "medium"}) {
    const Result r = RunTopo(preset);
    EXPECT_EQ(r.exit_code, 0) << preset << ": " << r.out;
    EXPECT_THAT(r.out, HasSubstr("server tier:      ")) << preset;
  }
  const Result xl = RunTopo("fat-tree:k=4");
  EXPECT_EQ(xl.exit_code, 0) << xl.out;
  EXPECT_THAT(xl.out, ::testing::Not(HasSubstr("server tier:"))) << xl.out;
  EXPECT_THAT(RunTopo("--help").out, HasSubstr("medium:rail"));
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
  fathom::test_util::ScratchDir tmp;
  const std::string path = tmp.Write("bad_topo.yaml", "fat_tree:\n  k: eight\n");
  const Result r = RunTopo(path);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.out, HasSubstr(path + ":2:6: fat_tree.k: expected an integer, got 'eight'"));
  const Result missing = RunTopo("/nonexistent/topo.yaml");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.out, HasSubstr("/nonexistent/topo.yaml"));
}

TEST(CmdTopoTest, MissingArgumentIsUsageError) { EXPECT_EQ(RunTopo("").exit_code, 2); }

// Two leaves, one spine, two parallel uplinks per leaf: names
// "leaf0-spine0" and "leaf0-spine0/1".
constexpr const char* kParallelTopology =
    "leaf_spine: {leaves: 2, spines: 1, hosts_per_leaf: 1, uplinks_per_pair: 2, "
    "gpus_per_server: 1}";
// Fat-tree k=4: dotted switch names ("edge0.1", "agg1.0").
constexpr const char* kFatTreeTopology = "fat_tree: {k: 4, gpus_per_server: 8}";

// The link names in `fathom topo FILE --links --json`, in order.
std::vector<std::string> LinkNames(const std::string& topology_yaml, const std::string& label) {
  fathom::test_util::ScratchDir tmp;
  const std::string path = tmp.Write(label + ".yaml", std::string(topology_yaml) + "\n");
  const Result r = RunTopo(path + " --links --json");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  std::map<std::string, std::string> j;
  EXPECT_TRUE(fathom::test_util::Json(r.out).Parse(&j)) << r.out;
  std::vector<std::string> names;
  for (int i = 0; j.count("links.list[" + std::to_string(i) + "].name"); ++i) {
    names.push_back(j["links.list[" + std::to_string(i) + "].name"]);
  }
  EXPECT_EQ(std::to_string(names.size()), j["links.total"]);
  return names;
}

TEST(CmdTopoTest, LinksListsEveryLinkOnceWithParallelSuffixes) {
  const std::vector<std::string> names = LinkNames(kParallelTopology, "parallel");
  EXPECT_THAT(names,
              ::testing::UnorderedElementsAre("h0-leaf0", "h1-leaf1", "leaf0-spine0",
                                              "leaf0-spine0/1", "leaf1-spine0", "leaf1-spine0/1"));
  fathom::test_util::ScratchDir tmp;
  const std::string path = tmp.Write("parallel_text.yaml", std::string(kParallelTopology) + "\n");
  const Result text = RunTopo(path + " --links");
  EXPECT_EQ(text.exit_code, 0) << text.out;
  EXPECT_THAT(text.out, HasSubstr("link names (for `fathom sim --fault link=NAME`"));
  EXPECT_THAT(text.out,
              ::testing::ContainsRegex("leaf0-spine0/1 +tier 2 +leaf0:2 +<-> spine0:1 +400 Gb/s"));
  // Without --links the summary stays short.
  EXPECT_THAT(RunTopo(path).out, ::testing::Not(HasSubstr("leaf0-spine0/1")));
}

// Every name `fathom topo --links` prints is accepted by `fathom sim --fault
// link=NAME` (one sim run per topology, one fault per link), and a name that
// is not a link is refused, so the check can fail.
TEST(CmdTopoTest, EveryListedLinkNameIsAcceptedBySimFault) {
#ifndef FATHOM_CLI
  GTEST_SKIP() << "the full fathom program is not part of this build";
#else
  fathom::test_util::ScratchDir tmp;
  for (const auto& [label, topology] :
       {std::pair<std::string, std::string>{"parallel", kParallelTopology},
        {"fat_tree", kFatTreeTopology}}) {
    const std::vector<std::string> names = LinkNames(topology, label);
    ASSERT_FALSE(names.empty()) << label;
    const std::string scenario = tmp.Write(label + "_scenario.yaml",
                                           "name: link-names\nseed: 1\nend_time_us: 100\n"
                                           "topology:\n  " +
                                               topology +
                                               "\nworkload:\n  pattern: permutation\n"
                                               "  flow_bytes: 4096\n");
    std::string faults;
    for (const std::string& n : names) {
      faults += " --fault kind=link_down,link=" + n + ",start_us=50,duration_us=10";
    }
    const std::string sim = std::string(FATHOM_CLI) + " sim --quiet " + scenario;
    const Result ok = fathom::test_util::RunCommand(sim + faults);
    EXPECT_EQ(ok.exit_code, 0) << label << ": " << ok.out;
    const Result bad =
        fathom::test_util::RunCommand(sim + " --fault kind=link_down,link=h0-nowhere");
    EXPECT_EQ(bad.exit_code, 2) << bad.out;
    EXPECT_THAT(bad.out, HasSubstr("h0-nowhere"));
  }
#endif
}

// The DOT graph: every node once, one row per tier, one edge per link
// labelled with its rate; rendered by Graphviz when it is installed.
TEST(CmdTopoTest, DotHasEveryNodeAndLink) {
  fathom::test_util::ScratchDir tmp;
  const std::string dot_path = tmp.File("cmd_topo.dot");
  const Result summary = RunTopo("fat-tree:k=4 --dot " + dot_path);
  EXPECT_EQ(summary.exit_code, 0) << summary.out;
  EXPECT_THAT(summary.out, HasSubstr("validation:       ok"));  // the summary still prints
  std::ifstream in(dot_path);
  const std::string dot((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const Result stdout_dot = RunTopo("fat-tree:k=4 --dot -");
  EXPECT_EQ(stdout_dot.exit_code, 0);
  EXPECT_EQ(stdout_dot.out, dot);  // and nothing else on stdout

  EXPECT_THAT(dot, ::testing::StartsWith("graph \"fat-tree k=4\" {\n"));
  EXPECT_EQ(dot.substr(dot.size() - 2), "}\n");
  const std::regex edge(R"re(^  "([^"]+)" -- "([^"]+)" \[label="400 Gb/s", id="([^"]+)")re");
  const std::regex node(R"re(^    "([^"]+)"( \[shape=ellipse.*\])?;$)re");
  std::set<std::string> nodes, edge_ids;
  int tiers = 0, hosts = 0;
  std::istringstream lines(dot);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (line.starts_with("  subgraph \"tier")) ++tiers;
    if (std::regex_search(line, m, node)) {
      EXPECT_TRUE(nodes.insert(m[1]).second) << "node twice: " << line;
      hosts += m[2].matched;
    }
    if (std::regex_search(line, m, edge)) {
      EXPECT_TRUE(nodes.count(m[1]) && nodes.count(m[2])) << line;
      EXPECT_EQ(m[3], std::string(m[1]) + "-" + std::string(m[2])) << line;
      EXPECT_TRUE(edge_ids.insert(m[3]).second) << line;
    }
  }
  EXPECT_EQ(tiers, 4);  // hosts, edge, aggregation, core
  EXPECT_EQ(hosts, 16);
  EXPECT_EQ(nodes.size(), 16u + 20u);
  EXPECT_EQ(edge_ids.size(), 48u);

  if (std::system("command -v dot >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "graphviz (dot) is not installed; the DOT text was checked, not rendered";
  }
  const Result svg = fathom::test_util::RunCommand("dot -Tsvg " + dot_path);
  EXPECT_EQ(svg.exit_code, 0) << svg.out;
  EXPECT_THAT(svg.out, HasSubstr("<svg"));
}

TEST(CmdTopoTest, DotToStdoutWithJsonIsUsageError) {
  const Result r = RunTopo("small --dot - --json");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("--dot"));
  const Result unwritable = RunTopo("small --dot /nonexistent/dir/t.dot");
  EXPECT_EQ(unwritable.exit_code, 2);
  EXPECT_THAT(unwritable.out, HasSubstr("/nonexistent/dir/t.dot"));
}

}  // namespace
