// `mpirun -np N fathom sim` (issue 30): the same trace digest and report
// for 1, 2, 3 and 4 processes (oversubscribed on these 2-core machines),
// and the launch errors rank 0 reports with exit 2.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli_run.h"
#include "tests/scratch_dir.h"

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
                         testing::Values("permutation.yaml", "incast.yaml", "fault.yaml",
                                         "send.yaml", "reroute.yaml", "pfc_incast.yaml",
                                         "pfc_storm.yaml", "reroute_restore.yaml",
                                         "reroute_core.yaml", "reroute_staggered.yaml",
                                         "reroute_core_restore.yaml", "reroute_both.yaml",
                                         "few_hosts.yaml"));

using fathom::test_util::ReadFile;

// --pcap and --trace (capture_merge.h): each process records its
// partition's frames and events, rank 0 merges them; the files are byte
// for byte those of one process in the canonical order: `fathom sim
// SCENARIO --pcap LINK_A --pcap LINK_B --trace` at 1-4 processes.
void ExpectSamePcapAndTraceFiles(const std::string& scenario_file, const std::string& link_a,
                                 const std::string& link_b) {
  test_util::ScratchDir tmp;
  const std::string d = tmp.path();
  auto outputs = [&](const std::string& tag) {
    return " --pcap " + link_a + "=" + d + "/detour" + tag + ".pcap --pcap " + link_b + "=" + d +
           "/h6" + tag + ".pcap --trace " + d + "/trace" + tag + ".json";
  };
  const std::string scenario = kScenarios + scenario_file;
  const nlohmann::json one =
      Report(kFathom + " sim " + scenario + " --json --event-order canonical" + outputs("1"));
  ASSERT_TRUE(one.is_object());
  const std::string detour = ReadFile(d + "/detour1.pcap");
  const std::string h6 = ReadFile(d + "/h61.pcap");
  const std::string trace = ReadFile(d + "/trace1.json");
  ASSERT_GT(detour.size(), 24u);  // more than the pcap header
  ASSERT_GT(h6.size(), 24u);
  ASSERT_GT(trace.size(), 100u);
  for (int n = 1; n <= 4; ++n) {
    const std::string tag = "n" + std::to_string(n);
    const nlohmann::json many = Report(Mpirun(n) + kFathom + " sim " + scenario + " --json" +
                                       (n == 1 ? " --event-order canonical" : "") + outputs(tag));
    EXPECT_EQ(many["captured_frames"], one["captured_frames"]) << n << " processes";
    EXPECT_TRUE(ReadFile(d + "/detour" + tag + ".pcap") == detour) << n << " processes";
    EXPECT_TRUE(ReadFile(d + "/h6" + tag + ".pcap") == h6) << n << " processes";
    EXPECT_TRUE(ReadFile(d + "/trace" + tag + ".json") == trace) << n << " processes";
  }
  // The merged capture is a capture: tshark reads every frame the report
  // counts.
  if (test_util::RunCommand("command -v tshark").exit_code == 0) {
    const test_util::CommandResult r = test_util::RunCommand(
        "(tshark -r " + d + "/detourn4.pcap -T fields -e frame.number; tshark -r " + d +
            "/h6n4.pcap -T fields -e frame.number) | wc -l",
        /*merge_stderr=*/false);
    ASSERT_EQ(r.exit_code, 0);
    EXPECT_EQ(std::stoull(r.out), one["captured_frames"].get<uint64_t>()) << r.out;
  }
}

TEST(MpiOutputsTest, SamePcapAndTraceFilesForOneToFourProcesses) {
  // leaf1-spine1 is the re-route's detour and crosses processes.
  ExpectSamePcapAndTraceFiles("reroute.yaml", "leaf1-spine1", "h6");
}

// On a lossless fabric the spines' PAUSE frames to leaf1 cross processes;
// the sending side runs PFC settle events (pfc_cross.h) with the keys of
// the far end's arrivals: neither they nor the XONs they release may
// change the merged files.
TEST(MpiOutputsTest, LosslessPcapAndTraceFilesForOneToFourProcesses) {
  ExpectSamePcapAndTraceFiles("pfc_incast.yaml", "leaf1-spine0", "leaf0-spine1");
}

// The PFC watchdog's polls (one event per switch, traced where the switch
// is simulated) and the deadlock checks (every process runs them; rank 0
// traces them) leave the merged files as one process writes them.
TEST(MpiOutputsTest, WatchdogPcapAndTraceFilesForOneToFourProcesses) {
  ExpectSamePcapAndTraceFiles("pfc_storm.yaml", "leaf0-spine0", "h0");
}

// reroute.yaml with spine0's link coming back at 60 us while the detour
// carries packets (written to `dir`): a switch reads the old route's next
// switch's port for a detour packet, and forwards it by its own route
// instead (reroute.h). Across processes that stopped `fathom sim` with
// exit 2, and `fathom coll` refused it up front.
std::string RerouteThatEnds(const test_util::ScratchDir& dir) {
  const std::string path = dir.File("ends.yaml");
  std::string text = ReadFile(kScenarios + "reroute.yaml");
  const size_t at = text.find("start_us: 20,");
  EXPECT_NE(at, std::string::npos);
  if (at == std::string::npos) return path;
  text.insert(at + std::strlen("start_us: 20,"), " duration_us: 40,");
  text = text.substr(0, text.find("expect:"));
  std::FILE* f = std::fopen(path.c_str(), "w");
  EXPECT_NE(f, nullptr);
  if (f == nullptr) return path;
  std::fputs(text.c_str(), f);
  std::fclose(f);
  return path;
}

TEST(MpiOutputsTest, RerouteThatEndsWithinTheRunSameForOneToFourProcesses) {
  test_util::ScratchDir tmp;
  const std::string path = RerouteThatEnds(tmp);
  const nlohmann::json one = Report(kFathom + " sim " + path + " --json --event-order canonical");
  ASSERT_TRUE(one.is_object());
  EXPECT_GT(one["flows_completed"].get<int>(), 0) << one.dump();
  for (int n = 2; n <= 4; ++n) {
    const nlohmann::json many = Report(Mpirun(n) + kFathom + " sim " + path + " --json");
    EXPECT_EQ(many, one) << n << " processes: " << nlohmann::json::diff(one, many).dump();
  }
}

// A lossless incast (PFC): the PAUSE frames leaf0 sends the spines and the
// spines send leaf1 cross between processes (with 4 processes over 5
// switches, at most one leaf-spine pair shares a process), and every
// port's PAUSE counters, merged on rank 0, are the one process's.
TEST(MpiPfcTest, PauseFramesCrossProcessesAsInOne) {
  const std::string scenario = kScenarios + "pfc_incast.yaml";
  const nlohmann::json one =
      Report(kFathom + " sim " + scenario + " --json --event-order canonical");
  ASSERT_TRUE(one.is_object());
  ASSERT_TRUE(one.contains("pfc")) << one.dump();
  EXPECT_EQ(one["flows_completed"], 11);
  EXPECT_TRUE(one["drops"].empty()) << one.dump();
  // The spines' PAUSEs toward leaf1, and leaf0's toward the spines.
  for (const char* port : {"leaf0->spine0", "leaf0->spine1", "spine0->leaf1", "spine1->leaf1"}) {
    ASSERT_TRUE(one["pfc"].contains(port)) << port << " " << one["pfc"].dump();
    EXPECT_GT(one["pfc"][port]["tx_prio3_pause"].get<int>(), 0) << port;
  }
  const nlohmann::json four = Report(Mpirun(4) + kFathom + " sim " + scenario + " --json");
  EXPECT_EQ(four["pfc"], one["pfc"]) << nlohmann::json::diff(one["pfc"], four["pfc"]).dump();
  EXPECT_EQ(four["trace_digest"], one["trace_digest"]);
  // One process under mpirun is plain `fathom sim` (its default order).
  const nlohmann::json plain = Report(kFathom + " sim " + scenario + " --json");
  const nlohmann::json np1 = Report(Mpirun(1) + kFathom + " sim " + scenario + " --json");
  EXPECT_EQ(np1["trace_digest"], plain["trace_digest"]);
  EXPECT_EQ(np1["pfc"], plain["pfc"]);
}

