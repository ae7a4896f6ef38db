// Verbs-level faults (transport/faulty) on every backend (backends.h: the
// emulated NIC always, verbs where a device exists, else skipped): each
// fault does what it says at the transport API — a failed post returns the
// status a real failed post returns, a delayed completion arrives no sooner
// than its delay, a swallowed error never reaches the caller (CASES.md 20)
// and leaves its WRs outstanding, a QP moved to ERR flushes, an async event
// is raised. Also the --verbs-fault grammar and its errors.
#include "transport/faulty/faulty.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "tests/transport/backends.h"
#include "transport/wait.h"

namespace fathom::transport::faulty {
namespace {

using testing::Backend;
using testing::OpenBackend;

constexpr size_t kBufSize = 64 * 1024;

QpOptions Options() {
  QpOptions o;
  o.max_send_wr = 64;
  o.max_recv_wr = 64;
  o.retry_cnt = 3;
  o.min_rnr_timer = 1;
  return o;
}

class FaultyTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto b = OpenBackend(GetParam());
    if (!b.ok() && b.status().code() == StatusCode::kNotFound) {
      GTEST_SKIP() << GetParam() << " backend unavailable here: " << b.status().message();
    }
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    backend_ = std::move(*b);
  }
  void TearDown() override {
    for (int r = 0; r < 2; ++r) qp_[r].reset();
    for (int r = 0; r < 2; ++r) {
      cq_[r].reset();
      mr_[r].reset();
    }
    dev_[0].reset();
    dev_[1].reset();
    injector_.reset();
    backend_.reset();
  }

  // Wraps both ranks' devices with `plan` (the flag's grammar) and connects
  // rank 0's QP 0 to rank 1's.
  void Start(const std::string& plan) {
    auto faults = ParseVerbsFaults(plan);
    ASSERT_TRUE(faults.ok()) << faults.status().ToString();
    FaultEnv env;
    env.clock = &backend_->clock();
    env.origin = backend_->clock().Now();
    injector_ = std::make_unique<FaultInjector>(std::move(*faults), env);
    for (int r = 0; r < 2; ++r) {
      // The injector wraps a borrowed device: hand it one that forwards.
      dev_[r] = injector_->Wrap(std::make_unique<Borrowed>(&backend_->device(r)), r);
      buf_[r].assign(kBufSize, 0);
      auto mr = dev_[r]->RegisterMemory(buf_[r].data(), kBufSize, kAccessAll);
      ASSERT_TRUE(mr.ok()) << mr.status().ToString();
      mr_[r] = std::move(*mr);
      auto cq = dev_[r]->CreateCq(256);
      ASSERT_TRUE(cq.ok()) << cq.status().ToString();
      cq_[r] = std::move(*cq);
    }
    auto a = dev_[0]->CreateQp(1, Options(), cq_[0].get());
    auto b = dev_[1]->CreateQp(0, Options(), cq_[1].get());
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    qp_[0] = std::move(*a);
    qp_[1] = std::move(*b);
    ASSERT_TRUE(qp_[0]->Connect(qp_[1]->LocalInfo()).ok());
    ASSERT_TRUE(qp_[1]->Connect(qp_[0]->LocalInfo()).ok());
  }

  SendWr Write(uint64_t wr_id, uint32_t len) {
    SendWr w;
    w.wr_id = wr_id;
    w.opcode = WrOpcode::kRdmaWrite;
    w.sge = {reinterpret_cast<uint64_t>(buf_[0].data()), len, mr_[0]->lkey()};
    w.remote_addr = reinterpret_cast<uint64_t>(buf_[1].data());
    w.rkey = mr_[1]->rkey();
    return w;
  }
  RecvWr Recv(int r, uint64_t wr_id) {
    return {wr_id, {reinterpret_cast<uint64_t>(buf_[r].data()), 4096, mr_[r]->lkey()}};
  }
  std::vector<Completion> Wait(int r, int n) {
    std::vector<Completion> out;
    const Status s =
        WaitForCompletions(backend_->clock(), *cq_[r], *qp_[r], n, backend_->wait_budget(), &out);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return out;
  }
  // Lets time pass, collecting whatever completes on rank r.
  std::vector<Completion> Quiet(int r, Picoseconds d) {
    std::vector<Completion> out;
    Clock& c = backend_->clock();
    const Picoseconds end = c.Now() + d;
    std::array<Completion, 16> buf;
    while (c.Now() < end) {
      c.Progress(end);
      const int n = cq_[r]->Poll(buf);
      out.insert(out.end(), buf.begin(), buf.begin() + n);
    }
    for (int n; (n = cq_[r]->Poll(buf)) > 0;) out.insert(out.end(), buf.begin(), buf.begin() + n);
    return out;
  }

