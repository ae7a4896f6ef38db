// Tests of the backend-independent wait helpers against a scripted world: a
// virtual clock whose Progress() delivers completions at given times.
#include "transport/wait.h"

#include <gtest/gtest.h>

#include <deque>

namespace fathom::transport {
namespace {

class ScriptedCq final : public CompletionQueue {
 public:
  int Poll(std::span<Completion> out) override {
    int n = 0;
    while (!ready_.empty() && static_cast<size_t>(n) < out.size()) {
      out[static_cast<size_t>(n++)] = ready_.front();
      ready_.pop_front();
    }
    return n;
  }
  void SetNotify(std::function<void()>) override {}
  std::deque<Completion> ready_;
};

// Completions scheduled at virtual times; Progress() advances to the next one.
class ScriptedClock final : public Clock {
 public:
  explicit ScriptedClock(ScriptedCq* cq) : cq_(cq) {}
  Picoseconds Now() override { return now_; }
  bool Progress(Picoseconds until) override {
    if (script_.empty()) {
      return false;
    }
    if (script_.front().first > until) {
      now_ = until;
      return true;
    }
    now_ = script_.front().first;
    cq_->ready_.push_back(script_.front().second);
    script_.pop_front();
    return true;
  }
  std::deque<std::pair<Picoseconds, Completion>> script_;

 private:
  ScriptedCq* cq_;
  Picoseconds now_{0};
};

class FixedQp final : public QueuePair {
 public:
  uint32_t qp_num() const override { return 0x2a; }
  int peer_rank() const override { return 17; }
  QpState state() const override { return QpState::kRts; }
  EndpointInfo LocalInfo() const override { return {}; }
  Status Connect(const EndpointInfo&) override { return Status::Ok(); }
  int path_mtu() const override { return 4096; }
  Status PostSend(const SendWr&) override { return Status::Ok(); }
  Status PostRecv(const RecvWr&) override { return Status::Ok(); }
  int outstanding_sends() const override { return 4; }
  int outstanding_recvs() const override { return 1; }
};

Completion Comp(uint64_t id, WcStatus s) {
  Completion c;
  c.wr_id = id;
  c.status = s;
  c.qp_num = 0x2a;
  c.peer_rank = 17;
  return c;
}

TEST(WaitTest, CollectsCompletionsBeforeDeadline) {
  ScriptedCq cq;
  ScriptedClock clock(&cq);
  FixedQp qp;
  clock.script_.push_back({Picoseconds::FromMicroseconds(5), Comp(1, WcStatus::kSuccess)});
  clock.script_.push_back({Picoseconds::FromMicroseconds(9), Comp(2, WcStatus::kSuccess)});
  std::vector<Completion> out;
  ASSERT_TRUE(WaitForCompletions(clock, cq, qp, 2, Picoseconds::FromMicroseconds(10), &out).ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].wr_id, 2u);
  EXPECT_EQ(clock.Now(), Picoseconds::FromMicroseconds(9));
}

TEST(WaitTest, DeadlineErrorNamesPeerQpOutstandingAndLastCompletion) {
  ScriptedCq cq;
  ScriptedClock clock(&cq);
  FixedQp qp;
  clock.script_.push_back({Picoseconds::FromMicroseconds(1), Comp(7, WcStatus::kSuccess)});
  clock.script_.push_back({Picoseconds::FromSeconds(60), Comp(8, WcStatus::kSuccess)});
  std::vector<Completion> out;
  Status s = WaitForCompletions(clock, cq, qp, 2, Picoseconds::FromSeconds(30), &out);
  ASSERT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(out.size(), 1u);
  const std::string& m = s.message();
  EXPECT_NE(m.find("rank 17 qpn 0x2a"), std::string::npos) << m;
  EXPECT_NE(m.find("no completion for 30.000 s"), std::string::npos) << m;
  EXPECT_NE(m.find("outstanding 4 send WRs, 1 recv WRs"), std::string::npos) << m;
  EXPECT_NE(m.find("last completion: completion IBV_WC_SUCCESS"), std::string::npos) << m;
  EXPECT_NE(m.find("wr_id 0x7"), std::string::npos) << m;
}

TEST(WaitTest, EmptyWorldIsAHangReportedAtOnce) {
  ScriptedCq cq;
  ScriptedClock clock(&cq);
  FixedQp qp;
  std::vector<Completion> out;
  Status s = WaitForCompletions(clock, cq, qp, 1, Picoseconds::FromSeconds(30), &out);
  ASSERT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(s.message().find("nothing left that could complete"), std::string::npos);
  EXPECT_NE(s.message().find("last completion: none"), std::string::npos);
  EXPECT_EQ(clock.Now(), Picoseconds(0));
}

TEST(WaitTest, ErrorCompletionIsReturnedAndDescribedLikeNccl) {
  Completion c = Comp(3, WcStatus::kRetryExcErr);
  c.vendor_err = 0x81;
  Status s = CompletionStatus(c);
  ASSERT_EQ(s.code(), StatusCode::kAborted);
  EXPECT_NE(s.message().find("IBV_WC_RETRY_EXC_ERR (12: transport retry counter exceeded)"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("vendor_err 0x81"), std::string::npos);
  EXPECT_TRUE(CompletionStatus(Comp(1, WcStatus::kSuccess)).ok());
}

}  // namespace
}  // namespace fathom::transport
