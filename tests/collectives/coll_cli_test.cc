// `fathom coll` as users run it, on this machine: the sim backend on the
// default "small" topology (back-to-back, where only one rail's NICs reach
// each other), the verbs backend's usage errors, and — where there is an
// RDMA device — two verbs ranks as two processes over the loopback bootstrap.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "tests/cli_run.h"
#include "tests/scratch_dir.h"
#include "transport/verbs/verbs_device.h"

namespace fathom::transport::coll {
namespace {

const std::string kFathom = std::string(FATHOM_BINARY_DIR) + "/tools/fathom";

using ShellRun = test_util::CommandResult;

ShellRun Shell(const std::string& cmd) { return test_util::RunCommand(cmd); }

bool HasDevice() {
  auto names = verbs::ListDeviceNames();
  return names.ok() && !names->empty();
}

// Without the server tier, ranks 0 and 1 used to land on NICs 0 and 1 of
// server 0, which back-to-back wiring does not connect:
// IBV_WC_RETRY_EXC_ERR. Now they sit on one rail (server 0 and server 1,
// GPU 0).
TEST(CollCliTest, TwoSimRanksOnTheDefaultTopologyAreCorrect) {
  auto r =
      Shell(kFathom + " coll allreduce --backend sim --server none --ranks 2 -b 64K -e 64K -n 2");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("2 ranks on back-to-back"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# Out of bounds values : 0 OK"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("IBV_WC_"), std::string::npos) << r.out;
  // Every GPU when no count is given (the server tier: NVLink inside each
  // server, the rails between them; issue 31).
  auto all = Shell(kFathom + " coll allgather -b 4K -e 4K -n 1");
  EXPECT_EQ(all.exit_code, 0) << all.out;
  EXPECT_NE(all.out.find("16 ranks on back-to-back"), std::string::npos) << all.out;
  EXPECT_NE(all.out.find("# Out of bounds values : 0 OK"), std::string::npos) << all.out;
}

TEST(CollCliTest, MoreRanksThanReachEachOtherIsAUsageErrorNamingTheLimit) {
  auto r = Shell(kFathom + " coll allreduce --server none --ranks 4 -b 1K -e 1K -n 1");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("only 2 of its hosts reach each other"), std::string::npos) << r.out;
}

TEST(CollCliTest, VerbsBackendUsageErrors) {
  auto r = Shell(kFathom + " coll allreduce --backend verbs -b 1K -e 1K");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("--nranks N and --rank R"), std::string::npos) << r.out;
  r = Shell(kFathom + " coll allreduce --backend verbs --nranks 2 --rank 0 --bootstrap nohost");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("expected ADDRESS:PORT"), std::string::npos) << r.out;
  r = Shell(kFathom + " coll allreduce --backend verbs --nranks 2 --rank 0 --modelled");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  r = Shell(kFathom + " coll allreduce --backend verbs --nranks 2 --rank 0 --cq-mode spin");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("--cq-mode 'spin': poll|events"), std::string::npos) << r.out;
  r = Shell(kFathom + " coll allreduce --backend foo");
  EXPECT_EQ(r.exit_code, 2) << r.out;
}

TEST(CollCliTest, HelpNamesTheVerbsFlags) {
  auto r = Shell(kFathom + " coll --help");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  for (const char* flag : {"--backend", "--nranks", "--rank", "--bootstrap", "--ib-dev",
                           "--gid-index", "--timeout", "--ib-timeout"}) {
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag << "\n" << r.out;
  }
}

// No device: it cannot run as asked, exit 2 (as `fathom perf` does); it was 1.
TEST(CollCliTest, VerbsWithoutADeviceSaysSoAndExits2) {
  if (HasDevice()) GTEST_SKIP() << "an RDMA device is present";
  auto r = Shell(kFathom + " coll allreduce --backend verbs --nranks 1 --rank 0 -b 1K -e 1K");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("no RDMA device"), std::string::npos) << r.out;
}

// Issue 24: these ran nothing and exited 0, or aborted.
TEST(CollCliTest, SizesAndRanksThatRunNothingAreUsageErrors) {
  auto r = Shell(kFathom + " coll allreduce -b 4M -e 1K");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("invalid sizes: -b 4194304 > -e 1024"), std::string::npos) << r.out;
  r = Shell(kFathom + " coll allreduce --ranks 0 -b 1K -e 1K");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("--ranks 0: expected at least 1"), std::string::npos) << r.out;
  // More memory than any test machine has: a usage error naming the limit,
  // not SIGABRT from a failed allocation.
  r = Shell(kFathom + " coll allreduce -b 512G -e 512G");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("of memory available here (MemAvailable)"), std::string::npos) << r.out;
  r = Shell(kFathom + " coll allreduce -e 2000000G");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("-e '2000000G': larger than"), std::string::npos) << r.out;
}

