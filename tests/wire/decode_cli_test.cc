// `fathom decode` end to end: the built binary on the rxe capture (text,
// --summary, --json), and the exit-2 errors for a missing file and a file
// that is not a capture. The JSON is checked with a minimal strict parser.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>

#include "tests/cli_run.h"
#include "tests/json_reader.h"
#include "tests/wire/wire_test_util.h"

namespace fathom::wire {
namespace {

using CliRun = test_util::CommandResult;

CliRun Decode(const std::string& args) {
  return test_util::RunCommand(std::string(FATHOM_BINARY_DIR) + "/tools/fathom decode " + args);
}

TEST(DecodeCliTest, TextListsFramesAndFlows) {
  const CliRun r = Decode(testing::CapturePath());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("192.0.2.2 -> 192.0.2.1 SEND_FIRST qpn=0x000012 psn=5162118 ackreq=0 "
                       "payload=1024 icrc=ok"),
            std::string::npos);
  EXPECT_NE(r.out.find("ACKNOWLEDGE qpn=0x000011"), std::string::npos);
  EXPECT_NE(r.out.find("aeth=ACK credits=31"), std::string::npos);
  EXPECT_NE(r.out.find("frames 600: roce 560, non-roce 40, malformed 0; icrc ok 560, bad 0"),
            std::string::npos);
  EXPECT_NE(r.out.find("retransmitted PSNs: 5162118 5162119 5162120 5162121"), std::string::npos);
  EXPECT_EQ(r.out.find("icrc=BAD"), std::string::npos);
}

TEST(DecodeCliTest, SummaryHasNoFrameLines) {
  const CliRun r = Decode(testing::CapturePath() + " --summary");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out.find("psn=5162118"), std::string::npos);
  EXPECT_NE(r.out.find("flows (3):"), std::string::npos);
  EXPECT_NE(r.out.find("retransmitted 4 PSNs (476 packets)"), std::string::npos);
}

TEST(DecodeCliTest, JsonHasTheKeys) {
  const CliRun r = Decode(testing::CapturePath() + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::map<std::string, std::string> j;
  ASSERT_TRUE(test_util::Json(r.out).Parse(&j)) << r.out;
  EXPECT_EQ(j["frames"], "600");
  EXPECT_EQ(j["roce_frames"], "560");
  EXPECT_EQ(j["non_roce_frames"], "40");
  EXPECT_EQ(j["malformed_frames"], "0");
  EXPECT_EQ(j["icrc_ok"], "560");
  EXPECT_EQ(j["icrc_bad"], "0");
  EXPECT_EQ(j["opcodes.SEND_FIRST"], "120");
  EXPECT_EQ(j["opcodes.SEND_MIDDLE"], "240");
  EXPECT_EQ(j["opcodes.ACKNOWLEDGE"], "40");
  int big = -1;
  for (int k = 0; k < 3; ++k) {
    const std::string f = "flows[" + std::to_string(k) + "].";
    for (const char* key :
         {"src", "dst", "dest_qpn", "packets", "bytes", "retransmitted_psns", "naks?"}) {
      EXPECT_TRUE(j.count(f + key)) << f + key;
    }
    if (j[f + "dest_qpn"] == "18") big = k;
  }
  ASSERT_GE(big, 0);
  const std::string f = "flows[" + std::to_string(big) + "].";
  EXPECT_EQ(j[f + "src"], "192.0.2.2");
  EXPECT_EQ(j[f + "dst"], "192.0.2.1");
  EXPECT_EQ(j[f + "packets"], "480");
  EXPECT_EQ(j[f + "bytes"], "491520");
  EXPECT_EQ(j[f + "retransmitted_psns"], "4");
  EXPECT_EQ(j[f + "retransmitted_psn_list[0]"], "5162118");
  EXPECT_EQ(j.count("flows[3].src"), 0u);
}

TEST(DecodeCliTest, MissingFileIsExit2NamingIt) {
  const CliRun r = Decode("/nonexistent/nothing.pcap");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("/nonexistent/nothing.pcap"), std::string::npos) << r.out;
  // One line.
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << r.out;
}

TEST(DecodeCliTest, NonCaptureIsExit2NamingIt) {
  const std::string path =
      ::testing::TempDir() + "/fathom_decode_cli_" + std::to_string(getpid()) + ".txt";
  std::ofstream(path) << "not a capture at all, just text\n";
  const CliRun r = Decode(path);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find(path), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("not a pcap"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << r.out;
  std::remove(path.c_str());
}

TEST(DecodeCliTest, NoArgumentIsExit2) {
  const CliRun r = Decode("");
  EXPECT_EQ(r.exit_code, 2);
}

}  // namespace
}  // namespace fathom::wire
