// The emulated RC NIC against the spec's predictions: line rate, go-back-N,
// timeouts, retry exhaustion, RNR, READ recovery, atomics, access errors.
#include "fabric/sim/nic.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <tuple>
#include <utility>
#include <vector>

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
  DropIf drop{
      [&](const Packet& p) { return p.psn == lost && p.opcode == Opcode::kRdmaWriteMiddle; }};
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
  wr.imm_data = 0xabcd;
  wr.sge = Sge{smr.addr, 10000, smr.lkey};
  ASSERT_TRUE(net.nic(0).PostSend(qp.a, wr).ok());
  PostRecvLater later{&net, qp.b, RecvWr{22, Sge{dmr.addr, 10000, dmr.lkey}}};
  engine.Schedule<&PostRecvLater::Fire>(Picoseconds::FromMicroseconds(25), EventKind::kUser, 0,
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
  EXPECT_EQ(recvd[0].imm_data, 0xabcdu);
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
    if (done || p.psn != lost || p.opcode != Opcode::kRdmaReadResponseMiddle) return false;
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
  w.imm_data = 77;
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
  EXPECT_EQ(rwc[0].imm_data, 77u);
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

// What one run of RunBulkTraffic shows: every packet as the switch sends it
// on to host 1 (when that port has the loss), every completion, counters.
struct PathRun {
  std::vector<std::tuple<Opcode, uint32_t, uint32_t, bool, uint16_t, uint16_t, uint8_t, int64_t>>
      to_host1;  // opcode, psn, dest_qpn, ack_req, payload, wire bytes, hops, at
  std::vector<std::tuple<uint64_t, WcStatus, uint32_t, int64_t>> completions;
  std::vector<QpCounters> counters;
  size_t peak_in_flight = 0;
  size_t left_in_flight = 0;
  uint64_t digest = 0;
};

// Middle packets go without a pool packet from a NIC to its port
// (Nic::RequesterSendFullSize), and from the last port to the receiving NIC
// (Nic::ReceiveFullSize), except where a port has a fault model: there the
// NICs take their general paths. The loss that makes go-back-N resend is on
// host 0's port (the sender's general path) or on the switch's port toward
// host 1 (the receiver's); `pass` puts a fault model that passes everything
// on the other one, for the other side's general path.
PathRun RunBulkTraffic(bool loss_at_sender, bool pass) {
  topo::Topology topo = TwoHosts(/*direct=*/false);
  Engine engine(5);
  Network net(&engine, &topo, {});
  QpAttr attr = Attr();
  attr.ack_every_packets = 3;
  // Two QPs from host 0 share its port (the round-robin), one from host 1
  // sends back (ACKs and data both ways).
  const auto q1 = Connect(net, 0, 1, attr, kPsnA, 300);
  const auto q2 = Connect(net, 0, 1, attr, 500, 600);
  const auto q3 = Connect(net, 1, 0, attr, 700, 800);
  PathRun run;
  auto record = [](void* ctx, const Packet& p, Picoseconds at) {
    static_cast<PathRun*>(ctx)->to_host1.emplace_back(
        p.opcode, p.psn, p.dest_qpn, p.ack_req, p.payload_bytes, p.wire_bytes, p.hops, at.ps());
  };
  const PacketTap tap{record, &run};
  Port* from_host0 = &net.port(topo.hosts()[0], 0);
  // The switch's port toward host 1: the reverse of host 1's.
  Port* to_host1 = net.port(topo.hosts()[1], 0).peer();
  // Lose two middle packets of q1 on the way (go-back-N resends them and
  // what followed, through the same path).
  DropIf loss{[&, n = 0](const Packet& p) mutable {
    return p.dest_qpn == q1.b && p.opcode == Opcode::kRdmaWriteMiddle && (++n == 5 || n == 40);
  }};
  DropIf pass_all{[](const Packet&) { return false; }};
  (loss_at_sender ? from_host0 : to_host1)->set_impairment(&loss.hook);
  if (pass) (loss_at_sender ? to_host1 : from_host0)->set_impairment(&pass_all.hook);
  if (!loss_at_sender) to_host1->set_tap(&tap);
  // Receive buffers of modelled bytes for the SENDs and the WRITE with
  // immediate.
  const Sge modelled{0, 1u << 20, kModelledKey};
  EXPECT_TRUE(net.nic(1).PostRecv(q1.b, RecvWr{81, modelled}).ok());
  EXPECT_TRUE(net.nic(1).PostRecv(q2.b, RecvWr{91, modelled}).ok());
  EXPECT_TRUE(net.nic(1).PostRecv(q2.b, RecvWr{92, modelled}).ok());
  EXPECT_TRUE(net.nic(0).PostRecv(q3.b, RecvWr{96, modelled}).ok());
  auto post = [&](Nic& nic, uint32_t qpn, uint64_t id, WrOpcode opcode, uint32_t bytes) {
    SendWr wr;
    wr.wr_id = id;
    wr.opcode = opcode;
    wr.sge.length = bytes;
    wr.imm_data = static_cast<uint32_t>(id);
    EXPECT_TRUE(nic.PostSend(qpn, wr).ok());
  };
  post(net.nic(0), q1.a, 1, WrOpcode::kRdmaWrite, 40 * 4096 + 100);
  post(net.nic(0), q1.a, 2, WrOpcode::kRdmaWriteWithImm, 9 * 4096);
  post(net.nic(0), q2.a, 3, WrOpcode::kSend, 12 * 4096);
  post(net.nic(0), q2.a, 4, WrOpcode::kSendWithImm, 7 * 4096 + 1);
  post(net.nic(0), q2.a, 5, WrOpcode::kRdmaRead, 6 * 4096);
  post(net.nic(1), q3.a, 6, WrOpcode::kSend, 20 * 4096);
  engine.Run();
  for (CompletionQueue* cq : {q1.acq, q2.acq, q3.acq, q1.bcq, q2.bcq, q3.bcq}) {
    for (const Completion& c : Drain(cq)) {
      run.completions.emplace_back(c.wr_id, c.status, c.byte_len, c.time.ps());
    }
  }
  for (const auto& [nic, qpn] :
       {std::pair{0, q1.a}, {0, q2.a}, {1, q3.a}, {1, q1.b}, {1, q2.b}, {0, q3.b}}) {
    run.counters.push_back(net.nic(nic).GetQpCounters(qpn).value());
  }
  EXPECT_EQ(loss.dropped, 2u);
  run.peak_in_flight = net.pool().peak_in_use();
  run.left_in_flight = net.pool().in_use();
  run.digest = engine.trace_digest();
  return run;
}

void ExpectSameRuns(const PathRun& cheap, const PathRun& general) {
  ASSERT_EQ(cheap.completions.size(), 10u);  // 6 sends, 4 receives
  for (const auto& c : cheap.completions) EXPECT_EQ(std::get<1>(c), WcStatus::kSuccess);
  EXPECT_GT(cheap.counters[0].retransmitted_packets, 0u);
  EXPECT_EQ(cheap.to_host1, general.to_host1);
  EXPECT_EQ(cheap.completions, general.completions);
  ASSERT_EQ(cheap.counters.size(), general.counters.size());
  for (size_t i = 0; i < cheap.counters.size(); ++i) {
    EXPECT_EQ(std::memcmp(&cheap.counters[i], &general.counters[i], sizeof(QpCounters)), 0)
        << "QP counters " << i;
  }
  EXPECT_EQ(cheap.peak_in_flight, general.peak_in_flight);
  EXPECT_EQ(cheap.left_in_flight, 0u);
  EXPECT_EQ(general.left_in_flight, 0u);
  EXPECT_EQ(cheap.digest, general.digest);
}

TEST(NicTest, MiddlePacketsSentWithoutAPoolPacketAreTheGeneralPathsPackets) {
  // The two runs must be the same, packet for packet.
  const PathRun cheap = RunBulkTraffic(/*loss_at_sender=*/false, /*pass=*/false);
  const PathRun general = RunBulkTraffic(false, true);
  EXPECT_GT(cheap.to_host1.size(), 100u);
  ExpectSameRuns(cheap, general);
}

TEST(NicTest, MiddlePacketsReceivedWithoutAPoolPacketAreTheGeneralPathsPackets) {
  // The same, for the receiving NIC (the packets are not seen on the way:
  // a tap would make the port hold pool packets).
  ExpectSameRuns(RunBulkTraffic(/*loss_at_sender=*/true, false), RunBulkTraffic(true, true));
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
