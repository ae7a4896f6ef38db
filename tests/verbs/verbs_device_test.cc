// The verbs backend against a real device (rxe in the testbed VMs, or a NIC):
// two QPs of one device connected to each other, every operation, data
// verified at 1 B, 4 KiB - 1, 64 KiB and 4 MiB. Without a device the device
// tests skip, saying why; the no-device behaviour itself is tested here.
// FATHOM_VERBS_DEVICE=<name> picks a device.
#include "transport/verbs/verbs_device.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <numeric>

#include "transport/wait.h"

namespace fathom::transport::verbs {
namespace {

DeviceOptions Options() {
  DeviceOptions o;
  if (const char* name = std::getenv("FATHOM_VERBS_DEVICE")) o.name = name;
  o.rank = 0;
  return o;
}

TEST(NoDeviceTest, MissingDeviceIsNotFoundWithAClearMessage) {
  DeviceOptions o;
  o.name = "no_such_device_x";
  auto d = OpenDevice(o);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kNotFound);
  auto names = ListDeviceNames();
  ASSERT_TRUE(names.ok()) << names.status().ToString();
  if (names->empty()) {
    EXPECT_NE(d.status().message().find("no RDMA device"), std::string::npos);
  } else {
    EXPECT_NE(d.status().message().find("no_such_device_x"), std::string::npos);
  }
}

// Two QPs on one device, connected to each other, sharing one CQ each.
class LoopbackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dev = OpenDevice(Options());
    if (!dev.ok() && dev.status().code() == StatusCode::kNotFound) {
      GTEST_SKIP() << "no RDMA device here: " << dev.status().message();
    }
    ASSERT_TRUE(dev.ok()) << dev.status().ToString();
    device_ = std::move(*dev);
    a_buf_.assign(kBufSize, 0);
    b_buf_.assign(kBufSize, 0);
    auto mra = device_->RegisterMemory(a_buf_.data(), kBufSize, kAccessAll);
    auto mrb = device_->RegisterMemory(b_buf_.data(), kBufSize, kAccessAll);
    ASSERT_TRUE(mra.ok()) << mra.status().ToString();
    ASSERT_TRUE(mrb.ok()) << mrb.status().ToString();
    mr_a_ = std::move(*mra);
    mr_b_ = std::move(*mrb);
    auto cqa = device_->CreateCq(1024);
    auto cqb = device_->CreateCq(1024);
    ASSERT_TRUE(cqa.ok() && cqb.ok());
    cq_a_ = std::move(*cqa);
    cq_b_ = std::move(*cqb);
    QpOptions o;
    o.max_send_wr = 512;
    o.max_recv_wr = 512;
    o.timeout = 14;
    o.retry_cnt = 3;
    auto qa = device_->CreateQp(1, o, cq_a_.get());
    auto qb = device_->CreateQp(0, o, cq_b_.get());
    ASSERT_TRUE(qa.ok()) << qa.status().ToString();
    ASSERT_TRUE(qb.ok()) << qb.status().ToString();
    qp_a_ = std::move(*qa);
    qp_b_ = std::move(*qb);
    ASSERT_TRUE(qp_a_->Connect(qp_b_->LocalInfo()).ok());
    ASSERT_TRUE(qp_b_->Connect(qp_a_->LocalInfo()).ok());
    EXPECT_EQ(qp_a_->state(), QpState::kRts);
    EXPECT_EQ(qp_a_->path_mtu(), device_->info().active_mtu);
  }
  void TearDown() override {
    qp_a_.reset();
    qp_b_.reset();
    cq_a_.reset();
    cq_b_.reset();
    mr_a_.reset();
    mr_b_.reset();
    device_.reset();
  }

  void Fill(std::vector<uint8_t>& buf, size_t n, uint8_t seed) {
    for (size_t i = 0; i < n; ++i) buf[i] = static_cast<uint8_t>(seed + i * 7 + (i >> 8));
  }
  std::vector<Completion> Wait(CompletionQueue& cq, const QueuePair& qp, int n) {
    std::vector<Completion> out;
    Status s = WaitForCompletions(clock_, cq, qp, n, Picoseconds::FromSeconds(20), &out);
    EXPECT_TRUE(s.ok()) << s.ToString();
    for (const Completion& c : out) EXPECT_TRUE(CompletionStatus(c).ok()) << DescribeCompletion(c);
    return out;
  }

  static constexpr size_t kBufSize = 4u << 20;
  WallClock clock_;
  std::unique_ptr<Device> device_;
  std::vector<uint8_t> a_buf_, b_buf_;
  std::unique_ptr<MemoryRegion> mr_a_, mr_b_;
  std::unique_ptr<CompletionQueue> cq_a_, cq_b_;
  std::unique_ptr<QueuePair> qp_a_, qp_b_;
};

