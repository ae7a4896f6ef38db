// How `fathom perf` waits: the CPU's cycle counter, its conversion to time,
// and the Poller, which polls the CQ (or sleeps on the completion channel
// with -e) and turns a failed completion or a stall past the deadline into
// an error naming the QP. Header-only: the latency loops call these on every
// iteration, so they stay inlinable as they were in one file.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#include "tools/perf_session.h"

namespace fathom::tools::perf {

// The CPU's cycle counter (x86 TSC, arm64 CNTVCT; the monotonic clock in ns
// elsewhere): what the latency loops and the pollers stamp progress with.
// perftest reads it too (get_cycles). The monotonic clock is not always that
// cheap: where the kernel's clocksource has no vDSO path (a TCG guest whose
// TSC the clocksource watchdog marked unstable runs on hpet or acpi_pm),
// every clock_gettime is a system call and an emulated device read, which in
// qemu takes the lock the I/O thread holds while it delivers a packet.
inline uint64_t CycleCount() {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#elif defined(__aarch64__)
  uint64_t v;
  asm volatile("mrs %0, cntvct_el0" : "=r"(v));
  return v;
#else
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
#endif
}

// Converts cycle counts to time by reading the monotonic clock at both ends
// of a span: exact on average over the span, two clock reads in all.
class CycleSpan {
 public:
  explicit CycleSpan(transport::Clock& clock)
      : clock_(clock), wall0_(clock.Now()), cycles0_(CycleCount()) {}
  // Cycles per microsecond from the start until now (one clock read).
  double CyclesPerUs() {
    const double us = (clock_.Now() - wall0_).us();
    const double cycles = static_cast<double>(CycleCount() - cycles0_);
    return us > 0 && cycles > 0 ? cycles / us : 1;
  }

 private:
  transport::Clock& clock_;
  Picoseconds wall0_;
  uint64_t cycles0_;
};

// Polls the CQ once; on no progress for the stall deadline, fails naming the QP.
// Progress is stamped with the cycle counter and the clock is read only every
// `idle_check` empty polls (a power of two), so a latency loop that finds a
// completion on each pass makes no clock call at all.
// In event mode (-e) an empty poll sleeps on the completion channel instead
// of spinning (perftest's -e): the CQ is armed at creation and re-armed by
// HandleEvents() before the next poll, so no completion is missed.
class Poller {
 public:
  Poller(Session& s, double stall_s, uint64_t idle_check = 1024)
      : s_(s),
        stall_(Picoseconds::FromSeconds(stall_s)),
        span_(s.clock),
        idle_mask_(idle_check - 1),
        last_progress_(CycleCount()) {
    if (s_.events) events_cq_ = dynamic_cast<tv::VerbsCompletionQueue*>(s_.cq.get());
  }
  // Returns completions (0..16) or an error for a failed completion / stall.
  // A failed completion's error says how long after the last progress it
  // came: with a dead peer that is the QP's retry budget (timeout, retry_cnt).
  StatusOr<int> Poll(std::array<Completion, 16>& out) {
    const int n = s_.cq->Poll(out);
    if (n > 0) {
      for (int i = 0; i < n; ++i) {
        last_ = out[static_cast<size_t>(i)];
        const Status st = transport::CompletionStatus(last_);
        if (!st.ok()) {
          char buf[96];
          std::snprintf(buf, sizeof(buf), " (%.3f s after the last progress)",
                        SecondsSinceProgress());
          return Status(st.code(), st.message() + buf);
        }
      }
      last_progress_ = CycleCount();
      return n;
    }
    if (events_cq_ != nullptr) {
      // DEADLINE_EXCEEDED only says that no event came in this slice.
      const Status st = events_cq_->WaitForEvent(Picoseconds::FromSeconds(0.1));
      if (!st.ok() && st.code() != StatusCode::kDeadlineExceeded) return st;
      FATHOM_RETURN_IF_ERROR(CheckStall());
      return 0;
    }
    if ((++idle_ & idle_mask_) == 0) FATHOM_RETURN_IF_ERROR(CheckStall());
    return 0;
  }
  // Marks progress that came another way (write_lat's memory polling).
  void Progressed() { last_progress_ = CycleCount(); }
  Status CheckStall() {
    const double since = SecondsSinceProgress();
    if (since < stall_.seconds()) return Status::Ok();
    const QueuePair& qp = *s_.qps[0];
    char buf[200];
    std::snprintf(buf, sizeof(buf),
                  ": no progress for %.1f s (outstanding %d send WRs, %d recv WRs; QP state %s); "
                  "last completion: ",
                  since, qp.outstanding_sends(), qp.outstanding_recvs(),
                  std::string(QpStateName(qp.state())).c_str());
    return DeadlineExceeded("perf " + transport::DescribeQp(qp) + buf +
                            (last_.qp_num ? transport::DescribeCompletion(last_) : "none"));
  }

 private:
  double SecondsSinceProgress() {
    const double per_us = span_.CyclesPerUs();
    return static_cast<double>(CycleCount() - last_progress_) / per_us / 1e6;
  }

  Session& s_;
  Picoseconds stall_;
  CycleSpan span_;
  uint64_t idle_mask_;
  uint64_t last_progress_;  // cycle count
  Completion last_;
  uint64_t idle_ = 0;
  tv::VerbsCompletionQueue* events_cq_ = nullptr;  // event mode only
};

}  // namespace fathom::tools::perf
