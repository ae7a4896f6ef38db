// `fathom coll --backend verbs` on real rxe in two testbed VMs (label vm),
// booted once for every case here (issues 27 and 31):
//  - Verbs-level faults (transport/faulty): each kind given to the verbs
//    backend with --verbs-fault, and the same flag given to --backend sim on
//    the host (rxe profile, one leaf, the same two ranks): the outcome must
//    be the same — exit status, the failing rank, its peer and channel, the
//    completion status or post error, and for a swallowed error (the job
//    hangs with no error) the watchdog's culprit.
//  - The new collectives (alltoall, sendrecv, reduce, gather, scatter) with
//    their data checked on every rank (-c 1), one and two ranks per VM.
//  - The hierarchical rings and trees with two ranks per VM
//    (--ranks-per-node 2). The intra-node path on one VM is real verbs:
//    rxe's loopback between QPs of the same device (rxe_net.c sends a packet
//    whose destination is its own address back into its receive path), not
//    skipped and not shared memory.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
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

// Quotes for the VM's shell (the fault lists hold ';').
std::string Quote(const std::string& s) { return "'" + s + "'"; }

struct HostRun {
  int exit_status = -1;
  std::string output;
};

// `fathom coll ARGS` on the host (the sim backend), stdout and stderr.
HostRun RunHost(const std::string& args) {
  HostRun r;
  FILE* p = popen((kFathom + " coll " + args + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
  const int st = pclose(p);
  r.exit_status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// The same two ranks on the simulator: one leaf, rxe's retry semantics
// (retry_cnt 7 retries forever, as on the VMs).
const std::string kSimWorld =
    " --backend sim --topology leaf-spine:leaves=1,spines=1,hosts=2,gpus=1 --server none "
    "--ranks 2 --profile rxe --ib-timeout 17";

// What a faulted run ended with, read from its output (the verbs backend's
// from every rank's output, the sim's from its one process).
struct Outcome {
  int exit_status = -1;
  std::string post_error;                 // "rank R peer P: (injected: ...): strerror"
  std::string completion;                 // "rank R -> rank P channel C: IBV_WC_..."
  std::string culprit;                    // "rank R -> rank P channel C"
  bool hang = false;                      // a watchdog report, not an error status
  std::vector<std::string> async_events;  // "rank R: IBV_EVENT_..."
  std::string Describe() const {
    std::string s = "exit " + std::to_string(exit_status) + "; post error '" + post_error +
                    "'; completion '" + completion + "'; culprit '" + culprit + "'; hang " +
                    (hang ? "yes" : "no") + "; async";
    for (const auto& e : async_events) s += " '" + e + "'";
    return s;
  }
};

Outcome Read(int exit_status, const std::string& out, bool verbs) {
  Outcome o;
  o.exit_status = exit_status;
  std::smatch m;
  static const std::regex post(
      R"(rank (\d+): ibv_post_send qpn=0x[0-9a-f]+ peer_rank=(\d+) [^(]*(\(injected: [^)]*\): [^;\n]*))");
  if (std::regex_search(out, m, post)) {
    o.post_error = "rank " + m[1].str() + " peer " + m[2].str() + ": " + m[3].str();
  }
  static const std::regex wc(R"(rank (\d+) -> rank (\d+) channel (\d+): completion (IBV_WC_\w+))");
  if (std::regex_search(out, m, wc)) {
    o.completion = "rank " + m[1].str() + " -> rank " + m[2].str() + " channel " + m[3].str() +
                   ": " + m[4].str();
  }
  // sim: the world's watchdog; verbs: rank 0's verdict over every rank's view.
  static const std::regex sim_culprit(
      R"((?:^|\n)watchdog: culprit rank (\d+) -> rank (\d+) qpn 0x[0-9a-f]+ channel (\d+))");
  static const std::regex verbs_culprit(
      R"(watchdog \(all ranks\): culprit rank (\d+) -> rank (\d+) qpn 0x[0-9a-f]+ channel (\d+))");
  if (std::regex_search(out, m, verbs ? verbs_culprit : sim_culprit)) {
    o.culprit = "rank " + m[1].str() + " -> rank " + m[2].str() + " channel " + m[3].str();
  }
  o.hang = out.find("watchdog: no progress") != std::string::npos;
  static const std::regex ev(R"(rank (\d+): async event (IBV_EVENT_\w+))");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), ev); it != std::sregex_iterator();
       ++it) {
    const std::string e = "rank " + (*it)[1].str() + ": " + (*it)[2].str();
    if (std::find(o.async_events.begin(), o.async_events.end(), e) == o.async_events.end()) {
      o.async_events.push_back(e);
    }
  }
  std::sort(o.async_events.begin(), o.async_events.end());
  return o;
}