class LoopbackSizeTest : public LoopbackTest, public ::testing::WithParamInterface<uint32_t> {};

TEST_P(LoopbackSizeTest, SendRecvWriteWriteImmAndRead) {
  const uint32_t n = GetParam();
  Fill(a_buf_, n, 1);
  // SEND/RECV.
  ASSERT_TRUE(
      qp_b_->PostRecv({7, {reinterpret_cast<uint64_t>(b_buf_.data()), n, mr_b_->lkey()}}).ok());
  SendWr s;
  s.wr_id = 1;
  s.sge = {reinterpret_cast<uint64_t>(a_buf_.data()), n, mr_a_->lkey()};
  ASSERT_TRUE(qp_a_->PostSend(s).ok());
  Wait(*cq_a_, *qp_a_, 1);
  auto rc = Wait(*cq_b_, *qp_b_, 1);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].opcode, WcOpcode::kRecv);
  EXPECT_EQ(rc[0].byte_len, n);
  EXPECT_EQ(rc[0].peer_rank, 0);
  EXPECT_EQ(std::memcmp(a_buf_.data(), b_buf_.data(), n), 0);
  // RDMA WRITE.
  Fill(a_buf_, n, 2);
  s.opcode = WrOpcode::kRdmaWrite;
  s.remote_addr = reinterpret_cast<uint64_t>(b_buf_.data());
  s.rkey = mr_b_->rkey();
  ASSERT_TRUE(qp_a_->PostSend(s).ok());
  auto wc = Wait(*cq_a_, *qp_a_, 1);
  EXPECT_EQ(wc[0].opcode, WcOpcode::kRdmaWrite);
  EXPECT_EQ(std::memcmp(a_buf_.data(), b_buf_.data(), n), 0);
  // RDMA WRITE_WITH_IMM consumes a receive and carries the immediate.
  Fill(a_buf_, n, 3);
  ASSERT_TRUE(
      qp_b_->PostRecv({8, {reinterpret_cast<uint64_t>(b_buf_.data()), 0, mr_b_->lkey()}}).ok());
  s.opcode = WrOpcode::kRdmaWriteWithImm;
  s.imm_data = 0xdeadbeef;
  ASSERT_TRUE(qp_a_->PostSend(s).ok());
  Wait(*cq_a_, *qp_a_, 1);
  rc = Wait(*cq_b_, *qp_b_, 1);
  EXPECT_EQ(rc[0].opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_TRUE(rc[0].has_imm);
  EXPECT_EQ(rc[0].imm_data, 0xdeadbeefu);
  EXPECT_EQ(std::memcmp(a_buf_.data(), b_buf_.data(), n), 0);
  // RDMA READ back into a cleared buffer.
  std::fill(a_buf_.begin(), a_buf_.begin() + n, 0);
  s.opcode = WrOpcode::kRdmaRead;
  ASSERT_TRUE(qp_a_->PostSend(s).ok());
  wc = Wait(*cq_a_, *qp_a_, 1);
  EXPECT_EQ(wc[0].opcode, WcOpcode::kRdmaRead);
  EXPECT_EQ(std::memcmp(a_buf_.data(), b_buf_.data(), n), 0);
  EXPECT_EQ(qp_a_->outstanding_sends(), 0);
  EXPECT_EQ(qp_b_->outstanding_recvs(), 0);
}

INSTANTIATE_TEST_SUITE_P(Sizes, LoopbackSizeTest, ::testing::Values(1u, 4095u, 65536u, 4u << 20));