// ECN marks and DCQCN's CNPs on the lossless incast: h0's CNPs to the
// senders behind leaf1 cross the spines. The same digest, marks, CNPs and
// PAUSE counters for 1, 2 and 4 processes, and the same report: each QP's
// DCQCN rates come from its requester's process.
TEST(MpiPfcTest, EcnMarksAndCnpsCrossProcessesAsInOne) {
  const std::string scenario = kScenarios + "pfc_ecn_incast.yaml";
  const nlohmann::json one =
      Report(kFathom + " sim " + scenario + " --json --event-order canonical");
  ASSERT_TRUE(one.is_object());
  EXPECT_EQ(one["flows_completed"], 11);
  EXPECT_GT(one["ecn_marked_packets"].get<int>(), 0) << one.dump();
  EXPECT_GT(one["np_cnp_sent"].get<int>(), 0) << one.dump();
  for (int n : {2, 4}) {
    const nlohmann::json many = Report(Mpirun(n) + kFathom + " sim " + scenario + " --json");
    for (const char* field : {"trace_digest", "events", "ecn_marked_packets", "np_cnp_sent",
                              "np_ecn_marked_roce_packets", "pfc", "fct_ns", "drops"}) {
      EXPECT_EQ(many[field], one[field]) << field << ", " << n << " processes";
    }
    // Every QP's rate limiter, the senders behind leaf1 too.
    ASSERT_TRUE(many["flows"].is_array()) << many.dump();
    for (const nlohmann::json& f : many["flows"]) {
      for (const nlohmann::json& q : f["qps"]) EXPECT_TRUE(q["dcqcn"].is_object()) << q.dump();
    }
    EXPECT_EQ(many, one) << n << " processes: " << nlohmann::json::diff(one, many).dump();
  }
}

// The PFC watchdog (pfc_field.h): each process polls its own switches,
// switch by switch, and rank 0 lists every process's stormed queues and
// detections as one process does. The scenario's expect block (4 storms
// detected and restored, no deadlock: the deadlock check runs too) passes
// for 1 to 4 processes; MpiRunTest compares its whole JSON report.
TEST(MpiPfcTest, WatchdogSummaryAsInOneForOneToFourProcesses) {
  const std::string scenario = kScenarios + "pfc_storm.yaml";
  // The summary's watchdog lines.
  auto watchdog_lines = [](const std::string& cmd) {
    const test_util::CommandResult r = test_util::RunCommand(cmd, /*merge_stderr=*/false);
    EXPECT_EQ(r.exit_code, 0) << cmd << "\n" << r.out;
    std::string lines;
    for (size_t at = 0; at < r.out.size();) {
      const size_t nl = r.out.find('\n', at);
      const std::string line = r.out.substr(at, nl - at);
      if (line.find("pfcwd") == 0 || line.find("STORM") != std::string::npos ||
          line.find(" storm ") != std::string::npos || line.find("deadlock") != std::string::npos) {
        lines += line + "\n";
      }
      at = nl == std::string::npos ? r.out.size() : nl + 1;
    }
    return lines;
  };
  const std::string one = watchdog_lines(kFathom + " sim " + scenario + " --event-order canonical");
  EXPECT_NE(one.find("4 storms detected, 4 restored"), std::string::npos) << one;
  EXPECT_NE(one.find("spine0:0->leaf0 prio 3  operational  STORM DETECTED/RESTORED 1/1"),
            std::string::npos)
      << one;
  EXPECT_NE(one.find("3.000 ms leaf2:4 prio 3 storm detected"), std::string::npos) << one;
  for (int n : {2, 4}) {
    EXPECT_EQ(watchdog_lines(Mpirun(n) + kFathom + " sim " + scenario), one) << n << " processes";
  }
}

// PFC deadlock detection (scenarios/faults/pfc_deadlock.yaml: a cycle of
// four paused queues over leaf1, spine1, leaf2 and spine0, which the
// processes split): every process notes its ports' part of the wait-for
// graph at each check, the window's end decides from all of them. The same
// cycle, times, digest and report for 1 to 4 processes, and the expect
// block (the deadlock and its cycle) passes; one process under mpirun is
// plain `fathom sim`.
TEST(MpiPfcTest, DeadlockCycleAsInOneForOneToFourProcesses) {
  const std::string scenario =
      std::string(FATHOM_SOURCE_DIR) + "/scenarios/faults/pfc_deadlock.yaml";
  const nlohmann::json one =
      Report(kFathom + " sim " + scenario + " --json --event-order canonical");
  ASSERT_TRUE(one.is_object());
  EXPECT_EQ(one["pfc_deadlock"], true) << one.dump();
  EXPECT_EQ(one["pfc_deadlock_cycle"], "leaf1:3 -> spine1:2 -> leaf2:2 -> spine0:1 -> leaf1:3");
  for (int n = 2; n <= 4; ++n) {
    const nlohmann::json many = Report(Mpirun(n) + kFathom + " sim " + scenario + " --json");
    EXPECT_EQ(many["trace_digest"], one["trace_digest"]) << n << " processes";
    EXPECT_EQ(many, one) << n << " processes: " << nlohmann::json::diff(one, many).dump();
  }
  // The summary's deadlock line (when the cycle closed, when declared).
  const test_util::CommandResult text = test_util::RunCommand(
      Mpirun(3) + kFathom + " sim " + scenario + " 2>/dev/null", /*merge_stderr=*/false);
  const test_util::CommandResult text1 =
      test_util::RunCommand(kFathom + " sim " + scenario + " --event-order canonical 2>/dev/null",
                            /*merge_stderr=*/false);
  const size_t at = text1.out.find("PFC deadlock: a cycle of 4 paused queues");
  ASSERT_NE(at, std::string::npos) << text1.out;
  const std::string line = text1.out.substr(at, text1.out.find('\n', at) - at);
  EXPECT_NE(text.out.find(line), std::string::npos) << line << "\n" << text.out;
  const nlohmann::json plain = Report(kFathom + " sim " + scenario + " --json");
  const nlohmann::json np1 = Report(Mpirun(1) + kFathom + " sim " + scenario + " --json");
  EXPECT_EQ(np1["trace_digest"], plain["trace_digest"]);
  EXPECT_EQ(np1["pfc_deadlock_cycle"], plain["pfc_deadlock_cycle"]);
}

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

// `mpirun -np N fathom coll ... --backend sim`: the same rows (times,
// busbw, #wrong), counters, trace digest and verdict for 1 to 4 processes
// (one process: --event-order canonical). `args` names the run.
struct CollRun {
  int exit_code;
  nlohmann::json j;
};
CollRun Coll(const std::string& launcher, const std::string& args) {
  const std::string cmd = launcher + kFathom + " coll " + args + " --json";
  const test_util::CommandResult r = test_util::RunCommand(cmd, /*merge_stderr=*/false);
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << cmd << "\n" << r.out;
  if (j.is_object()) j.erase("processes");  // the one thing that differs
  return {r.exit_code, j};
}

