// The PFC PAUSE frame (IEEE 802.1Qbb clause 36; MAC control, IEEE 802.3
// Annex 31D): destination 01:80:C2:00:00:01, ethertype 0x8808, opcode
// 0x0101, a 2-byte class-enable vector (bit p: priority p), eight 2-byte
// pause times in quanta of 512 bit times, zero padding to the 60-byte
// minimum frame (as captured: without the FCS). What the simulator's
// captures write for its PAUSE frames (tshark decodes them as "PFC").
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "base/status.h"
#include "fabric/wire/roce.h"

namespace fathom::wire {

inline constexpr MacAddress kPfcDestination = {0x01, 0x80, 0xC2, 0x00, 0x00, 0x01};
inline constexpr size_t kPfcFrameCapturedBytes = 60;  // 64 less the FCS

struct PfcFrame {
  MacAddress src{};
  uint8_t class_enable = 0;
  std::array<uint16_t, 8> quanta{};
};

// Writes the frame to `out`; returns its length (60).
StatusOr<size_t> BuildPfc(const PfcFrame& frame, std::span<uint8_t> out);
// Reads one (false: not a PFC frame).
bool ParsePfc(std::span<const uint8_t> bytes, PfcFrame* frame);

}  // namespace fathom::wire