// A barrier has no data: it reported every element of a 32M buffer wrong.
TEST(CollCliTest, BarrierIsCorrectAndShowsZeroBytes) {
  auto r = Shell(kFathom + " coll barrier -n 2 -w 1");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("# Out of bounds values : 0 OK"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("           0             0     float    none      -1"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("0.00    0.00       0"), std::string::npos) << r.out;
}

// The command lines users paste from nccl-tests.
TEST(CollCliTest, NcclTestsFlagsAreAccepted) {
  auto r = Shell(kFathom + " coll allreduce -b 8 -e 64K -f 8 -g 1 -n 2");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  for (const char* line :
       {"# nThread 1 nGpus 1 minBytes 8 maxBytes 65536 step: 8(factor) warmup iters: 5 iters: 2 "
        "agg iters: 1 validation: 1 graph: 0\n",
        "#\n# Using devices\n#  Rank  0 Group  0 Pid ", "algo\n",
        "# Out of bounds values : 0 OK"}) {
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
  }
  r = Shell(kFathom +
            " coll allreduce -t 1 -g 1 -a 1 -z 0 -m 2 -T 5 -G 0 -C 0 -p 0 -N 2 -R 0 -b 1K -e 1K "
            "-n 1 -w 0 -d double -o avg 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("agg iters: 2"), std::string::npos) << r.out;
  // -N 2: the sweep (one size here) twice.
  const size_t first_row = r.out.find("double     avg");
  ASSERT_NE(first_row, std::string::npos) << r.out;
  EXPECT_NE(r.out.find("double     avg", first_row + 1), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# Out of bounds values : 0 OK"), std::string::npos) << r.out;
  for (const char* t : {"int8", "uint8"}) {
    r = Shell(kFathom + " coll allreduce -b 1K -e 1K -n 1 -w 0 -o min -d " + t);
    EXPECT_EQ(r.exit_code, 0) << t << r.out;
    EXPECT_NE(r.out.find("# Out of bounds values : 0 OK"), std::string::npos) << r.out;
  }
  // -d all / -o all sweep types outer, ops inner, as nccl-tests does.
  r = Shell(kFathom + " coll reduce_scatter -b 1K -e 1K -n 1 -w 0 -d all -o all");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  const size_t int8_sum = r.out.find("int8     sum"), int8_avg = r.out.find("int8     avg");
  const size_t bf16_avg = r.out.find("bfloat16     avg"), uint8_sum = r.out.find("uint8     sum");
  EXPECT_NE(int8_sum, std::string::npos) << r.out;
  EXPECT_NE(int8_avg, std::string::npos) << r.out;  // integer avg: sum, then divide
  EXPECT_NE(bf16_avg, std::string::npos) << r.out;
  EXPECT_LT(int8_sum, uint8_sum);
  EXPECT_NE(r.out.find("# Out of bounds values : 0 OK"), std::string::npos) << r.out;
  // Flags without a meaning here: accepted with a note saying so.
  r = Shell(kFathom + " coll allreduce -b 1K -e 1K -n 1 -G 4 -R 1");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("-G 4 ignored: no CUDA graphs here"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("-R 1 ignored"), std::string::npos) << r.out;
  // -t x -g ranks in the sim's one process; one rank per process over verbs.
  r = Shell(kFathom + " coll allreduce --topology fat-tree:k=4 -g 4 -b 1K -e 1K -n 1");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("4 ranks on"), std::string::npos) << r.out;
  r = Shell(kFathom + " coll allreduce --backend verbs -g 2 -b 1K -e 1K");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("one rank per process"), std::string::npos) << r.out;
  r = Shell(kFathom + " coll allreduce -o avg -d int32 -b 1K -e 1K -n 1 -w 0");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("# Out of bounds values : 0 OK"), std::string::npos) << r.out;
  r = Shell(kFathom + " coll allreduce -a 7 -b 1K -e 1K");
  EXPECT_EQ(r.exit_code, 2) << r.out;
}

// avg over ranks whose 1/n is inexact, on both algorithms.
TEST(CollCliTest, AvgIsTheMeanOnRingAndTree) {
  for (const char* algo : {"ring", "tree"}) {
    auto r = Shell(kFathom + " coll allreduce --topology fat-tree:k=4 --ranks 5 -o avg -d all " +
                   "-b 1K -e 64K -f 64 -n 1 -w 0 --algo " + algo);
    EXPECT_EQ(r.exit_code, 0) << algo << r.out;
    EXPECT_NE(r.out.find("# Out of bounds values : 0 OK"), std::string::npos) << r.out;
  }
}

