// The bootstrap's wire framing: magic "FTHB", a 4-byte big-endian length,
// then one serialized fathom.proto.Envelope (proto/bootstrap.proto). Pure
// functions, so hostile input (garbage, oversized lengths, malformed bodies)
// is tested without sockets. The root and the ranks both use them.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "proto/bootstrap.pb.h"

namespace fathom::transport::bootstrap {

inline constexpr size_t kFrameHeaderBytes = 8;
inline constexpr uint32_t kFrameMagic = 0x46544842;  // "FTHB"

// The frame for `envelope`: header and body.
std::string EncodeFrame(const proto::Envelope& envelope);

// Checks a frame header and returns the body length. INVALID_ARGUMENT for a
// bad magic (garbage, or not a fathom bootstrap peer) and OUT_OF_RANGE for a
// length over `max_body_bytes`; both name the values seen.
StatusOr<uint32_t> DecodeFrameHeader(std::span<const uint8_t, kFrameHeaderBytes> header,
                                     uint32_t max_body_bytes);

// Parses a frame body; INVALID_ARGUMENT when it is not an Envelope or an
// Envelope with no body.
StatusOr<proto::Envelope> ParseFrameBody(std::span<const uint8_t> body);

// `text` with every byte that is not part of a valid UTF-8 sequence replaced
// by U+FFFD. The messages' text fields are proto3 `string`s, which protobuf
// refuses to parse unless they are UTF-8: an abort reason quoting a device's
// bytes would otherwise arrive as a "malformed message".
std::string ToValidUtf8(std::string_view text);

// "Hello", "Gather", ... for messages and errors.
std::string BodyName(const proto::Envelope& envelope);

// Reassembles frames from a byte stream that arrives in pieces, holding only
// the bytes that actually arrived: a header claiming 1 MiB costs nothing
// until the body comes (the buffer grows as it is filled, at most `chunk`
// bytes ahead of the data), and the buffer is released after a large frame.
// The caller reads into Prepare()'s span, reports the count to Commit(), and
// takes each complete frame with TakeFrame(). It never reads past a frame's
// end, so the limit can change between frames (before and after a Hello).
class FrameReader {
 public:
  explicit FrameReader(uint32_t max_body_bytes) : max_body_bytes_(max_body_bytes) {}

  // The limit for bodies whose header has not been read yet.
  void set_max_body_bytes(uint32_t n) { max_body_bytes_ = n; }
  uint32_t max_body_bytes() const { return max_body_bytes_; }

  // Where the next bytes go: the rest of the header, or up to `chunk` bytes
  // of the body (the buffer grows by that much). Empty when a frame is ready
  // to be taken.
  std::span<uint8_t> Prepare(size_t chunk);
  // `n` bytes arrived in Prepare()'s span. A complete header is checked
  // (DecodeFrameHeader's errors); the reader is then broken for good.
  Status Commit(size_t n);
  // The frame completed by the last Commit, parsed (ParseFrameBody's errors),
  // or nullopt when none is complete yet.
  std::optional<StatusOr<proto::Envelope>> TakeFrame();

  // Bytes held for the frame in progress (the buffer's capacity).
  size_t buffered_bytes() const { return body_.capacity(); }

 private:
  uint32_t max_body_bytes_;
  std::array<uint8_t, kFrameHeaderBytes> header_{};
  size_t header_have_ = 0;
  bool in_body_ = false;
  uint32_t body_want_ = 0;
  std::vector<uint8_t> body_;
  size_t body_have_ = 0;
};

}  // namespace fathom::transport::bootstrap
