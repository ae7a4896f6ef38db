// The emulated RC NIC against the spec's predictions: line rate, go-back-N,
// timeouts, retry exhaustion, RNR, READ recovery, atomics, access errors.
#include "fabric/sim/nic.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "fabric/sim/network.h"
#include "fabric/wire/psn.h"
#include "tests/sim/sim_test_util.h"

namespace fathom::sim {
namespace {

using testing::Connect;
using testing::Drain;
using testing::DropIf;
using testing::TwoHosts;

constexpr uint32_t kPsnA = 0xFFFFFC;  // the requester's PSNs wrap within a message

QpAttr Attr(int timeout = 14, int retry = 7) {
  QpAttr a;
  a.path_mtu_bytes = 4096;
  a.timeout = timeout;
  a.retry_cnt = retry;
  return a;
}

TEST(NicTest, OneFlowOnOneLinkReachesLineRateTimesHeaderEfficiency) {
  topo::Topology topo = TwoHosts(/*direct=*/true);
  Engine engine;
  Network net(&engine, &topo, {});
  auto qp = Connect(net, 0, 1, Attr(), kPsnA);
  const uint32_t bytes = 64u << 20;
  SendWr wr;
  wr.wr_id = 7;
  wr.opcode = WrOpcode::kRdmaWrite;
  wr.sge.length = bytes;
  ASSERT_TRUE(net.nic(0).PostSend(qp.a, wr).ok());
  engine.Run();
  auto wcs = Drain(qp.acq);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wcs[0].byte_len, bytes);
  // 4096-byte payload in 4178 wire bytes: Eth 14 + FCS 4 + preamble 8 + IFG
  // 12 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4.
  const double expected_gbps = 100.0 * 4096.0 / 4178.0;
  const double gbps = bytes * 8.0 / wcs[0].time.seconds() / 1e9;
  EXPECT_NEAR(gbps, expected_gbps, expected_gbps * 0.005);
  EXPECT_LE(gbps, expected_gbps);
}

TEST(NicTest, GoBackNRecoversOneDroppedPacketWithPredictedRetransmissions) {
  topo::Topology topo = TwoHosts(true);
  Engine engine;
  Network net(&engine, &topo, {});
  auto qp = Connect(net, 0, 1, Attr(), kPsnA);
  // Drop PSN #3 of 10 once. The NAK (sent when #4 arrives) returns after all
  // 10 packets left (10 x 334 ns < 5 x 334 ns + 2 x 1 us), so go-back-N
  // resends #3..#9: exactly 7 packets.
  const uint32_t lost = wire::PsnAdd(kPsnA, 3);
  DropIf drop{[&](const Packet& p) { return p.psn == lost && p.opcode == op::kWriteMiddle; }};
  drop.pred = [&, done = false](const Packet& p) mutable {
    if (done || p.psn != lost) return false;
    return done = true;
  };
  net.port(topo.hosts()[0], 0).set_impairment(&drop.hook);
  SendWr wr;
  wr.opcode = WrOpcode::kRdmaWrite;
  wr.sge.length = 10 * 4096;
  ASSERT_TRUE(net.nic(0).PostSend(qp.a, wr).ok());
  engine.Run();
  auto wcs = Drain(qp.acq);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  const QpCounters req = net.nic(0).GetQpCounters(qp.a).value();
  const QpCounters resp = net.nic(1).GetQpCounters(qp.b).value();
  EXPECT_EQ(drop.dropped, 1u);
  EXPECT_EQ(req.retransmitted_packets, 7u);
  EXPECT_EQ(req.packet_seq_err, 1u);
  EXPECT_EQ(req.local_ack_timeout_err, 0u);
  EXPECT_EQ(resp.out_of_sequence, 6u);
  EXPECT_EQ(req.sent_pkts, 17u);
}

TEST(NicTest, LostTailPacketIsRecoveredByTheTimeout) {
  // 10 us of cable: the resent burst (3.3 us) is out before the first
  // duplicate ACK can come back, so the prediction is exact.
  topo::Topology topo = TwoHosts(true, Picoseconds::FromMicroseconds(10));
  Engine engine;
  Network net(&engine, &topo, {});
  auto qp = Connect(net, 0, 1, Attr(/*timeout=*/10), kPsnA);
  const uint32_t last = wire::PsnAdd(kPsnA, 9);
  DropIf drop{[&, done = false](const Packet& p) mutable {
    if (done || p.psn != last) return false;
    return done = true;
  }};
  net.port(topo.hosts()[0], 0).set_impairment(&drop.hook);
  SendWr wr;
  wr.opcode = WrOpcode::kRdmaWrite;
  wr.sge.length = 10 * 4096;
  ASSERT_TRUE(net.nic(0).PostSend(qp.a, wr).ok());
  engine.Run();
  auto wcs = Drain(qp.acq);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_GT(wcs[0].time.ps(), LocalAckTimeoutPs(10));
  const QpCounters req = net.nic(0).GetQpCounters(qp.a).value();
  EXPECT_EQ(req.local_ack_timeout_err, 1u);
  // Nothing was acknowledged (AckReq only on the last packet): all 10 again.
  EXPECT_EQ(req.retransmitted_packets, 10u);
  EXPECT_EQ(net.nic(1).GetQpCounters(qp.b).value().duplicate_request, 9u);
}

TEST(NicTest, RetryExhaustionGivesRetryExcErrAtPredictedTimeThenFlushes) {
  topo::Topology topo = TwoHosts(false);
  Engine engine;
  Network net(&engine, &topo, {});
  const int timeout = 8, retry = 3;
  auto qp = Connect(net, 0, 1, Attr(timeout, retry));
  DropIf hole{[](const Packet&) { return true; }};
  net.port(topo.hosts()[0], 0).set_impairment(&hole.hook);
  for (uint64_t id = 1; id <= 3; ++id) {
    SendWr wr;
    wr.wr_id = id;
    wr.opcode = WrOpcode::kSend;
    wr.sge.length = 100;
    ASSERT_TRUE(net.nic(0).PostSend(qp.a, wr).ok());
  }
  engine.Run();
  auto wcs = Drain(qp.acq);
  ASSERT_EQ(wcs.size(), 3u);
  // The first packet leaves at t=0; the timer fires retry_cnt + 1 times.
  EXPECT_EQ(wcs[0].wr_id, 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRetryExcErr);
  EXPECT_EQ(wcs[0].time.ps(), (retry + 1) * LocalAckTimeoutPs(timeout));
  EXPECT_EQ(wcs[1].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(wcs[2].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(wcs[2].wr_id, 3u);
  EXPECT_EQ(net.nic(0).GetQpState(qp.a).value(), QpState::kErr);
  const QpCounters c = net.nic(0).GetQpCounters(qp.a).value();
  EXPECT_EQ(c.local_ack_timeout_err, 4u);
  EXPECT_EQ(c.retry_exceeded_err, 1u);
}

TEST(NicTest, RxeInfiniteRetryNeverGivesUp) {
  topo::Topology topo = TwoHosts(true);
  Engine engine;
  Network net(&engine, &topo, {});
  QpAttr attr = Attr(4, 7);
  attr.rxe_infinite_retry = true;
  auto qp = Connect(net, 0, 1, attr);
  DropIf hole{[](const Packet&) { return true; }};
  net.port(topo.hosts()[0], 0).set_impairment(&hole.hook);
  SendWr wr;
  wr.opcode = WrOpcode::kSend;
  wr.sge.length = 8;
  ASSERT_TRUE(net.nic(0).PostSend(qp.a, wr).ok());
  engine.Run(Picoseconds(50 * LocalAckTimeoutPs(4)));
  EXPECT_EQ(qp.acq->size(), 0u);
  EXPECT_EQ(net.nic(0).GetQpState(qp.a).value(), QpState::kRts);
  EXPECT_GE(net.nic(0).GetQpCounters(qp.a).value().local_ack_timeout_err, 40u);
}

TEST(NicTest, RnrNakThenRetryExhaustion) {
  topo::Topology topo = TwoHosts(true);
  Engine engine;
  Network net(&engine, &topo, {});
  QpAttr attr = Attr();
  attr.rnr_retry = 2;
  attr.min_rnr_timer = 1;  // 0.01 ms
  auto qp = Connect(net, 0, 1, attr);
  SendWr wr;
  wr.opcode = WrOpcode::kSend;
  wr.sge.length = 5000;
  ASSERT_TRUE(net.nic(0).PostSend(qp.a, wr).ok());
  engine.Run();
  auto wcs = Drain(qp.acq);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRnrRetryExcErr);
  // Three RNR NAKs: the first try and rnr_retry = 2 retries, 10 us apart.
  EXPECT_GE(wcs[0].time.ps(), 2 * RnrTimerPs(1));
  EXPECT_LT(wcs[0].time.ps(), 3 * RnrTimerPs(1));
  const QpCounters c = net.nic(0).GetQpCounters(qp.a).value();
  EXPECT_EQ(c.rcvd_rnr_err, 3u);
  EXPECT_EQ(c.rnr_nak_retry_err, 1u);
  EXPECT_EQ(net.nic(1).GetQpCounters(qp.b).value().send_rnr_err, 3u);
}

struct PostRecvLater {
  Network* net;
  uint32_t qpn;
  RecvWr wr;
  static void Fire(void* obj, uint64_t) {
    auto* self = static_cast<PostRecvLater*>(obj);
    (void)self->net->nic(1).PostRecv(self->qpn, self->wr);
  }
};

TEST(NicTest, RnrNakRecoversWhenReceiveIsPostedWithRealData) {
  topo::Topology topo = TwoHosts(false);
  Engine engine;
  Network net(&engine, &topo, {});
  QpAttr attr = Attr();
  attr.min_rnr_timer = 1;
  auto qp = Connect(net, 0, 1, attr);
  std::vector<uint8_t> src(10000), dst(10000, 0);
  std::iota(src.begin(), src.end(), 1);
  auto smr = net.nic(0).RegisterMemory(src.data(), src.size(), kAccessLocalWrite).value();
  auto dmr = net.nic(1).RegisterMemory(dst.data(), dst.size(), kAccessLocalWrite).value();
  SendWr wr;
  wr.wr_id = 11;
  wr.opcode = WrOpcode::kSendWithImm;
  wr.imm = 0xabcd;
  wr.sge = Sge{smr.addr, 10000, smr.lkey};
  ASSERT_TRUE(net.nic(0).PostSend(qp.a, wr).ok());
  PostRecvLater later{&net, qp.b, RecvWr{22, Sge{dmr.addr, 10000, dmr.lkey}}};
  engine.Schedule(Picoseconds::FromMicroseconds(25), EventKind::kUser, 0, &PostRecvLater::Fire,
                  &later, 0);
  engine.Run();
  auto sent = Drain(qp.acq);
  auto recvd = Drain(qp.bcq);
  ASSERT_EQ(sent.size(), 1u);
  ASSERT_EQ(recvd.size(), 1u);
  EXPECT_EQ(sent[0].status, WcStatus::kSuccess);
  EXPECT_EQ(recvd[0].status, WcStatus::kSuccess);
  EXPECT_EQ(recvd[0].opcode, WcOpcode::kRecv);
  EXPECT_EQ(recvd[0].byte_len, 10000u);
  EXPECT_TRUE(recvd[0].has_imm);
  EXPECT_EQ(recvd[0].imm, 0xabcdu);
  EXPECT_EQ(src, dst);
  EXPECT_GE(net.nic(0).GetQpCounters(qp.a).value().rcvd_rnr_err, 2u);
}

TEST(NicTest, ReadWithLostResponseRecovers) {
  topo::Topology topo = TwoHosts(false);
  Engine engine;
  Network net(&engine, &topo, {});
  auto qp = Connect(net, 0, 1, Attr(), kPsnA);
  std::vector<uint8_t> remote(5 * 4096), local(5 * 4096, 0);
  std::iota(remote.begin(), remote.end(), 7);
  auto rmr = net.nic(1).RegisterMemory(remote.data(), remote.size(), kAccessRemoteRead).value();
  auto lmr = net.nic(0).RegisterMemory(local.data(), local.size(), kAccessLocalWrite).value();
  const uint32_t lost = wire::PsnAdd(kPsnA, 2);
  DropIf drop{[&, done = false](const Packet& p) mutable {
    if (done || p.psn != lost || p.opcode != op::kReadRespMiddle) return false;
    return done = true;
  }};
  net.port(topo.hosts()[1], 0).set_impairment(&drop.hook);
  SendWr wr;
  wr.wr_id = 5;
  wr.opcode = WrOpcode::kRdmaRead;
  wr.sge = Sge{lmr.addr, static_cast<uint32_t>(local.size()), lmr.lkey};
  wr.remote_addr = rmr.addr;
  wr.rkey = rmr.rkey;
  ASSERT_TRUE(net.nic(0).PostSend(qp.a, wr).ok());
  engine.Run();
  auto wcs = Drain(qp.acq);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wcs[0].opcode, WcOpcode::kRdmaRead);
  EXPECT_EQ(drop.dropped, 1u);
  EXPECT_EQ(local, remote);
  const QpCounters c = net.nic(0).GetQpCounters(qp.a).value();
  EXPECT_EQ(c.implied_nak_seq_err, 1u);
  EXPECT_EQ(net.nic(1).GetQpCounters(qp.b).value().duplicate_request, 1u);
}

TEST(NicTest, WriteWithImmAtomicsAndAccessError) {
  topo::Topology topo = TwoHosts(false);
  Engine engine;
  Network net(&engine, &topo, {});
  auto qp = Connect(net, 0, 1, Attr());
  std::vector<uint8_t> src(9000, 0x5c), dst(9000, 0);
  uint64_t counter = 40, result = 0;
  auto smr = net.nic(0).RegisterMemory(src.data(), src.size(), 0).value();
  auto dmr = net.nic(1).RegisterMemory(dst.data(), dst.size(), kAccessRemoteWrite).value();
  auto cmr = net.nic(1).RegisterMemory(&counter, 8, kAccessRemoteAtomic).value();
  auto rmr = net.nic(0).RegisterMemory(&result, 8, kAccessLocalWrite).value();
  ASSERT_TRUE(net.nic(1).PostRecv(qp.b, RecvWr{90, Sge{}}).ok());
  SendWr w;
  w.wr_id = 1;
  w.opcode = WrOpcode::kRdmaWriteWithImm;
  w.sge = Sge{smr.addr, 9000, smr.lkey};
  w.remote_addr = dmr.addr;
  w.rkey = dmr.rkey;
  w.imm = 77;
  ASSERT_TRUE(net.nic(0).PostSend(qp.a, w).ok());
  SendWr fa;
  fa.wr_id = 2;
  fa.opcode = WrOpcode::kAtomicFetchAndAdd;
  fa.sge = Sge{rmr.addr, 8, rmr.lkey};
  fa.remote_addr = cmr.addr;
  fa.rkey = cmr.rkey;
  fa.compare_add = 2;
  ASSERT_TRUE(net.nic(0).PostSend(qp.a, fa).ok());
  engine.Run();
  auto wcs = Drain(qp.acq);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wcs[1].status, WcStatus::kSuccess);
  EXPECT_EQ(wcs[1].opcode, WcOpcode::kFetchAdd);
  EXPECT_EQ(result, 40u);
  EXPECT_EQ(counter, 42u);
  EXPECT_EQ(src, dst);
  auto rwc = Drain(qp.bcq);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(rwc[0].imm, 77u);
  EXPECT_EQ(rwc[0].byte_len, 9000u);

