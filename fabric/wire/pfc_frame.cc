#include "fabric/wire/pfc_frame.h"

#include <algorithm>
#include <string>

namespace fathom::wire {

StatusOr<size_t> BuildPfc(const PfcFrame& frame, std::span<uint8_t> out) {
  if (out.size() < kPfcFrameCapturedBytes) {
    return InvalidArgument("BuildPfc: buffer of " + std::to_string(out.size()) + " bytes, need " +
                           std::to_string(kPfcFrameCapturedBytes));
  }
  std::fill(out.begin(), out.begin() + kPfcFrameCapturedBytes, uint8_t{0});
  std::copy(kPfcDestination.begin(), kPfcDestination.end(), out.begin());
  std::copy(frame.src.begin(), frame.src.end(), out.begin() + 6);
  out[12] = 0x88;  // MAC control
  out[13] = 0x08;
  out[14] = 0x01;  // opcode 0x0101: PFC
  out[15] = 0x01;
  out[16] = 0;  // class-enable vector: the high byte is reserved
  out[17] = frame.class_enable;
  for (size_t p = 0; p < 8; ++p) {
    out[18 + 2 * p] = static_cast<uint8_t>(frame.quanta[p] >> 8);
    out[19 + 2 * p] = static_cast<uint8_t>(frame.quanta[p]);
  }
  return kPfcFrameCapturedBytes;
}

bool ParsePfc(std::span<const uint8_t> b, PfcFrame* frame) {
  if (b.size() < 34 || b[12] != 0x88 || b[13] != 0x08 || b[14] != 0x01 || b[15] != 0x01) {
    return false;
  }
  std::copy(b.begin() + 6, b.begin() + 12, frame->src.begin());
  frame->class_enable = b[17];
  for (size_t p = 0; p < 8; ++p) {
    frame->quanta[p] = static_cast<uint16_t>(b[18 + 2 * p] << 8 | b[19 + 2 * p]);
  }
  return true;
}

}  // namespace fathom::wire
