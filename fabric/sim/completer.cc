// The RC completer: what the requester does with each response packet — an
// ACK, a NAK, a READ response or an atomic ACK — as an explicit state
// machine with one short step per state, in the manner of rxe's completer
// (drivers/infiniband/sw/rxe/rxe_comp.c: get ack, check psn, check ack,
// read, atomic, write/send, update comp, error/retry, done). The rules are
// IBTA vol. 1 9.7.5 (requester: responses, ACK/NAK, implied NAK) and
// 9.7.5.2.8 (RNR NAK).
#include <cstring>

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

// The requester's status for a NAK that ends the QP (IBTA 9.7.5.2.4-6).
WcStatus NakStatus(uint8_t syndrome) {
  switch (syndrome) {
    case wire::kAethNakAccess:
      return WcStatus::kRemAccessErr;
    case wire::kAethNakOperational:
      return WcStatus::kRemOpErr;
    default:
      return WcStatus::kRemInvReqErr;
  }
}

}  // namespace

class Nic::Completer {
 public:
  Completer(Nic& nic, Qp& qp, const Packet& p) : nic_(nic), qp_(qp), p_(p), psn_(p.psn) {}

  void Run() {
    State s = State::kGetAck;
    while (s != State::kDone) s = Step(s);
  }

 private:
  enum class State : uint8_t {
    kGetAck,        // which kind of response this is
    kAck,           // positive ACK: complete the SEND/WRITEs it covers
    kCheckNak,      // NAK: stale, or complete what precedes its PSN
    kRnrRetry,      // RNR NAK: wait the responder's RNR time, then go back
    kSeqRetry,      // NAK sequence error: go back while retry_cnt allows
    kRemoteError,   // remote access/operational/invalid-request NAK
    kCheckPsn,      // READ response/atomic ACK: duplicate, expected or past a gap
    kAckPreceding,  // past the expected PSN: the SEND/WRITEs before its READ are done
    kImpliedNak,    // responses were lost: go back to the first missing one
    kCheckWqe,      // does the oldest WQE take this response
    kRead,          // READ response: place the payload
    kAtomic,        // atomic ACK: place the original value
    kUpdateComp,    // the acknowledged PSN moves; the retry budget starts over
    kCompleteWqe,   // the READ/atomic is whole: retire and complete it
    kResume,        // send cursor, ACK timer, scheduling
    kDone,
  };

  State Step(State s) {
    switch (s) {
      case State::kGetAck:
        return GetAck();
      case State::kAck:
        nic_.AckUpTo(qp_, PsnAdd(psn_, 1));  // every PSN up to and including psn
        return State::kDone;
      case State::kCheckNak:
        return CheckNak();
      case State::kRnrRetry:
        return RnrRetry();
      case State::kSeqRetry:
        ++qp_.counters.packet_seq_err;
        nic_.RetryOrFail(qp_, psn_);
        return State::kDone;
      case State::kRemoteError:
        nic_.FailFront(qp_, NakStatus(p_.aeth_syndrome));
        return State::kDone;
      case State::kCheckPsn:
        return CheckPsn();
      case State::kAckPreceding:
        return AckPreceding();
      case State::kImpliedNak:
        return ImpliedNak();
      case State::kCheckWqe:
        return CheckWqe();
      case State::kRead:
        return Read();
      case State::kAtomic:
        return Atomic();
      case State::kUpdateComp:
        qp_.acked_psn = PsnAdd(psn_, 1);
        ResetRetryBudget(qp_);
        return wqe_done_ ? State::kCompleteWqe : State::kResume;
      case State::kCompleteWqe:
        return CompleteWqe();
      case State::kResume:
        nic_.CatchUpCursorAndTimer(qp_);
        if (nic_.RequesterHasWork(qp_)) nic_.Activate(qp_);
        return State::kDone;
      case State::kDone:
        break;
    }
    return State::kDone;
  }

  State GetAck() {
    if (qp_.state != QpState::kRts) return State::kDone;
    if (p_.opcode != Opcode::kAcknowledge) return State::kCheckPsn;
    return wire::AethKindOf(p_.aeth_syndrome) == wire::AethKind::kAck ? State::kAck
                                                                      : State::kCheckNak;
  }

  State CheckNak() {
    if (PsnDiff(psn_, qp_.acked_psn) < 0) return State::kDone;  // already acknowledged
    // A NAK acknowledges every PSN before its own.
    nic_.AckUpTo(qp_, psn_);
    if (qp_.state != QpState::kRts) return State::kDone;
    if (wire::AethKindOf(p_.aeth_syndrome) == wire::AethKind::kRnrNak) return State::kRnrRetry;
    return p_.aeth_syndrome == wire::kAethNakSeq ? State::kSeqRetry : State::kRemoteError;
  }

