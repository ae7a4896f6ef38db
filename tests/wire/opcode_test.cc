#include "fabric/wire/opcode.h"

#include <gtest/gtest.h>

namespace fathom::wire {
namespace {

TEST(OpcodeTest, NamesFollowRocev2Md) {
  EXPECT_EQ(OpcodeName(Opcode::kSendFirst), "SEND_FIRST");
  EXPECT_EQ(OpcodeName(Opcode::kRdmaWriteOnlyWithImmediate), "RDMA_WRITE_ONLY_WITH_IMMEDIATE");
  EXPECT_EQ(OpcodeName(Opcode::kAcknowledge), "ACKNOWLEDGE");
  EXPECT_EQ(OpcodeName(Opcode::kSendOnlyWithInvalidate), "SEND_ONLY_WITH_INVALIDATE");
  EXPECT_EQ(OpcodeName(Opcode::kCnp), "CNP");
  EXPECT_EQ(OpcodeName(uint8_t{0x15}), "UNKNOWN");
  EXPECT_EQ(OpcodeName(uint8_t{0x64}), "UNKNOWN");  // UD SEND_ONLY: not supported
}

TEST(OpcodeTest, TableHasTheRcSetAndCnp) {
  int known = 0;
  for (int v = 0; v < 256; ++v) known += FindOpcode(static_cast<uint8_t>(v)) != nullptr;
  EXPECT_EQ(known, 24);  // 0x00..0x14, 0x16, 0x17, CNP
}

TEST(OpcodeTest, ExtensionHeaderBytesPerOpcode) {
  EXPECT_EQ(ExtensionHeaderBytes(Opcode::kSendMiddle), 0u);
  EXPECT_EQ(ExtensionHeaderBytes(Opcode::kRdmaWriteFirst), 16u);
  EXPECT_EQ(ExtensionHeaderBytes(Opcode::kRdmaWriteOnlyWithImmediate), 20u);
  EXPECT_EQ(ExtensionHeaderBytes(Opcode::kRdmaReadRequest), 16u);
  EXPECT_EQ(ExtensionHeaderBytes(Opcode::kRdmaReadResponseMiddle), 0u);
  EXPECT_EQ(ExtensionHeaderBytes(Opcode::kRdmaReadResponseLast), 4u);
  EXPECT_EQ(ExtensionHeaderBytes(Opcode::kAcknowledge), 4u);
  EXPECT_EQ(ExtensionHeaderBytes(Opcode::kAtomicAcknowledge), 12u);
  EXPECT_EQ(ExtensionHeaderBytes(Opcode::kCompareSwap), 28u);
  EXPECT_EQ(ExtensionHeaderBytes(Opcode::kSendLastWithImmediate), 4u);
  EXPECT_EQ(ExtensionHeaderBytes(Opcode::kSendOnlyWithInvalidate), 4u);
}

TEST(OpcodeTest, FrameSizesMatchTheCapture) {
  // rxe-send-ipv4.pcap: a 1024-byte SEND_MIDDLE is a 1082-byte frame, an ACK 62.
  EXPECT_EQ(FrameBytes(Opcode::kSendMiddle, false, false, 1024), 1082u);
  EXPECT_EQ(FrameBytes(Opcode::kAcknowledge, false, false, 0), 62u);
  EXPECT_EQ(FrameBytes(Opcode::kSendOnly, false, false, 512), 570u);
  EXPECT_EQ(FrameBytes(Opcode::kSendOnly, true, true, 1), 14u + 4 + 40 + 8 + 12 + 4 + 4);
  EXPECT_EQ(WireOverheadBytes(Opcode::kAcknowledge, false, false), 62u + 24);
}

TEST(OpcodeTest, AethSyndromes) {
  EXPECT_EQ(AethKindOf(0x1F), AethKind::kAck);
  EXPECT_EQ(AethKindOf(0x20 | 14), AethKind::kRnrNak);
  EXPECT_EQ(AethKindOf(0x60), AethKind::kNak);
  EXPECT_EQ(AethKindOf(0x40), AethKind::kReserved);
  EXPECT_EQ(NakCodeName(0), "PSN_SEQUENCE_ERROR");
  EXPECT_EQ(NakCodeName(2), "REMOTE_ACCESS_ERROR");
  EXPECT_EQ(NakCodeName(9), "RESERVED");
}

}  // namespace
}  // namespace fathom::wire
