// ReadEvidence on the real rxe evidence of the testbed (testdata/replay/
// rxe-mtu-mismatch and rxe-lossy-link, collected by testbed/
// collect_evidence.sh): every file is read, nothing is unusable.
#include <gtest/gtest.h>

#include "replay/evidence.h"
#include "tests/replay/replay_test_util.h"

namespace fathom::replay {
namespace {

using testing::Source;

Evidence Read(const std::string& name) {
  auto ev = ReadEvidence(std::string(FATHOM_TESTDATA_DIR) + "/replay/" + name);
  EXPECT_TRUE(ev.ok()) << ev.status().ToString();
  return ev.ok() ? *ev : Evidence{};
}

TEST(RealEvidence, MtuMismatchOnRxe) {
  const Evidence ev = Read("rxe-mtu-mismatch");
  for (const SourceReport& s : ev.sources) {
    if (s.path == "README.md") continue;
    EXPECT_EQ(s.use, SourceReport::Use::kUsed) << s.path << " (" << s.kind << "): " << s.reason;
  }
  EXPECT_EQ(Source(ev, "h0/coll.log")->kind, "fathom_watchdog");
  EXPECT_EQ(Source(ev, "h0/times.txt")->kind, "job_times");
  EXPECT_EQ(Source(ev, "fabric/host-switch.pcap")->kind, "capture");
  EXPECT_EQ(ev.library.nranks, 2);
  ASSERT_EQ(ev.ranks.size(), 2u);
  for (const RankInfo& r : ev.ranks) EXPECT_EQ(r.host, "h" + std::to_string(r.rank));
  for (const char* h : {"h0", "h1"}) {
    const HostState& s = ev.hosts.at(h);
    EXPECT_EQ(s.driver, "rxe") << h;
    EXPECT_EQ(s.device, "rxe0") << h;
    EXPECT_EQ(s.netdev_mtu, 9000) << h;
    EXPECT_EQ(s.active_mtu, 4096) << h;
    EXPECT_EQ(s.gids.size(), 3u) << h;
    EXPECT_TRUE(s.unknown_counters.empty()) << h;
  }
  EXPECT_EQ(ev.hosts.at("h0").rdma_counters.at("completer_retry_err"), 36u);
  // Each rank's watchdog names the QP without completions; rank 1's lines
  // in rank 0's gathered report are filed under h1.
  int stalls_h0 = 0, stalls_h1 = 0;
  for (const RankEvent& e : ev.rank_events) {
    if (e.kind != "stall" || e.rank < 0) continue;
    EXPECT_EQ(e.host, "h" + std::to_string(e.rank)) << e.detail;
    (e.rank == 0 ? stalls_h0 : stalls_h1)++;
  }
  EXPECT_GT(stalls_h0, 0);
  EXPECT_GT(stalls_h1, 0);
  EXPECT_TRUE(ev.errors.empty());  // rxe retries forever: no error surfaces
  bool over_mtu = false;
  for (const SwitchCounter& c : ev.switch_counters) {
    over_mtu = over_mtu || (c.counter == "drops_over_mtu" && c.value > 0);
  }
  EXPECT_TRUE(over_mtu);
  EXPECT_FALSE(ev.captures.empty());
  // The job's span from the times.txt files: h1 started first, h0 ended last.
  EXPECT_NEAR(ev.origin_wall_s, 1796471638.464158729, 1e-3);
  EXPECT_NEAR(ev.last_s, 1796471667.422596299 - 1796471638.464158729, 1e-3);
}

TEST(RealEvidence, LossyLinkOnRxe) {
  const Evidence ev = Read("rxe-lossy-link");
  for (const SourceReport& s : ev.sources) {
    // Rank 1's output is only its exit status ("rc=0"): nothing to read.
    if (s.path == "README.md" || s.path == "h1/coll.log") continue;
    EXPECT_EQ(s.use, SourceReport::Use::kUsed) << s.path << " (" << s.kind << "): " << s.reason;
  }
  EXPECT_EQ(Source(ev, "h1/coll.log")->use, SourceReport::Use::kIgnored);
  ASSERT_EQ(ev.ranks.size(), 1u);
  EXPECT_EQ(ev.ranks[0].host, "h0");
  EXPECT_EQ(ev.ranks[0].device, "rxe0");
  for (const RankEvent& e : ev.rank_events) EXPECT_NE(e.kind, "abort") << e.detail;  // rc=0
  EXPECT_GT(ev.hosts.at("h0").rdma_counters.at("completer_retry_err") +
                ev.hosts.at("h1").rdma_counters.at("completer_retry_err"),
            0u);
}

}  // namespace
}  // namespace fathom::replay
