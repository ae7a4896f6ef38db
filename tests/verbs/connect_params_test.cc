// The pure parts of RC connection setup: MTU negotiation (CASES.md 1-2), the
// attribute masks of each transition, option validation and error text.
#include "transport/verbs/connect_params.h"

#include <gtest/gtest.h>

#include <cerrno>

namespace fathom::transport::verbs {
namespace {

struct MtuCase {
  int local, remote, forced, expected;
};

class MtuTest : public ::testing::TestWithParam<MtuCase> {};

TEST_P(MtuTest, PathMtuIsTheMinimumOnBothSides) {
  const MtuCase c = GetParam();
  auto ours = NegotiatePathMtu(c.local, c.remote, c.forced);
  auto theirs = NegotiatePathMtu(c.remote, c.local, c.forced);
  ASSERT_TRUE(ours.ok()) << ours.status().ToString();
  ASSERT_TRUE(theirs.ok());
  EXPECT_EQ(*ours, c.expected);
  EXPECT_EQ(*theirs, c.expected);  // symmetric: the NCCL #1524 / PR #2135 bug was asymmetry
}

INSTANTIATE_TEST_SUITE_P(Sweep, MtuTest,
                         ::testing::Values(MtuCase{4096, 4096, 0, 4096},
                                           MtuCase{4096, 1024, 0, 1024},
                                           MtuCase{1024, 4096, 0, 1024},
                                           MtuCase{2048, 4096, 0, 2048}, MtuCase{256, 512, 0, 256},
                                           MtuCase{1024, 1024, 4096, 4096},
                                           MtuCase{4096, 4096, 512, 512}));

TEST(MtuTest, RejectsValuesThatAreNotVerbsMtus) {
  auto r = NegotiatePathMtu(1500, 4096, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("local active_mtu 1500"), std::string::npos);
  r = NegotiatePathMtu(4096, 0, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("remote active_mtu 0"), std::string::npos);
  EXPECT_FALSE(NegotiatePathMtu(4096, 4096, 9000).ok());
}

TEST(VerbsErrorTest, NamesCallObjectValuesAndErrno) {
  EXPECT_EQ(VerbsCallError("ibv_modify_qp(RTR)", "qpn=0x11 dest_qpn=0x12 mtu=4096", EINVAL),
            "ibv_modify_qp(RTR) qpn=0x11 dest_qpn=0x12 mtu=4096: Invalid argument");
  const Status s = VerbsError("ibv_reg_mr", "rxe0 length=4096", ENOMEM);
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_EQ(s.message(), "ibv_reg_mr rxe0 length=4096: Cannot allocate memory");
}

TEST(TransitionTest, InitHasRcPingpongMaskAndAccess) {
  const QpTransition t = InitTransition(1, kAccessAll);
  EXPECT_EQ(t.attr.qp_state, IBV_QPS_INIT);
  EXPECT_EQ(t.attr.port_num, 1);
  EXPECT_EQ(t.attr.qp_access_flags,
            static_cast<unsigned>(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                  IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC));
  EXPECT_EQ(t.mask, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

EndpointInfo Remote() {
  EndpointInfo r;
  r.rank = 1;
  r.qpn = 0x12;
  r.psn = 0x1abcdef;  // over 24 bits: must be masked
  r.lid = 7;
  r.gid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 2};
  r.gid_index = 1;
  r.active_mtu = 1024;
  return r;
}

TEST(TransitionTest, RtrOnRoceUsesGrhWithTrafficClass) {
  QpOptions o;
  o.traffic_class = 106;
  o.min_rnr_timer = 12;
  o.max_rd_atomic = 16;
  const QpTransition t = RtrTransition(o, Remote(), 1024, 1, 3, /*is_roce=*/true);
  EXPECT_EQ(t.attr.qp_state, IBV_QPS_RTR);
  EXPECT_EQ(t.attr.path_mtu, IBV_MTU_1024);
  EXPECT_EQ(t.attr.dest_qp_num, 0x12u);
  EXPECT_EQ(t.attr.rq_psn, 0xabcdefu);
  EXPECT_EQ(t.attr.max_dest_rd_atomic, 16);
  EXPECT_EQ(t.attr.min_rnr_timer, 12);
  EXPECT_EQ(t.attr.ah_attr.is_global, 1);
  EXPECT_EQ(t.attr.ah_attr.dlid, 0);
  EXPECT_EQ(t.attr.ah_attr.grh.sgid_index, 3);
  EXPECT_EQ(t.attr.ah_attr.grh.traffic_class, 106);
  EXPECT_EQ(t.attr.ah_attr.grh.dgid.raw[15], 2);
  EXPECT_EQ(t.mask, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

TEST(TransitionTest, RtrOnInfiniBandRoutesByLidWithServiceLevel) {
  QpOptions o;
  o.service_level = 3;
  const QpTransition t = RtrTransition(o, Remote(), 4096, 2, 0, /*is_roce=*/false);
  EXPECT_EQ(t.attr.ah_attr.is_global, 0);
  EXPECT_EQ(t.attr.ah_attr.dlid, 7);
  EXPECT_EQ(t.attr.ah_attr.sl, 3);
  EXPECT_EQ(t.attr.ah_attr.port_num, 2);
  EXPECT_EQ(t.attr.path_mtu, IBV_MTU_4096);
}

TEST(TransitionTest, RtsCarriesRetryOptions) {
  QpOptions o;
  o.timeout = 20;  // NCCL's default: 4.29 s per retry
  o.retry_cnt = 6;
  o.rnr_retry = 5;
  o.max_rd_atomic = 8;
  const QpTransition t = RtsTransition(o, 0x1234567);
  EXPECT_EQ(t.attr.qp_state, IBV_QPS_RTS);
  EXPECT_EQ(t.attr.timeout, 20);
  EXPECT_EQ(t.attr.retry_cnt, 6);
  EXPECT_EQ(t.attr.rnr_retry, 5);
  EXPECT_EQ(t.attr.sq_psn, 0x234567u);
  EXPECT_EQ(t.attr.max_rd_atomic, 8);
  EXPECT_EQ(t.mask, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                        IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

TEST(QpOptionsTest, ValidationNamesFieldAndRange) {
  EXPECT_TRUE(ValidateQpOptions(QpOptions{}).ok());
  QpOptions o;
  o.retry_cnt = 8;
  Status s = ValidateQpOptions(o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "QpOptions.retry_cnt = 8 is outside 0..7");
  o = QpOptions{};
  o.timeout = 32;
  EXPECT_FALSE(ValidateQpOptions(o).ok());
  o = QpOptions{};
  o.path_mtu = 1500;
  s = ValidateQpOptions(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("path_mtu = 1500"), std::string::npos);
}

TEST(PortTest, SpeedWidthAndStateNames) {
  EXPECT_DOUBLE_EQ(ActivePortGbps(32, 2), 103.125);  // EDR 4x
  EXPECT_DOUBLE_EQ(ActivePortGbps(1, 1), 2.5);       // SDR 1x (rxe reports this on slow links)
  EXPECT_DOUBLE_EQ(ActivePortGbps(64, 2), 212.5);    // HDR 4x
  EXPECT_EQ(ActivePortGbps(3, 2), 0);
  EXPECT_EQ(PortStateName(IBV_PORT_ACTIVE), "ACTIVE");
  EXPECT_EQ(PortStateName(IBV_PORT_DOWN), "DOWN");
  EXPECT_EQ(AsyncEventName(IBV_EVENT_PORT_ERR), "IBV_EVENT_PORT_ERR");
  EXPECT_EQ(AsyncEventName(IBV_EVENT_QP_FATAL), "IBV_EVENT_QP_FATAL");
  EXPECT_EQ(AsyncEventName(IBV_EVENT_DEVICE_FATAL), "IBV_EVENT_DEVICE_FATAL");
}

}  // namespace
}  // namespace fathom::transport::verbs
