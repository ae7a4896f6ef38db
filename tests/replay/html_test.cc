// The replay's HTML report: what it shows, and that a real browser renders
// it without a console error (issue 28: "load the page, check it renders
// without console errors, take a screenshot in the test").
#include "replay/html.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/scratch_dir.h"
#include "topologies/builders.h"

namespace fathom::replay {
namespace {

namespace fs = std::filesystem;

ReplayResult MtuMismatchResult() {
  ReplayResult r;
  r.evidence.root = "bundles/job-4711";
  r.evidence.topology = "medium";
  r.evidence.library.library = "nccl";
  r.evidence.library.version = "2.18.3";
  r.evidence.library.ib_timeout = 20;
  r.evidence.library.ib_retry_cnt = 7;
  r.evidence.last_s = 140.5;
  r.evidence.sources.push_back(
      {"h3/nccl.log", "nccl_log", "h3", SourceReport::Use::kUsed, "", 412, 3});
  r.evidence.sources.push_back({"h9/capture.pcap", "capture", "h9", SourceReport::Use::kUnusable,
                                "not a pcap or pcapng file", 0, 0});
  HostState h3;
  h3.host = "h3";
  h3.driver = "mlx5";
  h3.rdma_counters = {{"local_ack_timeout_err", 7}, {"out_of_sequence", 0}};
  h3.ethtool = {{"rx_prio3_pause", 0}, {"tx_prio3_pause", 12}};
  h3.netdev_mtu = 4200;
  h3.active_mtu = 4096;
  h3.port_state = "PORT_ACTIVE";
  r.evidence.hosts["h3"] = h3;
  r.evidence.switch_counters.push_back({"leaf0->spine1", "port_xmit_discards", 96});
  r.evidence.link_events.push_back({"leaf0-spine1", false, 96.25});
  r.evidence.errors.push_back({"h3", 3, "10.0.0.4<45678>", "h4", "", "", 12, "IBV_WC_RETRY_EXC_ERR",
                               "RDMA_WRITE", 129, 0x1c4, 130.9});
  r.symptoms = {"rank 3 (h3) IBV_WC_RETRY_EXC_ERR at 130.9 s", "ranks 0-2, 4-127 stall"};
  Cause best;
  best.hypothesis = {"mtu_mismatch",
                     "leaf0->spine1",
                     "leaf0->spine1 carries 1500-byte frames; 4096-byte RoCE packets are <dropped>",
                     {{"mtu", "1500"}, {"at_s", "96.25"}},
                     "name: replay-mtu\nend_time_us: 1000\n"};
  best.ran = true;
  best.reproduces = true;
  best.score = 0.93;
  best.matches.push_back({"rank 3 status", "IBV_WC_RETRY_EXC_ERR", "IBV_WC_RETRY_EXC_ERR", 2, 1});
  best.evidence_for = {"port_xmit_discards on leaf0->spine1 = 96"};
  best.evidence_against = {"no MTU difference in ip -d link"};
  best.ablation = {"without the MTU fault on leaf0->spine1: all flows complete"};
  best.ablation_confirms = true;
  Cause other;
  other.hypothesis = {"lossy_link", "leaf1->spine0", "a lossy link", {}, ""};
  other.ran = true;
  other.score = 0.21;
  r.causes = {best, other};
  r.found = true;
  r.suspects = {{"leaf0->spine1", 1.0}, {"h3", 0.5}};
  r.timeline.push_back({"h3", 3, 130.9, "IBV_WC_RETRY_EXC_ERR from h4", true});
  r.timeline.push_back({"h0", 0, 131.0, "watchdog: stalled waiting for rank 127", false});
  r.timeline.push_back({"h1", 1, 2.0, "init", false});  // before the window
  r.wall_s = 4.2;
  return r;
}

TEST(ReplayHtmlTest, ShowsTheVerdictRankingSuspectsTimelineAndSources) {
  const std::string html = RenderHtml(MtuMismatchResult());
  EXPECT_NE(html.find("Root cause: mtu_mismatch on leaf0-&gt;spine1"), std::string::npos);
  // Text from the evidence is escaped, never markup.
  EXPECT_EQ(html.find("<dropped>"), std::string::npos);
  EXPECT_NE(html.find("&lt;dropped&gt;"), std::string::npos);
  // The suspect link is drawn in red, by its topology name; the suspect host too.
  EXPECT_NE(html.find("class=\"link suspect\" data-link=\"leaf0-spine1\""), std::string::npos);
  EXPECT_NE(html.find("class=\"node host suspect\" data-node=\"h3\""), std::string::npos);
  EXPECT_EQ(html.find("class=\"link suspect\" data-link=\"leaf1-spine0\""), std::string::npos);
  // The timeline shows the last seconds and says what it left out.
  EXPECT_NE(html.find("1 earlier event(s)"), std::string::npos);
  // Counters: non-zero only; sources with their fate.
  EXPECT_NE(html.find("local_ack_timeout_err"), std::string::npos);
  EXPECT_EQ(html.find("<th>out_of_sequence</th>"), std::string::npos);
  EXPECT_NE(html.find("not a pcap or pcapng file"), std::string::npos);
  EXPECT_NE(html.find("IB_TIMEOUT=20"), std::string::npos);
  // Self-contained: nothing is fetched from elsewhere.
  EXPECT_EQ(html.find("src=\"http"), std::string::npos);
  EXPECT_EQ(html.find("href=\"http"), std::string::npos);
}

TEST(ReplayHtmlTest, SaysPlainlyWhenNothingReproducesAndWhenNoFabricIsNamed) {
  ReplayResult r = MtuMismatchResult();
  r.found = false;
  r.evidence.topology.clear();
  const std::string html = RenderHtml(r);
  EXPECT_NE(html.find("No hypothesis reproduces the symptom."), std::string::npos);
  EXPECT_NE(html.find("names no topology file or preset"), std::string::npos);
  EXPECT_EQ(html.find("Root cause:"), std::string::npos);
}

TEST(ReplayHtmlTest, LargeFabricsDrawSwitchesOnly) {
  ReplayResult r = MtuMismatchResult();
  r.evidence.topology = "large";
  r.suspects = {{"edge0.0-agg0.0", 1.0}};
  auto topology = EvidenceTopology(r.evidence);
  ASSERT_TRUE(topology.ok()) << topology.status().ToString();
  const std::string html = RenderHtml(r, &*topology);
  EXPECT_NE(html.find("hosts and their links not drawn"), std::string::npos);
  EXPECT_EQ(html.find("data-node=\"h1000\""), std::string::npos);
}

// Chromium in headless mode, in its own profile directory.
struct Browser {
  std::string binary;
  fs::path dir;

