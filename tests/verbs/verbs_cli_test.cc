// `fathom perf` and `fathom doctor` as a user runs them, on this machine: two
// doctor ranks as two processes over the loopback bootstrap, and perf's usage
// and no-device errors. With a device the doctor pair must come out clean.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "tests/cli_run.h"
#include "transport/verbs/verbs_device.h"

namespace fathom::transport::verbs {
namespace {

const std::string kFathom = std::string(FATHOM_BINARY_DIR) + "/tools/fathom";

using ShellRun = test_util::CommandResult;

ShellRun Shell(const std::string& cmd) { return test_util::RunCommand(cmd); }

bool HasDevice() {
  auto names = ListDeviceNames();
  return names.ok() && !names->empty();
}

// Below the kernel's ephemeral range (32768..), so no test's client socket takes it.
std::string Port() { return std::to_string(10000 + getpid() % 20000); }

TEST(DoctorCliTest, TwoProcessesMeetOverTheBootstrapAndReport) {
  const std::string port = Port();
  const std::string common = kFathom + " doctor -n 2 --wait 30 --token t0k -p " + port;
  const ShellRun r = Shell("(" + common + " -r 1 > /dev/null 2>&1 &); " + common + " -r 0");
  if (HasDevice()) {
    EXPECT_NE(r.out.find("all-pairs check: 2 of 2 directions ok"), std::string::npos) << r.out;
    return;
  }
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("rank 0 ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rank 1 ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("has no usable device: OpenDevice: no RDMA device"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("pair 0 -> 1 failed: no device on this rank"), std::string::npos) << r.out;
}

TEST(DoctorCliTest, MissingRankIsAClearDeadlineNotAHang) {
  const ShellRun r = Shell(kFathom + " doctor -n 2 -r 0 --wait 1 -p " + Port());
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("rank(s) 1 did not register"), std::string::npos) << r.out;
}

TEST(PerfCliTest, UsageErrorsAndNoDevice) {
  ShellRun r = Shell(kFathom + " perf write_everything");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  r = Shell(kFathom + " perf write_bw -m 1500");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  if (HasDevice()) return;
  r = Shell(kFathom + " perf write_bw -p " + Port());
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("no RDMA device"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace fathom::transport::verbs
