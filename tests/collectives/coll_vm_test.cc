// `fathom coll --backend verbs` on real rxe between testbed VMs (label vm):
// one process per rank, the ranks meeting over the bootstrap, the same
// collective code as the simulator's. 2 ranks (one per VM) and 4 ranks (two
// per VM), ring and tree allreduce, allgather and broadcast, each with its
// data checked on every rank (#wrong 0). Then the MTU-mismatch hang between
// VMs: a switch that drops frames over 1000 bytes while the QPs run at path
// MTU 4096 lets small allreduces pass and hangs large ones, and the
// watchdog, not the test's timeout, ends the run naming the stuck QPs.
// And --trace: rank 0 writes one Chrome trace with both ranks' steps; after
// a failed run, each rank its own.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "testbed/testbed.h"
#include "tests/collectives/coll_vm_runs.h"
#include "tests/json_reader.h"
#include "tests/testbed/shared_testbed.h"

namespace fathom::testbed {
namespace {

using std::chrono::seconds;
using Result = VmRunResult;

const std::string kFathom = std::string(FATHOM_BINARY_DIR) + "/tools/fathom";

class CollVmTest : public SharedTestbedTest<CollVmTest> {
 public:
  static TestbedOptions Options() {
    TestbedOptions o;
    o.num_vms = 2;
    return o;
  }

