// The RC responder: PSN checking, duplicate and out-of-sequence requests,
// ACK coalescing, NAK sequence error, RNR NAK, remote access checks, RDMA
// WRITE / SEND placement, READ responses and atomics (IBTA vol. 1 9.7.5
// "responder side", rxe_resp.c).
#include <cstring>

#include "fabric/sim/nic.h"
#include "fabric/wire/psn.h"

namespace fathom::sim {
namespace {

using wire::PsnAdd;
using wire::PsnDiff;

bool IsSend(Opcode opcode) { return opcode <= Opcode::kSendOnlyWithImmediate; }
bool IsWrite(Opcode opcode) {
  return opcode >= Opcode::kRdmaWriteFirst && opcode <= Opcode::kRdmaWriteOnlyWithImmediate;
}
bool StartsMessage(Opcode opcode) {
  return opcode == Opcode::kSendFirst || opcode == Opcode::kSendOnly ||
         opcode == Opcode::kSendOnlyWithImmediate || opcode == Opcode::kRdmaWriteFirst ||
         opcode == Opcode::kRdmaWriteOnly || opcode == Opcode::kRdmaWriteOnlyWithImmediate;
}
bool EndsMessage(Opcode opcode) {
  return opcode == Opcode::kSendLast || opcode == Opcode::kSendLastWithImmediate ||
         opcode == Opcode::kSendOnly || opcode == Opcode::kSendOnlyWithImmediate ||
         opcode == Opcode::kRdmaWriteLast || opcode == Opcode::kRdmaWriteLastWithImmediate ||
         opcode == Opcode::kRdmaWriteOnly || opcode == Opcode::kRdmaWriteOnlyWithImmediate;
}
bool HasImm(Opcode opcode) {
  return opcode == Opcode::kSendLastWithImmediate || opcode == Opcode::kSendOnlyWithImmediate ||
         opcode == Opcode::kRdmaWriteLastWithImmediate ||
         opcode == Opcode::kRdmaWriteOnlyWithImmediate;
}
bool ConsumesRecv(Opcode opcode) {
  return opcode == Opcode::kSendFirst || opcode == Opcode::kSendOnly ||
         opcode == Opcode::kSendOnlyWithImmediate ||
         opcode == Opcode::kRdmaWriteOnlyWithImmediate ||
         opcode == Opcode::kRdmaWriteLastWithImmediate;
}

}  // namespace

void Nic::OnRequest(Qp& qp, Packet* p) {
  const int32_t d = PsnDiff(p->psn, qp.epsn);
  if (d == 0) {
    ExecuteRequest(qp, *p);
  } else if (d < 0) {
    ++qp.counters.duplicate_request;
    OnDuplicate(qp, *p);
  } else {
    // A gap: NAK once with the expected PSN, then drop silently until it
    // arrives (IBTA 9.7.5.1.3 "PSN sequence error").
    ++qp.counters.out_of_sequence;
    if (!qp.nak_sent) {
      qp.nak_sent = true;
      QueueAck(qp, qp.epsn, wire::kAethNakSeq);
    }
  }
}

void Nic::ResponderError(Qp& qp, uint32_t psn, uint8_t nak) {
  qp.reads.clear();  // the NAK goes out now, not behind responses
  qp.has_deferred_ack = false;
  QueueAck(qp, psn, nak);
  qp.nak_sent = true;
  EnterError(qp);
}

void Nic::ExecuteRequest(Qp& qp, const Packet& p) {
  const Opcode opc = p.opcode;
  if (ConsumesRecv(opc) && !(opc == Opcode::kSendFirst && qp.recv_active) && qp.rq.empty()) {
    // No receive WQE: RNR NAK with our min_rnr_timer; later packets of the
    // message are dropped as out of sequence until the retry (9.7.5.2.8).
    ++qp.counters.send_rnr_err;
    QueueAck(qp, p.psn, static_cast<uint8_t>(wire::kAethRnrNak | (qp.attr.min_rnr_timer & 0x1F)));
    qp.nak_sent = true;
    return;
  }
  if (opc == Opcode::kRdmaReadRequest || opc == Opcode::kCompareSwap || opc == Opcode::kFetchAdd) {
    if (!QueueResponses(qp, p)) return;
    ++qp.msn;
    qp.nak_sent = false;
    return;
  }
  if (IsSend(opc)) {
    if (StartsMessage(opc)) {
      qp.recv_active = true;
      qp.recv_offset = 0;
    } else if (!qp.recv_active) {
      ResponderError(qp, p.psn, wire::kAethNakInvalid);  // MIDDLE/LAST without FIRST
      return;
    }
    RecvWqe& r = qp.rq.front();
    if (uint64_t{qp.recv_offset} + p.payload_bytes > r.wr.sge.length) {
      // The message does not fit the receive buffer: IBV_WC_LOC_LEN_ERR here,
      // IBV_WC_REM_INV_REQ_ERR at the requester (CASES.md 2).
      const RecvWqe failed = r;
      qp.rq.pop_front();
      Complete(qp, qp.recv_cq, RecvWc(failed.wr.wr_id, WcStatus::kLocLenErr));
      ResponderError(qp, p.psn, wire::kAethNakInvalid);
      return;
    }
    if (r.wr.sge.lkey != kModelledKey && p.has_data && p.payload_bytes > 0) {
      std::memcpy(reinterpret_cast<uint8_t*>(r.wr.sge.addr) + qp.recv_offset, p.data(),
                  p.payload_bytes);
    }
    qp.recv_offset += p.payload_bytes;
    if (EndsMessage(opc)) {
      const RecvWqe done = r;
      qp.rq.pop_front();
      qp.recv_active = false;
      ++qp.counters.rdma_recvs;
      Complete(qp, qp.recv_cq,
               RecvWcImm(done.wr.wr_id, WcOpcode::kRecv, qp.recv_offset, p.ext().imm, HasImm(opc)));
    }
  } else if (IsWrite(opc)) {
    if (opc == Opcode::kRdmaWriteFirst || opc == Opcode::kRdmaWriteOnly ||
        opc == Opcode::kRdmaWriteOnlyWithImmediate) {
      qp.write_modelled = p.ext().rkey == kModelledKey;
      if (!qp.write_modelled &&
          CheckRemote(p.ext().rkey, p.ext().va, p.ext().dma_len, kAccessRemoteWrite) == nullptr) {
        ResponderError(qp, p.psn, wire::kAethNakAccess);  // IBV_WC_REM_ACCESS_ERR at the requester
        return;
      }
      qp.write_va = p.ext().va;
      qp.write_len = 0;
    }
    if (!qp.write_modelled && p.has_data && p.payload_bytes > 0) {
      std::memcpy(reinterpret_cast<void*>(qp.write_va), p.data(), p.payload_bytes);
    }
    qp.write_va += p.payload_bytes;
    qp.write_len += p.payload_bytes;
    if (opc == Opcode::kRdmaWriteLastWithImmediate || opc == Opcode::kRdmaWriteOnlyWithImmediate) {
      const RecvWqe done = qp.rq.front();
      qp.rq.pop_front();
      ++qp.counters.rdma_recvs;
      Complete(
          qp, qp.recv_cq,
          RecvWcImm(done.wr.wr_id, WcOpcode::kRecvRdmaWithImm, qp.write_len, p.ext().imm, true));
    }
  } else {
    ResponderError(qp, p.psn, wire::kAethNakInvalid);
    return;
  }
  if (qp.state == QpState::kErr) return;
  RequestDone(qp, p.psn, EndsMessage(opc), p.ack_req);
}

void Nic::RequestDone(Qp& qp, uint32_t psn, bool ends_message, bool ack_req) {
  if (ends_message) ++qp.msn;
  qp.epsn = PsnAdd(psn, 1);
  qp.nak_sent = false;
  if (ack_req) QueueAck(qp, psn, wire::kAethAck);
}

bool Nic::ReceiveFullSize(void* nic, const QpFlow& flow, uint32_t psn, Opcode opcode,
                          bool ack_req) {
  // Receive, OnRequest and ExecuteRequest for this one case (a WRITE's
  // full-size packet, in sequence, of modelled bytes: a compact entry has no
  // payload bytes), which is most of what a bulk transfer receives.
  Nic* self = static_cast<Nic*>(nic);
  if (opcode != Opcode::kRdmaWriteMiddle || self->crashed_) return false;
  Qp* qp = self->FindQp(flow.dest_qpn);
  if (qp == nullptr || (qp->state != QpState::kRtr && qp->state != QpState::kRts) ||
      psn != qp->epsn) {
    return false;
  }
  ++qp->rcvd_pkts;
  qp->write_va += flow.full_payload;
  qp->write_len += flow.full_payload;
  self->RequestDone(*qp, psn, false, ack_req);
  return true;
}

// READ: queue its responses; atomics: execute now and queue the atomic ACK.
bool Nic::QueueResponses(Qp& qp, const Packet& p) {
  const uint32_t mtu = static_cast<uint32_t>(qp.attr.path_mtu_bytes);
  ReadJob job{};
  job.first_psn = p.psn;
  job.modelled = p.ext().rkey == kModelledKey;
  if (p.opcode == Opcode::kRdmaReadRequest) {
    if (!job.modelled &&
        CheckRemote(p.ext().rkey, p.ext().va, p.ext().dma_len, kAccessRemoteRead) == nullptr) {
      ResponderError(qp, p.psn, wire::kAethNakAccess);
      return false;
    }
    job.npkts = p.ext().dma_len == 0 ? 1 : (p.ext().dma_len + mtu - 1) / mtu;
    job.va = p.ext().va;
    job.len = p.ext().dma_len;
  } else {
    if (!job.modelled && (p.ext().va % 8 != 0 || CheckRemote(p.ext().rkey, p.ext().va, 8,
                                                             kAccessRemoteAtomic) == nullptr)) {
      ResponderError(qp, p.psn, wire::kAethNakAccess);
      return false;
    }
    job.npkts = 1;
    job.atomic = true;
    if (!job.modelled) {
      uint64_t value;
      std::memcpy(&value, reinterpret_cast<const void*>(p.ext().va), sizeof value);
      job.orig = value;
      if (p.opcode == Opcode::kFetchAdd) {
        value += p.ext().swap_add;
      } else if (value == p.ext().compare) {
        value = p.ext().swap_add;
      }
      std::memcpy(reinterpret_cast<void*>(p.ext().va), &value, sizeof value);
    }
    // Kept so that a duplicate atomic is answered, not executed twice (9.4.5).
    qp.atomics.push_back(AtomicResult{p.psn, job.orig});
    while (qp.atomics.size() > static_cast<size_t>(qp.attr.max_rd_atomic)) qp.atomics.pop_front();
  }
  qp.epsn = PsnAdd(p.psn, job.npkts);
  qp.reads.push_back(job);
  Activate(qp);
  return true;
}

void Nic::OnDuplicate(Qp& qp, const Packet& p) {
  if (p.opcode == Opcode::kRdmaReadRequest) {
    // Re-execute from the requested PSN; responses queued at or after it are
    // superseded (the requester resends everything after it anyway).
    while (!qp.reads.empty() && PsnDiff(qp.reads.back().first_psn, p.psn) >= 0) {
      qp.reads.pop_back();
    }
    const uint32_t epsn = qp.epsn;
    if (QueueResponses(qp, p)) qp.epsn = epsn;
    return;
  }
  if (p.opcode == Opcode::kCompareSwap || p.opcode == Opcode::kFetchAdd) {
    for (const AtomicResult& a : qp.atomics) {
      if (a.psn == p.psn) {
        ReadJob job{};
        job.first_psn = p.psn;
        job.npkts = 1;
        job.atomic = true;
        job.orig = a.orig;
        qp.reads.push_back(job);
        Activate(qp);
        return;
      }
    }
    return;
  }
  // A retransmitted SEND/WRITE we already have: acknowledge the newest PSN
  // so a requester whose ACK was lost makes progress (9.7.5.1.2).
  QueueAck(qp, PsnAdd(qp.epsn, -1), wire::kAethAck);
}

void Nic::QueueAck(Qp& qp, uint32_t psn, uint8_t syndrome) {
  if (!qp.reads.empty()) {
    // Behind queued READ responses: sent after them, in PSN order.
    if (qp.has_deferred_ack && syndrome == wire::kAethAck &&
        qp.deferred_ack_syndrome != wire::kAethAck) {
      return;  // keep the NAK
    }
    if (qp.has_deferred_ack) ++qp.counters.ack_deferred;
    qp.has_deferred_ack = true;
    qp.deferred_ack_psn = psn;
    qp.deferred_ack_syndrome = syndrome;
    Activate(qp);
    return;
  }
  if (syndrome == wire::kAethAck && qp.pending_ack != nullptr) {
    // Coalesce with the ACK still waiting for the port.
    ++qp.counters.ack_deferred;
    qp.pending_ack->psn = psn & wire::kPsnMask;
    qp.pending_ack->ext().msn = qp.msn;
    return;
  }
  Packet* ack = NewPacket(qp, Opcode::kAcknowledge, psn);
  ack->aeth_syndrome = syndrome;
  ack->ext().msn = qp.msn & wire::kPsnMask;
  if (syndrome == wire::kAethAck) qp.pending_ack = ack;
  SendControl(ack);
}

Packet* Nic::ResponderNext(Qp& qp) {
  if (!qp.reads.empty()) {
    ReadJob& job = qp.reads.front();
    if (job.atomic) {
      Packet* p = NewPacket(qp, Opcode::kAtomicAcknowledge, job.first_psn);
      p->aeth_syndrome = wire::kAethAck;
      p->ext().msn = qp.msn & wire::kPsnMask;
      p->ext().swap_add = job.orig;
      qp.reads.pop_front();
      return p;
    }
    const uint32_t mtu = static_cast<uint32_t>(qp.attr.path_mtu_bytes);
    const uint32_t i = job.next;
    Opcode opcode;
    if (job.npkts == 1) {
      opcode = Opcode::kRdmaReadResponseOnly;
    } else if (i == 0) {
      opcode = Opcode::kRdmaReadResponseFirst;
    } else if (i + 1 == job.npkts) {
      opcode = Opcode::kRdmaReadResponseLast;
    } else {
      opcode = Opcode::kRdmaReadResponseMiddle;
    }
    Packet* p = NewPacket(qp, opcode, PsnAdd(job.first_psn, i));
    const uint32_t offset = i * mtu;
    p->payload_bytes = static_cast<uint16_t>(job.len - offset < mtu ? job.len - offset : mtu);
    if (opcode != Opcode::kRdmaReadResponseMiddle) {
      p->aeth_syndrome = wire::kAethAck;
      p->ext().msn = qp.msn & wire::kPsnMask;
    }
    if (!job.modelled) p->set_data(reinterpret_cast<const uint8_t*>(job.va) + offset);
    if (++job.next == job.npkts) qp.reads.pop_front();
    return p;
  }
  if (qp.has_deferred_ack) {
    qp.has_deferred_ack = false;
    Packet* p = NewPacket(qp, Opcode::kAcknowledge, qp.deferred_ack_psn);
    p->aeth_syndrome = qp.deferred_ack_syndrome;
    p->ext().msn = qp.msn & wire::kPsnMask;
    return p;
  }
  return nullptr;
}

}  // namespace fathom::sim
