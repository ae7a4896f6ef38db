// The bootstrap's wire framing: magic "FTHB", a 4-byte big-endian length,
// then one serialized fathom.proto.Envelope (proto/bootstrap.proto). Pure
// functions, so hostile input (garbage, oversized lengths, malformed bodies)
// is tested without sockets. The root and the ranks both use them.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

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

// "Hello", "Gather", ... for messages and errors.
std::string BodyName(const proto::Envelope& envelope);

}  // namespace fathom::transport::bootstrap
