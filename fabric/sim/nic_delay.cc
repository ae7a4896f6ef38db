// The NIC profile's host/NIC delays (nic_profile.h): WRs posted and
// completions generated wait in order in the NIC until their time comes.
// Only a profile with a delay uses this (Nic::timed_); `ideal` never does.
#include "fabric/sim/flow_fabric.h"
#include "fabric/sim/nic.h"

namespace fathom::sim {

void Nic::ScheduleDelayed(uint64_t which, int64_t at_ps) {
  // The NIC's own track (kNicPump's component is the host).
  engine_->Schedule<&Nic::OnDelayed>(Picoseconds(at_ps), EventKind::kNicPump,
                                     static_cast<uint32_t>(host_), this, which);
}

// which 0: posted WRs reaching the send queue; 1: completions reaching
// their CQ. Each queue has one event pending, for its head.
void Nic::OnDelayed(void* nic, uint64_t which) {
  Nic* self = static_cast<Nic*>(nic);
  const int64_t now = self->engine_->Now().ps();
  if (self->flow_mode_ && !self->flow_->Local(self->host_)) [[unlikely]] {
    // A replica's copy of another process's post (flow_fabric.h, Split):
    // that process counts the event.
    self->flow_->Uncount(now, EventKind::kNicPump, static_cast<uint32_t>(self->host_));
  }
  if (which == 0) {
    auto& q = self->delayed_posts_;
    while (!q.empty() && q.front().at_ps <= now) {
      const DelayedPost d = q.front();
      q.pop_front();
      Qp* qp = self->FindQp(d.qpn);
      if (self->crashed_ || qp == nullptr) continue;
      if (qp->state != QpState::kRts) {
        // The QP left RTS while the WR was on its way: flushed (IBTA 10.3.1).
        self->Complete(*qp, qp->send_cq, SendWc(d.wr, WcStatus::kWrFlushErr));
        continue;
      }
      self->EnqueueSend(*qp, d.wr);
    }
    if (!q.empty()) self->ScheduleDelayed(0, q.front().at_ps);
    return;
  }
  auto& q = self->delayed_completions_;
  while (!q.empty() && q.front().at_ps <= now) {
    const DelayedCompletion d = q.front();
    q.pop_front();
    if (self->crashed_) continue;
    // The QP's context now (the transport may have let go of the QP since).
    const Qp* qp = self->FindQp(d.c.qp_num);
    d.cq->Push(d.c, qp != nullptr ? qp->context : nullptr);
  }
  if (!q.empty()) self->ScheduleDelayed(1, q.front().at_ps);
}

}  // namespace fathom::sim