// mpirun / srun / torchrun set the rank in the environment: no --rank and
// --nranks needed (here it gets as far as the missing device).
TEST(CollCliTest, VerbsTakesTheRankFromTheLauncher) {
  if (HasDevice()) GTEST_SKIP() << "an RDMA device is present";
  auto r = Shell("OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=1 " + kFathom +
                 " coll allreduce --backend verbs -b 1K -e 1K");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("rank 0 of 1 from Open MPI"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("needs --nranks"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no RDMA device"), std::string::npos) << r.out;
  r = Shell("NCCL_IB_TIMEOUT=99 " + kFathom + " coll allreduce -b 1K -e 1K -n 1");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("NCCL_IB_TIMEOUT='99'"), std::string::npos) << r.out;
  // The sim takes NCCL's transport knobs too; flags win.
  r = Shell("NCCL_ALGO=Tree " + kFathom + " coll allreduce -b 1K -e 1K -n 1");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("   tree\n"), std::string::npos) << r.out;
  r = Shell("NCCL_ALGO=Tree " + kFathom + " coll allreduce -b 1K -e 1K -n 1 --algo ring");
  EXPECT_NE(r.out.find("   ring\n"), std::string::npos) << r.out;
}

// Progress on a terminal only: a sweep in a pipe (or a test) shows none.
TEST(CollCliTest, ProgressOnlyOnATerminal) {
  const std::string cmd = kFathom + " coll allreduce -b 1K -e 4K -f 2 -n 2";
  auto piped = Shell(cmd);
  EXPECT_EQ(piped.exit_code, 0) << piped.out;
  EXPECT_EQ(piped.out.find("[coll]"), std::string::npos) << piped.out;
  if (Shell("command -v script").exit_code != 0) GTEST_SKIP() << "no script(1) for a terminal";
  auto tty = Shell("script -qec '" + cmd + "' /dev/null");
  EXPECT_EQ(tty.exit_code, 0) << tty.out;
  EXPECT_NE(tty.out.find("\r[coll] allreduce float sum 1K (1/3) out-of-place"), std::string::npos)
      << tty.out;
}

TEST(CollCliTest, TwoVerbsRanksOverTheLoopbackBootstrap) {
  if (!HasDevice()) GTEST_SKIP() << "no RDMA device (the vm tests run this on rxe)";
  const std::string port = std::to_string(10000 + getpid() % 20000);
  const std::string cmd =
      kFathom + " coll allreduce --backend verbs --nranks 2 --bootstrap 127.0.0.1:" + port +
      " -b 4K -e 64K -f 16 -n 2 --rank ";
  auto r = Shell("(" + cmd + "1 > /dev/null 2>&1 &) ; " + cmd + "0");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("# Out of bounds values : 0 OK"), std::string::npos) << r.out;
}

// --verbs-fault: bad input exits 2 naming the flag and the token; the
// swallowed-error scenario (CASES.md 20) hangs, exits 1, and the watchdog's
// report names rank 3's QP and the swallowed error.
TEST(CollCliTest, VerbsFaultFlagAndScenario) {
  auto r = Shell(kFathom + " coll allreduce -b 1K -e 1K --verbs-fault 'swallow_error:rank=1,qp=x'");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("--verbs-fault: 'qp=x': a rank or QP index"), std::string::npos) << r.out;
  r = Shell(kFathom + " coll allreduce -b 1K -e 1K --verbs-fault 'swallow_error:rank=17'");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("'rank=17': rank outside 0..15"), std::string::npos) << r.out;
  r = Shell(kFathom + " coll allreduce -b 64K -e 64K -n 1 -w 0 --verbs-fault " +
            "'fail_post:rank=1,after=2,error=EINVAL'");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("(injected: fail_post:rank=1,after=2,count=1,error=EINVAL): Invalid "
                       "argument"),
            std::string::npos)
      << r.out;
  r = Shell(kFathom + " coll allreduce -b 1M -e 1M -n 1 -w 0 --scenario " +
            std::string(FATHOM_SOURCE_DIR) + "/scenarios/coll/swallowed_error_hang.yaml");
  // The scenario's expect block says this hang is its signature.
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("watchdog: no progress on any rank"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rank 3 -> rank 0 qpn 0x11: no completion for"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("swallowed IBV_WC_RETRY_EXC_ERR of rank 3 qpn 0x11"), std::string::npos)
      << r.out;
  // `sim` refuses verbs faults rather than ignoring them.
  r = Shell(kFathom + " sim " + std::string(FATHOM_SOURCE_DIR) +
            "/scenarios/coll/swallowed_error_hang.yaml");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("swallowed_error_hang.yaml:27:3: verbs_faults: "), std::string::npos)
      << r.out;
}