  // Forwards to the backend's device, which the fixture keeps owning.
  class Borrowed final : public Device {
   public:
    explicit Borrowed(Device* d) : d_(d) {}
    const DeviceInfo& info() const override { return d_->info(); }
    StatusOr<std::unique_ptr<MemoryRegion>> RegisterMemory(void* a, uint64_t l,
                                                           uint32_t f) override {
      return d_->RegisterMemory(a, l, f);
    }
    StatusOr<std::unique_ptr<CompletionQueue>> CreateCq(int depth) override {
      return d_->CreateCq(depth);
    }
    StatusOr<std::unique_ptr<QueuePair>> CreateQp(int peer, const QpOptions& o,
                                                  CompletionQueue* cq) override {
      return d_->CreateQp(peer, o, cq);
    }
    std::vector<AsyncEvent> TakeAsyncEvents() override { return d_->TakeAsyncEvents(); }

   private:
    Device* d_;
  };

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<FaultInjector> injector_;
  std::unique_ptr<Device> dev_[2];
  std::vector<uint8_t> buf_[2];
  std::unique_ptr<MemoryRegion> mr_[2];
  std::unique_ptr<CompletionQueue> cq_[2];
  std::unique_ptr<QueuePair> qp_[2];
};

// The 2nd post fails as a full send queue does on verbs (ENOMEM ->
// UNAVAILABLE, the call, the QP and strerror); the 1st and 3rd go through.
TEST_P(FaultyTest, FailPostReturnsTheVerbsStatus) {
  Start("fail_post:rank=0,qp=0,after=1");
  ASSERT_TRUE(qp_[0]->PostSend(Write(1, 64)).ok());
  const Status s = qp_[0]->PostSend(Write(2, 64));
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_EQ(s.message(), "ibv_post_send qpn=" + Hex(qp_[0]->qp_num()) +
                             " peer_rank=1 wr_id=0x2 outstanding=1 (injected: "
                             "fail_post:rank=0,qp=0,after=1,count=1,error=ENOMEM): " +
                             std::strerror(ENOMEM));
  EXPECT_EQ(qp_[0]->outstanding_sends(), 1);  // the failed WR was not posted
  ASSERT_TRUE(qp_[0]->PostSend(Write(3, 64)).ok());
  const auto c = Wait(0, 2);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].wr_id, 1u);
  EXPECT_EQ(c[1].wr_id, 3u);
  EXPECT_EQ(injector_->stats()[0].acted, 1u);
  EXPECT_EQ(injector_->stats()[0].seen, 3u);
}

TEST_P(FaultyTest, FailPostOnTheReceiveQueueWithEinval) {
  Start("fail_post:rank=1,queue=recv,error=EINVAL");
  const Status s = qp_[1]->PostRecv(Recv(1, 7));
  EXPECT_EQ(s.code(), StatusCode::kIoError) << s.ToString();
  EXPECT_NE(s.message().find("ibv_post_recv qpn=" + Hex(qp_[1]->qp_num())), std::string::npos);
  EXPECT_NE(s.message().find(std::strerror(EINVAL)), std::string::npos);
  EXPECT_EQ(qp_[1]->outstanding_recvs(), 0);
  EXPECT_TRUE(qp_[1]->PostRecv(Recv(1, 8)).ok());
  EXPECT_EQ(qp_[1]->outstanding_recvs(), 1);
}