void ExpectSameCollForOneToFour(const std::string& args, int exit_code) {
  const CollRun one = Coll("", args + " --event-order canonical");
  ASSERT_EQ(one.exit_code, exit_code) << args << "\n" << one.j.dump();
  ASSERT_TRUE(one.j.is_object());
  ASSERT_TRUE(one.j.contains("trace_digest")) << one.j.dump();
  for (int n = 2; n <= 4; ++n) {
    const CollRun many = Coll(Mpirun(n), args);
    EXPECT_EQ(many.exit_code, exit_code) << n << " processes";
    EXPECT_EQ(many.j["trace_digest"], one.j["trace_digest"]) << n << " processes";
    EXPECT_EQ(many.j, one.j) << n << " processes: " << nlohmann::json::diff(one.j, many.j).dump();
  }
}

class MpiCollTest : public testing::TestWithParam<const char*> {};

// A collective world whose re-route ends within the run: the same rows
// and digest for 1 to 4 processes (refused up front before switches
// forwarded by their own routes).
TEST(MpiCollRerouteTest, LinkThatComesBackSameForOneToFourProcesses) {
  test_util::ScratchDir tmp;
  const std::string path = RerouteThatEnds(tmp);
  ExpectSameCollForOneToFour("allreduce --backend sim --scenario " + path +
                                 " --server none --fabric lossy -b 64K -e 64K -n 1 -w 0",
                             0);
}

TEST_P(MpiCollTest, SameRowsAndDigestForOneToFourProcesses) {
  // Eight ranks on four leaves: every ring and tree neighbour pair but
  // one per leaf crosses between processes; real data, checked.
  const std::string args =
      std::string(
          "allreduce --backend sim --topology leaf-spine:leaves=4,spines=2,hosts=2 "
          "--server none --fabric lossy -b 64K -e 256K -f 4 -n 1 -w 0 --algo ") +
      GetParam();
  ExpectSameCollForOneToFour(args, 0);
  const CollRun one = Coll("", args + " --event-order canonical");
  ASSERT_TRUE(one.j["rows"].is_array());
  ASSERT_EQ(one.j["rows"].size(), 2u) << one.j.dump();
  EXPECT_EQ(one.j["status"], "ok") << one.j.dump();
}

INSTANTIATE_TEST_SUITE_P(Algorithms, MpiCollTest, testing::Values("ring", "tree"));

// The default fabric, lossless (PFC on priority 3, ECN, DCQCN): the same
// rows, counters and digest for 1 to 4 processes.
TEST(MpiCollTest, LosslessFabricSameRowsAndDigestForOneToFourProcesses) {
  const std::string args =
      "allreduce --backend sim --topology leaf-spine:leaves=4,spines=2,hosts=2 --server none -b "
      "64K -e 256K -f 4 -n 1 -w 0 --algo ring";
  ExpectSameCollForOneToFour(args, 0);
  const CollRun one = Coll("", args + " --event-order canonical");
  EXPECT_EQ(one.j["fabric"], "lossless") << one.j.dump();
  EXPECT_EQ(one.j["status"], "ok") << one.j.dump();
}

TEST(MpiCollTest, SameWatchdogVerdictForOneToFourProcesses) {
  ExpectSameCollForOneToFour("allreduce --backend sim --scenario " + kScenarios +
                                 "coll_hang.yaml --server none --fabric lossy -b 64K -e 64K "
                                 "-n 1 -w 0 --timeout 0.01",
                             1);
  const CollRun one = Coll("", "allreduce --backend sim --scenario " + kScenarios +
                                   "coll_hang.yaml --server none --fabric lossy -b 64K -e 64K "
                                   "-n 1 -w 0 --timeout 0.01 --event-order canonical");
  EXPECT_EQ(one.j["status"], "failed") << one.j.dump();
  EXPECT_NE(one.j["report"].get<std::string>().find("watchdog: no progress"), std::string::npos)
      << one.j.dump();
}

TEST(MpiCollTest, SameCompletionErrorForOneToFourProcesses) {
  ExpectSameCollForOneToFour("allreduce --backend sim --scenario " + kScenarios +
                                 "coll_error.yaml --server none --fabric lossy -b 64K -e 64K "
                                 "-n 1 -w 0",
                             1);
  const CollRun one = Coll("", "allreduce --backend sim --scenario " + kScenarios +
                                   "coll_error.yaml --server none --fabric lossy -b 64K -e 64K "
                                   "-n 1 -w 0 --event-order canonical");
  EXPECT_NE(one.j["report"].get<std::string>().find("IBV_WC_RETRY_EXC_ERR"), std::string::npos)
      << one.j.dump();
}

// Verbs-level faults (transport/faulty) across processes: each acts in the
// process that runs its rank's NIC, its wake-ups are that process's events,
// and rank 0 reports what every fault did (its rank's process's count).
// The same rows, digest, verdict and report for 1 to 4 processes; the
// report names what the fault did.
struct VerbsFaultCase {
  const char* fault;   // --verbs-fault
  int exit_code;       // of every run
  const char* report;  // in the JSON report
};
class MpiVerbsFaultTest : public testing::TestWithParam<VerbsFaultCase> {};

const std::string kVerbsFaultArgs =
    "allreduce --backend sim --topology leaf-spine:leaves=4,spines=2,hosts=2 --server none "
    "--fabric lossy -b 64K -e 64K -n 1 -w 0 --algo ring --timeout 0.01";

TEST_P(MpiVerbsFaultTest, SameOutcomeForOneToFourProcesses) {
  const std::string args =
      kVerbsFaultArgs + " --verbs-fault '" + std::string(GetParam().fault) + "'";
  ExpectSameCollForOneToFour(args, GetParam().exit_code);
  const CollRun one = Coll("", args + " --event-order canonical");
  ASSERT_TRUE(one.j.contains("report")) << one.j.dump();
  EXPECT_NE(one.j["report"].get<std::string>().find(GetParam().report), std::string::npos)
      << one.j.dump();
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, MpiVerbsFaultTest,
    testing::Values(
        VerbsFaultCase{"fail_post:rank=6,after=10,error=EINVAL", 1,
                       "acted 1 times, first at 0.000007 s: ibv_post_send of rank 6 qpn 0x14 "
                       "failed with Invalid argument"},
        // Timed: a wake-up event of rank 5's process.
        VerbsFaultCase{"qp_error:rank=5,qp=0,at=20us", 1,
                       "acted 1 times, first at 0.000020 s: moved to IBV_QPS_ERR rank 5 qpn 0x11"},
        // After posts: checked at rank 3's posts, in its process.
        VerbsFaultCase{"qp_error:rank=3,peer=4,after=12", 1,
                       "first at 0.000001 s: moved to IBV_QPS_ERR rank 3 qpn 0x14"},
        VerbsFaultCase{"async_event:rank=2,at=30us", 1,
                       "raised IBV_EVENT_QP_FATAL on rank 2 qpn 0x11 0x12 0x13 0x14 0x15"},
        // Two at one time, in two processes (np >= 2): ties in time.
        VerbsFaultCase{"qp_error:rank=1,qp=0,at=20us;async_event:rank=6,at=20us,event=QP_REQ_ERR",
                       1, "raised IBV_EVENT_QP_REQ_ERR on rank 6"}),
    [](const testing::TestParamInfo<VerbsFaultCase>& info) {
      const std::string f = info.param.fault;
      return f.substr(0, f.find(':')) + std::to_string(info.index);
    });

