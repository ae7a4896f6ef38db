// The global log options of `fathom` (tools/main.cc, base/log.h) as a user
// runs them, on a command that starts a bootstrap root: `fathom doctor` as
// rank 0 of 2 with no rank 1, which gives up after --wait 1. The root's
// "listening" line is info: shown with -v, --log-level or FATHOM_LOG_LEVEL,
// not by default.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "tests/cli_run.h"

namespace {

const std::string kFathom = std::string(FATHOM_BINARY_DIR) + "/tools/fathom";
constexpr const char* kLine = "[info] bootstrap root: listening on 127.0.0.1:";

// With no RDMA device here, doctor exits 2 (as perf does) after its
// bootstrap has run; the log lines are what these tests look at.
// Below the kernel's ephemeral range, and apart from verbs_cli_test's ports.
std::string Doctor() {
  return " doctor --nranks 2 --rank 0 --wait 1 -p " + std::to_string(12000 + getpid() % 18000);
}

fathom::test_util::CommandResult Fathom(const std::string& cmd) {
  return fathom::test_util::RunCommand(cmd);
}

TEST(LogCliTest, VerboseShowsTheRootsInfoLinesAndDefaultDoesNot) {
  auto quiet = Fathom("env -u FATHOM_LOG_LEVEL " + kFathom + Doctor());
  EXPECT_EQ(quiet.exit_code, 2) << quiet.out;
  EXPECT_NE(quiet.out.find("rank(s) 1 did not register"), std::string::npos) << quiet.out;
  EXPECT_EQ(quiet.out.find("[info]"), std::string::npos) << quiet.out;

  auto verbose = Fathom("env -u FATHOM_LOG_LEVEL " + kFathom + " -v" + Doctor());
  EXPECT_EQ(verbose.exit_code, 2) << verbose.out;
  EXPECT_NE(verbose.out.find(kLine), std::string::npos) << verbose.out;
  EXPECT_NE(verbose.out.find("registered from"), std::string::npos) << verbose.out;
  EXPECT_EQ(verbose.out.find("[debug]"), std::string::npos) << verbose.out;
  // The user-facing error is unchanged.
  EXPECT_NE(verbose.out.find("rank(s) 1 did not register"), std::string::npos) << verbose.out;

  // -vv after the subcommand: debug too.
  auto debug = Fathom("env -u FATHOM_LOG_LEVEL " + kFathom + Doctor() + " -vv");
  EXPECT_NE(debug.out.find(kLine), std::string::npos) << debug.out;
  EXPECT_NE(debug.out.find("[debug] bootstrap root: Hello from"), std::string::npos) << debug.out;
}

TEST(LogCliTest, LogLevelFlagAndEnvironment) {
  auto env = Fathom("FATHOM_LOG_LEVEL=info " + kFathom + Doctor());
  EXPECT_NE(env.out.find(kLine), std::string::npos) << env.out;
  // The flag overrides the environment.
  auto flag = Fathom("FATHOM_LOG_LEVEL=info " + kFathom + " --log-level error" + Doctor());
  EXPECT_EQ(flag.exit_code, 2) << flag.out;
  EXPECT_EQ(flag.out.find("[info]"), std::string::npos) << flag.out;
}

TEST(LogCliTest, BadLevelsAreUsageErrorsNamingFlagOrVariable) {
  auto flag = Fathom(kFathom + " --log-level loud" + Doctor());
  EXPECT_EQ(flag.exit_code, 2) << flag.out;
  EXPECT_NE(flag.out.find("--log-level"), std::string::npos) << flag.out;
  EXPECT_NE(flag.out.find("\"loud\""), std::string::npos) << flag.out;
  auto env = Fathom("FATHOM_LOG_LEVEL=loud " + kFathom + Doctor());
  EXPECT_EQ(env.exit_code, 2) << env.out;
  EXPECT_NE(env.out.find("FATHOM_LOG_LEVEL: log level \"loud\""), std::string::npos) << env.out;
}

}  // namespace