class CollVerbsVmTest : public SharedTestbedTest<CollVerbsVmTest> {
 public:
  static TestbedOptions Options() {
    TestbedOptions o;
    o.num_vms = 2;
    return o;
  }

 protected:
  // One fault, both backends: returns {sim, verbs} outcomes, which must match.
  std::pair<Outcome, Outcome> Both(const std::string& fault, const std::string& args, int port,
                                   seconds timeout) {
    const HostRun sim = RunHost(args + kSimWorld + " --verbs-fault " + Quote(fault));
    const Result v = RunRanks(*tb_, args + " --verbs-fault " + Quote(fault), 2, port, timeout);
    EXPECT_FALSE(v.vm0.timed_out || v.vm1.timed_out) << v.Describe();
    // Both processes agree on the exit status; rank 0's is the job's.
    EXPECT_EQ(v.vm0.exit_status, v.vm1.exit_status) << v.Describe();
    const Outcome s = Read(sim.exit_status, sim.output, false);
    const Outcome r = Read(v.vm0.exit_status, v.All(), true);
    EXPECT_EQ(s.exit_status, r.exit_status) << sim.output << "\n---\n" << v.Describe();
    EXPECT_EQ(s.post_error, r.post_error) << sim.output << "\n---\n" << v.Describe();
    EXPECT_EQ(s.completion, r.completion) << sim.output << "\n---\n" << v.Describe();
    EXPECT_EQ(s.culprit, r.culprit) << sim.output << "\n---\n" << v.Describe();
    EXPECT_EQ(s.hang, r.hang) << sim.output << "\n---\n" << v.Describe();
    EXPECT_EQ(s.async_events, r.async_events) << sim.output << "\n---\n" << v.Describe();
    std::printf("%s\n  sim:   %s\n  verbs: %s\n", fault.c_str(), s.Describe().c_str(),
                r.Describe().c_str());
    return {s, r};
  }