// delay_completions: the run succeeds, later than without the fault (its
// wake-ups are events of rank 3's process), the same for 1 to 4 processes.
TEST(MpiVerbsFaultTest, DelayedCompletionsSameRowsForOneToFourProcesses) {
  const std::string args =
      kVerbsFaultArgs + " --verbs-fault 'delay_completions:rank=3,count=5,delay=20us'";
  ExpectSameCollForOneToFour(args, 0);
  const CollRun plain = Coll("", kVerbsFaultArgs + " --event-order canonical");
  const CollRun one = Coll("", args + " --event-order canonical");
  ASSERT_EQ(one.j["rows"].size(), 1u) << one.j.dump();
  ASSERT_EQ(plain.j["rows"].size(), 1u) << plain.j.dump();
  EXPECT_GT(one.j["rows"][0]["out_of_place"]["time_us"].get<double>(),
            plain.j["rows"][0]["out_of_place"]["time_us"].get<double>() + 19.0)
      << one.j.dump() << "\n"
      << plain.j.dump();
}

// swallow_error from a scenario's verbs_faults (CASES.md 20): rank 5's
// IBV_WC_RETRY_EXC_ERR never surfaces, the ring hangs, and the watchdog's
// verdict (every process's stuck ranks) names the swallowed completion.
TEST(MpiVerbsFaultTest, SwallowedErrorSameWatchdogVerdictForOneToFourProcesses) {
  const std::string args = "allreduce --backend sim --scenario " + kScenarios +
                           "coll_swallow.yaml --server none --fabric lossy -b 64K -e 64K -n 1 "
                           "-w 0 --timeout 0.01";
  ExpectSameCollForOneToFour(args, 1);
  const CollRun one = Coll("", args + " --event-order canonical");
  const std::string report = one.j["report"].get<std::string>();
  EXPECT_NE(report.find("watchdog: no progress on any rank"), std::string::npos) << report;
  EXPECT_NE(report.find("8 of 8 ranks stuck"), std::string::npos) << report;
  EXPECT_NE(report.find("verbs fault swallow_error:rank=5: acted"), std::string::npos) << report;
  EXPECT_NE(report.find("swallowed IBV_WC_RETRY_EXC_ERR of rank 5"), std::string::npos) << report;
  EXPECT_EQ(one.j["error_counters"]["retry_exceeded_err"], 1) << one.j.dump();
}

// A re-route in a collective world: every process applies it, its owner
// counts it in the digest (LocalDigestSum). Without reroute_via the ring
// does not finish; with it, the same rows and digest for 1 to 4 processes.
TEST(MpiCollTest, RerouteSameRowsAndDigestForOneToFourProcesses) {
  const std::string args = "allreduce --backend sim --scenario " + kScenarios +
                           "coll_reroute.yaml --server none --fabric lossy -b 1M -e 1M -n 1 -w 0 "
                           "--algo ring";
  ExpectSameCollForOneToFour(args, 0);
  const CollRun one = Coll("", args + " --event-order canonical");
  EXPECT_EQ(one.j["status"], "ok") << one.j.dump();
}

TEST(MpiCollTest, BadLaunchesAreExit2OnRank0) {
  const std::string args =
      "allreduce --backend sim --topology leaf-spine:leaves=4,spines=2,hosts=2 --server none "
      "--fabric lossy -b 1K -e 1K -n 1 -w 0";
  // Different command lines.
  test_util::CommandResult r =
      test_util::RunCommand(Mpirun(1) + kFathom + " coll " + args + " : -np 1 " + kFathom +
                            " coll " + args + " --seed 2");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("processes disagree on the run"), std::string::npos) << r.out;
  // More processes than partitions (one leaf and one spine: two units).
  r = test_util::RunCommand(Mpirun(3) + kFathom +
                            " coll allreduce --backend sim --topology "
                            "leaf-spine:leaves=1,spines=1,hosts=8 --server none --fabric lossy -b "
                            "1K -e 1K -n 1 -w 0");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("more processes (3) than partitions (2"), std::string::npos) << r.out;
  // A server is never split: "small" is two servers cabled back to back,
  // so two partitions.
  r = test_util::RunCommand(Mpirun(3) + kFathom +
                            " coll allreduce --backend sim --topology small --server h100 -b 1K "
                            "-e 1K -n 1 -w 0");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("more processes (3) than partitions (2 units: switches with their hosts, "
                       "and the GPU servers whose NICs reach several, each whole)"),
            std::string::npos)
      << r.out;
}

// `mpirun -np N fathom coll train` (a training loop across processes,
// docs/PARALLEL.md "Training loops"): the JSON report (iterations, their
// times, the failing iteration, collective and group, the error or the
// stalled ranks, the watchdog's report, the faults armed at an iteration,
// events) and the trace digest are those of one process in the canonical
// order, for every N the topology's partitions allow. `max` processes;
// `exit_code` of every run.
void ExpectSameTrainingForOneToN(const std::string& scenario, int max, int exit_code,
                                 const std::string& extra = "") {
  const std::string args = "train --scenario " + scenario + extra;
  CollRun one = Coll("", args + " --event-order canonical");
  ASSERT_EQ(one.exit_code, exit_code) << one.j.dump();
  ASSERT_TRUE(one.j.is_object());
  ASSERT_TRUE(one.j.contains("trace_digest")) << one.j.dump();
  one.j.erase("wall_s");
  one.j.erase("idle_wall_s");
  for (int n = 1; n <= max; ++n) {
    CollRun many = Coll(Mpirun(n), args + (n == 1 ? " --event-order canonical" : ""));
    EXPECT_EQ(many.exit_code, exit_code) << n << " processes";
    if (!many.j.is_object()) continue;
    many.j.erase("wall_s");
    many.j.erase("idle_wall_s");
    EXPECT_EQ(many.j["trace_digest"], one.j["trace_digest"]) << n << " processes";
    EXPECT_EQ(many.j, one.j) << n << " processes: " << nlohmann::json::diff(one.j, many.j).dump();
  }
}

// The example scenario: a link down armed at iteration 42 (on every
// process, its events kept where the link's node is) ends the loop with a
// retry-exceeded error. Its two leaves and a spine are three partitions.
TEST(MpiTrainTest, FaultAtAnIterationSameForOneToThreeProcesses) {
  const std::string scenario =
      std::string(FATHOM_SOURCE_DIR) + "/scenarios/coll/training_link_down_at_iteration.yaml";
  ExpectSameTrainingForOneToN(scenario, 3, 0);
  const CollRun one = Coll("", "train --scenario " + scenario + " --event-order canonical");
  EXPECT_EQ(one.j["status"], "failed") << one.j.dump();
  EXPECT_EQ(one.j["first_failed_iteration"], 42) << one.j.dump();
  EXPECT_EQ(one.j["error_status"], "IBV_WC_RETRY_EXC_ERR") << one.j.dump();
  EXPECT_EQ(one.j["armed_faults"].size(), 1u) << one.j.dump();
  // The completion error's report has the async events of the ranks'
  // devices, as the default order's (rank 3's port went down), gathered
  // from the process that runs rank 3.
  EXPECT_NE(one.j["report"].get<std::string>().find(
                "rank 3: async event IBV_EVENT_PORT_ERR (rank 3 port 1 down at 43000384804 ns"),
            std::string::npos)
      << one.j.dump();
}

