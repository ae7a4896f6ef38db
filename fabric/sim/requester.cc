// The RC requester: segmentation, PSNs, ACK/NAK processing, go-back-N, the
// local ACK timer with retry_cnt, RNR waits with rnr_retry, READ and atomic
// responses (IBTA vol. 1 9.7.4 "requester side", rxe_req.c / rxe_comp.c).
#include <cassert>

#include "fabric/sim/nic.h"
#include "fabric/wire/psn.h"

namespace fathom::sim {
namespace {

using wire::PsnAdd;
using wire::PsnDiff;

bool IsReadOrAtomic(WrOpcode op) {
  return op == WrOpcode::kRdmaRead || op == WrOpcode::kAtomicCmpAndSwp ||
         op == WrOpcode::kAtomicFetchAndAdd;
}

}  // namespace

uint32_t Nic::SendPsn(const Qp& qp) const {
  if (qp.send_idx >= qp.sq.size()) return qp.next_psn;
  return PsnAdd(qp.sq[qp.send_idx].first_psn, qp.send_pkt);
}

bool Nic::RequesterHasWork(const Qp& qp) const {
  if (qp.state != QpState::kRts || qp.rnr_until_ps != 0 || qp.send_idx >= qp.sq.size()) {
    return false;
  }
  const SendWqe& w = qp.sq[qp.send_idx];
  // A WR with a bad local key fails when it reaches the head, in order.
  if (w.local_error) return qp.send_idx == 0;
  if (IsReadOrAtomic(w.wr.opcode) && qp.outstanding_rd >= qp.attr.max_rd_atomic) return false;
  return true;
}

void Nic::RestartAckTimer(Qp& qp) {
  if (qp.attr.timeout == 0) {
    qp.ack_deadline_ps = 0;  // timeout 0: no local ACK timer (IBTA 9.7.6.1.3)
    return;
  }
  const int64_t interval =
      retrans_profile_ ? ProfileTimeoutPs(qp) : LocalAckTimeoutPs(qp.attr.timeout);
  qp.ack_deadline_ps = engine_->Now().ps() + interval;
  ArmTimer(qp, qp.ack_deadline_ps);
}

int64_t Nic::ProfileTimeoutPs(const Qp& qp) const {
  return qp.adp_step < qp.adp_steps ? AdaptiveGapPs(profile_, qp.adp_step) : qp.regular_timeout_ps;
}

// ConnectX (CASES.md 21): a retransmission on the firmware's adaptive
// schedule, before the QP's own timer; the whole schedule uses one unit of
// retry_cnt.
void Nic::AdaptiveRetransmit(Qp& qp) {
  ++qp.adp_step;
  ++qp.counters.roce_adp_retrans;
  if (qp.adp_step == qp.adp_steps) --qp.retries_left;
  GoBackN(qp, qp.acked_psn);  // re-arms: the next gap, or the regular interval
}

// ConnectX's regular timeout (CASES.md 21: retry_cnt - 1 of them after the
// adaptive ones): each uses a unit of retry_cnt, and the one that uses the
// last reports IBV_WC_RETRY_EXC_ERR.
void Nic::ProfileTimeout(Qp& qp) {
  const bool infinite = (qp.attr.rxe_infinite_retry || infinite_retry7_) && qp.attr.retry_cnt == 7;
  if (!infinite && --qp.retries_left <= 0) {
    ++qp.counters.retry_exceeded_err;
    FailFront(qp, WcStatus::kRetryExcErr);
    return;
  }
  GoBackN(qp, qp.acked_psn);
}

Packet* Nic::RequesterNext(Qp& qp) {
  qp.full_size_left = 0;  // known again below, when they are
  SendWqe& w = qp.sq[qp.send_idx];
  if (w.local_error) {
    FailFront(qp, WcStatus::kLocProtErr);
    return nullptr;
  }
  const uint32_t mtu = static_cast<uint32_t>(qp.attr.path_mtu_bytes);
  const uint32_t psn = PsnAdd(w.first_psn, qp.send_pkt);
  const SendWr& wr = w.wr;
  Packet* p = nullptr;
  uint32_t psn_end = PsnAdd(psn, 1);
  if (wr.opcode == WrOpcode::kRdmaRead) {
    // One request for the rest of the READ from this PSN on (a retried READ
    // asks only for the responses still missing).
    const uint32_t offset = qp.send_pkt * mtu;
    p = NewPacket(qp, Opcode::kRdmaReadRequest, psn);
    p->ext().va = wr.remote_addr + offset;
    p->ext().rkey = wr.rkey;
    p->ext().dma_len = wr.sge.length - offset;
    p->ack_req = 1;
    psn_end = PsnAdd(w.first_psn, w.npkts);
    ++qp.send_idx;
    qp.send_pkt = 0;
    ++qp.outstanding_rd;
  } else if (wr.opcode == WrOpcode::kAtomicCmpAndSwp || wr.opcode == WrOpcode::kAtomicFetchAndAdd) {
    const bool cas = wr.opcode == WrOpcode::kAtomicCmpAndSwp;
    p = NewPacket(qp, cas ? Opcode::kCompareSwap : Opcode::kFetchAdd, psn);
    p->ext().va = wr.remote_addr;
    p->ext().rkey = wr.rkey;
    p->ext().swap_add = cas ? wr.swap : wr.compare_add;
    p->ext().compare = cas ? wr.compare_add : 0;
    p->ack_req = 1;
    ++qp.send_idx;
    qp.send_pkt = 0;
    ++qp.outstanding_rd;
  } else {
    const bool write =
        wr.opcode == WrOpcode::kRdmaWrite || wr.opcode == WrOpcode::kRdmaWriteWithImm;
    const bool imm =
        wr.opcode == WrOpcode::kSendWithImm || wr.opcode == WrOpcode::kRdmaWriteWithImm;
    const uint32_t i = qp.send_pkt;
    const uint32_t offset = i * mtu;
    const uint32_t payload = wr.sge.length - offset < mtu ? wr.sge.length - offset : mtu;
    Opcode opcode;
    if (w.npkts == 1) {
      opcode = write ? (imm ? Opcode::kRdmaWriteOnlyWithImmediate : Opcode::kRdmaWriteOnly)
                     : (imm ? Opcode::kSendOnlyWithImmediate : Opcode::kSendOnly);
    } else if (i == 0) {
      opcode = write ? Opcode::kRdmaWriteFirst : Opcode::kSendFirst;
    } else if (i + 1 == w.npkts) {
      opcode = write ? (imm ? Opcode::kRdmaWriteLastWithImmediate : Opcode::kRdmaWriteLast)
                     : (imm ? Opcode::kSendLastWithImmediate : Opcode::kSendLast);
    } else {
      opcode = write ? Opcode::kRdmaWriteMiddle : Opcode::kSendMiddle;
    }
    p = NewPacket(qp, opcode, psn);
    p->payload_bytes = static_cast<uint16_t>(payload);
    if (wr.sge.lkey != kModelledKey)
      p->set_data(reinterpret_cast<const uint8_t*>(wr.sge.addr) + offset);
    if (write && i == 0) {
      p->ext().va = wr.remote_addr;
      p->ext().rkey = wr.rkey;
      p->ext().dma_len = wr.sge.length;
    }
    if (imm) p->ext().imm = wr.imm_data;
    const bool last = i + 1 == w.npkts;
    if (last || ++qp.pkts_since_ackreq >= qp.ack_every_packets) {
      p->ack_req = 1;
      qp.pkts_since_ackreq = 0;
    }
    if (++qp.send_pkt == w.npkts) {
      ++qp.send_idx;
      qp.send_pkt = 0;
    } else if (wr.sge.lkey == kModelledKey && qp.send_pkt + 1 < w.npkts) {
      // The packets from the next to the message's last (not included) are
      // full-size packets: RequesterSendFullSize sends them.
      qp.full_size_left = w.npkts - 1 - qp.send_pkt;
      qp.full_size_psn = PsnAdd(psn, 1);
      qp.full_size_opcode = write ? Opcode::kRdmaWriteMiddle : Opcode::kSendMiddle;
    }
    if (last && write) ++qp.counters.rdma_sends;
  }
  NoteSent(qp, psn, psn_end);
  return p;
}

void Nic::NoteSent(Qp& qp, uint32_t psn, uint32_t psn_end) {
  if (PsnDiff(psn, qp.max_sent_psn) < 0) {
    ++qp.counters.retransmitted_packets;
  }
  if (PsnDiff(psn_end, qp.max_sent_psn) > 0) qp.max_sent_psn = psn_end;
  if (qp.ack_deadline_ps == 0) RestartAckTimer(qp);
}

bool Nic::RequesterSendFullSize(Qp& qp) {
  // Exactly the packet RequesterNext would build, and Pump's general path
  // would send, for this case (RequesterNext found the next packets to be
  // full-size packets); anything else goes that way. Reads the QP's lines 0
  // and 1 only: not the WQE, nor the flow.
  if (qp.full_size_left == 0 || qp.state != QpState::kRts || ResponderHasWork(qp) ||
      qp.rnr_until_ps != 0 || !port_->TakesFullSize(qp.flow)) {
    return false;
  }
  assert(qp.send_idx < qp.sq.size() && !qp.sq[qp.send_idx].local_error && qp.send_pkt > 0 &&
         qp.send_pkt + qp.full_size_left + 1 == qp.sq[qp.send_idx].npkts &&
         qp.full_size_psn == PsnAdd(qp.sq[qp.send_idx].first_psn, qp.send_pkt));
  const uint32_t psn = qp.full_size_psn;
  qp.full_size_psn = PsnAdd(psn, 1);
  --qp.full_size_left;
  bool ack_req = false;
  if (++qp.pkts_since_ackreq >= qp.ack_every_packets) {
    ack_req = true;
    qp.pkts_since_ackreq = 0;
  }
  ++qp.send_pkt;  // not the WQE's last packet
  NoteSent(qp, psn, PsnAdd(psn, 1));
  // The QP still has work: the round-robin moves it to the back (where it
  // already is when it is alone).
  if (active_.size() > 1) {
    active_.pop_front();
    active_.push_back(&qp);
    SyncFront();
  }
  SetPumpHint(&qp);
  ++qp.sent_pkts;
  if (dcqcn_) DcqcnSent(qp, qp.full_size_opcode, qp.full_wire_bytes);
  pool_->AddCompact();  // the port's pool, the NIC's
  port_->SendFullSize(qp.flow, qp.full_wire_bytes, qp.buffer_class & 7, qp.full_size_opcode, psn,
                      ack_req);
  return true;
}

// Every PSN before `psn` is acknowledged: complete the SEND/WRITE WRs it
// covers, in order. A READ or atomic at the head is only completed by its
// responses; an ACK beyond it means they were lost (an implied NAK).
void Nic::AckUpTo(Qp& qp, uint32_t psn) {
  if (PsnDiff(psn, qp.acked_psn) <= 0) return;  // stale or duplicate
  if (PsnDiff(psn, qp.max_sent_psn) > 0) psn = qp.max_sent_psn;
  bool implied_nak = false;
  while (!qp.sq.empty()) {
    const SendWqe& w = qp.sq.front();
    if (IsReadOrAtomic(w.wr.opcode)) {
      if (PsnDiff(psn, w.first_psn) > 0) implied_nak = true;
      break;
    }
    const uint32_t end = PsnAdd(w.first_psn, w.npkts);
    if (PsnDiff(end, psn) > 0) {
      qp.acked_psn = psn;  // part of this message
      break;
    }
    qp.acked_psn = end;
    const SendWqe done = RetireFront(qp);
    if (done.wr.signaled) {
      Complete(qp, qp.send_cq, SendWc(done.wr, WcStatus::kSuccess, done.wr.sge.length));
    }
  }
  if (qp.state != QpState::kRts) return;  // a completion callback moved the QP
  ResetRetryBudget(qp);
  ResetRnrBudget(qp);
  CatchUpCursorAndTimer(qp);
  if (implied_nak) {
    ++qp.counters.implied_nak_seq_err;
    RetryOrFail(qp, qp.acked_psn);
    return;
  }
  if (RequesterHasWork(qp)) Activate(qp);
}

Nic::SendWqe Nic::RetireFront(Qp& qp) {
  const SendWqe done = qp.sq.front();
  qp.sq.pop_front();
  if (qp.send_idx > 0) {
    --qp.send_idx;  // the same WQE
  } else {
    MoveSendCursor(qp, 0, 0);
  }
  return done;
}

void Nic::CatchUpCursorAndTimer(Qp& qp) {
  if (!qp.sq.empty() && PsnDiff(SendPsn(qp), qp.acked_psn) < 0) {
    MoveSendCursor(qp, 0, static_cast<uint32_t>(PsnDiff(qp.acked_psn, qp.sq.front().first_psn)));
  }
  if (PsnDiff(qp.max_sent_psn, qp.acked_psn) > 0) {
    RestartAckTimer(qp);
  } else {
    qp.ack_deadline_ps = 0;
  }
}

void Nic::GoBackN(Qp& qp, uint32_t psn) {
  if (qp.sq.empty()) return;
  const int32_t into = PsnDiff(psn, qp.sq.front().first_psn);
  MoveSendCursor(qp, 0, into > 0 ? static_cast<uint32_t>(into) : 0);
  qp.outstanding_rd = 0;
  qp.pkts_since_ackreq = 0;
  qp.retry_pending = true;
  qp.retry_psn = psn;
  RestartAckTimer(qp);
  if (RequesterHasWork(qp)) Activate(qp);
}

// NAK sequence error, implied NAK or timeout: retransmit from the oldest
// unacknowledged PSN while retry_cnt allows (rxe: retry_cnt 7 is infinite
// when rxe_infinite_retry is set), else IBV_WC_RETRY_EXC_ERR.
void Nic::RetryOrFail(Qp& qp, uint32_t psn) {
  const bool infinite = (qp.attr.rxe_infinite_retry || infinite_retry7_) && qp.attr.retry_cnt == 7;
  if (qp.retries_left <= 0 && !infinite) {
    ++qp.counters.retry_exceeded_err;
    FailFront(qp, WcStatus::kRetryExcErr);
    return;
  }
  if (!infinite) --qp.retries_left;
  GoBackN(qp, psn);
}

void Nic::FailFront(Qp& qp, WcStatus status) {
  if (!qp.sq.empty()) {
    const SendWqe w = qp.sq.front();
    qp.sq.pop_front();
    Complete(qp, qp.send_cq, SendWc(w.wr, status));
  }
  EnterError(qp);
}

void Nic::TimerExpired(Qp& qp) {
  qp.ack_deadline_ps = 0;
  if (qp.state != QpState::kRts || PsnDiff(qp.max_sent_psn, qp.acked_psn) <= 0) return;
  if (retrans_profile_) {
    if (qp.adp_step < qp.adp_steps) {
      AdaptiveRetransmit(qp);
      return;
    }
    ++qp.counters.local_ack_timeout_err;
    ProfileTimeout(qp);
    return;
  }
  ++qp.counters.local_ack_timeout_err;
  RetryOrFail(qp, qp.acked_psn);
}

}  // namespace fathom::sim
