// Real rxe in qemu VMs (ctest label vm). Each TEST is one group that boots
// its VMs once and runs several checks on them: rdma-core and perftest
// programs through the host switch, the capture decoded by `fathom decode`,
// the MTU-mismatch hang (TESTBED.md, CASES.md case 4), failure paths and
// clean teardown. Figures (boot-to-ready, bandwidth, frames/s) are printed,
// never asserted.
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "testbed/process.h"
#include "testbed/testbed.h"
#include "tests/cli_run.h"
#include "tests/scratch_dir.h"

namespace fathom::testbed {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

// A per-test parent for the testbed's temporary directory, so the check for
// leftover qemu processes looks only at this test's VMs.
using TempRoot = test_util::ScratchDir;

// Pids of qemu processes whose command line mentions `root`.
std::vector<int> QemuUnder(const std::string& root) {
  std::vector<int> pids;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "cmdline", std::ios::binary);
    std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (cmd.find("qemu-system") != std::string::npos && cmd.find(root) != std::string::npos) {
      pids.push_back(std::stoi(name));
    }
  }
  return pids;
}

// perftest and rc_pingpong clients fail at once when the server is not
// listening yet (its start inside a TCG VM takes a moment): retry only that.
std::string ClientWithRetry(const std::string& cmd) {
  return "for i in $(seq 1 60); do " + cmd +
         " >c.out 2>c.err; rc=$?; "
         "if grep -qE \"Couldn't connect|Unable to init the socket|Connection refused\" c.out "
         "c.err; then sleep 0.5; else break; fi; done; cat c.out; cat c.err >&2; exit $rc\n";
}

struct PairResult {
  CommandResult server, client;
};

PairResult RunPair(Testbed& tb, const std::string& server, const std::string& client,
                   seconds timeout) {
  PairResult r;
  auto hs = tb.Launch(0, server + "\n", timeout);
  EXPECT_TRUE(hs.ok()) << hs.status().ToString();
  auto hc = tb.Launch(1, ClientWithRetry(client), timeout);
  EXPECT_TRUE(hc.ok()) << hc.status().ToString();
  if (!hs.ok() || !hc.ok()) return r;
  auto rc = tb.Wait(*hc);
  auto rs = tb.Wait(*hs);
  EXPECT_TRUE(rc.ok()) << rc.status().ToString();
  EXPECT_TRUE(rs.ok()) << rs.status().ToString();
  if (rc.ok()) r.client = *rc;
  if (rs.ok()) r.server = *rs;
  return r;
}

std::string Describe(const PairResult& r) {
  return "server rc=" + std::to_string(r.server.exit_status) + " out=" + r.server.stdout_text +
         " err=" + r.server.stderr_text + "\nclient rc=" + std::to_string(r.client.exit_status) +
         " out=" + r.client.stdout_text + " err=" + r.client.stderr_text;
}

// The perftest result line: "65536 200 x.xx y.yy z.zz" -> BW average (MB/s).
double BwAverage(const std::string& out) {
  std::regex row(R"(^\s*65536\s+\d+\s+([\d.]+)\s+([\d.]+))");
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, row)) return std::stod(m[2]);
  }
  return -1;
}

std::string RunFathom(const std::string& args) {
  return test_util::RunCommand(std::string(FATHOM_BINARY_DIR) + "/tools/fathom " + args,
                               /*merge_stderr=*/false)
      .out;
}