TEST_F(LoopbackTest, AtomicsFetchAddAndCompareSwap) {
  uint64_t* target = reinterpret_cast<uint64_t*>(b_buf_.data());
  uint64_t* result = reinterpret_cast<uint64_t*>(a_buf_.data());
  *target = 40;
  SendWr s;
  s.opcode = WrOpcode::kAtomicFetchAndAdd;
  s.sge = {reinterpret_cast<uint64_t>(result), 8, mr_a_->lkey()};
  s.remote_addr = reinterpret_cast<uint64_t>(target);
  s.rkey = mr_b_->rkey();
  s.compare_add = 2;
  ASSERT_TRUE(qp_a_->PostSend(s).ok());
  auto wc = Wait(*cq_a_, *qp_a_, 1);
  EXPECT_EQ(wc[0].opcode, WcOpcode::kFetchAdd);
  EXPECT_EQ(*result, 40u);
  EXPECT_EQ(*target, 42u);
  s.opcode = WrOpcode::kAtomicCmpAndSwp;
  s.compare_add = 42;
  s.swap = 7;
  ASSERT_TRUE(qp_a_->PostSend(s).ok());
  wc = Wait(*cq_a_, *qp_a_, 1);
  EXPECT_EQ(wc[0].opcode, WcOpcode::kCompSwap);
  EXPECT_EQ(*result, 42u);
  EXPECT_EQ(*target, 7u);
}

TEST_F(LoopbackTest, ManyOutstandingUnsignaledWritesRetireWithTheSignaledOne) {
  constexpr int kWrs = 400;
  constexpr uint32_t kLen = 4096;
  Fill(a_buf_, kWrs * kLen, 9);
  for (int i = 0; i < kWrs; ++i) {
    SendWr s;
    s.wr_id = static_cast<uint64_t>(i);
    s.opcode = WrOpcode::kRdmaWrite;
    s.signaled = (i % 100 == 99);
    const uint64_t off = static_cast<uint64_t>(i) * kLen;
    s.sge = {reinterpret_cast<uint64_t>(a_buf_.data()) + off, kLen, mr_a_->lkey()};
    s.remote_addr = reinterpret_cast<uint64_t>(b_buf_.data()) + off;
    s.rkey = mr_b_->rkey();
    ASSERT_TRUE(qp_a_->PostSend(s).ok());
  }
  EXPECT_EQ(qp_a_->outstanding_sends(), kWrs);
  Wait(*cq_a_, *qp_a_, kWrs / 100);
  EXPECT_EQ(qp_a_->outstanding_sends(), 0);
  EXPECT_EQ(std::memcmp(a_buf_.data(), b_buf_.data(), kWrs * kLen), 0);
}

