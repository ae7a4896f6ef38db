// pcap I/O through libpcap: write then read back (microsecond and nanosecond
// files), pcapng input, and the errors for missing and non-capture files.
#include "fabric/wire/pcap.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "tests/scratch_dir.h"
#include "tests/wire/pcapng_encode.h"
#include "tests/wire/wire_test_util.h"

namespace fathom::wire {
namespace {

TEST(PcapTest, WriteThenReadMicroseconds) {
  test_util::ScratchDir tmp;
  const std::string path = tmp.File("us.pcap");
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
}

TEST(PcapTest, WriteThenReadNanoseconds) {
  test_util::ScratchDir tmp;
  const std::string path = tmp.File("ns.pcap");
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
}

TEST(PcapTest, NegativeTimestampIsRejected) {
  test_util::ScratchDir tmp;
  const std::string path = tmp.File("neg.pcap");
  auto w = PcapWriter::Open(path);
  ASSERT_TRUE(w.ok());
  const std::vector<uint8_t> a(60, 0);
  EXPECT_FALSE((*w)->Write(a, -1).ok());
}

void Put32(std::string* s, uint32_t v) { s->append(reinterpret_cast<const char*>(&v), 4); }
void Put16(std::string* s, uint16_t v) { s->append(reinterpret_cast<const char*>(&v), 2); }

// A minimal little-endian pcapng file (SHB, IDB with if_tsresol 9, one EPB),
// written by hand so the reader is checked against the format, not itself.
TEST(PcapTest, ReadsPcapng) {
  test_util::ScratchDir tmp;
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
  const std::string path = tmp.File("x.pcapng");
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
}

TEST(PcapTest, ErrorsNameTheFile) {
  test_util::ScratchDir tmp;
  auto missing = PcapReader::Open("/nonexistent/fathom.pcap");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/fathom.pcap"), std::string::npos);

  const std::string path = tmp.File("text.pcap");
  std::ofstream(path) << "this is not a capture\n";
  auto text = PcapReader::Open(path);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(text.status().message().find(path), std::string::npos);

  auto dir = PcapReader::Open(::testing::TempDir());
  EXPECT_FALSE(dir.ok());

  auto unwritable = PcapWriter::Open("/nonexistent/dir/out.pcap");
  ASSERT_FALSE(unwritable.ok());
  EXPECT_NE(unwritable.status().message().find("/nonexistent/dir/out.pcap"), std::string::npos);
}

TEST(PcapTest, TruncatedRecordIsAnError) {
  test_util::ScratchDir tmp;
  const std::string good = tmp.File("good.pcap");
  {
    auto w = PcapWriter::Open(good);
    ASSERT_TRUE(w.ok());
    const std::vector<uint8_t> a(100, 1);
    ASSERT_TRUE((*w)->Write(a, 1000).ok());
  }
  std::ifstream in(good, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  bytes.resize(bytes.size() - 30);
  const std::string cut = tmp.File("cut.pcap");
  std::ofstream(cut, std::ios::binary) << bytes;
  auto r = PcapReader::Open(cut);
  ASSERT_TRUE(r.ok());
  PcapRecord rec;
  auto more = (*r)->Next(&rec);
  ASSERT_FALSE(more.ok());
  EXPECT_NE(more.status().message().find(cut), std::string::npos);
}

// pcapng timestamps of every if_tsresol form: power of 10 and power of 2,
// in range and far beyond what int64 nanoseconds hold (issue 24: if_tsresol
// 0 with a huge timestamp overflowed a signed multiply and printed a wrong
// time). Out-of-range times saturate to INT64_MAX and say so.
struct TsCase {
  const char* label;
  std::optional<uint8_t> tsresol;
  uint64_t raw;
  std::optional<int64_t> tsoffset;
  int64_t want_ns;
  bool want_clamped;
};

constexpr int64_t kNsMax = std::numeric_limits<int64_t>::max();
constexpr uint64_t kRawMax = std::numeric_limits<uint64_t>::max();

class PcapngTimestampTest : public ::testing::TestWithParam<TsCase> {};

TEST_P(PcapngTimestampTest, ConvertsOrSaturates) {
  test_util::ScratchDir tmp;
  const TsCase& c = GetParam();
  testing::PcapngEncoder enc(c.tsresol, c.tsoffset);
  const std::vector<uint8_t> frame(60, 0x5A);
  enc.AddPacket(c.raw, frame);
  const std::string path = tmp.File(std::string(c.label) + ".pcapng");
  std::ofstream(path, std::ios::binary) << enc.bytes();
  auto r = PcapReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  PcapRecord rec;
  auto more = (*r)->Next(&rec);
  ASSERT_TRUE(more.ok()) << more.status().ToString();
  ASSERT_TRUE(*more);
  EXPECT_EQ(rec.timestamp_ns, c.want_ns);
  EXPECT_EQ(rec.timestamp_clamped, c.want_clamped);
  EXPECT_EQ(rec.data.size(), frame.size());
}

INSTANTIATE_TEST_SUITE_P(
    EveryResolution, PcapngTimestampTest,
    ::testing::Values(
        // Power of 10: seconds, milliseconds, the default microseconds,
        // nanoseconds, 10^-19.
        TsCase{"s_in_range", 0, 1'700'000'000, {}, 1'700'000'000'000'000'000, false},
        TsCase{"s_year_2286", 0, 10'000'000'000, {}, kNsMax, true},
        TsCase{"s_2pow62", 0, 1ull << 62, {}, kNsMax, true},
        TsCase{"s_max", 0, kRawMax, {}, kNsMax, true},  // libpcap: tv_sec -1
        TsCase{"ms_in_range", 3, 1'700'000'000'123, {}, 1'700'000'000'123'000'000, false},
        TsCase{"ms_max", 3, kRawMax, {}, kNsMax, true},
        TsCase{
            "us_default_in_range", {}, 1'700'000'000'000'001, {}, 1'700'000'000'000'001'000, false},
        TsCase{"us_default_max", {}, kRawMax, {}, kNsMax, true},
        TsCase{"ns_last_in_range", 9, 9'223'372'036'854'775'807, {}, kNsMax, false},
        TsCase{"ns_one_past", 9, 9'223'372'036'854'775'808ull, {}, kNsMax, true},
        TsCase{"ns_max", 9, kRawMax, {}, kNsMax, true},
        TsCase{"e19_max", 19, kRawMax, {}, 1'844'674'407, false},
        // Power of 2: 2^0 s, 2^-10 s, 2^-30 s, 2^-34 s (the finest libpcap
        // scales to nanoseconds without wrapping its own 64-bit product).
        TsCase{"b0_in_range", 0x80, 1'700'000'000, {}, 1'700'000'000'000'000'000, false},
        TsCase{"b0_max", 0x80, kRawMax, {}, kNsMax, true},
        TsCase{"b10_half", 0x80 | 10, 5 * 1024 + 512, {}, 5'500'000'000, false},
        TsCase{"b10_max", 0x80 | 10, kRawMax, {}, kNsMax, true},
        TsCase{"b30_half", 0x80 | 30, (3ull << 30) + (1ull << 29), {}, 3'500'000'000, false},
        TsCase{"b30_max", 0x80 | 30, kRawMax, {}, kNsMax, true},
        TsCase{"b34_quarter", 0x80 | 34, (7ull << 34) + (1ull << 32), {}, 7'250'000'000, false},
        // if_tsoffset pushing an in-range time past 2^63 s (libpcap's
        // unsigned sum wraps to a negative time_t).
        TsCase{"s_offset_past_2pow63", 0, (1ull << 63) - 10, 20, kNsMax, true},
        TsCase{"us_offset_in_range", 6, 1'000'000, 1'700'000'000, 1'700'000'001'000'000'000,
               false}),
    [](const ::testing::TestParamInfo<TsCase>& info) { return std::string(info.param.label); });

TEST(PcapTest, CaptureTimeFromLibpcapSaturates) {
  EXPECT_EQ(CaptureTimeFromLibpcap(0, 0).ns, 0);
  EXPECT_FALSE(CaptureTimeFromLibpcap(9'223'372'036, 854'775'807).clamped);
  EXPECT_EQ(CaptureTimeFromLibpcap(9'223'372'036, 854'775'807).ns, kNsMax);
  EXPECT_TRUE(CaptureTimeFromLibpcap(9'223'372'036, 854'775'808).clamped);
  EXPECT_TRUE(CaptureTimeFromLibpcap(std::numeric_limits<int64_t>::max(), 999'999'999).clamped);
  EXPECT_TRUE(CaptureTimeFromLibpcap(-1, 0).clamped);
  EXPECT_EQ(CaptureTimeFromLibpcap(-1, 0).ns, kNsMax);
  // A fraction past one second carries (libpcap scales classic pcap
  // microseconds by 1000 without checking them).
  EXPECT_EQ(CaptureTimeFromLibpcap(1, 4'000'000'000).ns, 5'000'000'000);
}

TEST(PcapTest, TooFineResolutionIsNotACapture) {
  test_util::ScratchDir tmp;
  for (const uint8_t tsresol : {uint8_t{20}, uint8_t{0x80 | 64}}) {
    testing::PcapngEncoder enc(tsresol);
    const std::string path = tmp.File("fine" + std::to_string(tsresol) + ".pcapng");
    std::ofstream(path, std::ios::binary) << enc.bytes();
    auto r = PcapReader::Open(path);
    ASSERT_FALSE(r.ok()) << static_cast<int>(tsresol);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(path), std::string::npos);
  }
}

}  // namespace
}  // namespace fathom::wire
