#include "transport/bootstrap/framing.h"

#include <algorithm>
#include <cstdio>

namespace fathom::transport::bootstrap {

std::string EncodeFrame(const proto::Envelope& envelope) {
  const std::string body = envelope.SerializeAsString();
  const auto n = static_cast<uint32_t>(body.size());
  std::string frame;
  frame.reserve(kFrameHeaderBytes + body.size());
  for (int shift = 24; shift >= 0; shift -= 8) {
    frame.push_back(static_cast<char>((kFrameMagic >> shift) & 0xff));
  }
  for (int shift = 24; shift >= 0; shift -= 8)
    frame.push_back(static_cast<char>((n >> shift) & 0xff));
  frame += body;
  return frame;
}

StatusOr<uint32_t> DecodeFrameHeader(std::span<const uint8_t, kFrameHeaderBytes> h,
                                     uint32_t max_body_bytes) {
  const uint32_t magic =
      (uint32_t{h[0]} << 24) | (uint32_t{h[1]} << 16) | (uint32_t{h[2]} << 8) | uint32_t{h[3]};
  const uint32_t len =
      (uint32_t{h[4]} << 24) | (uint32_t{h[5]} << 16) | (uint32_t{h[6]} << 8) | uint32_t{h[7]};
  char buf[160];
  if (magic != kFrameMagic) {
    std::snprintf(buf, sizeof(buf),
                  "bad frame magic 0x%08x (expected 0x%08x \"FTHB\"): not a fathom bootstrap peer",
                  magic, kFrameMagic);
    return InvalidArgument(buf);
  }
  if (len > max_body_bytes) {
    std::snprintf(buf, sizeof(buf),
                  "oversized message: length prefix %u bytes exceeds the limit %u", len,
                  max_body_bytes);
    return OutOfRange(buf);
  }
  return len;
}

StatusOr<proto::Envelope> ParseFrameBody(std::span<const uint8_t> body) {
  proto::Envelope envelope;
  if (!envelope.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
    return InvalidArgument("malformed message: " + std::to_string(body.size()) +
                           " bytes are not a bootstrap Envelope");
  }
  if (envelope.body_case() == proto::Envelope::BODY_NOT_SET) {
    return InvalidArgument("malformed message: Envelope of " + std::to_string(body.size()) +
                           " bytes carries no known message");
  }
  return envelope;
}

std::span<uint8_t> FrameReader::Prepare(size_t chunk) {
  if (!in_body_) return std::span<uint8_t>(header_).subspan(header_have_);
  if (body_have_ == body_want_) return {};
  const size_t grow = std::min<size_t>(std::max<size_t>(chunk, 1), body_want_ - body_have_);
  if (body_.size() < body_have_ + grow) body_.resize(body_have_ + grow);
  return std::span<uint8_t>(body_).subspan(body_have_, grow);
}

Status FrameReader::Commit(size_t n) {
  if (!in_body_) {
    header_have_ += n;
    if (header_have_ < kFrameHeaderBytes) return Status::Ok();
    FATHOM_ASSIGN_OR_RETURN(body_want_, DecodeFrameHeader(header_, max_body_bytes_));
    in_body_ = true;
    header_have_ = 0;
    body_have_ = 0;
    return Status::Ok();
  }
  body_have_ += n;
  return Status::Ok();
}

std::optional<StatusOr<proto::Envelope>> FrameReader::TakeFrame() {
  if (!in_body_ || body_have_ < body_want_) return std::nullopt;
  StatusOr<proto::Envelope> env =
      ParseFrameBody(std::span<const uint8_t>(body_.data(), body_want_));
  in_body_ = false;
  body_have_ = 0;
  body_want_ = 0;
  // Small buffers are kept for the next frame; a large one goes back to the
  // allocator, so that a rank's one big round does not stay resident.
  constexpr size_t kKeepBytes = 64 * 1024;
  if (body_.capacity() > kKeepBytes) {
    std::vector<uint8_t>().swap(body_);
  } else {
    body_.clear();
  }
  return env;
}

std::string BodyName(const proto::Envelope& e) {
  switch (e.body_case()) {
    case proto::Envelope::kHello:
      return "Hello";
    case proto::Envelope::kWelcome:
      return "Welcome";
    case proto::Envelope::kGather:
      return "Gather";
    case proto::Envelope::kGatherResult:
      return "GatherResult";
    case proto::Envelope::kAbort:
      return "Abort";
    case proto::Envelope::kError:
      return "Error";
    case proto::Envelope::kGoodbye:
      return "Goodbye";
    case proto::Envelope::kReport:
      return "Report";
    case proto::Envelope::BODY_NOT_SET:
      break;
  }
  return "(empty)";
}

}  // namespace fathom::transport::bootstrap
