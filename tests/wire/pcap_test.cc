// pcap I/O through libpcap: write then read back (microsecond and nanosecond
// files), pcapng input, and the errors for missing and non-capture files.
#include "fabric/wire/pcap.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "tests/wire/wire_test_util.h"

namespace fathom::wire {
namespace {

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/fathom_pcap_test_" + std::to_string(getpid()) + "_" + name;
}

TEST(PcapTest, WriteThenReadMicroseconds) {
  const std::string path = TempPath("us.pcap");
  const std::vector<uint8_t> a(60, 0xAA), b(1082, 0xBB);
  {
    auto w = PcapWriter::Open(path);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    ASSERT_TRUE((*w)->Write(a, 1'700'000'000'123'456'789).ok());
    ASSERT_TRUE((*w)->Write(b, 1'700'000'001'000'000'999).ok());
    ASSERT_TRUE((*w)->Flush().ok());
  }
  const auto frames = testing::ReadAll(path);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].bytes, a);
  EXPECT_EQ(frames[1].bytes, b);
  // Microsecond files keep microseconds.
  EXPECT_EQ(frames[0].timestamp_ns, 1'700'000'000'123'456'000);
  EXPECT_EQ(frames[1].timestamp_ns, 1'700'000'001'000'000'000);
  std::remove(path.c_str());
}

TEST(PcapTest, WriteThenReadNanoseconds) {
  const std::string path = TempPath("ns.pcap");
  const std::vector<uint8_t> a(62, 0x11);
  {
    auto w = PcapWriter::Open(path, /*nanosecond=*/true);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Write(a, 5'000'000'007).ok());
    ASSERT_TRUE((*w)->Write(a, 5'000'000'999).ok());
  }
  auto r = PcapReader::Open(path);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)->linktype(), kLinktypeEthernet);
  PcapRecord rec;
  ASSERT_TRUE(*(*r)->Next(&rec));
  EXPECT_EQ(rec.timestamp_ns, 5'000'000'007);
  EXPECT_EQ(rec.original_length, 62u);
  ASSERT_TRUE(*(*r)->Next(&rec));
  EXPECT_EQ(rec.timestamp_ns, 5'000'000'999);
  auto end = (*r)->Next(&rec);
  ASSERT_TRUE(end.ok());
  EXPECT_FALSE(*end);
  std::remove(path.c_str());
}

TEST(PcapTest, NegativeTimestampIsRejected) {
  const std::string path = TempPath("neg.pcap");
  auto w = PcapWriter::Open(path);
  ASSERT_TRUE(w.ok());
  const std::vector<uint8_t> a(60, 0);
  EXPECT_FALSE((*w)->Write(a, -1).ok());
  std::remove(path.c_str());
}

void Put32(std::string* s, uint32_t v) { s->append(reinterpret_cast<const char*>(&v), 4); }
void Put16(std::string* s, uint16_t v) { s->append(reinterpret_cast<const char*>(&v), 2); }

// A minimal little-endian pcapng file (SHB, IDB with if_tsresol 9, one EPB),
// written by hand so the reader is checked against the format, not itself.
TEST(PcapTest, ReadsPcapng) {
  std::string s;
  Put32(&s, 0x0A0D0D0A);  // SHB
  Put32(&s, 28);
  Put32(&s, 0x1A2B3C4D);
  Put16(&s, 1);
  Put16(&s, 0);
  Put32(&s, 0xFFFFFFFF);  // section length unknown
  Put32(&s, 0xFFFFFFFF);
  Put32(&s, 28);
  Put32(&s, 1);  // IDB
  Put32(&s, 32);
  Put16(&s, kLinktypeEthernet);
  Put16(&s, 0);
  Put32(&s, 65535);
  Put16(&s, 9);  // if_tsresol
  Put16(&s, 1);
  s.append("\x09\0\0\0", 4);  // 10^-9, padded
  Put16(&s, 0);               // opt_endofopt
  Put16(&s, 0);
  Put32(&s, 32);
  const std::string frame(62, '\x42');
  const uint64_t ts = 1'234'567'890'123ull;
  Put32(&s, 6);  // EPB
  Put32(&s, 32 + 64);
  Put32(&s, 0);
  Put32(&s, static_cast<uint32_t>(ts >> 32));
  Put32(&s, static_cast<uint32_t>(ts));
  Put32(&s, 62);
  Put32(&s, 62);
  s += frame;
  s.append(2, '\0');
  Put32(&s, 32 + 64);
  const std::string path = TempPath("x.pcapng");
  std::ofstream(path, std::ios::binary) << s;
  auto r = PcapReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->linktype(), kLinktypeEthernet);
  PcapRecord rec;
  auto more = (*r)->Next(&rec);
  ASSERT_TRUE(more.ok()) << more.status().ToString();
  ASSERT_TRUE(*more);
  EXPECT_EQ(rec.timestamp_ns, static_cast<int64_t>(ts));
  ASSERT_EQ(rec.data.size(), 62u);
  EXPECT_EQ(rec.data[61], 0x42);
  EXPECT_FALSE(*(*r)->Next(&rec));
  std::remove(path.c_str());
}

TEST(PcapTest, ErrorsNameTheFile) {
  auto missing = PcapReader::Open("/nonexistent/fathom.pcap");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/fathom.pcap"), std::string::npos);

  const std::string path = TempPath("text.pcap");
  std::ofstream(path) << "this is not a capture\n";
  auto text = PcapReader::Open(path);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(text.status().message().find(path), std::string::npos);
  std::remove(path.c_str());

  auto dir = PcapReader::Open(::testing::TempDir());
  EXPECT_FALSE(dir.ok());

  auto unwritable = PcapWriter::Open("/nonexistent/dir/out.pcap");
  ASSERT_FALSE(unwritable.ok());
  EXPECT_NE(unwritable.status().message().find("/nonexistent/dir/out.pcap"), std::string::npos);
}

TEST(PcapTest, TruncatedRecordIsAnError) {
  const std::string good = TempPath("good.pcap");
  {
    auto w = PcapWriter::Open(good);
    ASSERT_TRUE(w.ok());
    const std::vector<uint8_t> a(100, 1);
    ASSERT_TRUE((*w)->Write(a, 1000).ok());
  }
  std::ifstream in(good, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  bytes.resize(bytes.size() - 30);
  const std::string cut = TempPath("cut.pcap");
  std::ofstream(cut, std::ios::binary) << bytes;
  auto r = PcapReader::Open(cut);
  ASSERT_TRUE(r.ok());
  PcapRecord rec;
  auto more = (*r)->Next(&rec);
  ASSERT_FALSE(more.ok());
  EXPECT_NE(more.status().message().find(cut), std::string::npos);
  std::remove(good.c_str());
  std::remove(cut.c_str());
}

}  // namespace
}  // namespace fathom::wire
