// The NIC's side of the flow model (flow_fabric.h, docs/FLOW.md): a QP's
// messages leave one at a time as flows, in send-queue order; the receiver
// executes each whole (what the responder does packet by packet, for a
// message received in sequence); the requester completes WQEs when their
// ACK returns. Only SEND and WRITE (with or without immediate): PostSend
// refuses READ and atomics in this model.
#include <cstring>

#include "fabric/sim/flow_fabric.h"
#include "fabric/sim/nic.h"
#include "fabric/wire/psn.h"

namespace fathom::sim {
namespace {

bool IsWriteWr(WrOpcode op) {
  return op == WrOpcode::kRdmaWrite || op == WrOpcode::kRdmaWriteWithImm;
}
bool HasImmWr(WrOpcode op) {
  return op == WrOpcode::kSendWithImm || op == WrOpcode::kRdmaWriteWithImm;
}

// The bytes the message's packets put on the wire (headers, ICRC, FCS,
// preamble and gap: FrameWireBytes), packet by packet as RequesterNext
// segments it, and the size of the last packet.
uint64_t MessageWireBytes(const SendWr& wr, uint32_t npkts, uint32_t mtu, bool ipv6,
                          uint32_t* last_wire) {
  const bool write = IsWriteWr(wr.opcode);
  const bool imm = HasImmWr(wr.opcode);
  const uint32_t len = wr.sge.length;
  if (npkts == 1) {
    const Opcode only = write ? (imm ? Opcode::kRdmaWriteOnlyWithImmediate : Opcode::kRdmaWriteOnly)
                              : (imm ? Opcode::kSendOnlyWithImmediate : Opcode::kSendOnly);
    *last_wire = FrameWireBytes(only, len, ipv6);
    return *last_wire;
  }
  const Opcode first = write ? Opcode::kRdmaWriteFirst : Opcode::kSendFirst;
  const Opcode middle = write ? Opcode::kRdmaWriteMiddle : Opcode::kSendMiddle;
  const Opcode last = write ? (imm ? Opcode::kRdmaWriteLastWithImmediate : Opcode::kRdmaWriteLast)
                            : (imm ? Opcode::kSendLastWithImmediate : Opcode::kSendLast);
  *last_wire = FrameWireBytes(last, len - (npkts - 1) * mtu, ipv6);
  return uint64_t{FrameWireBytes(first, mtu, ipv6)} +
         uint64_t{npkts - 2} * FrameWireBytes(middle, mtu, ipv6) + *last_wire;
}

}  // namespace

void Nic::FlowRouteOf(Qp& qp) {
  // The QP's fixed route (QpFlow::path, from the NIC's own port on), as the
  // model's links, looked up once per route.
  Qp::FlowRoute& route = qp.flow_route;
  if (route.known) return;
  route.known = true;
  route.nlinks = 0;
  for (size_t i = 0; i < kPathMax && qp.flow.path[i] != nullptr; ++i) {
    route.links[route.nlinks++] = flow_->LinkOf(qp.flow.path[i]);
  }
}

int64_t Nic::FlowLoneTime(Qp& qp, const SendWr& wr) {
  FlowRouteOf(qp);
  const uint32_t mtu = static_cast<uint32_t>(qp.attr.path_mtu_bytes);
  const uint32_t npkts = wr.sge.length == 0 ? 1u : (wr.sge.length + mtu - 1) / mtu;
  uint32_t last_wire = 0;
  const uint64_t bytes = MessageWireBytes(wr, npkts, mtu, ipv6_, &last_wire);
  return flow_->model().LoneTime(
      std::span<const int32_t>(qp.flow_route.links, qp.flow_route.nlinks), bytes);
}

void Nic::FlowActivate(Qp& qp) {
  if (crashed_ || qp.flow_busy || !RequesterHasWork(qp)) return;
  const int64_t now = engine_->Now().ps();
  const bool split = flow_->split();
  if (now < qp.flow_free_ps || (split && now == qp.flow_free_ps)) [[unlikely]] {
    // A folded one-packet message is still leaving: the next one starts
    // when it has left, as it would at that message's finish event. Split,
    // also at the very picosecond it leaves, and on the QP's PassKey: the
    // next flow then starts at the same place of the canonical order in
    // every process (a replica holds the QP the same way: OnKeptDone).
    qp.flow_busy = true;
    engine_->Schedule<&Nic::OnFlowFree>(Picoseconds(qp.flow_free_ps), EventKind::kUser,
                                        split ? FlowFabric::PassKey(host_, qp.qpn) : qp.qpn, this,
                                        qp.qpn);
    return;
  }
  SendWqe& w = qp.sq[qp.send_idx];
  if (w.local_error) {
    FailFront(qp, WcStatus::kLocProtErr);
    return;
  }
  FlowRouteOf(qp);
  const Qp::FlowRoute& route = qp.flow_route;
  const size_t n = route.nlinks;
  if (n == 0) {
    // No route (a disconnected pair): the packets would be dropped until the
    // retries ran out.
    FailFront(qp, WcStatus::kRetryExcErr);
    return;
  }
  uint32_t last_wire = 0;
  const uint64_t bytes = MessageWireBytes(
      w.wr, w.npkts, static_cast<uint32_t>(qp.attr.path_mtu_bytes), ipv6_, &last_wire);
  const std::span<const int32_t> links(route.links, n);
  if (w.npkts == 1) {
    // One packet (a credit, a zero-length SEND, a small message): a real
    // fabric serializes it at line rate between the other flows' packets,
    // costing them one small packet's wire time, not a fair share. It
    // takes its lone time and stays out of the max-min sharing
    // (docs/FLOW.md, "Single-packet messages").
    // Its lone time is known now, so its finish needs no event and takes
    // no flow slot. It is sent now, for the time it leaves (the arrival and
    // ACK fall where its finish would have put them), and the QP stays
    // busy until then (flow_free_ps). One event per message fewer: a
    // ring's credits are half its messages. Split, its arrival waits in
    // this process until the window it leaves in has run
    // (FlowFabric::NoteArrival), so that a QP failing before then can
    // still withdraw it.
    flow_->model().CountPass();
    const int64_t lone = flow_->model().LoneTime(links, bytes);
    qp.flow_free_ps = now + lone;
    FlowSent(qp, lone);
    return;
  }
  qp.flow_busy = true;
  flow_->model().Start(links, bytes, &Nic::OnFlowSent, this, qp.qpn, route.split_class);
}

void Nic::OnFlowFree(void* nic, uint64_t qpn) {
  Nic* self = static_cast<Nic*>(nic);
  Qp* qp = self->FindQp(static_cast<uint32_t>(qpn));
  FlowFabric* flow = self->flow_;
  if (flow->split() && !flow->Local(self->host_)) {
    // A replica's: its requester's process counts the same event.
    flow->Uncount(self->engine_->Now().ps(), EventKind::kUser,
                  FlowFabric::PassKey(self->host_, static_cast<uint32_t>(qpn)));
  }
  qp->flow_busy = false;
  qp->flow_free_ps = -1;  // it has left
  self->FlowActivate(*qp);
}

void Nic::FlowWithdrawFold(Qp& qp) {
  if (flow_ == nullptr || engine_->Now().ps() >= qp.flow_free_ps) return;
  // Its arrival is still ahead (at least its lone time from now): the
  // message never left, as the finish event would have found. What the
  // fold counted as sent is taken back.
  const bool split = flow_->split();
  if (split && !flow_->Local(host_)) return;  // a replica sent nothing
  if (qp.flow_fold_slot != 0) {
    const SendWr& wr =
        split ? flow_->WithdrawHeld(host_, qp.qpn) : flow_->Withdraw(qp.flow_fold_slot - 1);
    if (IsWriteWr(wr.opcode)) --qp.counters.rdma_sends;
  }
  if (split) --qp.flow_route.split_sent;
  qp.max_sent_psn = wire::PsnAdd(qp.max_sent_psn, -1);
  --qp.sent_pkts;
  qp.flow_free_ps = -1;
}

void Nic::OnFlowSent(void* nic, uint64_t qpn) {
  Nic* self = static_cast<Nic*>(nic);
  Qp* qp = self->FindQp(static_cast<uint32_t>(qpn));
  qp->flow_busy = false;
  // The QP failed (or the host crashed) while its message was on the wire.
  if (self->crashed_ || qp->state != QpState::kRts || qp->send_idx >= qp->sq.size()) return;
  self->FlowSent(*qp, 0);
}

void Nic::FlowSent(Qp& qp, int64_t later_ps) {
  const SendWqe w = qp.sq[qp.send_idx];
  MoveSendCursor(qp, qp.send_idx + 1, 0);
  // Split (flow_fabric.h): the requester's process completes the WQE; a
  // replica keeps only what is still to send.
  const bool local = flow_->Local(host_);
  const uint32_t end_psn = wire::PsnAdd(w.first_psn, w.npkts);
  qp.max_sent_psn = end_psn;
  qp.sent_pkts += w.npkts;
  if (IsWriteWr(w.wr.opcode) && local) ++qp.counters.rdma_sends;
  const bool split = flow_->split();
  if (split && !local) {
    // A replica: its process's copy sends the message on (NoteArrival).
    RetireFront(qp);
    FlowActivate(qp);
    return;
  }
  if (split) ++qp.flow_route.split_sent;
  qp.flow_fold_slot = 0;
  Nic* dst = flow_->NicOfHost(qp.flow.dst_host);
  Qp* peer = dst != nullptr ? dst->FindQp(qp.remote_qpn) : nullptr;
  uint32_t last_wire = 0;
  MessageWireBytes(w.wr, w.npkts, static_cast<uint32_t>(qp.attr.path_mtu_bytes), ipv6_, &last_wire);
  // Forward: the last packet crosses every link's propagation delay, and is
  // stored and forwarded (serialized again) at every hop after the first
  // (its first serialization ends the flow), as Port does.
  // Kept per QP with its route: its messages mostly repeat one size.
  Qp::FlowRoute& route = qp.flow_route;
  if (route.fwd_wire != last_wire) {
    Picoseconds forward;
    for (size_t i = 0; i < kPathMax && qp.flow.path[i] != nullptr; ++i) {
      const PortConfig& c = qp.flow.path[i]->config();
      forward += c.latency + (i > 0 ? c.rate.SerializationTime(last_wire) : Picoseconds());
    }
    route.fwd_wire = last_wire;
    route.fwd = forward;
  }
  const Picoseconds forward = route.fwd;
  // Back: the ACK (no payload) on the peer QP's own route, kept with that
  // route (reset when the peer's route is set).
  Picoseconds back;
  if (peer != nullptr) {
    Qp::FlowRoute& peer_route = peer->flow_route;
    if (!peer_route.ack_known) {
      const uint32_t ack_wire = FrameWireBytes(Opcode::kAcknowledge, 0, ipv6_);
      Picoseconds ack;
      for (size_t i = 0; i < kPathMax && peer->flow.path[i] != nullptr; ++i) {
        const PortConfig& c = peer->flow.path[i]->config();
        ack += c.latency + c.rate.SerializationTime(ack_wire);
      }
      peer_route.ack_known = true;
      peer_route.ack = ack;
    }
    back = peer_route.ack;
  }
  if (dst != nullptr) {
    const int rnr_retry = qp.attr.rnr_retry;
    const int64_t rnr_wait = RnrTimerPs(peer != nullptr ? peer->attr.min_rnr_timer : 0);
    if (split) {
      // To the receiver's process, through the exchange (forward is at
      // least a window: the route's propagation), once it has left.
      flow_->NoteArrival(this, qp.qpn, dst, qp.remote_qpn, w.wr, w.npkts, end_psn,
                         Picoseconds(later_ps), forward, back, rnr_retry, rnr_wait);
      qp.flow_fold_slot = later_ps > 0 ? 1 : 0;
    } else {
      qp.flow_fold_slot =
          1 + flow_->Deliver(this, qp.qpn, dst, qp.remote_qpn, w.wr, w.npkts, end_psn,
                             forward + Picoseconds(later_ps), back, rnr_retry, rnr_wait);
    }
  }
  FlowActivate(qp);  // the next message follows at once
}

WcStatus Nic::FlowReceive(uint32_t qpn, const SendWr& wr, uint32_t npkts, uint32_t end_psn,
                          bool* rnr) {
  *rnr = false;
  Qp* qp = FindQp(qpn);
  if (crashed_ || qp == nullptr || (qp->state != QpState::kRtr && qp->state != QpState::kRts)) {
    if (crashed_) {
      drops_->Add(DropReason::kHostCrashed);
    } else {
      drops_->Add(DropReason::kQpNotReady);
    }
    return WcStatus::kRetryExcErr;
  }
  const bool write = IsWriteWr(wr.opcode);
  const bool imm = HasImmWr(wr.opcode);
  const uint32_t len = wr.sge.length;
  const bool consumes = !write || imm;
  if (consumes && qp->rq.empty()) {
    ++qp->counters.send_rnr_err;
    *rnr = true;
    return WcStatus::kRnrRetryExcErr;
  }
  // The source bytes: the requester's buffer, in this process (a modelled
  // key carries none).
  const bool has_data = wr.sge.lkey != kModelledKey && len > 0;
  if (write) {
    if (wr.rkey != kModelledKey) {
      if (CheckRemote(wr.rkey, wr.remote_addr, len, kAccessRemoteWrite) == nullptr) {
        EnterError(*qp);
        return WcStatus::kRemAccessErr;
      }
      if (has_data) {
        std::memcpy(reinterpret_cast<void*>(wr.remote_addr),
                    reinterpret_cast<const void*>(wr.sge.addr), len);
      }
    }
  } else {
    const RecvWqe& r = qp->rq.front();
    if (len > r.wr.sge.length) {
      // IBV_WC_LOC_LEN_ERR here, IBV_WC_REM_INV_REQ_ERR at the requester
      // (CASES.md 2), as the responder does.
      const RecvWqe failed = r;
      qp->rq.pop_front();
      Complete(*qp, qp->recv_cq, RecvWc(failed.wr.wr_id, WcStatus::kLocLenErr));
      EnterError(*qp);
      return WcStatus::kRemInvReqErr;
    }
    if (has_data && r.wr.sge.lkey != kModelledKey) {
      std::memcpy(reinterpret_cast<void*>(r.wr.sge.addr),
                  reinterpret_cast<const void*>(wr.sge.addr), len);
    }
  }
  qp->rcvd_pkts += npkts;
  ++qp->msn;
  qp->epsn = end_psn;
  if (consumes) {
    const RecvWqe done = qp->rq.front();
    qp->rq.pop_front();
    ++qp->counters.rdma_recvs;
    Complete(*qp, qp->recv_cq,
             RecvWcImm(done.wr.wr_id, write ? WcOpcode::kRecvRdmaWithImm : WcOpcode::kRecv, len,
                       wr.imm_data, imm));
  }
  return WcStatus::kSuccess;
}

void Nic::FlowAcked(uint32_t qpn, uint32_t end_psn, WcStatus status) {
  Qp* qp = FindQp(qpn);
  if (crashed_ || qp == nullptr || qp->state != QpState::kRts) return;
  if (status != WcStatus::kSuccess) {
    if (status == WcStatus::kRnrRetryExcErr) ++qp->counters.rnr_nak_retry_err;
    FailFront(*qp, status);
    return;
  }
  // Every WQE up to end_psn is acknowledged (AckUpTo, without timers: the
  // flow model loses nothing).
  while (!qp->sq.empty()) {
    const SendWqe& w = qp->sq.front();
    const uint32_t end = wire::PsnAdd(w.first_psn, w.npkts);
    if (wire::PsnDiff(end, end_psn) > 0) break;
    qp->acked_psn = end;
    const SendWqe done = RetireFront(*qp);
    if (done.wr.signaled) {
      Complete(*qp, qp->send_cq, SendWc(done.wr, WcStatus::kSuccess, done.wr.sge.length));
    }
    if (qp->state != QpState::kRts) return;  // a completion callback moved the QP
  }
  FlowActivate(*qp);
}

}  // namespace fathom::sim
