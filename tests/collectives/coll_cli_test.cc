// `fathom coll` as users run it, on this machine: the sim backend on the
// default "small" topology (back-to-back, where only one rail's NICs reach
// each other), the verbs backend's usage errors, and — where there is an
// RDMA device — two verbs ranks as two processes over the loopback bootstrap.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "tests/cli_run.h"
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

// Ranks 0 and 1 used to land on NICs 0 and 1 of server 0, which
// back-to-back wiring does not connect: IBV_WC_RETRY_EXC_ERR. Now they sit
// on one rail (server 0 and server 1, GPU 0).
TEST(CollCliTest, TwoSimRanksOnTheDefaultTopologyAreCorrect) {
  auto r = Shell(kFathom + " coll allreduce --backend sim --ranks 2 -b 64K -e 64K -n 2");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("2 ranks on back-to-back"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# Out of bounds values : 0 OK"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("IBV_WC_"), std::string::npos) << r.out;
  // Every host when no count is given: the hosts that reach each other.
  auto all = Shell(kFathom + " coll allgather -b 4K -e 4K -n 1");
  EXPECT_EQ(all.exit_code, 0) << all.out;
  EXPECT_NE(all.out.find("2 ranks on back-to-back"), std::string::npos) << all.out;
}

TEST(CollCliTest, MoreRanksThanReachEachOtherIsAUsageErrorNamingTheLimit) {
  auto r = Shell(kFathom + " coll allreduce --ranks 4 -b 1K -e 1K -n 1");
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

TEST(CollCliTest, VerbsWithoutADeviceSaysSo) {
  if (HasDevice()) GTEST_SKIP() << "an RDMA device is present";
  auto r = Shell(kFathom + " coll allreduce --backend verbs --nranks 1 --rank 0 -b 1K -e 1K");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("no RDMA device"), std::string::npos) << r.out;
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

}  // namespace
}  // namespace fathom::transport::coll