// A delayed completion reaches the caller no sooner than its delay after
// the post (it cannot have completed before it was posted). The wrapper here
// has no wake-up (FaultEnv::wake_at), so time is let pass as a polling
// driver does; the sim world's wake-ups are coll_verbs_fault_test's.
TEST_P(FaultyTest, DelayedCompletionsArriveAfterTheDelay) {
  const Picoseconds quiet = backend_->quiet_period();
  const Picoseconds delay = quiet * 4;
  Start("delay_completions:rank=0,qp=0,delay=" + std::to_string(delay.ps() / 1000000) + "us");
  const Picoseconds posted = backend_->clock().Now();
  ASSERT_TRUE(qp_[0]->PostSend(Write(1, 64)).ok());
  // Nothing until `delay` after the post.
  EXPECT_TRUE(Quiet(0, posted + delay - quiet - backend_->clock().Now()).empty());
  EXPECT_EQ(qp_[0]->outstanding_sends(), 1);
  std::vector<Completion> c;
  while (c.empty() && backend_->clock().Now() - posted < backend_->wait_budget()) {
    c = Quiet(0, quiet);
  }
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  EXPECT_GE(backend_->clock().Now() - posted, delay);
  EXPECT_EQ(qp_[0]->outstanding_sends(), 0);
  EXPECT_EQ(injector_->stats()[0].acted, 1u);
}

