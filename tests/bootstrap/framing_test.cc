// Frame encoding and the hostile-input checks of the header and body.
#include "transport/bootstrap/framing.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace fathom::transport::bootstrap