  SendWr cas = fa;
  cas.wr_id = 3;
  cas.opcode = WrOpcode::kAtomicCmpAndSwp;
  cas.compare_add = 42;
  cas.swap = 1000;
  ASSERT_TRUE(net.nic(0).PostSend(qp.a, cas).ok());
  SendWr bad = w;
  bad.wr_id = 4;
  bad.opcode = WrOpcode::kRdmaWrite;
  bad.rkey = dmr.rkey + 0x100;  // a key the responder never issued
  ASSERT_TRUE(net.nic(0).PostSend(qp.a, bad).ok());
  engine.Run();
  wcs = Drain(qp.acq);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(counter, 1000u);
  EXPECT_EQ(result, 42u);
  EXPECT_EQ(wcs[1].status, WcStatus::kRemAccessErr);
  EXPECT_EQ(net.nic(0).GetQpState(qp.a).value(), QpState::kErr);
}

TEST(NicTest, SetupErrorsNameTheCallAndValues) {
  topo::Topology topo = TwoHosts(true);
  Engine engine;
  Network net(&engine, &topo, {});
  CompletionQueue* cq = net.nic(0).CreateCq();
  QpAttr bad;
  bad.path_mtu_bytes = 3000;
  auto qp = net.nic(0).CreateQp(cq, cq, bad);
  ASSERT_FALSE(qp.ok());
  EXPECT_NE(qp.status().message().find("path_mtu 3000"), std::string::npos);
  const uint32_t q = net.nic(0).CreateQp(cq, cq, QpAttr{}).value();
  Status s = net.nic(0).ModifyToRts(q, 0);
  EXPECT_NE(s.message().find("ibv_modify_qp(RTS)"), std::string::npos);
  SendWr wr;
  EXPECT_EQ(net.nic(0).PostSend(q, wr).code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace fathom::sim