// qp_error after 2 posted receives: both flush with IBV_WC_WR_FLUSH_ERR.
TEST_P(FaultyTest, QpErrorFlushesOutstandingWrs) {
  Start("qp_error:rank=1,qp=0,after=2");
  ASSERT_TRUE(qp_[1]->PostRecv(Recv(1, 1)).ok());
  EXPECT_EQ(qp_[1]->state(), QpState::kRts);
  ASSERT_TRUE(qp_[1]->PostRecv(Recv(1, 2)).ok());
  EXPECT_EQ(qp_[1]->state(), QpState::kErr);
  const auto c = Wait(1, 2);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(c[1].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(qp_[1]->outstanding_recvs(), 0);
}

// The same flush with its errors swallowed: nothing reaches the caller, the
// receives stay outstanding as far as it can tell (CASES.md 20).
TEST_P(FaultyTest, SwallowedErrorsNeverSurface) {
  Start("qp_error:rank=1,qp=0,after=2;swallow_error:rank=1,qp=0");
  ASSERT_TRUE(qp_[1]->PostRecv(Recv(1, 1)).ok());
  ASSERT_TRUE(qp_[1]->PostRecv(Recv(1, 2)).ok());
  EXPECT_EQ(qp_[1]->state(), QpState::kErr);
  EXPECT_TRUE(Quiet(1, backend_->quiet_period()).empty());
  EXPECT_EQ(qp_[1]->outstanding_recvs(), 2);
  EXPECT_EQ(injector_->stats()[1].acted, 2u);
  EXPECT_NE(injector_->Report().find("swallowed IBV_WC_WR_FLUSH_ERR of rank 1 qpn " +
                                     Hex(qp_[1]->qp_num())),
            std::string::npos)
      << injector_->Report();
}

// Successful completions pass a swallow_error fault untouched.
TEST_P(FaultyTest, SwallowLeavesSuccessAlone) {
  Start("swallow_error:rank=0");
  ASSERT_TRUE(qp_[0]->PostSend(Write(1, 64)).ok());
  const auto c = Wait(0, 1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  EXPECT_EQ(injector_->stats()[0].acted, 0u);
}

// IBV_EVENT_QP_FATAL: the event names the QP, and the QP is in ERR (man
// ibv_get_async_event); a port event is the device's.
TEST_P(FaultyTest, AsyncEventsAreRaised) {
  Start("async_event:rank=0,qp=0,after=1;async_event:rank=1,event=PORT_ERR");
  ASSERT_TRUE(qp_[0]->PostRecv(Recv(0, 1)).ok());
  EXPECT_EQ(qp_[0]->state(), QpState::kErr);
  const auto e0 = dev_[0]->TakeAsyncEvents();
  ASSERT_EQ(e0.size(), 1u);
  EXPECT_EQ(e0[0].type, "IBV_EVENT_QP_FATAL");
  EXPECT_EQ(e0[0].qp_num, qp_[0]->qp_num());
  const auto e1 = dev_[1]->TakeAsyncEvents();
  ASSERT_EQ(e1.size(), 1u);
  EXPECT_EQ(e1[0].type, "IBV_EVENT_PORT_ERR");
  EXPECT_TRUE(dev_[0]->TakeAsyncEvents().empty());  // raised once
  EXPECT_EQ(Wait(0, 1)[0].status, WcStatus::kWrFlushErr);
}

INSTANTIATE_TEST_SUITE_P(Backends, FaultyTest, ::testing::Values("emulated", "verbs"),
                         [](const auto& info) { return info.param; });

TEST(VerbsFaultPlanTest, ParsesTheGrammar) {
  auto p = ParseVerbsFaults(
      "swallow_error:rank=3,qp=0,after=10;delay_completions:rank=1,peer=2,at=5ms,delay=250us");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->size(), 2u);
  EXPECT_EQ((*p)[0].kind, FaultKind::kSwallowError);
  EXPECT_EQ((*p)[0].rank, 3);
  EXPECT_EQ((*p)[0].qp, 0);
  EXPECT_EQ((*p)[0].after, 10u);
  EXPECT_EQ((*p)[1].peer, 2);
  EXPECT_EQ((*p)[1].at, Picoseconds::FromMilliseconds(5));
  EXPECT_EQ((*p)[1].delay, Picoseconds::FromMicroseconds(250));
  EXPECT_EQ(Describe((*p)[1]), "delay_completions:rank=1,peer=2,at=5ms,delay=250us");
  auto q = ParseVerbsFaults("fail_post:rank=0,qpn=0x11,error=eagain,queue=recv");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ((*q)[0].qpn, 0x11u);
  EXPECT_EQ((*q)[0].error, EAGAIN);
  EXPECT_TRUE((*q)[0].recv_queue);
  EXPECT_EQ((*q)[0].count, 1u);
}

TEST(VerbsFaultPlanTest, BadInputNamesTheFlagAndTheToken) {
  const std::pair<const char*, const char*> cases[] = {
      {"swallow:rank=1", "--verbs-fault: 'swallow': unknown fault"},
      {"swallow_error", "--verbs-fault: 'swallow_error': rank=N is required"},
      {"swallow_error:qp=0", "rank=N is required"},
      {"swallow_error:rank=x", "--verbs-fault: 'rank=x': "},
      {"swallow_error:rank=1,after=-3", "'after=-3': a count"},
      {"delay_completions:rank=1,delay=5", "'delay=5': a time is a number >= 0 with its unit"},
      {"delay_completions:rank=1", "needs delay=T > 0"},
      {"swallow_error:rank=1,delay=5us", "'delay=5us': only delay_completions"},
      {"fail_post:rank=1,error=EBUSY", "'error=EBUSY': one of ENOMEM"},
      {"async_event:rank=1,event=LINK_DOWN", "'event=LINK_DOWN': one of QP_FATAL"},
      {"qp_error:rank=1,colour=red", "'colour=red': unknown key"},
      {"qp_error:rank=1,qp", "'qp': expected key=value"},
      {"qp_error:rank=1,qp=0,peer=1", "give one of qp, qpn and peer"},
      {"", "no fault given"},
  };
  for (const auto& [text, want] : cases) {
    auto p = ParseVerbsFaults(text);
    ASSERT_FALSE(p.ok()) << text;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(p.status().message().find(want), std::string::npos)
        << text << " -> " << p.status().message();
  }
}

}  // namespace
}  // namespace fathom::transport::faulty
