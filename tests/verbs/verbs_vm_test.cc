// The verbs backend, `fathom perf` and `fathom doctor` on real rxe in two
// testbed VMs (label vm). The VMs boot once, with MTU 9000 on VM 0 and 1500
// on VM 1 (CASES.md 1-4): every transfer must still succeed at the
// negotiated path MTU, and doctor must flag the mismatch.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "testbed/testbed.h"
#include "tests/testbed/shared_testbed.h"

namespace fathom::testbed {
namespace {

using std::chrono::seconds;

const std::string kBin = FATHOM_BINARY_DIR;
const std::string kFathom = kBin + "/tools/fathom";
const std::string kHostile = kBin + "/tests/bootstrap/bootstrap_hostile_client";
// The server's own bootstrap rank connects to the bind address: the VMs'
// loopback interface is not configured, so 127.0.0.1 would not answer.
const std::string kServerBind = " --bind $FATHOM_VM0_IP4";

// One testbed for the whole suite: VM time is precious.
class VerbsVmTest : public SharedTestbedTest<VerbsVmTest> {
 public:
  static TestbedOptions Options() {
    TestbedOptions o;
    o.num_vms = 2;
    o.mtus = {9000, 1500};
    return o;
  }

 protected:
  // Server in VM 0 and client in VM 1 (the client retries until the server's
  // bootstrap root is up, which the bootstrap does by itself).
  std::pair<CommandResult, CommandResult> Pair(const std::string& server, const std::string& client,
                                               seconds timeout) {
    auto hs = tb_->Launch(0, server + "\n", timeout);
    auto hc = tb_->Launch(1, client + "\n", timeout);
    EXPECT_TRUE(hs.ok() && hc.ok());
    CommandResult s, c;
    if (hc.ok()) {
      auto r = tb_->Wait(*hc);
      if (r.ok()) c = *r;
    }
    if (hs.ok()) {
      auto r = tb_->Wait(*hs);
      if (r.ok()) s = *r;
    }
    return {s, c};
  }
  static std::string Describe(const std::pair<CommandResult, CommandResult>& r) {
    return "server rc=" + std::to_string(r.first.exit_status) + "\n" + r.first.stdout_text +
           r.first.stderr_text + "\nclient rc=" + std::to_string(r.second.exit_status) + "\n" +
           r.second.stdout_text + r.second.stderr_text;
  }
};

TEST_F(VerbsVmTest, DeviceTestsPassOnRealRxe) {
  // Loopback QPs on one rxe: SEND/RECV, WRITE, WRITE_WITH_IMM, READ, atomics,
  // 1 B .. 4 MiB with data verified, 400 outstanding WRs, error statuses.
  auto r = tb_->Run(0, kBin + "/tests/verbs/verbs_device_test 2>&1\n", seconds(240));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_status, 0) << r->stdout_text;
  EXPECT_EQ(r->stdout_text.find("SKIPPED"), std::string::npos) << r->stdout_text;
}

TEST_F(VerbsVmTest, TransportConformanceSuitePassesOnRealRxe) {
  // The suite the emulated NIC passes in every build
  // (tests/transport/conformance_test.cc), its verbs cases on rxe: two device
  // contexts, loopback QPs. The port flap is left out: a test cannot take
  // the VM's real port down (it skips, by design).
  auto r = tb_->Run(0,
                    kBin +
                        "/tests/transport/transport_conformance_test"
                        " '--gtest_filter=*/verbs:-*PortDownAndUp*' 2>&1\n",
                    seconds(300));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_status, 0) << r->stdout_text;
  EXPECT_EQ(r->stdout_text.find("SKIPPED"), std::string::npos) << r->stdout_text;
  EXPECT_NE(r->stdout_text.find("[  PASSED  ]"), std::string::npos) << r->stdout_text;
}