// Verbs faults placed at iterations (delayed completions of rank 1 from
// iteration 2, rank 2's QPs in error at iteration 7): each acts where its
// rank is; the iteration times they lengthen, the error and the faults'
// report are the same for 1 to 3 processes.
TEST(MpiTrainTest, VerbsFaultsAtIterationsSameForOneToThreeProcesses) {
  ExpectSameTrainingForOneToN(kScenarios + "training_verbs_faults.yaml", 3, 0);
  const CollRun one = Coll(
      "", "train --scenario " + kScenarios + "training_verbs_faults.yaml --event-order canonical");
  EXPECT_EQ(one.j["first_failed_iteration"], 7) << one.j.dump();
  EXPECT_EQ(one.j["armed_faults"].size(), 2u) << one.j.dump();
  EXPECT_NE(one.j["report"].get<std::string>().find("verbs fault delay_completions"),
            std::string::npos)
      << one.j.dump();
}

// Four leaves: tensor-parallel pairs and data-parallel groups across the
// leaves, checkpoints, and a link down at iteration 12 that stalls one
// data-parallel group: the watchdog's verdict (the stalled ranks, every
// process's stuck ranks in the report) is the same for 1 to 4 processes.
TEST(MpiTrainTest, StalledGroupSameForOneToFourProcesses) {
  ExpectSameTrainingForOneToN(kScenarios + "training_stall.yaml", 4, 0);
  const CollRun one =
      Coll("", "train --scenario " + kScenarios + "training_stall.yaml --event-order canonical");
  EXPECT_EQ(one.j["status"], "hung") << one.j.dump();
  EXPECT_EQ(one.j["failed_collective"], "dp") << one.j.dump();
  EXPECT_EQ(one.j["failed_group"], 1) << one.j.dump();
  EXPECT_EQ(one.j["stalled_ranks"], nlohmann::json::parse("[1, 3, 5, 7]")) << one.j.dump();
  // The watchdog's report is the Driver's, merged from every process on
  // rank 0 (the JSON above is the same for 1 to 4 processes): each stuck
  // rank's wait and QPs, the QP lines, the culprit over every process's
  // wait graph, the async event of rank 5's port, and the fabric's
  // evidence (the QPs' retransmissions, the link fault's drops, the drops
  // by reason), each read where its node is simulated and summed.
  const std::string report = one.j["report"].get<std::string>();
  for (const char* line :
       {"watchdog: no progress on any rank for 1.073742 s; 4 of 8 ranks stuck",
        "rank 1: allreduce(ring) stream 0 step 3/7: waiting for data from rank 0",
        "  qp to rank 2 channel 0 qpn 0x1a state IBV_QPS_RTS: 3 send WRs and 10 recv WRs "
        "outstanding",
        "rank 1 -> rank 2 qpn 0x1a: no completion for",
        "watchdog: culprit rank 1 -> rank 2 qpn 0x1a channel 0: 3 send WRs without a completion",
        "rank 2: async event IBV_EVENT_PORT_ERR (rank 5 port 1 down",
        "fabric: the culprit's QP runs from host h3 (rank 3) to host h5 (rank 5)",
        "fabric: rank 3 -> rank 5 qpn 0x1a: retransmitted_packets 768 local_ack_timeout_err 16",
        "fabric: link h5-leaf2 (leaf2 -> h5): fault link_down#0 frames_seen",
        "fabric: link h5-leaf2 (h5 -> leaf2): fault link_down#0 frames_seen 258",
        "fabric: rank 5 -> rank 7 qpn 0x1a: retransmitted_packets 256",
        "fabric: drops in the whole network: impairment"}) {
    EXPECT_NE(report.find(line), std::string::npos) << line << "\n" << report;
  }
  // Line for line the default order's report, but for the figures (the
  // windowed rule starts 'dp' up to a window later: docs/PARALLEL.md).
  const CollRun def = Coll("", "train --scenario " + kScenarios + "training_stall.yaml");
  auto shape = [](std::string r) {
    std::erase_if(r, [](char c) { return c >= '0' && c <= '9'; });
    return r;
  };
  EXPECT_EQ(shape(def.j["report"].get<std::string>()), shape(report))
      << def.j["report"].get<std::string>() << "\n---\n"
      << report;
}

// The flow model in a training loop (no faults: the flow model has none):
// every process replicates it and counts each of its events once (the
// others' replicas are uncounted, as in the digest), so the events, like
// the rest of the report and the digest, are those of one process for 1
// to 4 processes.
TEST(MpiTrainTest, FlowModelEventsSameForOneToFourProcesses) {
  const std::string extra = " --fabric-model flow --modelled --profile cx6";
  ExpectSameTrainingForOneToN(kScenarios + "training_flow.yaml", 4, 0, extra);
  const CollRun one = Coll("", "train --scenario " + kScenarios + "training_flow.yaml" + extra +
                                   " --event-order canonical");
  EXPECT_EQ(one.j["status"], "ok") << one.j.dump();
  EXPECT_EQ(one.j["iterations_completed"], 4) << one.j.dump();
  EXPECT_GT(one.j["events"].get<uint64_t>(), 0u) << one.j.dump();
}

// The server tier (--server h100: eight GPUs per server, NVLink inside):
// one process simulates each server whole (on medium with the leaf its
// NICs share; on medium:rail, whose NICs sit on eight leaves, as a unit of
// its own whose NIC cables cross), so NVLink copies and the server's ranks
// never cross. The same rows (checked data: #wrong 0) and digest as one
// process in the canonical order, for mpirun -np 1 to 4.
class MpiServerTest : public testing::TestWithParam<const char*> {};

TEST_P(MpiServerTest, SameRowsAndDigestForOneToFourProcesses) {
  const std::string args = std::string("allreduce --backend sim --topology ") + GetParam() +
                           " --server h100 -b 64K -e 64K -n 1 -w 0 --algo tree";
  ExpectSameCollForOneToFour(args, 0);
  const CollRun one = Coll("", args + " --event-order canonical");
  const CollRun np1 = Coll(Mpirun(1), args + " --event-order canonical");
  EXPECT_EQ(np1.exit_code, 0);
  EXPECT_EQ(np1.j, one.j) << nlohmann::json::diff(one.j, np1.j).dump();
  EXPECT_EQ(one.j["status"], "ok") << one.j.dump();
  EXPECT_EQ(one.j["nranks"], 128) << one.j.dump();
  ASSERT_EQ(one.j["rows"].size(), 1u) << one.j.dump();
  EXPECT_EQ(one.j["rows"][0]["out_of_place"]["wrong"], 0) << one.j.dump();
  // The server tier was in the run: without it (one rank per NIC, no
  // NVLink) the same collective is another run.
  const CollRun none = Coll("", std::string("allreduce --backend sim --topology ") + GetParam() +
                                    " --server none -b 64K -e 64K -n 1 -w 0 --algo tree "
                                    "--event-order canonical");
  EXPECT_NE(none.j["trace_digest"], one.j["trace_digest"]);
}