int64_t JsonInt(const std::string& json, const std::string& key) {
  std::smatch m;
  if (std::regex_search(json, m, std::regex("\"" + key + R"("\s*:\s*(\d+))"))) {
    return std::stoll(m[1]);
  }
  return -1;
}

const char* kPingpong = "ibv_rc_pingpong -d $FATHOM_RDMA_DEV -n 100";
const char* kPerf = " -d $FATHOM_RDMA_DEV -F -s 65536 -n 100";

TEST(TwoVmsThroughSwitch, RcPingpongPerftestCaptureAndFailureStatus) {
  TempRoot root;
  const std::string capture = root.path() + "/switch.pcap";
  TestbedOptions o;
  o.num_vms = 2;
  o.mode = Mode::kAuto;  // the local device, when the machine has one
  o.temp_root = root.path();
  o.capture_path = capture;
  auto tb_or = Testbed::Start(o);
  ASSERT_TRUE(tb_or.ok()) << tb_or.status().ToString();
  Testbed& tb = **tb_or;
  std::printf("testbed mode: %s\n", tb.ModeDescription().c_str());
  for (int i = 0; i < tb.size(); ++i) {
    std::printf("vm%d boot-to-ready: %.1f s\n", i, tb.vm(i).boot_to_ready.count() / 1000.0);
  }
  const std::string server_ip = tb.vm(0).ipv4;

  // IPv4-mapped GID (index 1) and IPv6 link-local GID (index 0).
  for (int gid : {1, 0}) {
    const std::string g = " -g " + std::to_string(gid);
    PairResult r =
        RunPair(tb, kPingpong + g, std::string(kPingpong) + g + " " + server_ip, seconds(60));
    EXPECT_EQ(r.server.exit_status, 0) << "gid " << gid << "\n" << Describe(r);
    EXPECT_EQ(r.client.exit_status, 0) << "gid " << gid << "\n" << Describe(r);
    EXPECT_NE(r.client.stdout_text.find("100 iters"), std::string::npos) << Describe(r);
  }

  double write_bw = -1;
  for (const std::string prog : {"ib_write_bw", "ib_read_bw"}) {
    const uint64_t fwd_before = tb.host_switch() ? tb.host_switch()->ForwardedFrames() : 0;
    const auto start = std::chrono::steady_clock::now();
    PairResult r =
        RunPair(tb, prog + kPerf + " -x 1", prog + kPerf + " -x 1 " + server_ip, seconds(90));
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(r.server.exit_status, 0) << prog << "\n" << Describe(r);
    EXPECT_EQ(r.client.exit_status, 0) << prog << "\n" << Describe(r);
    const double bw = BwAverage(r.client.stdout_text);
    EXPECT_GT(bw, 0) << prog << " printed no result row:\n" << Describe(r);
    if (prog == "ib_write_bw") write_bw = bw;
    if (tb.host_switch() != nullptr) {
      const uint64_t fwd = tb.host_switch()->ForwardedFrames() - fwd_before;
      std::printf("%s through switch: %.2f MB/s; switch forwarded %lu frames in %.1f s (%.0f/s)\n",
                  prog.c_str(), bw, static_cast<unsigned long>(fwd), s, fwd / s);
    }
  }
  (void)write_bw;

  // A failing command reports its status, output and the files it wrote.
  auto fail =
      tb.Run(1, "echo to-stdout; echo to-stderr >&2; echo 42 > answer.txt; exit 3\n", seconds(30));
  ASSERT_TRUE(fail.ok()) << fail.status().ToString();
  EXPECT_EQ(fail->exit_status, 3);
  EXPECT_FALSE(fail->timed_out);
  EXPECT_EQ(fail->stdout_text, "to-stdout\n");
  EXPECT_EQ(fail->stderr_text, "to-stderr\n");
  ASSERT_TRUE(tb.CollectFiles(1, root.path() + "/collected").ok());
  std::ifstream answer(root.path() + "/collected/answer.txt");
  std::string a;
  answer >> a;
  EXPECT_EQ(a, "42");

  const bool switched = tb.host_switch() != nullptr;
  if (switched) std::printf("%s", tb.host_switch()->CountersText().c_str());
  const fs::path work = tb.work_dir();
  const pid_t pid0 = tb.vm(0).pid;
  ASSERT_TRUE(tb.Teardown().ok());
  EXPECT_FALSE(fs::exists(work));
  EXPECT_FALSE(ProcessExists(pid0));
  EXPECT_TRUE(QemuUnder(root.path()).empty());

  if (!switched) GTEST_SKIP() << "native mode: no switch capture to decode";
  // Every RoCE frame of the run carries a valid ICRC.
  const std::string json = RunFathom("decode " + capture + " --json");
  const int64_t roce = JsonInt(json, "roce_frames");
  EXPECT_GT(roce, 1000) << json.substr(0, 400);
  EXPECT_EQ(JsonInt(json, "icrc_ok"), roce) << json.substr(0, 400);
  EXPECT_EQ(JsonInt(json, "icrc_bad"), 0) << json.substr(0, 400);
}

// Baseline for the switch's cost: the same ib_write_bw with the two VMs'
// sockets pointed at each other.
TEST(TwoVmsWiredDirectly, WriteBandwidthBaseline) {
  if (HasNativeRdmaDevice()) GTEST_SKIP() << "native RDMA device: VM wiring not used";
  TempRoot root;
  TestbedOptions o;
  o.num_vms = 2;
  o.direct = true;
  o.temp_root = root.path();
  auto tb_or = Testbed::Start(o);
  ASSERT_TRUE(tb_or.ok()) << tb_or.status().ToString();
  Testbed& tb = **tb_or;
  EXPECT_EQ(tb.host_switch(), nullptr);
  PairResult r =
      RunPair(tb, std::string("ib_write_bw") + kPerf + " -x 1",
              std::string("ib_write_bw") + kPerf + " -x 1 " + tb.vm(0).ipv4, seconds(90));
  EXPECT_EQ(r.client.exit_status, 0) << Describe(r);
  const double bw = BwAverage(r.client.stdout_text);
  EXPECT_GT(bw, 0) << Describe(r);
  std::printf("ib_write_bw wired directly: %.2f MB/s\n", bw);
  ASSERT_TRUE(tb.Teardown().ok());
  EXPECT_TRUE(QemuUnder(root.path()).empty());
}

// CASES.md case 4 on a real RDMA stack: a switch that drops frames over 1000
// bytes passes MTU 1024 messages that fit one frame, and hangs larger ones
// (rxe retries forever with retry_cnt 7).
TEST(MtuMismatchInSwitch, SmallMessagesPassLargeOnesHangAndDropsAreCounted) {
  if (HasNativeRdmaDevice()) GTEST_SKIP() << "native RDMA device: no switch to stage the drop";
  TempRoot root;
  TestbedOptions o;
  o.num_vms = 2;
  o.temp_root = root.path();
  PortImpairments mtu;
  mtu.max_frame_bytes = 1000;
  o.impairments = {mtu, mtu};
  auto tb_or = Testbed::Start(o);
  ASSERT_TRUE(tb_or.ok()) << tb_or.status().ToString();
  Testbed& tb = **tb_or;
  const std::string pp = "ibv_rc_pingpong -d $FATHOM_RDMA_DEV -g 1 -m 1024 -n 20";

  PairResult ok = RunPair(tb, pp + " -s 512", pp + " -s 512 " + tb.vm(0).ipv4, seconds(60));
  EXPECT_EQ(ok.client.exit_status, 0) << Describe(ok);
  EXPECT_EQ(ok.server.exit_status, 0) << Describe(ok);
  const PortCounters before = tb.host_switch()->Counters(0);
  EXPECT_EQ(before.drops[static_cast<int>(DropReason::kOverMtu)], 0u);

  PairResult hang = RunPair(tb, pp + " -s 4096", pp + " -s 4096 " + tb.vm(0).ipv4, seconds(20));
  EXPECT_TRUE(hang.client.timed_out) << Describe(hang);
  EXPECT_TRUE(hang.server.timed_out) << Describe(hang);
  uint64_t over_mtu = 0;
  for (int p = 0; p < 2; ++p) {
    over_mtu += tb.host_switch()->Counters(p).drops[static_cast<int>(DropReason::kOverMtu)];
  }
  EXPECT_GT(over_mtu, 0u);
  const std::string text = tb.host_switch()->CountersText();
  std::printf("%s", text.c_str());
  EXPECT_TRUE(std::regex_search(text, std::regex(R"(vm[01] .*drop\[over_mtu\]=[1-9])"))) << text;

  // The VMs are still usable after the deliberate hang, and teardown is clean.
  auto alive = tb.Run(0, "cat /sys/class/infiniband/rxe0/ports/1/state\n", seconds(30));
  ASSERT_TRUE(alive.ok()) << alive.status().ToString();
  EXPECT_NE(alive->stdout_text.find("ACTIVE"), std::string::npos);
  ASSERT_TRUE(tb.Teardown().ok());
  EXPECT_TRUE(QemuUnder(root.path()).empty());
}

TEST(VmFailurePaths, VmNotReadyIsKilledAtItsBootTimeout) {
  if (HasNativeRdmaDevice()) GTEST_SKIP() << "native RDMA device: no VMs to boot";
  TempRoot root;
  TestbedOptions o;
  o.num_vms = 1;
  o.temp_root = root.path();
  o.boot_timeout = seconds(2);  // a TCG boot takes far longer: never ready in time
  auto tb = Testbed::Start(o);
  ASSERT_FALSE(tb.ok());
  EXPECT_EQ(tb.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(tb.status().message().find("vm0 not ready within 2 s boot timeout"), std::string::npos)
      << tb.status().ToString();
  EXPECT_TRUE(QemuUnder(root.path()).empty());
  // The testbed's temporary directory is gone too.
  EXPECT_TRUE(fs::is_empty(root.path()));
}

TEST(VmFailurePaths, BadOptionsAreRejectedBeforeAnythingStarts) {
  TestbedOptions o;
  o.num_vms = 9;
  EXPECT_EQ(Testbed::Start(o).status().code(), StatusCode::kInvalidArgument);
  o.num_vms = 3;
  o.direct = true;
  EXPECT_EQ(Testbed::Start(o).status().code(), StatusCode::kInvalidArgument);
  o.direct = false;
  o.mtus = {9000, 500};
  EXPECT_EQ(Testbed::Start(o).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fathom::testbed
