#include "transport/emulated/emulated.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "topologies/builders.h"
#include "transport/wait.h"

namespace fathom::transport::emulated {
namespace {

TEST(ActiveMtuTest, FollowsRxeRule) {
  EXPECT_EQ(ActiveMtuForEthernetMtu(4200), 4096);
  EXPECT_EQ(ActiveMtuForEthernetMtu(9000), 4096);
  EXPECT_EQ(ActiveMtuForEthernetMtu(2200), 2048);
  EXPECT_EQ(ActiveMtuForEthernetMtu(1500), 1024);
  EXPECT_EQ(ActiveMtuForEthernetMtu(200), 0);
}

struct Pair {
  topo::Topology topo = topo::BuildPreset("fat-tree:k=4,gpus=4").value();
  sim::Engine engine{1};
  sim::Network net{&engine, &topo, sim::NetworkConfig{}};
  EmulatedFabric fabric{&net, EmulatedOptions{}};
};

TEST(EmulatedTest, WriteWithImmMovesBytesAndCompletesBothSides) {
  Pair w;
  auto d0 = w.fabric.OpenDevice(0).value();
  auto d5 = w.fabric.OpenDevice(5).value();
  EXPECT_EQ(d0->info().active_mtu, 4096);
  EXPECT_EQ(d0->info().link_layer, "Emulated");
  auto cq0 = d0->CreateCq(16).value();
  auto cq5 = d5->CreateCq(16).value();
  int notified = 0;
  cq5->SetNotify([&] { ++notified; });
  auto qp0 = d0->CreateQp(5, QpOptions{}, cq0.get()).value();
  auto qp5 = d5->CreateQp(0, QpOptions{}, cq5.get()).value();
  ASSERT_TRUE(qp0->Connect(qp5->LocalInfo()).ok());
  ASSERT_TRUE(qp5->Connect(qp0->LocalInfo()).ok());
  EXPECT_EQ(qp0->path_mtu(), 4096);
  std::vector<uint8_t> src(10000), dst(10000, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7);
  auto mr0 = d0->RegisterMemory(src.data(), src.size(), kAccessAll).value();
  auto mr5 = d5->RegisterMemory(dst.data(), dst.size(), kAccessAll).value();
  ASSERT_TRUE(
      qp5->PostRecv(RecvWr{42, {reinterpret_cast<uint64_t>(dst.data()), 0, mr5->lkey()}}).ok());
  SendWr wr;
  wr.wr_id = 7;
  wr.opcode = WrOpcode::kRdmaWriteWithImm;
  wr.sge = {reinterpret_cast<uint64_t>(src.data()), 10000, mr0->lkey()};
  wr.remote_addr = reinterpret_cast<uint64_t>(dst.data());
  wr.rkey = mr5->rkey();
  wr.imm_data = 0x1234;
  ASSERT_TRUE(qp0->PostSend(wr).ok());
  EXPECT_EQ(qp0->outstanding_sends(), 1);
  std::vector<Completion> got;
  ASSERT_TRUE(
      WaitForCompletions(w.fabric.clock(), *cq5, *qp5, 1, Picoseconds::FromMilliseconds(1), &got)
          .ok());
  EXPECT_EQ(got[0].opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(got[0].imm_data, 0x1234u);
  EXPECT_EQ(got[0].peer_rank, 0);
  EXPECT_GE(notified, 1);
  EXPECT_EQ(src, dst);
  got.clear();
  ASSERT_TRUE(
      WaitForCompletions(w.fabric.clock(), *cq0, *qp0, 1, Picoseconds::FromMilliseconds(1), &got)
          .ok());
  EXPECT_EQ(got[0].wr_id, 7u);
  EXPECT_EQ(got[0].status, WcStatus::kSuccess);
  EXPECT_EQ(qp0->outstanding_sends(), 0);
  EXPECT_EQ(qp5->outstanding_recvs(), 0);
}

// Signaled and unsignaled sends mixed on one QP: each unsignaled WRITE
// retires with the next signaled one (outstanding_sends() at each
// completion says so), and completions left waiting in the CQ come out in
// order however the polls split them.
TEST(EmulatedTest, MixedSignaledSendsRetireInOrderAndPollInParts) {
  Pair w;
  auto d0 = w.fabric.OpenDevice(0).value();
  auto d5 = w.fabric.OpenDevice(5).value();
  auto cq0 = d0->CreateCq(16).value();
  auto cq5 = d5->CreateCq(16).value();
  auto qp0 = d0->CreateQp(5, QpOptions{}, cq0.get()).value();
  auto qp5 = d5->CreateQp(0, QpOptions{}, cq5.get()).value();
  ASSERT_TRUE(qp0->Connect(qp5->LocalInfo()).ok());
  ASSERT_TRUE(qp5->Connect(qp0->LocalInfo()).ok());
  // wr_id 1..8; 3, 5 and 6 unsignaled (the first after two signaled ones
  // still outstanding). Modelled bytes: lkey and rkey 0.
  const bool signaled[] = {true, true, false, true, false, false, true, true};
  for (int i = 0; i < 8; ++i) {
    SendWr wr;
    wr.wr_id = static_cast<uint64_t>(i + 1);
    wr.opcode = WrOpcode::kRdmaWrite;
    wr.sge = {0, 1024, 0};
    wr.signaled = signaled[i];
    ASSERT_TRUE(qp0->PostSend(wr).ok());
  }
  EXPECT_EQ(qp0->outstanding_sends(), 8);
  // Progress() returns at each completion: after wr 1, 2, 4 (with 3), 7
  // (with 5 and 6) and 8.
  const int left_after[] = {7, 6, 4, 1, 0};
  for (int left : left_after) {
    ASSERT_TRUE(w.fabric.clock().Progress(Picoseconds::FromMilliseconds(1)));
    EXPECT_EQ(qp0->outstanding_sends(), left);
  }
  std::vector<uint64_t> ids;
  Completion out[3];
  for (size_t n : {size_t{1}, size_t{1}, size_t{2}, size_t{3}}) {
    const int got = cq0->Poll(std::span<Completion>(out, n));
    for (int i = 0; i < got; ++i) {
      EXPECT_EQ(out[i].status, WcStatus::kSuccess);
      EXPECT_EQ(out[i].peer_rank, 5);
      ids.push_back(out[i].wr_id);
    }
  }
  EXPECT_EQ(ids, (std::vector<uint64_t>{1, 2, 4, 7, 8}));
  EXPECT_EQ(cq0->Poll(std::span<Completion>(out, 3)), 0);
  EXPECT_EQ(cq5->Poll(std::span<Completion>(out, 3)), 0);
  // Again from an empty queue, unsignaled first: wr 9 retires with 10.
  for (uint64_t id : {uint64_t{9}, uint64_t{10}}) {
    SendWr wr;
    wr.wr_id = id;
    wr.opcode = WrOpcode::kRdmaWrite;
    wr.sge = {0, 1024, 0};
    wr.signaled = id == 10;
    ASSERT_TRUE(qp0->PostSend(wr).ok());
  }
  EXPECT_EQ(qp0->outstanding_sends(), 2);
  ASSERT_TRUE(w.fabric.clock().Progress(Picoseconds::FromMilliseconds(2)));
  EXPECT_EQ(qp0->outstanding_sends(), 0);
  ASSERT_EQ(cq0->Poll(std::span<Completion>(out, 3)), 1);
  EXPECT_EQ(out[0].wr_id, 10u);
}

TEST(EmulatedTest, ProgressReturnsFalseWhenNothingCanHappen) {
  Pair w;
  EXPECT_FALSE(w.fabric.clock().Progress(Picoseconds::FromMicroseconds(5)));
}

TEST(EmulatedTest, SendQueueFullIsAnErrorNamingTheDepth) {
  Pair w;
  auto d0 = w.fabric.OpenDevice(0).value();
  auto d1 = w.fabric.OpenDevice(1).value();
  auto cq0 = d0->CreateCq(4).value();
  auto cq1 = d1->CreateCq(4).value();
  QpOptions o;
  o.max_send_wr = 1;
  auto qp0 = d0->CreateQp(1, o, cq0.get()).value();
  auto qp1 = d1->CreateQp(0, o, cq1.get()).value();
  ASSERT_TRUE(qp0->Connect(qp1->LocalInfo()).ok());
  ASSERT_TRUE(qp1->Connect(qp0->LocalInfo()).ok());
  SendWr wr;
  wr.opcode = WrOpcode::kRdmaWrite;
  wr.sge.length = 8;  // lkey 0: modelled bytes
  ASSERT_TRUE(qp0->PostSend(wr).ok());
  const Status s = qp0->PostSend(wr);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("max_send_wr 1"), std::string::npos) << s.ToString();
}

// A port that goes down and up (a link fault on the host's link) surfaces
// as verbs' async events on that rank's device, in order, then no more.
TEST(EmulatedTest, PortEventsSurfaceAsVerbsAsyncEvents) {
  Pair w;
  auto d3 = w.fabric.OpenDevice(3).value();
  EXPECT_TRUE(d3->TakeAsyncEvents().empty());
  w.net.nic(3).SetPortState(false);
  w.net.nic(3).SetPortState(false);  // no change, no event
  w.net.nic(3).SetPortState(true);
  const std::vector<AsyncEvent> ev = d3->TakeAsyncEvents();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].type, "IBV_EVENT_PORT_ERR");
  EXPECT_EQ(ev[1].type, "IBV_EVENT_PORT_ACTIVE");
  EXPECT_EQ(ev[0].port, 1);
  EXPECT_NE(ev[0].detail.find("rank 3"), std::string::npos) << ev[0].detail;
  EXPECT_TRUE(d3->TakeAsyncEvents().empty());
  auto d4 = w.fabric.OpenDevice(4).value();
  EXPECT_TRUE(d4->TakeAsyncEvents().empty());
}

}  // namespace
}  // namespace fathom::transport::emulated
