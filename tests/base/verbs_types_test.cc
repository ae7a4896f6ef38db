#include "base/verbs_types.h"

#include <gtest/gtest.h>

namespace fathom {
namespace {

TEST(VerbsTypesTest, NamesMatchLibibverbs) {
  EXPECT_EQ(WcStatusName(WcStatus::kRetryExcErr), "IBV_WC_RETRY_EXC_ERR");
  EXPECT_EQ(static_cast<int>(WcStatus::kRetryExcErr), 12);
  EXPECT_EQ(WcStatusName(WcStatus::kWrFlushErr), "IBV_WC_WR_FLUSH_ERR");
  EXPECT_EQ(WcStatusString(WcStatus::kRetryExcErr), "transport retry counter exceeded");
  EXPECT_EQ(WcStatusName(WcStatus::kGeneralErr), "IBV_WC_GENERAL_ERR");
  EXPECT_EQ(WcOpcodeName(WcOpcode::kRecvRdmaWithImm), "IBV_WC_RECV_RDMA_WITH_IMM");
  EXPECT_EQ(QpStateName(QpState::kErr), "IBV_QPS_ERR");
}

TEST(VerbsTypesTest, MtuEnum) {
  EXPECT_EQ(MtuEnumToBytes(5), 4096);
  EXPECT_EQ(MtuEnumToBytes(3), 1024);
  EXPECT_EQ(MtuEnumToBytes(6), 0);
  EXPECT_EQ(MtuBytesToEnum(2048), 4);
  EXPECT_EQ(MtuBytesToEnum(1500), -1);
}

TEST(VerbsTypesTest, Timers) {
  // NCCL's default timeout 20: 4.096 us * 2^20 = 4.294967296 s.
  EXPECT_EQ(LocalAckTimeoutPs(20), 4294967296000);
  EXPECT_EQ(LocalAckTimeoutPs(14), int64_t{4096000} * 16384);  // perftest: 67.1 ms
  EXPECT_EQ(LocalAckTimeoutPs(0), 0);
  EXPECT_EQ(RnrTimerPs(1), 10000000);       // 0.01 ms
  EXPECT_EQ(RnrTimerPs(31), 491520000000);  // 491.52 ms
  EXPECT_EQ(RnrTimerPs(0), 655360000000);   // 655.36 ms
  EXPECT_EQ(RnrTimerPs(32), -1);
}

}  // namespace
}  // namespace fathom