  // Every rank exited 0 and rank 0's table has `sizes` rows, each with
  // #wrong 0 out of place and in place.
  static void ExpectCorrect(const Result& r, int nranks, size_t sizes) {
    EXPECT_EQ(r.vm0.exit_status, 0) << r.Describe();
    EXPECT_EQ(r.vm1.exit_status, 0) << r.Describe();
    const std::string all = r.All();
    for (int rank = 0; rank < nranks; ++rank) {
      if (all.find("rank " + std::to_string(rank) + " rc=") == std::string::npos) continue;
      EXPECT_NE(all.find("rank " + std::to_string(rank) + " rc=0"), std::string::npos)
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
  }
};

// One 64 KiB ring allreduce (one chunk), checked; the watchdog at 20 s
// (virtual on sim, wall on verbs) ends a hang well inside the test's limit.
const std::string kFaultRun = "allreduce --algo ring -b 64K -e 64K -n 2 -w 1 -c 1 --timeout 20";

// Rank 1's second send post fails with ENOMEM (queue full): both backends
// stop with that post's error on rank 1 toward rank 0.
TEST_F(CollVerbsVmTest, FailedPostStopsBothBackendsWithThePostsError) {
  const auto [sim, verbs] = Both("fail_post:rank=1,peer=0,after=1", kFaultRun, 18800, seconds(180));
  EXPECT_EQ(sim.exit_status, 1);
  EXPECT_NE(sim.post_error.find("rank 1 peer 0: (injected: fail_post:rank=1,peer=0"),
            std::string::npos)
      << sim.Describe();
  EXPECT_NE(sim.post_error.find("Cannot allocate memory"), std::string::npos) << sim.Describe();
  EXPECT_FALSE(sim.hang);
}

// Rank 1's QPs to rank 0 go to ERR after its 20 pre-posted receives (10 per
// QP, two QPs: the ring's and the second tree's): the flushes surface as
// IBV_WC_WR_FLUSH_ERR on rank 1 toward rank 0, channel 0, on both.
TEST_F(CollVerbsVmTest, QpErrorFlushesOnBothBackends) {
  const auto [sim, verbs] = Both("qp_error:rank=1,peer=0,after=20", kFaultRun, 18801, seconds(180));
  EXPECT_EQ(sim.exit_status, 1);
  EXPECT_EQ(sim.completion, "rank 1 -> rank 0 channel 0: IBV_WC_WR_FLUSH_ERR") << sim.Describe();
  EXPECT_TRUE(sim.async_events.empty()) << sim.Describe();
}

// IBV_EVENT_QP_FATAL on rank 1's QPs to rank 0 (which go to ERR with it, as
// verbs says): the flush error and the event, named on both.
TEST_F(CollVerbsVmTest, AsyncEventIsReportedAndFlushesOnBothBackends) {
  const auto [sim, verbs] =
      Both("async_event:rank=1,peer=0,after=20,event=QP_FATAL", kFaultRun, 18802, seconds(180));
  EXPECT_EQ(sim.exit_status, 1);
  EXPECT_EQ(sim.completion, "rank 1 -> rank 0 channel 0: IBV_WC_WR_FLUSH_ERR") << sim.Describe();
  EXPECT_EQ(sim.async_events, std::vector<std::string>{"rank 1: IBV_EVENT_QP_FATAL"})
      << sim.Describe();
}

// The same QP error with its flushes swallowed (CASES.md 20: the library
// never passes them up): no error status, the job hangs, and the watchdog
// (not the test's limit) ends it naming rank 1's QP to rank 0 as the
// culprit — on rxe from every rank's view gathered on rank 0.
TEST_F(CollVerbsVmTest, SwallowedErrorHangsAndTheWatchdogNamesTheSameQp) {
  const auto [sim, verbs] = Both("qp_error:rank=1,peer=0,after=20;swallow_error:rank=1,peer=0",
                                 kFaultRun, 18803, seconds(240));
  EXPECT_EQ(sim.exit_status, 1);
  EXPECT_TRUE(sim.hang) << sim.Describe();
  EXPECT_EQ(sim.completion, "") << sim.Describe();
  EXPECT_EQ(sim.culprit, "rank 1 -> rank 0 channel 0") << sim.Describe();
}

// Rank 0's first completion is held 300 ms: the run is still correct on
// both, and its one timed iteration (-w 0 -n 1) takes at least the delay
// (virtual time on sim, wall time on verbs: a lower bound the fault sets).
TEST_F(CollVerbsVmTest, DelayedCompletionDelaysButKeepsResultsOnBothBackends) {
  const std::string args = "allreduce --algo ring -b 64K -e 64K -n 1 -w 0 -c 1 --timeout 20";
  const auto [sim, verbs] =
      Both("delay_completions:rank=0,count=1,delay=300ms", args, 18804, seconds(180));
  EXPECT_EQ(sim.exit_status, 0) << sim.Describe();
  const HostRun s = RunHost(args + kSimWorld + " --verbs-fault " +
                            Quote("delay_completions:rank=0,count=1,delay=300ms"));
  const auto srows = Rows(s.output);
  ASSERT_EQ(srows.size(), 1u) << s.output;
  EXPECT_GE(std::stod(srows[0][5]), 300000.0) << s.output;
  EXPECT_EQ(srows[0][8], "0") << s.output;
  const Result v = RunRanks(
      *tb_, args + " --verbs-fault " + Quote("delay_completions:rank=0,count=1,delay=300ms"), 2,
      18805, seconds(180));
  const auto vrows = Rows(v.vm0.stdout_text);
  ASSERT_EQ(vrows.size(), 1u) << v.Describe();
  EXPECT_GE(std::stod(vrows[0][5]), 300000.0) << v.Describe();
  EXPECT_EQ(vrows[0][8], "0") << v.Describe();
  EXPECT_EQ(vrows[0][12], "0") << v.Describe();
}

// nccl-tests' alltoall_perf, sendrecv_perf, reduce_perf, gather_perf and
// scatter_perf over real verbs, every rank's data checked: 2 ranks (one per
// VM), then 4 (two per VM: pairs on one VM over rxe's loopback).
const std::string kSmall = " -b 1K -e 64K -f 64 -n 2 -w 1 -c 1";

TEST_F(CollVerbsVmTest, NewCollectivesAreCorrectOnTwoRanks) {
  int port = 18810;
  for (const std::string op :
       {"alltoall", "sendrecv", "reduce -r 1", "gather -r 1", "scatter -r 1"}) {
    SCOPED_TRACE(op);
    ExpectCorrect(RunRanks(*tb_, op + kSmall, 2, port++, seconds(300)), 2, 2);
  }
}

TEST_F(CollVerbsVmTest, NewCollectivesAreCorrectOnFourRanksTwoPerVm) {
  int port = 18820;
  for (const std::string op :
       {"alltoall", "sendrecv", "reduce -r 2", "gather -r 3", "scatter -r 1"}) {
    SCOPED_TRACE(op);
    ExpectCorrect(RunRanks(*tb_, op + kSmall, 4, port++, seconds(600)), 4, 2);
  }
}

// Hierarchical: 4 ranks, two per VM, node-major (--ranks-per-node 2): the
// rings cross each VM between its two ranks over rxe loopback and the VMs
// over the switch; the trees run a chain inside each VM. Correct results
// for the ring and tree allreduce, allgather, reduce-scatter, broadcast and
// alltoall.
TEST_F(CollVerbsVmTest, HierarchicalCollectivesWithTwoRanksPerVmAreCorrect) {
  int port = 18830;
  for (const std::string op : {"allreduce --algo ring", "allreduce --algo tree", "allgather",
                               "reduce_scatter", "broadcast -r 3", "alltoall"}) {
    SCOPED_TRACE(op);
    const Result r =
        RunRanks(*tb_, op + " --ranks-per-node 2" + kSmall, 4, port++, seconds(600), 2);
    ExpectCorrect(r, 4, 2);
    EXPECT_NE(r.vm0.stdout_text.find("2 ranks per node (hierarchical"), std::string::npos)
        << r.Describe();
  }
}

// Whom each rank's ring allreduce sends to, from rank 0's gathered trace.
std::map<int, std::set<std::string>> RingSendsTo(Testbed& tb, const std::string& extra, int port,
                                                 const std::string& name) {
  const std::string file = name + ".json";
  const Result r =
      RunRanks(tb, "allreduce --algo ring -b 64K -e 64K -n 1 -w 0 -c 1 --trace " + file + extra, 4,
               port, seconds(300), 2);
  EXPECT_EQ(r.vm0.exit_status, 0) << r.Describe();
  const std::filesystem::path dir = tb.work_dir() / name;
  EXPECT_TRUE(tb.CollectFiles(0, dir).ok());
  std::ifstream in(dir / file);
  EXPECT_TRUE(in.good()) << "rank 0 wrote no " << file << "\n" << r.Describe();
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::map<std::string, std::string> j;
  EXPECT_TRUE(test_util::Json(text).Parse(&j)) << text.substr(0, 2000);
  std::map<int, std::set<std::string>> to;
  for (const test_util::TraceEvent& e : test_util::TraceEvents(j)) {
    if (e.count("ph") && e.at("ph") == "X" && e.count("args.to")) {
      to[std::stoi(e.at("pid"))].insert(e.at("args.to"));
    }
  }
  return to;
}

// The layout is really hierarchical: with two ranks per VM the ring is
// NCCL's snake 0 -> 1 -> 3 -> 2 -> 0 (schedule.h RingOrder: the odd server
// is walked backwards), so each VM's two ranks are ring neighbours (one hop
// over rxe loopback per VM, one each way over the switch); flat (the same
// placement), the ring is 0 -> 1 -> 2 -> 3 -> 0.
TEST_F(CollVerbsVmTest, HierarchicalRingCrossesEachVmOnceWhereTheFlatRingDoesNot) {
  const auto hier = RingSendsTo(*tb_, " --ranks-per-node 2", 18840, "hier-ring");
  const std::map<int, std::set<std::string>> want_hier = {
      {0, {"1"}}, {1, {"3"}}, {2, {"0"}}, {3, {"2"}}};
  EXPECT_EQ(hier, want_hier);
  const auto flat = RingSendsTo(*tb_, "", 18841, "flat-ring");
  const std::map<int, std::set<std::string>> want_flat = {
      {0, {"1"}}, {1, {"2"}}, {2, {"3"}}, {3, {"0"}}};
  EXPECT_EQ(flat, want_flat);
}

}  // namespace
}  // namespace fathom::testbed