// alltoallv (issue 31): a matrix file runs with correct results and states
// its busbw; a bad one exits 2 naming FILE:LINE; the matrix flags belong to
// alltoallv.
TEST(CollCliTest, AllToAllVTakesASizeMatrixFileAndRefusesABadOne) {
  test_util::ScratchDir tmp;
  const std::string good = tmp.Write("coll_cli_a2av_good.txt",
                                     "# rows = senders\n64K 1M 0 4K\n1K 2K 0 4K\n"
                                     "1M 2K 300K 4K\n1K 2K 0 16K\n");
  const std::string bad =
      tmp.Write("coll_cli_a2av_bad.txt", "1K 2K 0 4K\n1K 2K 0 4K\n1K 2K 0 4K\n1K 2K 0x 4K\n");
  const std::string base = kFathom + " coll alltoallv --topology medium --server none --ranks 4 ";
  ShellRun r = Shell(base + "--matrix " + good + " -n 1 -w 0");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("# alltoallv: " + good + " (rows = senders)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("busbw = the busiest rank's bytes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# Out of bounds values : 0 OK"), std::string::npos) << r.out;
  r = Shell(base + "--matrix " + bad);
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find(bad + ":4: entry 3 '0x' is not a size"), std::string::npos) << r.out;
  r = Shell(base + "--skew 3 -b 64K -e 256K -f 4 -n 1 -w 0");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("# alltoallv: skew seed 3 zipf 1"), std::string::npos) << r.out;
  r = Shell(kFathom + " coll allreduce --ranks 2 --matrix " + good);
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("--matrix is for alltoallv"), std::string::npos) << r.out;
}

// The hot links line: medium's rings (4 servers under 2 leaves) collide on
// ECMP-hashed spine uplinks.
TEST(CollCliTest, HotLinksAreNamedAfterEachSize) {
  const std::string cmd = kFathom +
                          " coll allreduce --topology medium --ranks 32 --server h100 --modelled "
                          "--algo ring -b 1M -e 1M -n 1 -w 0";
  ShellRun r = Shell(cmd);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("#  hot links (>= 1.5x the mean switch link): leaf"), std::string::npos)
      << r.out;
  r = Shell(cmd + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("\"hot_links\":[{\"link\":\""), std::string::npos) << r.out;
}

// --ranks-per-node (verbs: hierarchical rings and trees, node-major ranks)
// is checked before any device is opened; sim has --server instead.
TEST(CollCliTest, RanksPerNodeIsForVerbsAndMustDivideTheRanks) {
  auto r = Shell(kFathom + " coll allreduce --backend sim --ranks 2 --ranks-per-node 2");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("--ranks-per-node is for --backend verbs"), std::string::npos) << r.out;
  r = Shell(kFathom + " coll allreduce --backend verbs --nranks 6 --rank 0 --ranks-per-node 4");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("--ranks-per-node 4: must divide --nranks 6"), std::string::npos) << r.out;
  r = Shell(kFathom + " coll --help");
  EXPECT_NE(r.out.find("--ranks-per-node"), std::string::npos) << r.out;
}

// An error swallowed after a QP went to ERR (qp_error + swallow_error, the
// case coll_verbs_vm_test runs on rxe too): two ranks wait on each other (a
// cycle), and the watchdog names the QP in ERR — its sends can never
// complete — not merely the one silent longest.
TEST(CollCliTest, WatchdogNamesTheQpInErrAsTheCulprit) {
  auto r = Shell(kFathom +
                 " coll allreduce --algo ring -b 64K -e 64K -n 2 -w 1 --timeout 20 --backend sim "
                 "--topology leaf-spine:leaves=1,spines=1,hosts=2,gpus=1 --server none --ranks 2 "
                 "--profile rxe --ib-timeout 17 --verbs-fault "
                 "'qp_error:rank=1,peer=0,after=20;swallow_error:rank=1,peer=0'");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("watchdog: no progress on any rank"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("completion IBV_WC_"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("watchdog: culprit rank 1 -> rank 0 qpn 0x11 channel 0: 1 send WRs without "
                       "a completion for 20.000000 s; it is in IBV_QPS_ERR"),
            std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace fathom::transport::coll
