#include "transport/bootstrap/framing.h"

#include <google/protobuf/stubs/logging.h>

#include <algorithm>
#include <cstdio>
#include <mutex>

#include "base/log.h"

namespace fathom::transport::bootstrap {
namespace {

// Protobuf prints its complaints about a peer's bytes (invalid UTF-8, ...)
// to stderr itself; a stranger could fill the root's stderr with them. They
// go to the log at debug instead: the rejection says what was wrong.
void RouteProtobufLogs() {
  static std::once_flag once;
  std::call_once(once, [] {
    google::protobuf::SetLogHandler(
        [](google::protobuf::LogLevel, const char* file, int line, const std::string& message) {
          FATHOM_LOG(kDebug,
                     std::string("protobuf ") + file + ":" + std::to_string(line) + ": " + message);
        });
  });
}

}  // namespace

std::string ToValidUtf8(std::string_view in) {
  static constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD
  std::string out;
  out.reserve(in.size());
  size_t i = 0;
  while (i < in.size()) {
    const auto b = static_cast<uint8_t>(in[i]);
    size_t len = 0;
    uint32_t min = 0, cp = 0;
    if (b < 0x80) {
      out.push_back(static_cast<char>(b));
      ++i;
      continue;
    } else if ((b & 0xe0) == 0xc0) {
      len = 2, min = 0x80, cp = b & 0x1f;
    } else if ((b & 0xf0) == 0xe0) {
      len = 3, min = 0x800, cp = b & 0x0f;
    } else if ((b & 0xf8) == 0xf0) {
      len = 4, min = 0x10000, cp = b & 0x07;
    }
    bool ok = len > 0 && i + len <= in.size();
    for (size_t k = 1; ok && k < len; ++k) {
      const auto c = static_cast<uint8_t>(in[i + k]);
      ok = (c & 0xc0) == 0x80;
      cp = (cp << 6) | (c & 0x3f);
    }
    // Overlong forms, UTF-16 surrogates and code points past U+10FFFF are
    // invalid too (RFC 3629 section 3).
    ok = ok && cp >= min && cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff);
    if (ok) {
      out.append(in.substr(i, len));
      i += len;
    } else {
      out += kReplacement;
      ++i;
    }
  }
  return out;
}

std::string EncodeFrame(const proto::Envelope& envelope) {
  RouteProtobufLogs();
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
  RouteProtobufLogs();
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