// perftest's -l: lists of 16 chained writes, one ibv_post_send each, the
// last of each list signaled; every WR lands and retires in order.
TEST_F(LoopbackTest, PostSendListPostsChainedWritesThatAllLand) {
  constexpr int kLists = 8, kPerList = 16;
  constexpr uint32_t kLen = 8192;
  Fill(a_buf_, kLists * kPerList * kLen, 5);
  for (int l = 0; l < kLists; ++l) {
    std::vector<SendWr> list(kPerList);
    for (int k = 0; k < kPerList; ++k) {
      const uint64_t off = static_cast<uint64_t>(l * kPerList + k) * kLen;
      SendWr& s = list[static_cast<size_t>(k)];
      s.wr_id = static_cast<uint64_t>(l * kPerList + k);
      s.opcode = WrOpcode::kRdmaWrite;
      s.signaled = k == kPerList - 1;
      s.sge = {reinterpret_cast<uint64_t>(a_buf_.data()) + off, kLen, mr_a_->lkey()};
      s.remote_addr = reinterpret_cast<uint64_t>(b_buf_.data()) + off;
      s.rkey = mr_b_->rkey();
    }
    const Status st = qp_a_->PostSendList(list);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  EXPECT_EQ(qp_a_->outstanding_sends(), kLists * kPerList);
  const auto done = Wait(*cq_a_, *qp_a_, kLists);
  ASSERT_EQ(done.size(), static_cast<size_t>(kLists));
  EXPECT_EQ(done.back().wr_id, static_cast<uint64_t>(kLists * kPerList - 1));
  EXPECT_EQ(qp_a_->outstanding_sends(), 0);
  EXPECT_EQ(std::memcmp(a_buf_.data(), b_buf_.data(), kLists * kPerList * kLen), 0);
}

TEST_F(LoopbackTest, FullSendQueueIsUnavailableNamingTheDepth) {
  // A QP whose peer never leaves INIT: nothing is acknowledged, so every
  // posted WR stays outstanding until the queue is full (a loopback peer
  // would drain it as fast as we post).
  auto cq = device_->CreateCq(1024);
  ASSERT_TRUE(cq.ok());
  QpOptions o;
  o.max_send_wr = 64;
  auto sender = device_->CreateQp(1, o, cq->get());
  auto silent = device_->CreateQp(0, o, cq->get());
  ASSERT_TRUE(sender.ok() && silent.ok());
  ASSERT_TRUE((*sender)->Connect((*silent)->LocalInfo()).ok());
  Status last;
  int posted = 0;
  for (; posted < 4096 && last.ok(); ++posted) {
    SendWr s;
    s.signaled = false;
    s.opcode = WrOpcode::kRdmaWrite;
    s.sge = {reinterpret_cast<uint64_t>(a_buf_.data()), 64, mr_a_->lkey()};
    s.remote_addr = reinterpret_cast<uint64_t>(b_buf_.data());
    s.rkey = mr_b_->rkey();
    last = (*sender)->PostSend(s);
  }
  ASSERT_FALSE(last.ok()) << "posted " << posted << " WRs without filling the queue";
  EXPECT_EQ(last.code(), StatusCode::kUnavailable) << last.ToString();
  EXPECT_NE(last.message().find("ibv_post_send"), std::string::npos) << last.ToString();
  EXPECT_NE(last.message().find("max_send_wr=64"), std::string::npos) << last.ToString();
  EXPECT_GE((*sender)->outstanding_sends(), 64);
  sender->reset();
  silent->reset();
}

TEST_F(LoopbackTest, BadRkeyGivesRemoteAccessErrorNamingThePeer) {
  SendWr s;
  s.wr_id = 0x77;
  s.opcode = WrOpcode::kRdmaWrite;
  s.sge = {reinterpret_cast<uint64_t>(a_buf_.data()), 64, mr_a_->lkey()};
  s.remote_addr = reinterpret_cast<uint64_t>(b_buf_.data());
  s.rkey = mr_b_->rkey() ^ 0x5a5a00;
  ASSERT_TRUE(qp_a_->PostSend(s).ok());
  std::vector<Completion> out;
  ASSERT_TRUE(
      WaitForCompletions(clock_, *cq_a_, *qp_a_, 1, Picoseconds::FromSeconds(20), &out).ok());
  EXPECT_EQ(out[0].status, WcStatus::kRemAccessErr);
  EXPECT_EQ(out[0].opcode, WcOpcode::kRdmaWrite);  // filled in from the posted WR
  EXPECT_EQ(out[0].peer_rank, 1);
  EXPECT_EQ(qp_a_->state(), QpState::kErr);
  EXPECT_NE(DescribeCompletion(out[0]).find("IBV_WC_REM_ACCESS_ERR"), std::string::npos);
}

// Event mode (a completion channel): a receive completes while the receiver
// sleeps in WaitForEvent(), which returns with the event acknowledged and the
// CQ re-armed, so a second message wakes it again. With nothing pending the
// wait ends with DEADLINE_EXCEEDED after its timeout instead of blocking.
TEST(EventModeTest, CompletionChannelWakesTheWaiterForEachMessage) {
  DeviceOptions o = Options();
  o.cq_mode = CqMode::kEvents;
  auto dev = OpenDevice(o);
  if (!dev.ok() && dev.status().code() == StatusCode::kNotFound) {
    GTEST_SKIP() << "no RDMA device here: " << dev.status().message();
  }
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  Device& d = **dev;
  std::vector<uint8_t> a(4096, 0x5a), b(4096, 0);
  auto mra = d.RegisterMemory(a.data(), a.size(), kAccessAll);
  auto mrb = d.RegisterMemory(b.data(), b.size(), kAccessAll);
  ASSERT_TRUE(mra.ok() && mrb.ok());
  auto cqa = d.CreateCq(64);
  auto cqb = d.CreateCq(64);
  ASSERT_TRUE(cqa.ok() && cqb.ok());
  auto* events_b = dynamic_cast<VerbsCompletionQueue*>(cqb->get());
  ASSERT_NE(events_b, nullptr);
  EXPECT_GE(events_b->event_fd(), 0);
  QpOptions qo;
  qo.timeout = 14;
  qo.retry_cnt = 3;
  auto qa = d.CreateQp(1, qo, cqa->get());
  auto qb = d.CreateQp(0, qo, cqb->get());
  ASSERT_TRUE(qa.ok() && qb.ok());
  ASSERT_TRUE((*qa)->Connect((*qb)->LocalInfo()).ok());
  ASSERT_TRUE((*qb)->Connect((*qa)->LocalInfo()).ok());

  const Status idle = events_b->WaitForEvent(Picoseconds::FromSeconds(0.2));
  EXPECT_EQ(idle.code(), StatusCode::kDeadlineExceeded) << idle.ToString();
  for (int msg = 0; msg < 2; ++msg) {
    ASSERT_TRUE(
        (*qb)
            ->PostRecv({10u + msg, {reinterpret_cast<uint64_t>(b.data()), 4096, (*mrb)->lkey()}})
            .ok());
    SendWr s;
    s.wr_id = 20u + msg;
    s.sge = {reinterpret_cast<uint64_t>(a.data()), 4096, (*mra)->lkey()};
    ASSERT_TRUE((*qa)->PostSend(s).ok());
    std::array<Completion, 4> got;
    int n = (*cqb)->Poll(got);
    for (int waits = 0; n == 0 && waits < 50; ++waits) {
      const Status w = events_b->WaitForEvent(Picoseconds::FromSeconds(0.2));
      ASSERT_TRUE(w.ok() || w.code() == StatusCode::kDeadlineExceeded) << w.ToString();
      n = (*cqb)->Poll(got);
    }
    ASSERT_EQ(n, 1) << "message " << msg << ": no receive completion within 10 s";
    EXPECT_TRUE(CompletionStatus(got[0]).ok()) << DescribeCompletion(got[0]);
    EXPECT_EQ(got[0].wr_id, 10u + msg);
    EXPECT_EQ(got[0].byte_len, 4096u);
    // The completion may have been there before the first wait: its event is
    // then still queued on the channel, and HandleEvents() drains it.
    ASSERT_TRUE(events_b->HandleEvents().ok());
    EXPECT_EQ(events_b->events(), static_cast<uint64_t>(msg + 1))
        << "each message is one event on an armed CQ";
    std::vector<Completion> sent;
    WallClock clock;
    ASSERT_TRUE(
        WaitForCompletions(clock, **cqa, **qa, 1, Picoseconds::FromSeconds(20), &sent).ok());
  }
  EXPECT_EQ(b, a);
  qa->reset();
  qb->reset();
}

TEST(DeviceInfoTest, ReportsPortAndGidFacts) {
  auto dev = OpenDevice(Options());
  if (!dev.ok() && dev.status().code() == StatusCode::kNotFound) {
    GTEST_SKIP() << "no RDMA device here: " << dev.status().message();
  }
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  const DeviceInfo& i = (*dev)->info();
  EXPECT_FALSE(i.name.empty());
  EXPECT_GT(i.active_mtu, 0);
  EXPECT_GE(i.gid_index, 0);
  if (i.link_layer == "Ethernet") {
    EXPECT_EQ(i.gid_type, "RoCE v2");
    EXPECT_GT(i.netdev_mtu, 0);
  }
  // Draining never blocks; a freshly opened device has no fatal event.
  for (const AsyncEvent& e : (*dev)->TakeAsyncEvents()) {
    EXPECT_NE(e.type, "IBV_EVENT_DEVICE_FATAL") << e.detail;
  }
}

}  // namespace
}  // namespace fathom::transport::verbs