TEST_F(VerbsVmTest, PerfMovesVerifiedDataBetweenVmsAtTheNegotiatedMtu) {
  for (const std::string test : {"write_bw", "read_bw", "send_bw"}) {
    const std::string flags = " " + test + " -s 4194304 -n 8 --verify -p 18600";
    auto r = Pair(kFathom + " perf" + flags + kServerBind,
                  kFathom + " perf" + flags + " $FATHOM_VM0_IP4", seconds(240));
    EXPECT_EQ(r.first.exit_status, 0) << test << "\n" << Describe(r);
    EXPECT_EQ(r.second.exit_status, 0) << test << "\n" << Describe(r);
    EXPECT_NE(r.second.stdout_text.find("Mtu            : 1024[B]"), std::string::npos)
        << Describe(r);
  }
  for (const std::string test : {"write_lat", "send_lat", "read_lat"}) {
    for (const std::string size : {"1", "4095", "65536"}) {
      // 130 iterations: more than two signaled sends (one per 64) and the last.
      const std::string flags = " " + test + " -s " + size + " -n 130 --verify --json -p 18601";
      auto r = Pair(kFathom + " perf" + flags + kServerBind,
                    kFathom + " perf" + flags + " $FATHOM_VM0_IP4", seconds(240));
      EXPECT_EQ(r.second.exit_status, 0) << test << " " << size << "\n" << Describe(r);
      EXPECT_NE(r.second.stdout_text.find("\"t_typical\""), std::string::npos) << Describe(r);
    }
  }
}

TEST_F(VerbsVmTest, DoctorFlagsTheMtuMismatchAndFourRanksConnectAllPairs) {
  // Ranks 0 and 2 in VM 0, ranks 1 and 3 in VM 1: all six pairs, both ways.
  // Two busy-polling ranks share each VM's one TCG vCPU with rxe's softirq
  // work, so ACKs can take longer than doctor's default 16.8 ms x 4 budget:
  // give the pair check 537 ms x 7 (a dead pair still fails in seconds).
  const std::string common =
      kFathom + " doctor --nranks 4 -p 18602 --root $FATHOM_VM0_IP4 -u 17 --retry-cnt 6";
  auto r = Pair("(" + common + " --rank 2 > r2.out 2>&1 &) ; " + common + " --rank 0",
                common + " --rank 1 & " + common + " --rank 3 > r3.out 2>&1; wait", seconds(240));
  EXPECT_EQ(r.first.exit_status, 1) << Describe(r);  // the mismatch is a finding
  const std::string& out = r.first.stdout_text;
  EXPECT_NE(out.find("all-pairs check: 12 of 12 directions ok"), std::string::npos) << Describe(r);
  EXPECT_NE(out.find("active_mtu differs"), std::string::npos) << Describe(r);
  EXPECT_NE(
      out.find("Ethernet MTU of the RoCE netdevs differs: 1500 on ranks 1, 3; 9000 on ranks 0, 2"),
      std::string::npos)
      << Describe(r);
}

TEST_F(VerbsVmTest, KilledPeerGivesACompletionErrorNotAHang) {
  // timeout 14 (67 ms, perftest's default) x retry_cnt 7, which rxe treats as
  // infinite, so perf's stall deadline (5 s) bounds the wait. What the
  // survivor sees depends on how the dead peer's rxe answers (nothing: the
  // stall; a NAK: a completion error such as IBV_WC_REM_INV_REQ_ERR); either
  // way it fails with a named error well inside the command timeout.
  const std::string flags = " write_bw -s 65536 -D 60 -u 14 --stall-timeout 5 -p 18603";
  auto r = Pair(kFathom + " perf" + flags + kServerBind + " & sleep 8; kill -9 $!; sleep 1",
                kFathom + " perf" + flags + " $FATHOM_VM0_IP4", seconds(120));
  // The server ran until it was killed: the client's failure is the kill's.
  EXPECT_EQ(r.first.stdout_text.find("ABORTED"), std::string::npos) << Describe(r);
  EXPECT_FALSE(r.second.timed_out) << Describe(r);
  EXPECT_EQ(r.second.exit_status, 1) << Describe(r);
  const std::string& err = r.second.stderr_text + r.second.stdout_text;
  EXPECT_TRUE(err.find("completion IBV_WC_") != std::string::npos ||
              err.find("no progress") != std::string::npos)
      << Describe(r);
}