// Rail-only wiring (no spines): an alltoall's cross-rail pairs go over
// NVLink to a proxy GPU and out of its NIC (PXN), and with GPUDirect off
// the NIC's payloads bounce through host memory over PCIe. Both stay
// inside a server, so inside a process.
TEST(MpiServerTest, PxnAndPcieBouncesSameForOneToFourProcesses) {
  const std::string args =
      "alltoall --backend sim --topology leaf-spine:leaves=8,spines=0,hosts=4,rail --server h100 "
      "--gpudirect off -b 32K -e 32K -n 1 -w 0";
  ExpectSameCollForOneToFour(args, 0);
  const CollRun one = Coll("", args + " --event-order canonical");
  EXPECT_EQ(one.j["status"], "ok") << one.j.dump();
  ASSERT_EQ(one.j["rows"].size(), 1u) << one.j.dump();
  EXPECT_EQ(one.j["rows"][0]["out_of_place"]["wrong"], 0) << one.j.dump();
}

INSTANTIATE_TEST_SUITE_P(Topologies, MpiServerTest, testing::Values("medium", "medium:rail"),
                         [](const testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param) == "medium" ? "medium" : "medium_rail";
                         });

TEST(MpiCollTest, SameTraceFileForOneToFourProcesses) {
  // --trace: rank 0 writes every process's ranks' steps on one timeline.
  test_util::ScratchDir tmp;
  const std::string args =
      "allreduce --backend sim --topology leaf-spine:leaves=4,spines=2,hosts=2 --server none "
      "--fabric lossy -b 64K -e 64K -n 1 -w 0 --algo ring --trace ";
  auto read = [](const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    std::string text;
    if (f == nullptr) return text;
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof(buf), f)) > 0;) text.append(buf, n);
    std::fclose(f);
    return text;
  };
  const std::string one = tmp.File("one.json");
  ASSERT_EQ(
      test_util::RunCommand(kFathom + " coll " + args + one + " --event-order canonical").exit_code,
      0);
  const std::string expected = read(one);
  // Every rank's steps are there.
  for (int r = 0; r < 8; ++r) {
    EXPECT_NE(expected.find("\"pid\":" + std::to_string(r) + ","), std::string::npos) << r;
  }
  for (int n : {2, 4}) {
    const std::string many = tmp.File(std::to_string(n) + ".json");
    ASSERT_EQ(test_util::RunCommand(Mpirun(n) + kFathom + " coll " + args + many).exit_code, 0);
    EXPECT_EQ(read(many), expected) << n << " processes";
  }
}

// The flow model (--fabric-model flow, docs/FLOW.md) across processes:
// every process replicates the flow model and the send queues; the posted
// WRs (lookahead: the cx6 profile's post-to-wire delay) and the ACKs cross.
// The same rows (times, busbw) and digest as one process in the canonical
// order, for a ring and a tree allreduce over the 128 NICs of medium
// (timing only: --modelled).
class MpiFlowTest : public testing::TestWithParam<const char*> {};

// The flows process `p` started, from its line of `fathom coll`'s output.
// The posted WRs that crossed between processes, from `fathom coll`'s
// flow model line.
unsigned long long PostsCrossed(const std::string& out) {
  const std::string key = "parallel   flow model: ";
  const size_t at = out.find(key);
  unsigned long long posts = 0;
  if (at == std::string::npos ||
      std::sscanf(out.c_str() + at + key.size(), "%llu posted WRs", &posts) != 1) {
    ADD_FAILURE() << "no flow model line:\n" << out;
    return ~0ull;
  }
  return posts;
}

unsigned long long FlowsStarted(const std::string& out, int p) {
  const std::string mine = "parallel   process " + std::to_string(p) + ": ";
  const size_t at = out.find(mine);
  unsigned long long events = 0, flows = 0;
  double wall = 0, cpu = 0;
  if (at == std::string::npos ||
      std::sscanf(out.c_str() + at + mine.size(),
                  "%llu events run, %lf s in exchanges (%lf s of CPU); flow model: %llu "
                  "flows started",
                  &events, &wall, &cpu, &flows) != 4) {
    ADD_FAILURE() << "no line for process " << p << ":\n" << out;
  }
  return flows;
}