  State RnrRetry() {
    ++qp_.counters.rcvd_rnr_err;
    if (qp_.rnr_retries_left <= 0 && qp_.attr.rnr_retry != 7) {  // 7: infinite (IBTA)
      ++qp_.counters.rnr_nak_retry_err;
      nic_.FailFront(qp_, WcStatus::kRnrRetryExcErr);
      return State::kDone;
    }
    if (qp_.attr.rnr_retry != 7) --qp_.rnr_retries_left;
    nic_.GoBackN(qp_, psn_);
    qp_.ack_deadline_ps = 0;  // no ACK timer while waiting out the RNR delay
    qp_.rnr_until_ps = nic_.engine_->Now().ps() + RnrTimerPs(p_.aeth_syndrome & 0x1F);
    nic_.ArmTimer(qp_, qp_.rnr_until_ps);
    return State::kDone;
  }

  // READ responses and atomic ACKs come in PSN order.
  State CheckPsn() {
    const int32_t d = PsnDiff(psn_, qp_.acked_psn);
    if (d < 0) return State::kDone;  // duplicate
    return d > 0 ? State::kAckPreceding : State::kCheckWqe;
  }

  // A response also acknowledges the SEND/WRITEs before its READ (their ACK
  // may have been lost): complete those first.
  State AckPreceding() {
    for (const SendWqe& w : qp_.sq) {
      if (wire::PsnInWindow(psn_, w.first_psn, w.npkts)) {
        if (IsReadOrAtomic(w.wr.opcode)) nic_.AckUpTo(qp_, w.first_psn);
        break;
      }
    }
    if (qp_.state != QpState::kRts) return State::kDone;
    return PsnDiff(psn_, qp_.acked_psn) > 0 ? State::kImpliedNak : State::kCheckWqe;
  }

  // Responses past a lost one: go back to the first missing response, once
  // per go-back-N.
  State ImpliedNak() {
    if (!qp_.retry_pending || qp_.retry_psn != qp_.acked_psn) {
      ++qp_.counters.implied_nak_seq_err;
      nic_.RetryOrFail(qp_, qp_.acked_psn);
    }
    return State::kDone;
  }

  State CheckWqe() {
    if (qp_.sq.empty() || !IsReadOrAtomic(qp_.sq.front().wr.opcode)) return State::kDone;
    return p_.opcode == Opcode::kAtomicAcknowledge ? State::kAtomic : State::kRead;
  }

  State Read() {
    const SendWqe& w = qp_.sq.front();
    const uint32_t index = static_cast<uint32_t>(PsnDiff(psn_, w.first_psn));
    if (w.wr.sge.lkey != kModelledKey && p_.has_data && p_.payload_bytes > 0) {
      const uint64_t mtu = static_cast<uint64_t>(qp_.attr.path_mtu_bytes);
      std::memcpy(reinterpret_cast<uint8_t*>(w.wr.sge.addr) + uint64_t{index} * mtu, p_.data(),
                  p_.payload_bytes);
    }
    wqe_done_ = index + 1 == w.npkts;
    byte_len_ = w.wr.sge.length;
    return State::kUpdateComp;
  }

  State Atomic() {
    const SendWqe& w = qp_.sq.front();
    if (w.wr.sge.lkey != kModelledKey) {
      std::memcpy(reinterpret_cast<void*>(w.wr.sge.addr), &p_.ext().swap_add, sizeof(uint64_t));
    }
    wqe_done_ = true;
    byte_len_ = sizeof(uint64_t);
    return State::kUpdateComp;
  }

  State CompleteWqe() {
    const SendWqe finished = nic_.RetireFront(qp_);
    if (qp_.outstanding_rd > 0) --qp_.outstanding_rd;
    if (finished.wr.signaled) {
      nic_.Complete(qp_, qp_.send_cq, SendWc(finished.wr, WcStatus::kSuccess, byte_len_));
    }
    // A completion callback may have moved the QP.
    return qp_.state == QpState::kRts ? State::kResume : State::kDone;
  }

  Nic& nic_;
  Qp& qp_;
  const Packet& p_;
  const uint32_t psn_;
  bool wqe_done_ = false;  // the response is the WQE's last
  uint32_t byte_len_ = 0;  // the WQE's completion byte_len
};

void Nic::OnResponse(Qp& qp, Packet* p) { Completer(*this, qp, *p).Run(); }

}  // namespace fathom::sim
