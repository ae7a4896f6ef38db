#include "transport/wait.h"

#include <array>
#include <chrono>
#include <cstdio>

namespace fathom::transport {

std::string DescribeQp(const QueuePair& qp) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "rank %d qpn 0x%x", qp.peer_rank(), qp.qp_num());
  return buf;
}

std::string DescribeCompletion(const Completion& c) {
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "completion %s (%d: %s) opcode %s len %u wr_id 0x%llx vendor_err 0x%x on rank %d "
                "qpn 0x%x",
                std::string(WcStatusName(c.status)).c_str(), static_cast<int>(c.status),
                std::string(WcStatusString(c.status)).c_str(),
                std::string(WcOpcodeName(c.opcode)).c_str(), c.byte_len,
                static_cast<unsigned long long>(c.wr_id), c.vendor_err, c.peer_rank, c.qp_num);
  return buf;
}

Status CompletionStatus(const Completion& c) {
  if (c.status == WcStatus::kSuccess) return Status::Ok();
  return Aborted(DescribeCompletion(c));
}

Status WaitForCompletions(Clock& clock, CompletionQueue& cq, const QueuePair& qp, int count,
                          Picoseconds timeout, std::vector<Completion>* out, Completion* last) {
  const Picoseconds start = clock.Now();
  const Picoseconds deadline = start + timeout;
  Completion local_last;
  bool seen = last != nullptr && last->qp_num != 0;
  if (seen) local_last = *last;
  int got = 0;
  std::array<Completion, 16> batch;
  while (got < count) {
    const int n = cq.Poll(std::span<Completion>(batch.data(), batch.size()));
    for (int i = 0; i < n; ++i) {
      out->push_back(batch[static_cast<size_t>(i)]);
      local_last = batch[static_cast<size_t>(i)];
      seen = true;
    }
    got += n;
    if (last != nullptr && seen) *last = local_last;
    if (got >= count) break;
    if (n > 0) continue;
    const Picoseconds now = clock.Now();
    bool can_progress = true;
    if (now < deadline) can_progress = clock.Progress(deadline);
    if (clock.Now() >= deadline || !can_progress) {
      char buf[320];
      std::snprintf(buf, sizeof(buf),
                    ": no completion for %.3f s%s (waiting for %d of %d; outstanding %d send WRs, "
                    "%d recv WRs; QP state %s); last completion: ",
                    (clock.Now() - start).seconds(),
                    can_progress ? "" : " and nothing left that could complete", count - got, count,
                    qp.outstanding_sends(), qp.outstanding_recvs(),
                    std::string(QpStateName(qp.state())).c_str());
      return DeadlineExceeded("WaitForCompletions " + DescribeQp(qp) + buf +
                              (seen ? DescribeCompletion(local_last) : std::string("none")));
    }
  }
  return Status::Ok();
}

WallClock::WallClock()
    : origin_ns_(std::chrono::duration_cast<std::chrono::nanoseconds>(
                     std::chrono::steady_clock::now().time_since_epoch())
                     .count()) {}

Picoseconds WallClock::Now() {
  const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::steady_clock::now().time_since_epoch())
                         .count();
  return Picoseconds::FromNanoseconds(ns - origin_ns_);
}

// The NIC progresses by itself; the caller spins on Poll().
bool WallClock::Progress(Picoseconds /*until*/) { return true; }

}  // namespace fathom::transport