  static std::string Find() {
    for (const char* b :
         {"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"}) {
      if (::access(b, X_OK) == 0) return b;
    }
    return "";
  }

  // Runs chromium with `action` on `page`; returns its exit status, fills
  // stdout and the console lines of its log.
  int Run(const std::string& action, const fs::path& page, std::string* out, std::string* console) {
    const fs::path out_file = dir / "out.txt";
    const fs::path err_file = dir / "err.txt";
    const std::string cmd = "timeout 120 " + binary +
                            " --headless=new --no-sandbox --disable-gpu --no-first-run"
                            " --disable-extensions --disable-background-networking --disable-sync"
                            " --enable-logging=stderr --v=0 --user-data-dir=" +
                            (dir / "profile").string() + " --window-size=1400,1800 " + action +
                            " file://" + page.string() + " >" + out_file.string() + " 2>" +
                            err_file.string();
    const int status = std::system(cmd.c_str());
    std::ifstream o(out_file), e(err_file);
    std::stringstream os, es;
    os << o.rdbuf();
    *out = os.str();
    console->clear();
    std::string line;
    while (std::getline(e, line)) {
      if (line.find(":CONSOLE") != std::string::npos) *console += line + "\n";
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
};

class ReplayHtmlBrowserTest : public ::testing::Test {
 protected:
  void SetUp() override {
    browser_.binary = Browser::Find();
    if (browser_.binary.empty()) {
      GTEST_SKIP() << "no chromium: scripts/setup.sh installs Debian's chromium package";
    }
    browser_.dir = tmp_.path();
  }
  test_util::ScratchDir tmp_;
  Browser browser_;
};

TEST_F(ReplayHtmlBrowserTest, ChromiumRendersThePageWithoutConsoleErrorsAndScreenshotsIt) {
  const fs::path page = browser_.dir / "report.html";
  {
    std::ofstream f(page);
    f << RenderHtml(MtuMismatchResult());
  }
  std::string dom, console;
  ASSERT_EQ(browser_.Run("--dump-dom", page, &dom, &console), 0) << console;
  // The page's script ran to its end: every section is there.
  EXPECT_NE(dom.find("data-rendered=\"ok\""), std::string::npos) << dom.substr(0, 400);
  EXPECT_NE(dom.find("id=\"fabric\""), std::string::npos);
  // Its first cause's details were opened by the script.
  EXPECT_NE(dom.find("class=\"detail open\" id=\"cause-0\""), std::string::npos);
  EXPECT_EQ(console, "") << "console output while rendering the report";

  const fs::path shot = browser_.dir / "report.png";
  std::string ignored;
  ASSERT_EQ(browser_.Run("--screenshot=" + shot.string(), page, &ignored, &console), 0) << console;
  EXPECT_EQ(console, "");
  ASSERT_TRUE(fs::exists(shot));
  std::ifstream png(shot, std::ios::binary);
  char magic[8] = {};
  png.read(magic, 8);
  EXPECT_EQ(std::string(magic, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  // A blank page compresses to a few KB; the report's tables and drawings do not.
  EXPECT_GT(fs::file_size(shot), 20000u);
  if (const char* keep = std::getenv("FATHOM_KEEP_SCREENSHOT")) fs::copy_file(shot, keep);
}

// The check above can fail: a page whose script throws is caught.
TEST_F(ReplayHtmlBrowserTest, AScriptErrorIsSeenOnTheConsole) {
  const fs::path page = browser_.dir / "broken.html";
  {
    std::ofstream f(page);
    f << "<!DOCTYPE html><html><body><p>x</p><script>notDefined();</script></body></html>";
  }
  std::string dom, console;
  ASSERT_EQ(browser_.Run("--dump-dom", page, &dom, &console), 0);
  EXPECT_NE(console.find("Uncaught ReferenceError"), std::string::npos) << console;
  EXPECT_EQ(dom.find("data-rendered"), std::string::npos);
}

}  // namespace
}  // namespace fathom::replay
