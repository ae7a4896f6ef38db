// `fathom decode` end to end: the built binary on the rxe capture (text,
// --summary, --json), and the exit-2 errors for a missing file and a file
// that is not a capture; times beyond int64 nanoseconds, captures cut
// mid-record, FIFOs without a writer and standard input (issue 24). The
// JSON is checked with a minimal strict parser.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/cli_run.h"
#include "tests/json_reader.h"
#include "tests/scratch_dir.h"
#include "tests/wire/pcapng_encode.h"
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
  test_util::ScratchDir tmp;
  const std::string path = tmp.Write("decode_cli.txt", "not a capture at all, just text\n");
  const CliRun r = Decode(path);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find(path), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("not a pcap"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << r.out;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Counts lines of the per-frame listing ("     N     T.TTTTTT ...").
int FrameLines(const std::string& out) {
  static const std::regex kFrameLine("^ *[0-9]+ +([0-9]+\\.[0-9]{6}|out-of-range) .*");
  int n = 0;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) n += std::regex_match(line, kFrameLine);
  return n;
}

// if_tsresol 0 (whole seconds) with a time 2^40 s after the epoch: seconds
// times 1e9 overflowed int64 and the line showed a wrapped time.
TEST(DecodeCliTest, TimeBeyondInt64NanosecondsIsOutOfRange) {
  test_util::ScratchDir tmp;
  testing::PcapngEncoder enc(0);
  const std::vector<uint8_t> frame(60, 0);
  enc.AddPacket(1'700'000'000, frame);
  enc.AddPacket(1ull << 40, frame);
  enc.AddPacket(1'700'000'002, frame);
  enc.AddPacket(~0ull, frame);
  const std::string path = tmp.File("huge.pcapng");
  std::ofstream(path, std::ios::binary) << enc.bytes();
  const CliRun r = Decode(path);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("     1     0.000000 non-RoCE"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("     2 out-of-range non-RoCE"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("     3     2.000000 non-RoCE"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("     4 out-of-range non-RoCE"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(path + " record 2: timestamp of 1099511627776 s since 1970 is past"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("frames 4:"), std::string::npos) << r.out;
}

// Times relative to the first in-range frame, also when the first is not.
TEST(DecodeCliTest, FirstFrameOutOfRangeDoesNotShiftTheOthers) {
  test_util::ScratchDir tmp;
  testing::PcapngEncoder enc(0x80 | 10);  // 2^-10 s
  const std::vector<uint8_t> frame(60, 0);
  enc.AddPacket(~0ull, frame);
  enc.AddPacket(1'000ull << 10, frame);
  enc.AddPacket((1'001ull << 10) + 256, frame);
  const std::string path = tmp.File("first_huge.pcapng");
  std::ofstream(path, std::ios::binary) << enc.bytes();
  const CliRun r = Decode(path);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("     1 out-of-range"), std::string::npos) << r.out;
  // 2^64-1 / 1024 s: the unsigned count, not a wrapped negative one.
  EXPECT_NE(r.out.find("record 1: timestamp of 18014398509481983 s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("     2     0.000000"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("     3     1.250000"), std::string::npos) << r.out;
}

// The rxe capture cut in the middle of its 101st record.
std::string CutCapture(const test_util::ScratchDir& tmp) {
  const std::string bytes = ReadFile(testing::CapturePath());
  size_t offset = 24;  // classic pcap file header
  for (int i = 0; i < 100; ++i) {
    uint32_t caplen;
    std::memcpy(&caplen, bytes.data() + offset + 8, 4);
    offset += 16 + caplen;
  }
  const std::string path = tmp.File("cut.pcap");
  std::ofstream(path, std::ios::binary) << bytes.substr(0, offset + 16 + 20);
  return path;
}

TEST(DecodeCliTest, CutCaptureStillSummarizesThenFailsWith2) {
  test_util::ScratchDir tmp;
  const std::string path = CutCapture(tmp);
  const CliRun text = Decode(path);
  EXPECT_EQ(text.exit_code, 2) << text.out;
  EXPECT_EQ(FrameLines(text.out), 100) << text.out;
  EXPECT_NE(text.out.find("frames 100: roce"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("flows ("), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(path + ") record 101:"), std::string::npos) << text.out;

  const CliRun summary = Decode(path + " --summary");
  EXPECT_EQ(summary.exit_code, 2) << summary.out;
  EXPECT_NE(summary.out.find("frames 100: roce"), std::string::npos) << summary.out;
  EXPECT_NE(summary.out.find("flows ("), std::string::npos) << summary.out;

  // stdout alone is one JSON object; the error goes to stderr.
  const CliRun json = test_util::RunCommand(
      std::string(FATHOM_BINARY_DIR) + "/tools/fathom decode " + path + " --json 2>/dev/null",
      /*merge_stderr=*/false);
  EXPECT_EQ(json.exit_code, 2) << json.out;
  std::map<std::string, std::string> j;
  ASSERT_TRUE(test_util::Json(json.out).Parse(&j)) << json.out;
  EXPECT_EQ(j["frames"], "100");
  EXPECT_EQ(j["complete"], "false");
  EXPECT_NE(j["error"].find("record 101"), std::string::npos) << j["error"];
  EXPECT_TRUE(j.count("flows[0].src")) << json.out;

  const CliRun whole = Decode(testing::CapturePath() + " --json");
  std::map<std::string, std::string> w;
  ASSERT_TRUE(test_util::Json(whole.out).Parse(&w)) << whole.out;
  EXPECT_EQ(w["complete"], "true");
  EXPECT_EQ(w.count("error"), 0u);
}

// A FIFO nobody writes to: a blocking open(2) would wait forever.
TEST(DecodeCliTest, FifoWithoutWriterGivesUp) {
  test_util::ScratchDir tmp;
  const std::string fifo = tmp.File("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  const CliRun r = Decode(fifo + " --fifo-wait 0.2");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find(fifo), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no writer"), std::string::npos) << r.out;
}

// A FIFO whose writer comes along decodes like the file.
TEST(DecodeCliTest, FifoWithWriterDecodes) {
  test_util::ScratchDir tmp;
  const std::string fifo = tmp.File("fifo_w");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  const CliRun r = test_util::RunCommand("(cat " + testing::CapturePath() + " > " + fifo +
                                         " &) ; " + std::string(FATHOM_BINARY_DIR) +
                                         "/tools/fathom decode --summary " + fifo);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("frames 600: roce 560"), std::string::npos) << r.out;
}

TEST(DecodeCliTest, DashReadsStandardInput) {
  const CliRun r = Decode("--summary - < " + testing::CapturePath());
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("frames 600: roce 560"), std::string::npos) << r.out;
}

TEST(DecodeCliTest, DeviceIsRefused) {
  const CliRun r = Decode("/dev/null");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("not a regular file or FIFO"), std::string::npos) << r.out;
}

TEST(DecodeCliTest, HelpStatesTheExitCodes) {
  const CliRun r = Decode("--help");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("cut mid-record"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--fifo-wait"), std::string::npos) << r.out;
}

TEST(DecodeCliTest, NoArgumentIsExit2) {
  const CliRun r = Decode("");
  EXPECT_EQ(r.exit_code, 2);
}

}  // namespace
}  // namespace fathom::wire