 protected:
  // Every rank exited 0 and rank 0's table has `sizes` rows, each with
  // #wrong 0 out of place and in place.
  static void ExpectCorrect(const Result& r, int nranks, size_t sizes) {
    EXPECT_EQ(r.vm0.exit_status, 0) << r.Describe();
    EXPECT_EQ(r.vm1.exit_status, 0) << r.Describe();
    for (int rank = 2; rank < nranks; ++rank) {
      const std::string& out = rank % 2 == 0 ? r.vm0.stdout_text : r.vm1.stdout_text;
      EXPECT_NE(out.find("rank " + std::to_string(rank) + " rc=0"), std::string::npos)
          << r.Describe();
    }
    const auto rows = Rows(r.vm0.stdout_text);
    ASSERT_EQ(rows.size(), sizes) << r.Describe();
    for (const auto& row : rows) {
      EXPECT_EQ(row[8], "0") << "out-of-place #wrong at size " << row[0] << "\n" << r.Describe();
      EXPECT_EQ(row[12], "0") << "in-place #wrong at size " << row[0] << "\n" << r.Describe();
    }
    EXPECT_NE(r.vm0.stdout_text.find("# Out of bounds values : 0 OK"), std::string::npos)
        << r.Describe();
    std::printf("%s", r.vm0.stdout_text.c_str());
  }
};

// Sizes: 4 KiB .. 1 MiB by 16 (3 rows); 1 MiB is two 512 KiB chunks.
const std::string kSizes = " -b 4K -e 1M -f 16 -n 2 -w 1";

TEST_F(CollVmTest, TwoRanksRingAndTreeAllreduceAreCorrect) {
  for (const std::string algo : {"ring", "tree"}) {
    auto r = RunRanks(*tb_, "allreduce --algo " + algo + kSizes, 2, 18700, seconds(300));
    SCOPED_TRACE(algo);
    ExpectCorrect(r, 2, 3);
    EXPECT_NE(r.vm0.stdout_text.find("backend verbs, 2 ranks"), std::string::npos) << r.Describe();
  }
}

TEST_F(CollVmTest, TwoRanksAllgatherBroadcastEventsAndTwoChannelsAreCorrect) {
  ExpectCorrect(RunRanks(*tb_, "allgather" + kSizes, 2, 18701, seconds(300)), 2, 3);
  ExpectCorrect(RunRanks(*tb_, "broadcast -r 1" + kSizes, 2, 18702, seconds(300)), 2, 3);
  // Completion events instead of busy polling (the CQ's completion channel).
  ExpectCorrect(
      RunRanks(*tb_, "allreduce --algo tree --cq-mode events" + kSizes, 2, 18704, seconds(300)), 2,
      3);
  // Two QPs per peer (the `channel` of the endpoint records), int32 max.
  ExpectCorrect(RunRanks(*tb_, "allreduce --algo ring --channels 2 -d int32 -o max" + kSizes, 2,
                         18703, seconds(300)),
                2, 3);
}

// --trace on verbs: rank 0 gathers both ranks' steps into one file (pid =
// rank, "rank N" process names, each rank's sends to and receives from the
// other); rank 1 writes no file of its own.
TEST_F(CollVmTest, TwoRanksTraceIsOneFileOnRankZeroWithBothRanks) {
  const std::string file = "coll-trace.json";
  auto r = RunRanks(*tb_, "allreduce --algo ring -b 4K -e 64K -f 16 -n 2 -w 1 --trace " + file, 2,
                    18705, seconds(300));
  ExpectCorrect(r, 2, 2);
  const std::filesystem::path got = tb_->work_dir() / "coll-trace-files";
  for (int vm = 0; vm < 2; ++vm) {
    ASSERT_TRUE(tb_->CollectFiles(vm, got / ("vm" + std::to_string(vm))).ok());
  }
  for (const char* stray : {"vm0/coll-trace.json.0", "vm0/coll-trace.json.1", "vm1/coll-trace.json",
                            "vm1/coll-trace.json.1"}) {
    EXPECT_FALSE(std::filesystem::exists(got / stray)) << stray << "\n" << r.Describe();
  }
  std::ifstream in(got / "vm0" / file);
  ASSERT_TRUE(in.good()) << "rank 0 wrote no " << file << "\n" << r.Describe();
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::map<std::string, std::string> j;
  ASSERT_TRUE(test_util::Json(text).Parse(&j)) << text.substr(0, 2000);
  const std::vector<test_util::TraceEvent> events = test_util::TraceEvents(j);
  std::map<int, std::string> process_name = test_util::TraceProcessNames(events);
  std::map<int, int> steps, sends_to_peer, receives_from_peer;
  std::map<int, std::set<std::string>> names;
  std::map<int, double> first_ts;  // for the log: how close the ranks' timelines look
  for (const test_util::TraceEvent& e : events) {
    if (e.at("ph") != "X") continue;
    const int pid = std::stoi(e.at("pid"));
    ++steps[pid];
    names[pid].insert(e.at("name"));
    // On the common timeline every step comes after the reference point.
    const double ts = std::stod(e.at("ts"));
    EXPECT_GE(ts, 0.0) << e.at("name");
    if (!first_ts.count(pid) || ts < first_ts[pid]) first_ts[pid] = ts;
    const std::string peer = std::to_string(1 - pid);
    if (e.count("args.to") && e.at("args.to") == peer) ++sends_to_peer[pid];
    if (e.count("args.from") && e.at("args.from") == peer) ++receives_from_peer[pid];
  }
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    EXPECT_EQ(process_name[rank], "rank " + std::to_string(rank)) << text.substr(0, 2000);
    EXPECT_GT(steps[rank], 0) << text.substr(0, 2000);
    EXPECT_GT(sends_to_peer[rank], 0) << text.substr(0, 2000);
    EXPECT_GT(receives_from_peer[rank], 0) << text.substr(0, 2000);
    EXPECT_TRUE(names[rank].count("recv-reduce-send") || names[rank].count("recv-reduce"))
        << text.substr(0, 2000);
  }
  EXPECT_EQ(steps.size(), 2u) << text.substr(0, 2000);
  std::printf("trace %s: %zu bytes; rank 0: %d steps from ts %.1f us; rank 1: %d from %.1f us\n",
              file.c_str(), text.size(), steps[0], first_ts[0], steps[1], first_ts[1]);
  EXPECT_NE(text.find("aligned to that barrier's skew"), std::string::npos);
}

TEST_F(CollVmTest, FourRanksRingAndTreeAllreduceAndAllgatherAreCorrect) {
  // Two ranks per VM: every pair crosses the switch or rxe's loopback.
  const std::string sizes = " -b 1K -e 256K -f 16 -n 2 -w 1";
  for (const std::string algo : {"ring", "tree"}) {
    SCOPED_TRACE(algo);
    ExpectCorrect(RunRanks(*tb_, "allreduce --algo " + algo + sizes, 4, 18710, seconds(600)), 4, 3);
  }
  ExpectCorrect(RunRanks(*tb_, "allgather" + sizes, 4, 18711, seconds(600)), 4, 3);
}

TEST_F(CollVmTest, AKilledRankStopsTheOthersWithTheReason) {
  // Rank 1 is killed mid-run. Rank 0 must stop with a named failure — the
  // root's abort ("rank 1 ... lost its bootstrap connection"), or a
  // completion error toward rank 1 — well before its watchdog would fire,
  // and never hang until the test's own timeout.
  const std::string args = "allreduce --algo ring -b 4M -e 4M -n 200 -w 0 --timeout 60";
  const std::string r0 = VerbsCmd(args, 2, 0, 18720) + "\n";
  const std::string r1 = VerbsCmd(args, 2, 1, 18720) + " & sleep 25; kill -9 $!; sleep 1\n";
  auto h0 = tb_->Launch(0, r0, seconds(180));
  auto h1 = tb_->Launch(1, r1, seconds(180));
  ASSERT_TRUE(h0.ok() && h1.ok());
  auto res0 = tb_->Wait(*h0);
  auto res1 = tb_->Wait(*h1);
  ASSERT_TRUE(res0.ok() && res1.ok());
  const std::string all = res0->stdout_text + res0->stderr_text;
  EXPECT_FALSE(res0->timed_out) << all;
  EXPECT_EQ(res0->exit_status, 1) << all;
  EXPECT_TRUE(all.find("rank 1 (") != std::string::npos ||
              all.find("completion IBV_WC_") != std::string::npos)
      << all;
  EXPECT_EQ(all.find("watchdog: no progress"), std::string::npos) << all;
  // The killed rank never reports; rank 0 says so rather than waiting on.
  EXPECT_NE(all.find("gathered on rank 0 (1 of 2 reported)"), std::string::npos) << all;
  EXPECT_NE(all.find("## rank 1: no report within"), std::string::npos) << all;
}

// The hang, explained, on a real RDMA stack (TESTBED.md, CASES.md case 4).
TEST(CollVmHang, MtuMismatchHangsLargeAllreducesAndTheWatchdogNamesTheStuckQps) {
  if (HasNativeRdmaDevice()) GTEST_SKIP() << "native RDMA device: no switch to stage the drop";
  TestbedOptions o;
  o.num_vms = 2;
  PortImpairments mtu;
  mtu.max_frame_bytes = 1000;  // the QPs run at path MTU 4096 (Ethernet MTU 9000)
  o.impairments = {mtu, mtu};
  auto tb_or = Testbed::Start(o);
  ASSERT_TRUE(tb_or.ok()) << tb_or.status().ToString();
  Testbed& tb = **tb_or;
  auto run = [&tb](const std::string& args, int port) {
    return RunRanks(tb, "allreduce --algo ring " + args, 2, port, seconds(150));
  };
  // Small: 256 B (two 128-byte chunks): every frame fits; correct results.
  const Result sr = run("-b 256 -e 256 -n 2 -w 1 --timeout 20", 18730);
  EXPECT_EQ(sr.vm0.exit_status, 0) << sr.Describe();
  EXPECT_EQ(sr.vm1.exit_status, 0) << sr.Describe();
  const auto rows = Rows(sr.vm0.stdout_text);
  ASSERT_EQ(rows.size(), 1u) << sr.Describe();
  EXPECT_EQ(rows[0][8], "0");
  EXPECT_EQ(rows[0][12], "0");

  // Large: 64 KiB: full-MTU frames are dropped, rxe retransmits forever
  // (retry_cnt 7), and nothing completes. The watchdog (20 s) must end it:
  // the command's own limit (20 s + bootstrap and teardown margin) is far
  // beyond that, so a timeout here is a watchdog that did not fire.
  const Result lr = run("-b 64K -e 64K -n 2 -w 1 --timeout 20", 18731);
  const std::string out0 = lr.vm0.stdout_text + lr.vm0.stderr_text;
  const std::string out1 = lr.vm1.stdout_text + lr.vm1.stderr_text;
  const std::string both = lr.Describe();
  EXPECT_FALSE(lr.vm0.timed_out) << both;
  EXPECT_FALSE(lr.vm1.timed_out) << both;
  EXPECT_EQ(lr.vm0.exit_status, 1) << both;
  EXPECT_EQ(lr.vm1.exit_status, 1) << both;
  // At least one rank's own watchdog fired and named a stuck QP toward its
  // peer, NCCL-style; the other stopped with it (its own watchdog, or the
  // abort the first one sent through the bootstrap).
  const std::regex stuck_qp(R"(rank ([01]) -> rank ([01]) qpn 0x[0-9a-f]+: no completion for )");
  std::smatch m;
  const bool named = std::regex_search(out0, m, stuck_qp) || std::regex_search(out1, m, stuck_qp);
  EXPECT_TRUE(named) << both;
  if (named) {
    EXPECT_NE(m[1].str(), m[2].str()) << both;
  }
  EXPECT_NE(both.find("watchdog: no progress"), std::string::npos) << both;
  EXPECT_NE(both.find("waiting for"), std::string::npos) << both;
  // Rank 0 prints every rank's view: rank 1's own report, its QP toward
  // rank 0 with the WRs outstanding, under its heading.
  EXPECT_NE(out0.find("gathered on rank 0 (2 of 2 reported)"), std::string::npos) << both;
  const size_t rank1_view = out0.find("## rank 1\n");
  ASSERT_NE(rank1_view, std::string::npos) << both;
  EXPECT_NE(out0.find("  qp to rank 0 channel 0", rank1_view), std::string::npos) << both;
  // The switch saw why: frames over its limit dropped.
  uint64_t over_mtu = 0;
  for (int p = 0; p < 2; ++p) {
    over_mtu += tb.host_switch()->Counters(p).drops[static_cast<int>(DropReason::kOverMtu)];
  }
  EXPECT_GT(over_mtu, 0u);
  std::printf("%s\n%s", both.c_str(), tb.host_switch()->CountersText().c_str());

  // The same drop with a finite retry count (rxe retries forever only at 7):
  // after 3 x 537 ms the requester completes with IBV_WC_RETRY_EXC_ERR (12),
  // and every rank stops naming the status, the peer and the QP. With
  // --trace of the failing iteration (-w 0): the abort leaves no bootstrap
  // round to gather through, so each rank sends its steps with its report:
  // rank 0 writes both ranks' to the file, one timeline; rank 1 also keeps
  // all of its own in FILE.1, and says so.
  const Result er =
      run("-b 64K -e 64K -n 2 -w 0 --timeout 20 --retry-cnt 2 --trace err-trace.json", 18732);
  const std::string err0 = er.vm0.stdout_text + er.vm0.stderr_text;
  const std::string err1 = er.vm1.stdout_text + er.vm1.stderr_text;
  const std::string err_both = er.Describe();
  EXPECT_FALSE(er.vm0.timed_out || er.vm1.timed_out) << err_both;
  EXPECT_EQ(er.vm0.exit_status, 1) << err_both;
  EXPECT_EQ(er.vm1.exit_status, 1) << err_both;
  const std::regex error12(
      R"(rank ([01]) -> rank ([01]) channel 0: completion IBV_WC_RETRY_EXC_ERR .* qpn 0x[0-9a-f]+)");
  EXPECT_TRUE(std::regex_search(err0, error12) || std::regex_search(err1, error12)) << err_both;
  EXPECT_EQ(err_both.find("watchdog: no progress"), std::string::npos) << err_both;
  EXPECT_NE(err0.find("gathered on rank 0 (2 of 2 reported)"), std::string::npos) << err_both;
  std::printf("%s", err_both.c_str());
  std::map<int, std::string> files;  // vm -> its trace file's text
  for (int vm = 0; vm < 2; ++vm) {
    SCOPED_TRACE("vm " + std::to_string(vm));
    const std::filesystem::path dir = tb.work_dir() / ("err-trace-vm" + std::to_string(vm));
    ASSERT_TRUE(tb.CollectFiles(vm, dir).ok());
    const std::string mine = vm == 0 ? "err-trace.json" : "err-trace.json.1";
    const std::string other = vm == 0 ? "err-trace.json.0" : "err-trace.json";
    EXPECT_FALSE(std::filesystem::exists(dir / other)) << other;
    std::ifstream in(dir / mine);
    ASSERT_TRUE(in.good()) << "no " << mine << "\n" << err_both;
    files[vm] = std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::printf("%s: %zu bytes\n", mine.c_str(), files[vm].size());
  }
  // Rank 0's file: both ranks, each with steps, and why it came this way.
  std::map<std::string, std::string> j0;
  ASSERT_TRUE(test_util::Json(files[0]).Parse(&j0)) << files[0].substr(0, 2000);
  std::map<int, int> steps;
  for (const test_util::TraceEvent& e : test_util::TraceEvents(j0)) {
    if (e.at("ph") == "X") ++steps[std::stoi(e.at("pid"))];
  }
  EXPECT_GT(steps[0], 0) << files[0].substr(0, 2000);
  EXPECT_GT(steps[1], 0) << files[0].substr(0, 2000);
  EXPECT_NE(files[0].find("the other ranks sent their steps with their reports"), std::string::npos)
      << files[0].substr(0, 2000);
  // Rank 1's own file: its steps only, all of them.
  std::map<std::string, std::string> j1;
  ASSERT_TRUE(test_util::Json(files[1]).Parse(&j1)) << files[1].substr(0, 2000);
  EXPECT_EQ(j1["traceEvents[0].args.name"], "rank 1") << files[1].substr(0, 2000);
  EXPECT_NE(j1["otherData.note1"].find("steps only, all of them"), std::string::npos)
      << files[1].substr(0, 2000);
  EXPECT_NE(err1.find("--trace: the run failed;"), std::string::npos) << err_both;
  EXPECT_EQ(err0.find("--trace: cannot gather"), std::string::npos) << err_both;
  ASSERT_TRUE(tb.Teardown().ok());
}

}  // namespace
}  // namespace fathom::testbed
