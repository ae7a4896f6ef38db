// `fathom replay` on real evidence (label vm): faults staged between two
// testbed VMs running real rxe, a ring allreduce run across them with
// `fathom coll --backend verbs`, the evidence collected the way a field
// engineer would (each rank's output, rxe's hw_counters, ibv_devinfo, ip
// link, the GID table; the host switch's counters and capture), and the
// replay must name the staged fault as its first cause (issue 28). A lossy
// link staged the same way is testdata/replay/rxe-lossy-link, replayed
// without VMs by replay_e2e_test.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "testbed/testbed.h"
#include "tests/json_reader.h"
#include "tests/scratch_dir.h"

namespace fathom::testbed {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

const std::string kFathom = std::string(FATHOM_BINARY_DIR) + "/tools/fathom";
const std::string kCollect = std::string(FATHOM_SOURCE_DIR) + "/testbed/collect_evidence.sh";

// Rank N runs on VM N as host hN; its evidence lands in $FATHOM_OUT/hN.
std::string RankScript(const std::string& coll_args, int port) {
  return "out=$FATHOM_OUT/h$FATHOM_VM_ID; mkdir -p $out\n"
         "echo \"start $(date +%s.%N)\" > $out/times.txt\n"
         "timeout 200 " +
         kFathom + " coll allreduce --algo ring --backend verbs --nranks 2 --rank $FATHOM_VM_ID" +
         " --bootstrap $FATHOM_VM0_IP4:" + std::to_string(port) + " --ib-timeout 17 " + coll_args +
         " > $out/coll.log 2>&1\n"
         "echo \"rc=$?\" >> $out/coll.log\n"
         "echo \"end $(date +%s.%N)\" >> $out/times.txt\n"
         "sh " +
         kCollect + " $out\n";
}

// Boots two VMs with `impairments` on the host switch, runs the allreduce
// on both, and writes the evidence bundle to `bundle`.
void StageAndCollect(const std::vector<PortImpairments>& impairments, const std::string& coll_args,
                     int port, const fs::path& bundle) {
  TestbedOptions o;
  o.num_vms = 2;
  o.impairments = impairments;
  o.capture_path = (bundle / "fabric" / "host-switch.pcap").string();
  fs::create_directories(bundle / "fabric");
  auto tb_or = Testbed::Start(o);
  ASSERT_TRUE(tb_or.ok()) << tb_or.status().ToString();
  Testbed& tb = **tb_or;
  const std::string script = RankScript(coll_args, port);
  auto h0 = tb.Launch(0, script, seconds(300));
  auto h1 = tb.Launch(1, script, seconds(300));
  ASSERT_TRUE(h0.ok() && h1.ok());
  auto r1 = tb.Wait(*h1);
  auto r0 = tb.Wait(*h0);
  ASSERT_TRUE(r0.ok() && r1.ok());
  for (int vm = 0; vm < 2; ++vm) {
    ASSERT_TRUE(tb.CollectFiles(vm, bundle / ("vm" + std::to_string(vm))).ok());
  }
  // The fabric as the engineer knows it: one leaf, the neighbour table, the
  // switch's per-port counters (port N faces hN).
  std::ofstream(bundle / "fabric" / "topology.txt")
      << "leaf-spine:leaves=1,spines=1,hosts=2,gpus=1\n";
  std::ofstream(bundle / "fabric" / "neighbors.csv")
      << "host,nic,switch,port\nh0,eth0,leaf0,0\nh1,eth0,leaf0,1\n";
  std::ofstream counters(bundle / "fabric" / "switch_counters.csv");
  counters << "port,counter,value\n";
  Switch* sw = tb.host_switch();
  ASSERT_NE(sw, nullptr);
  for (int p = 0; p < 2; ++p) {
    const PortCounters c = sw->Counters(p);
    const std::string name = "leaf0:" + std::to_string(p);
    counters << name << ",rx_frames," << c.rx_frames << "\n"
             << name << ",tx_frames," << c.tx_frames << "\n";
    for (int d = 0; d < kNumDropReasons; ++d) {
      counters << name << ",drops_" << DropReasonName(static_cast<DropReason>(d)) << ","
               << c.drops[d] << "\n";
    }
  }
  counters.close();
  ASSERT_TRUE(tb.Teardown().ok());
}

std::map<std::string, std::string> Replay(const fs::path& bundle, int* exit_code) {
  const fs::path json = bundle / "replay.json";
  // --scenario-out in the bundle: without it the reproducing scenario goes
  // to a directory of its own under $TMPDIR that nobody removes.
  const std::string cmd = kFathom + " replay " + bundle.string() + " --json " + json.string() +
                          " --html " + (bundle / "replay.html").string() + " --scenario-out " +
                          (bundle / "scenarios").string() + " > " +
                          (bundle / "replay.txt").string() + " 2>&1";
  const int status = std::system(cmd.c_str());
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream f(json);
  std::stringstream ss;
  ss << f.rdbuf();
  std::map<std::string, std::string> flat;
  test_util::Json(ss.str()).Parse(&flat);
  return flat;
}

std::string ReadFile(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class ReplayVmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (HasNativeRdmaDevice()) GTEST_SKIP() << "native RDMA device: no host switch to stage faults";
    dir_ = tmp_.path();
  }
  void TearDown() override {
    if (HasFailure()) tmp_.Keep();  // the bundle and the replay's output are the evidence
  }
  test_util::ScratchDir tmp_;
  fs::path dir_;
};

TEST_F(ReplayVmTest, AnMtuMismatchStagedOnRealRxeIsTheFirstCause) {
  PortImpairments mtu;
  mtu.max_frame_bytes = 1000;  // QPs at path MTU 4096 send 2 KiB+ frames
  const fs::path bundle = dir_ / "mtu";
  StageAndCollect({mtu, mtu}, "-b 4K -e 64K -f 16 -n 2 -w 1 --timeout 20", 18740, bundle);
  if (HasFatalFailure()) return;
  int code = -1;
  auto j = Replay(bundle, &code);
  EXPECT_EQ(code, 0) << ReadFile(bundle / "replay.txt");
  EXPECT_EQ(j["causes[0].kind"], "mtu_mismatch") << ReadFile(bundle / "replay.txt");
}

}  // namespace
}  // namespace fathom::testbed