TEST_P(MpiFlowTest, SameRowsAndDigestForOneToFourProcesses) {
  const std::string args =
      std::string(
          "allreduce --backend sim --topology medium --server none -b 1M -e 4M -f 4 -n 1 -w 0 "
          "--fabric lossless --fabric-model flow --modelled --algo ") +
      GetParam();
  ExpectSameCollForOneToFour(args, 0);
  const CollRun one = Coll("", args + " --event-order canonical");
  EXPECT_EQ(one.j["status"], "ok") << one.j.dump();
  EXPECT_EQ(one.j["nranks"], 128) << one.j.dump();
  const test_util::CommandResult text =
      test_util::RunCommand(kFathom + " coll " + args + " --event-order canonical");
  ASSERT_EQ(text.exit_code, 0) << text.out;
  const unsigned long long all_flows = FlowsStarted(text.out, 0);
  EXPECT_GT(all_flows, 0u);
  // Split by hosts, every process owns ranks: arrivals and ACKs cross
  // between them; the tree's data messages' posts cross (its flows share
  // spine links: one class, FlowFabric::Plan), the ring's do not (no two
  // of its flows share a link: each stays in its requester's process), and
  // the credits' (one packet, on QPs that send nothing else) stay in their
  // process.
  for (int n = 2; n <= 4; n += 2) {
    const test_util::CommandResult r = test_util::RunCommand(Mpirun(n) + kFathom + " coll " + args);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const std::string key = "parallel   flow model: ";
    const size_t at = r.out.find(key);
    ASSERT_NE(at, std::string::npos) << r.out;
    unsigned long long posts = 0, acks = 0, arrivals = 0, kept = 0;
    ASSERT_EQ(std::sscanf(r.out.c_str() + at + key.size(),
                          "%llu posted WRs and %llu ACKs between processes, %llu arrivals; %llu "
                          "one-packet posts kept in their process",
                          &posts, &acks, &arrivals, &kept),
              4)
        << r.out;
    const bool ring = std::string(GetParam()) == "ring";
    if (ring) {
      EXPECT_EQ(posts, 0u) << n << " processes";
    } else {
      EXPECT_GT(posts, 0u) << n << " processes";
    }
    EXPECT_GT(acks, 0u) << n << " processes";
    EXPECT_GT(arrivals, 0u) << n << " processes";
    EXPECT_GT(kept, 0u) << n << " processes";
    // Each process's line: the tree's replicas start every data flow (the
    // same count in each), the ring's only their own (the same share of 128
    // ranks at 2 and 4 processes); each runs events of its own.
    for (int p = 0; p < n; ++p) {
      const std::string mine = "parallel   process " + std::to_string(p) + ": ";
      const size_t pat = r.out.find(mine);
      ASSERT_NE(pat, std::string::npos) << r.out;
      unsigned long long events = 0, flows = 0;
      double wall = 0, cpu = 0;
      ASSERT_EQ(std::sscanf(r.out.c_str() + pat + mine.size(),
                            "%llu events run, %lf s in exchanges (%lf s of CPU); flow model: %llu "
                            "flows started",
                            &events, &wall, &cpu, &flows),
                4)
          << r.out;
      EXPECT_GT(events, 0u) << "process " << p << " of " << n;
      EXPECT_GT(flows, 0u) << "process " << p << " of " << n;
      EXPECT_EQ(flows, ring ? all_flows / static_cast<unsigned long long>(n) : all_flows)
          << "process " << p << " of " << n;
    }
  }
  ASSERT_EQ(one.j["rows"].size(), 2u) << one.j.dump();
  // The canonical order models what the default order does: each row's
  // time within 1% of the default order's (a collective starts at a window
  // boundary there, and ties between events go in another order).
  const CollRun dflt = Coll("", args);
  ASSERT_EQ(dflt.exit_code, 0);
  ASSERT_EQ(dflt.j["rows"].size(), 2u) << dflt.j.dump();
  for (size_t i = 0; i < 2; ++i) {
    const double a = one.j["rows"][i]["out_of_place"]["time_us"].get<double>();
    const double b = dflt.j["rows"][i]["out_of_place"]["time_us"].get<double>();
    EXPECT_GT(a, 0) << i;
    EXPECT_NEAR(a, b, b * 0.01) << "row " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Algorithms, MpiFlowTest, testing::Values("ring", "tree"));

// With a collective's plan (FlowFabric::Plan: its data QPs, closed over
// the links their routes share), a process replicates only the flows that
// can share a link with its own: the same rows and digest for 1 to 4
// processes for a ring (whose flows never share here: 8 classes), a tree
// and an alltoall (whose flows do), on 8 NICs of 4 leaves.
class MpiFlowPlanTest : public testing::TestWithParam<const char*> {};

std::string FlowPlanArgs(const std::string& what) {
  return what +
         " --backend sim --topology leaf-spine:leaves=4,spines=2,hosts=2 --server none -b 256K -e "
         "1M -f 4 -n 1 -w 0 --fabric lossless --fabric-model flow --modelled";
}

TEST_P(MpiFlowPlanTest, SameRowsAndDigestForOneToFourProcesses) {
  ExpectSameCollForOneToFour(FlowPlanArgs(GetParam()), 0);
}

INSTANTIATE_TEST_SUITE_P(Collectives, MpiFlowPlanTest,
                         testing::Values("allreduce --algo ring", "allreduce --algo tree",
                                         "alltoall"),
                         [](const testing::TestParamInfo<const char*>& info) {
                           const std::string p = info.param;
                           return p == "alltoall" ? std::string("alltoall")
                                                  : p.substr(p.rfind(' ') + 1);
                         });

// The ring's flows each stay in their requester's process: the flows the
// processes start add up to one process's, and no post crosses.
TEST(MpiFlowPlanTest, RingReplicatesNoFlowOfAnotherProcess) {
  const std::string args = FlowPlanArgs("allreduce --algo ring");
  const test_util::CommandResult one =
      test_util::RunCommand(kFathom + " coll " + args + " --event-order canonical");
  ASSERT_EQ(one.exit_code, 0) << one.out;
  const unsigned long long all = FlowsStarted(one.out, 0);
  EXPECT_GT(all, 0u);
  const test_util::CommandResult two = test_util::RunCommand(Mpirun(2) + kFathom + " coll " + args);
  ASSERT_EQ(two.exit_code, 0) << two.out;
  const unsigned long long f0 = FlowsStarted(two.out, 0), f1 = FlowsStarted(two.out, 1);
  EXPECT_GT(f0, 0u);
  EXPECT_GT(f1, 0u);
  EXPECT_EQ(f0 + f1, all);
  EXPECT_EQ(PostsCrossed(two.out), 0u) << two.out;
}

// A world of fewer ranks than the topology has hosts (64 of large's 1024,
// all in its first pod): the partition is cut across the ranks' hosts
// (partition.h's `used`), not across the whole fabric, so every process
// runs about its share of the events (a cut by pods left them all to
// process 0, or 5% of them to process 1 on the packet model's core
// switches), and the digest is one process's; for the flow model (split by
// hosts) and the packet model (by switch units). The events a process runs
// include what it does for the others' packets (mirrors, replicas), so
// they need not add up to one process's.
class MpiPartitionTest : public testing::TestWithParam<const char*> {};

// The events process `p` ran and the trace digest, from `fathom coll`'s
// lines.
unsigned long long EventsRun(const std::string& out, int p) {
  const std::string mine = "parallel   process " + std::to_string(p) + ": ";
  const size_t at = out.find(mine);
  unsigned long long events = 0;
  if (at == std::string::npos ||
      std::sscanf(out.c_str() + at + mine.size(), "%llu events run", &events) != 1) {
    ADD_FAILURE() << "no line for process " << p << ":\n" << out;
  }
  return events;
}
std::string Digest(const std::string& out) {
  const std::string key = "# trace digest ";
  const size_t at = out.find(key);
  EXPECT_NE(at, std::string::npos) << out;
  return at == std::string::npos ? std::string() : out.substr(at + key.size(), 16);
}

TEST_P(MpiPartitionTest, FewerRanksThanHostsSplitAcrossTheRanks) {
  const std::string args =
      std::string(
          "allreduce --backend sim --topology large --ranks 64 --server none -n 1 -w 0 "
          "--fabric lossless --modelled --algo ring ") +
      GetParam();
  const test_util::CommandResult one =
      test_util::RunCommand(kFathom + " coll " + args + " --event-order canonical");
  ASSERT_EQ(one.exit_code, 0) << one.out;
  const unsigned long long all = EventsRun(one.out, 0);
  EXPECT_GT(all, 1000u) << one.out;
  for (int n = 2; n <= 3; ++n) {
    const test_util::CommandResult r = test_util::RunCommand(Mpirun(n) + kFathom + " coll " + args);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(Digest(r.out), Digest(one.out)) << n << " processes";
    for (int p = 0; p < n; ++p) {
      const unsigned long long events = EventsRun(r.out, p);
      // At least half its share (64 ranks cut into runs of 32, or of 21 to
      // 24: whole leaves of 8 on the packet model).
      EXPECT_GE(events * 2 * static_cast<unsigned long long>(n), all)
          << "process " << p << " of " << n << ":\n"
          << r.out;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, MpiPartitionTest,
                         testing::Values("--fabric-model flow -b 1M -e 1M",
                                         "--fabric-model packet -b 64K -e 64K"),
                         [](const testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param).find("flow") != std::string::npos
                                      ? "flow"
                                      : "packet";
                         });

// `fathom sim` weighs the hosts its flows use (RunHooks::OnFlows): 10
// flows on 8 of 32 hosts, two leaves' worth (few_hosts.yaml; MpiRunTest
// checks its report for 1 to 4 processes): each of two processes takes a
// leaf and about half the events.
TEST(MpiPartitionTest, ScenarioSplitAcrossItsFlowsHosts) {
  const std::string scenario = kScenarios + "few_hosts.yaml";
  const test_util::CommandResult one =
      test_util::RunCommand(kFathom + " sim " + scenario + " --event-order canonical");
  ASSERT_EQ(one.exit_code, 0) << one.out;
  const unsigned long long all = EventsRun(one.out, 0);
  EXPECT_GT(all, 1000u) << one.out;
  auto digest = [](const std::string& out) {
    const size_t at = out.find("digest     ");
    EXPECT_NE(at, std::string::npos) << out;
    return at == std::string::npos ? std::string() : out.substr(at + 11, 16);
  };
  const test_util::CommandResult two =
      test_util::RunCommand(Mpirun(2) + kFathom + " sim " + scenario);
  ASSERT_EQ(two.exit_code, 0) << two.out;
  EXPECT_EQ(digest(two.out), digest(one.out));
  for (int p = 0; p < 2; ++p) {
    // At least a third of the events each.
    EXPECT_GE(EventsRun(two.out, p) * 3, all) << "process " << p << ":\n" << two.out;
  }
}

TEST(MpiFlowTest, WhatDoesNotCrossIsExit2) {
  const std::string args =
      "allreduce --backend sim --topology medium --server none -b 1M -e 1M -n 1 -w 0 "
      "--fabric-model flow";
  // Real data: the replicas hold no buffers of other processes' ranks.
  test_util::CommandResult r = test_util::RunCommand(Mpirun(2) + kFathom + " coll " + args);
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("--fabric-model flow across 2 processes moves no data between them: add "
                       "--modelled"),
            std::string::npos)
      << r.out;
  // A profile that posts with no delay leaves a crossing post no lookahead:
  // a tree's data QPs share links (one class, every flow everywhere), so
  // its posts would cross; refused before any row.
  r = test_util::RunCommand(Mpirun(2) + kFathom + " coll " + args +
                            " --modelled --profile ideal --algo tree");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("--fabric-model flow across 2 processes: the NIC profile ideal posts with "
                       "no delay"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("every process replicates every flow"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("# Avg bus bandwidth"), std::string::npos) << r.out;
  // So is a training loop's (no plan: every flow everywhere).
  r = test_util::RunCommand(Mpirun(2) + kFathom + " coll train --scenario " + kScenarios +
                            "training_flow.yaml --fabric-model flow --modelled --profile ideal");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("the NIC profile ideal posts with no delay"), std::string::npos) << r.out;
  // Both run in one process, in the canonical order.
  r = test_util::RunCommand(kFathom + " coll " + args + " --profile ideal --event-order canonical");
  EXPECT_EQ(r.exit_code, 0) << r.out;
}

#ifdef FATHOM_HAVE_BENCH
// The ideal profile (no post delay) across processes where no post
// crosses: a ring's flows share no link with another rank's, so each
// stays in its requester's process (Plan's classes of one) and only the
// arrivals and ACKs cross, whose lookahead is their route's latency. The
// same rows and digest as one process in the canonical order, no post
// crossed.
TEST(MpiFlowTest, IdealProfileRingSameForOneToFourProcesses) {
  const std::string args =
      "allreduce --backend sim --topology medium --server none -b 256K -e 1M -f 4 -n 1 -w 0 "
      "--fabric-model flow --modelled --profile ideal --algo ring";
  ExpectSameCollForOneToFour(args, 0);
  const test_util::CommandResult two = test_util::RunCommand(Mpirun(2) + kFathom + " coll " + args);
  ASSERT_EQ(two.exit_code, 0) << two.out;
  EXPECT_EQ(PostsCrossed(two.out), 0u) << two.out;
}

// bench/coll_scale_bench under mpirun (PROFILE cx6): one
// allreduce split as `fathom coll` splits it, with the same virtual time,
// canonical digest and events (each counted once) as one process in the
// canonical order; each process's events add up to them (the ring's flows
// stay in their requester's process).
struct BenchRun {
  int exit_code = -1;
  std::string out;
  double virtual_us = -1;
  std::string digest;
  unsigned long long events = 0;
  unsigned long long local_sum = 0;
  int process_lines = 0;
};

BenchRun Bench(const std::string& prefix, const std::string& args) {
  BenchRun b;
  const test_util::CommandResult r = test_util::RunCommand(prefix + std::string(FATHOM_BINARY_DIR) +
                                                           "/bench/coll_scale_bench " + args);
  b.exit_code = r.exit_code;
  b.out = r.out;
  if (size_t at = r.out.find("virtual time "); at != std::string::npos) {
    std::sscanf(r.out.c_str() + at, "virtual time %lf us", &b.virtual_us);
  }
  if (size_t at = r.out.find("trace digest "); at != std::string::npos) {
    char digest[17] = {};
    if (std::sscanf(r.out.c_str() + at, "trace digest %16[0-9a-f], %llu events", digest,
                    &b.events) == 2) {
      b.digest = digest;
    }
  }
  for (size_t at = r.out.find("  process "); at != std::string::npos;
       at = r.out.find("  process ", at + 1)) {
    int p = -1;
    unsigned long long events = 0;
    if (std::sscanf(r.out.c_str() + at, "  process %d: %llu events run", &p, &events) == 2) {
      b.local_sum += events;
      ++b.process_lines;
    }
  }
  return b;
}

TEST(MpiBenchTest, CollScaleBenchSameDigestForOneToThreeProcesses) {
  const std::string args = "1048576 medium 0 ring none lossless modelled flow cx6";
  const BenchRun one = Bench("", args + " canonical");
  ASSERT_EQ(one.exit_code, 0) << one.out;
  ASSERT_EQ(one.digest.size(), 16u) << one.out;
  EXPECT_GT(one.virtual_us, 0) << one.out;
  EXPECT_GT(one.events, 0u) << one.out;
  EXPECT_EQ(one.process_lines, 1) << one.out;
  EXPECT_EQ(one.local_sum, one.events) << one.out;
  // The default order prints no digest and runs as before.
  const BenchRun dflt = Bench("", args);
  ASSERT_EQ(dflt.exit_code, 0) << dflt.out;
  EXPECT_TRUE(dflt.digest.empty()) << dflt.out;
  EXPECT_EQ(dflt.process_lines, 0) << dflt.out;
  for (int n = 2; n <= 3; ++n) {
    const BenchRun many = Bench(Mpirun(n), args);
    ASSERT_EQ(many.exit_code, 0) << n << " processes\n" << many.out;
    EXPECT_EQ(many.digest, one.digest) << n << " processes\n" << many.out;
    EXPECT_EQ(many.virtual_us, one.virtual_us) << n << " processes\n" << many.out;
    EXPECT_EQ(many.events, one.events) << n << " processes\n" << many.out;
    EXPECT_EQ(many.process_lines, n) << many.out;
    EXPECT_EQ(many.local_sum, one.events) << n << " processes\n" << many.out;
  }
  // Across processes: real data, a profile with no post delay, and a bad
  // ORDER are exit 2.
  const BenchRun data = Bench(Mpirun(2), "1048576 medium 0 ring none lossless data flow cx6");
  EXPECT_EQ(data.exit_code, 2) << data.out;
  EXPECT_NE(data.out.find("DATA data across 2 processes"), std::string::npos) << data.out;
  const BenchRun ideal =
      Bench(Mpirun(2), "1048576 medium 0 tree none lossless modelled flow ideal");
  EXPECT_EQ(ideal.exit_code, 2) << ideal.out;
  EXPECT_NE(ideal.out.find("posts with no delay"), std::string::npos) << ideal.out;
  // The ideal profile's ring, whose posts stay home: as one process.
  const std::string ring = "1048576 medium 0 ring none lossless modelled flow ideal";
  const BenchRun ideal_one = Bench("", ring + " canonical");
  ASSERT_EQ(ideal_one.exit_code, 0) << ideal_one.out;
  const BenchRun ideal_two = Bench(Mpirun(2), ring);
  ASSERT_EQ(ideal_two.exit_code, 0) << ideal_two.out;
  EXPECT_EQ(ideal_two.digest, ideal_one.digest) << ideal_two.out;
  EXPECT_EQ(ideal_two.virtual_us, ideal_one.virtual_us) << ideal_two.out;
  EXPECT_EQ(ideal_two.events, ideal_one.events) << ideal_two.out;
  const BenchRun bad = Bench("", args + " sorted");
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
}
#endif

}  // namespace
}  // namespace fathom
