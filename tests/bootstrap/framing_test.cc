// Frame encoding and the hostile-input checks of the header and body.
#include "transport/bootstrap/framing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace fathom::transport::bootstrap {
namespace {

std::span<const uint8_t, kFrameHeaderBytes> Header(const std::string& frame) {
  return std::span<const uint8_t, kFrameHeaderBytes>(reinterpret_cast<const uint8_t*>(frame.data()),
                                                     kFrameHeaderBytes);
}

TEST(FramingTest, RoundTripsAnEnvelope) {
  proto::Envelope e;
  e.mutable_hello()->set_version(1);
  e.mutable_hello()->set_rank(3);
  e.mutable_hello()->set_token("s3cret");
  const std::string frame = EncodeFrame(e);
  ASSERT_GT(frame.size(), kFrameHeaderBytes);
  EXPECT_EQ(frame.substr(0, 4), "FTHB");
  auto len = DecodeFrameHeader(Header(frame), 1024);
  ASSERT_TRUE(len.ok()) << len.status().ToString();
  EXPECT_EQ(*len, frame.size() - kFrameHeaderBytes);
  auto parsed = ParseFrameBody(std::span<const uint8_t>(
      reinterpret_cast<const uint8_t*>(frame.data()) + kFrameHeaderBytes, *len));
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(BodyName(*parsed), "Hello");
  EXPECT_EQ(parsed->hello().rank(), 3);
  EXPECT_EQ(parsed->hello().token(), "s3cret");
}

TEST(FramingTest, GarbageHeaderIsBadMagic) {
  const std::string garbage = "GET / HTTP/1.1\r\n";
  auto len = DecodeFrameHeader(Header(garbage), 1u << 20);
  ASSERT_FALSE(len.ok());
  EXPECT_EQ(len.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(len.status().message().find("bad frame magic 0x47455420"), std::string::npos)
      << len.status().message();
}

TEST(FramingTest, OversizedLengthNamesLengthAndLimit) {
  std::string h = "FTHB";
  h += std::string("\x7f\xff\xff\xff", 4);
  auto len = DecodeFrameHeader(Header(h), 1u << 20);
  ASSERT_FALSE(len.ok());
  EXPECT_EQ(len.status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(len.status().message(),
            "oversized message: length prefix 2147483647 bytes exceeds the limit 1048576");
  // Exactly at the limit is fine.
  h = "FTHB";
  h += std::string("\x00\x10\x00\x00", 4);
  EXPECT_TRUE(DecodeFrameHeader(Header(h), 1u << 20).ok());
}

TEST(FramingTest, MalformedAndEmptyBodiesAreRejected) {
  const std::string junk = "\xff\xff\xff\xff\xff";
  auto a = ParseFrameBody(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(junk.data()), junk.size()));
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("malformed"), std::string::npos);
  auto b = ParseFrameBody({});
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("no known message"), std::string::npos);
}

// Feeds `bytes` to `r` at most `step` bytes at a time; returns the frames
// completed (or the first error).
StatusOr<std::vector<proto::Envelope>> Feed(FrameReader& r, const std::string& bytes, size_t step) {
  std::vector<proto::Envelope> out;
  size_t at = 0;
  while (at < bytes.size()) {
    std::span<uint8_t> into = r.Prepare(step);
    const size_t n = std::min({into.size(), step, bytes.size() - at});
    std::copy_n(bytes.data() + at, n, into.data());
    at += n;
    FATHOM_RETURN_IF_ERROR(r.Commit(n));
    if (auto f = r.TakeFrame()) {
      FATHOM_RETURN_IF_ERROR(f->status());
      out.push_back(**f);
    }
  }
  return out;
}

TEST(FrameReaderTest, ReassemblesFramesFedAByteAtATime) {
  proto::Envelope a, b;
  a.mutable_gather()->set_seq(3);
  a.mutable_gather()->set_payload(std::string(300, 'p'));
  b.mutable_goodbye();
  FrameReader r(1u << 20);
  auto frames = Feed(r, EncodeFrame(a) + EncodeFrame(b), 1);
  ASSERT_TRUE(frames.ok()) << frames.status().ToString();
  ASSERT_EQ(frames->size(), 2u);
  EXPECT_EQ((*frames)[0].gather().payload(), std::string(300, 'p'));
  EXPECT_TRUE((*frames)[1].has_goodbye());
  EXPECT_LE(r.buffered_bytes(), 1024u);
}

// Issue 24: the body was allocated at the length the header claimed.
TEST(FrameReaderTest, HoldsWhatArrivedNotWhatTheHeaderClaims) {
  std::string bytes = std::string("FTHB\x00\x10\x00\x00", 8) + std::string(10, 'x');
  FrameReader r(1u << 20);
  auto frames = Feed(r, bytes, 4096);
  ASSERT_TRUE(frames.ok());
  EXPECT_TRUE(frames->empty());
  EXPECT_LE(r.buffered_bytes(), 2 * 4096u) << "the header claims 1 MiB";
}

TEST(FrameReaderTest, TheLimitAppliesToTheNextHeader) {
  proto::Envelope big;
  big.mutable_gather()->set_payload(std::string(5000, 'p'));
  FrameReader r(4096);
  auto refused = Feed(r, EncodeFrame(big), 64);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(refused.status().message().find("exceeds the limit 4096"), std::string::npos);
  FrameReader ok(4096);
  ok.set_max_body_bytes(1u << 20);
  auto frames = Feed(ok, EncodeFrame(big), 64);
  ASSERT_TRUE(frames.ok()) << frames.status().ToString();
  EXPECT_EQ(frames->size(), 1u);
}

TEST(FramingTest, ToValidUtf8KeepsUtf8AndReplacesTheRest) {
  EXPECT_EQ(ToValidUtf8("port 1 is DOWN"), "port 1 is DOWN");
  EXPECT_EQ(ToValidUtf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"),
            "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(ToValidUtf8("a\xFF"), "a" + r);
  EXPECT_EQ(ToValidUtf8("\xC3"), r);                          // truncated
  EXPECT_EQ(ToValidUtf8("\xC0\xAF"), r + r);                  // overlong '/'
  EXPECT_EQ(ToValidUtf8("\xED\xA0\x80"), r + r + r);          // a surrogate
  EXPECT_EQ(ToValidUtf8("\xF4\x90\x80\x80"), r + r + r + r);  // past U+10FFFF
  proto::Envelope e;
  e.mutable_abort()->set_reason(ToValidUtf8("\xFF\xFEreason"));
  const std::string frame = EncodeFrame(e);
  auto back = ParseFrameBody(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(frame.data()) + kFrameHeaderBytes,
                               frame.size() - kFrameHeaderBytes));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->abort().reason(), r + r + "reason");
}

}  // namespace
}  // namespace fathom::transport::bootstrap