TEST_F(VerbsVmTest, EventModeCqMovesVerifiedDataBetweenVms) {
  // -e: both sides sleep on the completion channel instead of spinning.
  for (const std::string test : {"write_bw", "send_bw", "send_lat", "read_lat"}) {
    const std::string flags = " " + test + " -e -s 65536 -n 130 --verify -p 18605";
    auto r = Pair(kFathom + " perf" + flags + kServerBind,
                  kFathom + " perf" + flags + " $FATHOM_VM0_IP4", seconds(240));
    EXPECT_EQ(r.first.exit_status, 0) << test << "\n" << Describe(r);
    EXPECT_EQ(r.second.exit_status, 0) << test << "\n" << Describe(r);
    const std::string& out = r.second.stdout_text;
    EXPECT_NE(out.find("Completions    : events (completion channel)"), std::string::npos)
        << Describe(r);
    // The client woke on at least one event (it posts, then waits).
    const size_t at = out.find(" Completion events: ");
    ASSERT_NE(at, std::string::npos) << Describe(r);
    EXPECT_GT(std::atoll(out.c_str() + at + 20), 0) << Describe(r);
    std::printf("[   INFO   ] %s -e: client woke on %lld completion events\n", test.c_str(),
                std::atoll(out.c_str() + at + 20));
  }
}

TEST_F(VerbsVmTest, BootstrapRootServesTheRealRanksWhileHostileClientsHitItFromTheOtherVm) {
  // The root (doctor rank 0) in VM 0 has a token; from VM 1 a real TCP client
  // sends garbage, a 2 GiB length prefix, a Hello of a wrong protocol version
  // and a Hello with a wrong token, each answered with an Error; then the
  // real rank 1 joins from the same VM and the run completes.
  const std::string common =
      kFathom + " doctor --nranks 2 -p 18604 --token s3cret -u 17 --retry-cnt 6";
  auto r = Pair(common + " --rank 0 --bind $FATHOM_VM0_IP4",
                kHostile + " $FATHOM_VM0_IP4 18604; echo \"hostile rc=$?\"; " + common +
                    " --rank 1 --root $FATHOM_VM0_IP4",
                seconds(240));
  const std::string& client = r.second.stdout_text;
  EXPECT_NE(client.find("hostile rc=0"), std::string::npos) << Describe(r);
  for (const std::string answer :
       {"garbage: root answered Error: bad frame magic",
        "oversized: root answered Error: oversized message: length prefix 2147483647",
        "version: root answered Error: wrong protocol version",
        "token: root answered Error: wrong token"}) {
    EXPECT_NE(client.find(answer), std::string::npos) << answer << "\n" << Describe(r);
  }
  // The hostile client claims the root's own version plus 41.
  std::smatch v;
  ASSERT_TRUE(std::regex_search(
      client, v, std::regex(R"(wrong protocol version (\d+) \(this root speaks version (\d+)\))")))
      << Describe(r);
  EXPECT_EQ(std::stoi(v[1].str()), std::stoi(v[2].str()) + 41) << Describe(r);
  // The root logged each rejection with the stranger's address, and the real
  // ranks still ran the whole check (exit 1: the MTU mismatch is a finding).
  EXPECT_NE(r.first.stderr_text.find("the bootstrap root rejected 4 connection(s)"),
            std::string::npos)
      << Describe(r);
  EXPECT_NE(r.first.stderr_text.find("192.0.2.2:"), std::string::npos) << Describe(r);
  EXPECT_EQ(r.first.exit_status, 1) << Describe(r);
  EXPECT_NE(r.first.stdout_text.find("all-pairs check: 2 of 2 directions ok"), std::string::npos)
      << Describe(r);
}

// A peer VM dies (qemu SIGKILL) in the middle of a write_bw: its rxe never
// answers again, so the survivor's requester times out retry_cnt + 1 times
// (4.096 us * 2^timeout each) and completes the WR with IBV_WC_RETRY_EXC_ERR.
// Its own testbed, since the kill ends it.
TEST(VerbsVmKillTest, KilledPeerVmGivesRetryExceededWithinTheQpRetryBudget) {
  TestbedOptions o;
  o.num_vms = 2;
  auto tb_or = Testbed::Start(o);
  ASSERT_TRUE(tb_or.ok()) << tb_or.status().ToString();
  Testbed& tb = **tb_or;
  constexpr int kTimeout = 14;  // 67.1 ms
  constexpr int kRetryCnt = 3;  // below 7, which rxe treats as infinite
  const double budget_s = (kRetryCnt + 1) * 4.096e-6 * (1 << kTimeout);
  // The margin covers TCG's timer slack and the gap between the survivor's
  // last completion (one per 64 x 4 KiB) and the kill.
  constexpr double kMarginS = 3.0;
  // The stall deadline is far beyond the bound: if rxe retried forever the
  // error would be "no progress", and the test would fail.
  const std::string flags = " write_bw -s 4096 -D 120 -u " + std::to_string(kTimeout) +
                            " --retry-cnt " + std::to_string(kRetryCnt) +
                            " --stall-timeout 60 -p 18606";
  auto hs =
      tb.Launch(0, kFathom + " perf" + flags + kServerBind + " > server.out 2>&1\n", seconds(200));
  ASSERT_TRUE(hs.ok()) << hs.status().ToString();
  auto hc = tb.Launch(1, kFathom + " perf" + flags + " $FATHOM_VM0_IP4 > client.out 2>&1\n",
                      seconds(200));
  ASSERT_TRUE(hc.ok()) << hc.status().ToString();
  // Wait until the client printed its table header (connected; the run
  // starts at the next barrier), let the transfer run, then kill VM 0.
  const auto out_path = tb.vm(1).share / "out" / "client.out";
  auto read = [](const std::filesystem::path& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  bool running = false;
  for (int i = 0; i < 1200 && !running; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    running = read(out_path).find("#bytes") != std::string::npos;
  }
  // What both sides said so far, for the reader of a failure.
  ASSERT_TRUE(running) << "the client never connected\nclient.out:\n"
                       << read(out_path) << "\nserver.out:\n"
                       << read(tb.vm(0).share / "out" / "server.out");
  std::this_thread::sleep_for(seconds(5));
  ASSERT_EQ(kill(tb.vm(0).pid, SIGKILL), 0);
  auto s = tb.Wait(*hs);
  EXPECT_FALSE(s.ok());  // "vm0 died"
  auto c = tb.Wait(*hc);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const std::string out = read(out_path);
  EXPECT_FALSE(c->timed_out) << out;
  EXPECT_EQ(c->exit_status, 1) << out;
  ASSERT_NE(out.find("completion IBV_WC_RETRY_EXC_ERR"), std::string::npos) << out;
  const std::string kAfter = " s after the last progress";
  const size_t at = out.find(kAfter);
  ASSERT_NE(at, std::string::npos) << out;
  const size_t open = out.rfind('(', at);
  ASSERT_NE(open, std::string::npos) << out;
  const double waited_s = std::atof(out.c_str() + open + 1);
  std::printf(
      "[   INFO   ] survivor: IBV_WC_RETRY_EXC_ERR %.3f s after its last progress "
      "(retry budget %.3f s + margin %.1f s)\n",
      waited_s, budget_s, kMarginS);
  EXPECT_LE(waited_s, budget_s + kMarginS)
      << "retry budget " << budget_s << " s (retry_cnt " << kRetryCnt << ", timeout " << kTimeout
      << ") + margin " << kMarginS << " s\n"
      << out;
}

}  // namespace
}  // namespace fathom::testbed
