// Completion queues and queue pairs of the verbs backend.
#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <net/if.h>
#include <poll.h>

#include <array>
#include <cassert>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <random>
#include <unordered_map>

#include "transport/verbs/connect_params.h"
#include "transport/verbs/verbs_objects.h"

namespace fathom::transport::verbs {

// base/verbs_types.h mirrors verbs.h by value; the backend casts between them.
static_assert(static_cast<int>(WcStatus::kSuccess) == IBV_WC_SUCCESS);
static_assert(static_cast<int>(WcStatus::kLocLenErr) == IBV_WC_LOC_LEN_ERR);
static_assert(static_cast<int>(WcStatus::kLocProtErr) == IBV_WC_LOC_PROT_ERR);
static_assert(static_cast<int>(WcStatus::kWrFlushErr) == IBV_WC_WR_FLUSH_ERR);
static_assert(static_cast<int>(WcStatus::kRemInvReqErr) == IBV_WC_REM_INV_REQ_ERR);
static_assert(static_cast<int>(WcStatus::kRemAccessErr) == IBV_WC_REM_ACCESS_ERR);
static_assert(static_cast<int>(WcStatus::kRetryExcErr) == IBV_WC_RETRY_EXC_ERR);
static_assert(static_cast<int>(WcStatus::kRnrRetryExcErr) == IBV_WC_RNR_RETRY_EXC_ERR);
static_assert(static_cast<int>(WcStatus::kFatalErr) == IBV_WC_FATAL_ERR);
static_assert(static_cast<int>(WcStatus::kGeneralErr) == IBV_WC_GENERAL_ERR);
static_assert(static_cast<int>(WcOpcode::kSend) == IBV_WC_SEND);
static_assert(static_cast<int>(WcOpcode::kRdmaWrite) == IBV_WC_RDMA_WRITE);
static_assert(static_cast<int>(WcOpcode::kRdmaRead) == IBV_WC_RDMA_READ);
static_assert(static_cast<int>(WcOpcode::kCompSwap) == IBV_WC_COMP_SWAP);
static_assert(static_cast<int>(WcOpcode::kFetchAdd) == IBV_WC_FETCH_ADD);
static_assert(static_cast<int>(WcOpcode::kBindMw) == IBV_WC_BIND_MW);
static_assert(static_cast<int>(WcOpcode::kLocalInv) == IBV_WC_LOCAL_INV);
static_assert(static_cast<int>(WcOpcode::kRecv) == IBV_WC_RECV);
static_assert(static_cast<int>(WcOpcode::kRecvRdmaWithImm) == IBV_WC_RECV_RDMA_WITH_IMM);
static_assert(static_cast<int>(WrOpcode::kRdmaWrite) == IBV_WR_RDMA_WRITE);
static_assert(static_cast<int>(WrOpcode::kRdmaWriteWithImm) == IBV_WR_RDMA_WRITE_WITH_IMM);
static_assert(static_cast<int>(WrOpcode::kSend) == IBV_WR_SEND);
static_assert(static_cast<int>(WrOpcode::kSendWithImm) == IBV_WR_SEND_WITH_IMM);
static_assert(static_cast<int>(WrOpcode::kRdmaRead) == IBV_WR_RDMA_READ);
static_assert(static_cast<int>(WrOpcode::kAtomicCmpAndSwp) == IBV_WR_ATOMIC_CMP_AND_SWP);
static_assert(static_cast<int>(WrOpcode::kAtomicFetchAndAdd) == IBV_WR_ATOMIC_FETCH_AND_ADD);
static_assert(static_cast<int>(QpState::kReset) == IBV_QPS_RESET);
static_assert(static_cast<int>(QpState::kInit) == IBV_QPS_INIT);
static_assert(static_cast<int>(QpState::kRtr) == IBV_QPS_RTR);
static_assert(static_cast<int>(QpState::kRts) == IBV_QPS_RTS);
static_assert(static_cast<int>(QpState::kSqd) == IBV_QPS_SQD);
static_assert(static_cast<int>(QpState::kSqe) == IBV_QPS_SQE);
static_assert(static_cast<int>(QpState::kErr) == IBV_QPS_ERR);
static_assert(static_cast<int>(kAccessLocalWrite) == static_cast<int>(IBV_ACCESS_LOCAL_WRITE));
static_assert(static_cast<int>(kAccessRemoteWrite) == static_cast<int>(IBV_ACCESS_REMOTE_WRITE));
static_assert(static_cast<int>(kAccessRemoteRead) == static_cast<int>(IBV_ACCESS_REMOTE_READ));
static_assert(static_cast<int>(kAccessRemoteAtomic) == static_cast<int>(IBV_ACCESS_REMOTE_ATOMIC));
static_assert(static_cast<int>(GidType::kIb) == IBV_GID_TYPE_IB);
static_assert(static_cast<int>(GidType::kRoceV1) == IBV_GID_TYPE_ROCE_V1);
static_assert(static_cast<int>(GidType::kRoceV2) == IBV_GID_TYPE_ROCE_V2);

namespace internal {

Status SetNonBlocking(int fd, const char* what) {
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    return IoError(std::string("fcntl(O_NONBLOCK) on ") + what + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

// ---- CQ ----

int VerbsCq::Poll(std::span<Completion> out) {
  std::array<ibv_wc, 32> wcs;
  int total = 0;
  while (static_cast<size_t>(total) < out.size()) {
    const int want =
        static_cast<int>(std::min(wcs.size(), out.size() - static_cast<size_t>(total)));
    const int n = ibv_poll_cq(cq_.get(), want, wcs.data());
    if (n <= 0) break;  // < 0 only for a broken CQ, which also raises IBV_EVENT_CQ_ERR
    for (int i = 0; i < n; ++i) {
      const ibv_wc& wc = wcs[static_cast<size_t>(i)];
      Completion& c = out[static_cast<size_t>(total++)];
      c = Completion{};
      c.wr_id = wc.wr_id;
      c.status = static_cast<WcStatus>(wc.status);
      c.opcode = static_cast<WcOpcode>(wc.opcode);
      c.byte_len = wc.byte_len;
      c.has_imm = (wc.wc_flags & IBV_WC_WITH_IMM) != 0;
      c.imm_data = c.has_imm ? ntohl(wc.imm_data) : 0;
      c.qp_num = wc.qp_num;
      c.vendor_err = wc.vendor_err;
      auto it = qps_.find(wc.qp_num);
      if (it != qps_.end()) it->second->OnCompletion(c);
    }
    if (n < want) break;
  }
  while (static_cast<size_t>(total) < out.size() && !flushed_.empty()) {
    out[static_cast<size_t>(total++)] = flushed_.front();
    flushed_.pop_front();
  }
  return total;
}

Status VerbsCq::HandleEvents() {
  if (!channel_) return Status::Ok();
  bool any = false;
  for (;;) {
    ibv_cq* ev_cq = nullptr;
    void* ctx = nullptr;
    if (ibv_get_cq_event(channel_.get(), &ev_cq, &ctx) != 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return VerbsError("ibv_get_cq_event", "fd=" + std::to_string(channel_->fd), errno);
    }
    any = true;
    ++events_;
    // Acks are batched: ibv_ack_cq_events takes a mutex.
    if (++unacked_events_ >= 64) {
      ibv_ack_cq_events(cq_.get(), unacked_events_);
      unacked_events_ = 0;
    }
  }
  if (any) {
    if (const int rc = ibv_req_notify_cq(cq_.get(), 0); rc != 0) {
      return VerbsError("ibv_req_notify_cq", "cq", rc);
    }
    if (notify_) notify_();
  }
  return Status::Ok();
}

Status VerbsCq::WaitForEvent(Picoseconds timeout) {
  if (!channel_) return Status::Ok();
  pollfd pfd{channel_->fd, POLLIN, 0};
  const int ms = static_cast<int>(std::max<int64_t>(0, timeout.ps() / 1000000000));
  const int rc = poll(&pfd, 1, ms);
  if (rc < 0 && errno != EINTR) {
    return IoError(std::string("poll(completion channel): ") + std::strerror(errno));
  }
  if (rc <= 0) return DeadlineExceeded("no completion event within " + std::to_string(ms) + " ms");
  return HandleEvents();
}

// ---- QP ----

EndpointInfo VerbsQp::LocalInfo() const {
  EndpointInfo e;
  e.rank = device_->rank();
  e.qpn = qp_->qp_num;
  e.psn = psn_;
  e.lid = device_->lid();
  e.gid = device_->gid().gid;
  e.gid_index = device_->gid().index;
  e.active_mtu = device_->active_mtu();
  return e;
}

Status VerbsQp::ToInit() {
  QpTransition t = InitTransition(device_->port(), kAccessAll);
  if (const int rc = ibv_modify_qp(qp_.get(), &t.attr, t.mask); rc != 0) {
    return VerbsError("ibv_modify_qp(INIT)",
                      Describe() + " port=" + std::to_string(device_->port()), rc);
  }
  state_ = QpState::kInit;
  return Status::Ok();
}

Status VerbsQp::Connect(const EndpointInfo& remote) {
  FATHOM_RETURN_IF_ERROR(ValidateQpOptions(options_));
  if (state_ == QpState::kReset) FATHOM_RETURN_IF_ERROR(ToInit());
  if (state_ != QpState::kInit) {
    return FailedPrecondition("Connect " + Describe() + ": QP is in " +
                              std::string(QpStateName(state_)) + ", not IBV_QPS_INIT");
  }
  if (remote.qpn == 0 || remote.qpn > 0xffffff) {
    return InvalidArgument("Connect " + Describe() + ": remote qpn " + Hex(remote.qpn) +
                           " from rank " + std::to_string(remote.rank) + " is not a QPN");
  }
  if (device_->is_roce() && IsZeroGid(remote.gid)) {
    return InvalidArgument("Connect " + Describe() + ": remote GID of rank " +
                           std::to_string(remote.rank) + " is zero (RoCE needs a GID)");
  }
  if (!device_->is_roce() && remote.lid == 0) {
    return InvalidArgument("Connect " + Describe() + ": remote LID of rank " +
                           std::to_string(remote.rank) + " is 0 (is a subnet manager running?)");
  }
  auto mtu = NegotiatePathMtu(device_->active_mtu(), remote.active_mtu, options_.path_mtu);
  if (!mtu.ok()) return mtu.status().WithContext("Connect " + Describe());
  QpOptions o = options_;
  // The device bounds outstanding reads/atomics (mlx5: 16, rxe: 128).
  o.max_rd_atomic = std::min(o.max_rd_atomic, device_->dev_attr().max_qp_rd_atom);
  QpOptions o_rtr = options_;
  o_rtr.max_rd_atomic = std::min(o_rtr.max_rd_atomic, device_->dev_attr().max_qp_init_rd_atom);
  QpTransition rtr =
      RtrTransition(o_rtr, remote, *mtu, device_->port(), device_->gid().index, device_->is_roce());
  if (const int rc = ibv_modify_qp(qp_.get(), &rtr.attr, rtr.mask); rc != 0) {
    return VerbsError(
        "ibv_modify_qp(RTR)",
        Describe() + " dest_qpn=" + Hex(remote.qpn) + " mtu=" + std::to_string(*mtu) +
            " dest_gid=" + FormatGid(remote.gid) + " dlid=" + std::to_string(remote.lid) +
            " sgid_index=" + std::to_string(device_->gid().index) + " rq_psn=" + Hex(remote.psn),
        rc);
  }
  state_ = QpState::kRtr;
  QpTransition rts = RtsTransition(o, psn_);
  if (const int rc = ibv_modify_qp(qp_.get(), &rts.attr, rts.mask); rc != 0) {
    return VerbsError("ibv_modify_qp(RTS)",
                      Describe() + " timeout=" + std::to_string(o.timeout) +
                          " retry_cnt=" + std::to_string(o.retry_cnt) +
                          " rnr_retry=" + std::to_string(o.rnr_retry) + " sq_psn=" + Hex(psn_) +
                          " max_rd_atomic=" + std::to_string(o.max_rd_atomic),
                      rc);
  }
  state_ = QpState::kRts;
  path_mtu_ = *mtu;
  return Status::Ok();
}

namespace {

// One ibv_send_wr (and its one SGE) from a SendWr; `inline_size` is the QP's.
void FillSendWr(const SendWr& wr, uint32_t inline_size, ibv_send_wr* w, ibv_sge* sge) {
  *sge = {wr.sge.addr, wr.sge.length, wr.sge.lkey};
  *w = ibv_send_wr{};
  w->wr_id = wr.wr_id;
  w->sg_list = sge;
  w->num_sge = 1;
  w->opcode = static_cast<ibv_wr_opcode>(wr.opcode);
  w->send_flags = wr.signaled ? IBV_SEND_SIGNALED : 0;
  const bool can_inline = wr.opcode == WrOpcode::kSend || wr.opcode == WrOpcode::kSendWithImm ||
                          wr.opcode == WrOpcode::kRdmaWrite ||
                          wr.opcode == WrOpcode::kRdmaWriteWithImm;
  if (can_inline && wr.sge.length > 0 && wr.sge.length <= inline_size) {
    w->send_flags |= IBV_SEND_INLINE;
  }
  if (wr.opcode == WrOpcode::kSendWithImm || wr.opcode == WrOpcode::kRdmaWriteWithImm) {
    w->imm_data = htonl(wr.imm_data);
  }
  if (wr.opcode == WrOpcode::kAtomicCmpAndSwp || wr.opcode == WrOpcode::kAtomicFetchAndAdd) {
    w->wr.atomic.remote_addr = wr.remote_addr;
    w->wr.atomic.rkey = wr.rkey;
    w->wr.atomic.compare_add = wr.compare_add;
    w->wr.atomic.swap = wr.swap;
  } else {
    w->wr.rdma.remote_addr = wr.remote_addr;
    w->wr.rdma.rkey = wr.rkey;
  }
}

}  // namespace

Status VerbsQp::ModifyToError() {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  if (const int rc = ibv_modify_qp(qp_.get(), &attr, IBV_QP_STATE); rc != 0) {
    return VerbsError("ibv_modify_qp(ERR)", Describe(), rc);
  }
  state_ = QpState::kErr;
  return Status::Ok();
}

// The send queue works from RTS on (IBTA 10.3.1). Providers differ before
// that (EINVAL, or a WQE queued until RTS), so refuse here, before the
// provider sees the WR, as the emulated NIC does.
Status VerbsQp::CheckCanSend(const SendWr& wr) const {
  if (state_ == QpState::kReset || state_ == QpState::kInit || state_ == QpState::kRtr) {
    return FailedPrecondition(
        "ibv_post_send " + Describe() + " peer_rank=" + std::to_string(peer_rank_) +
        " wr_id=" + Hex(wr.wr_id) + ": QP in " + std::string(QpStateName(state_)) +
        ", not IBV_QPS_RTS (Connect() first)");
  }
  return Status::Ok();
}

Status VerbsQp::PostSend(const SendWr& wr) {
  if (Status s = CheckCanSend(wr); !s.ok()) return s;
  ibv_sge sge;
  ibv_send_wr w;
  FillSendWr(wr, inline_size_, &w, &sge);
  ibv_send_wr* bad = nullptr;
  if (const int rc = ibv_post_send(qp_.get(), &w, &bad); rc != 0) {
    const std::string detail =
        Describe() + " peer_rank=" + std::to_string(peer_rank_) + " wr_id=" + Hex(wr.wr_id) +
        " opcode=" + std::string(WrOpcodeName(wr.opcode)) +
        " len=" + std::to_string(wr.sge.length) + " outstanding=" + std::to_string(sends_.size()) +
        " max_send_wr=" + std::to_string(options_.max_send_wr);
    if (rc == ENOMEM) return Unavailable(VerbsCallError("ibv_post_send", detail, rc));
    return VerbsError("ibv_post_send", detail, rc);
  }
  sends_.push_back({wr.wr_id, SendCompletionOpcode(wr.opcode)});
  send_signaled_.push_back(wr.signaled);
  return Status::Ok();
}

Status VerbsQp::PostSendList(std::span<const SendWr> wrs) {
  if (wrs.empty()) return Status::Ok();
  if (Status s = CheckCanSend(wrs.front()); !s.ok()) return s;
  if (list_wrs_.size() < wrs.size()) {
    list_wrs_.resize(wrs.size());
    list_sges_.resize(wrs.size());
  }
  for (size_t i = 0; i < wrs.size(); ++i) {
    FillSendWr(wrs[i], inline_size_, &list_wrs_[i], &list_sges_[i]);
    list_wrs_[i].next = i + 1 < wrs.size() ? &list_wrs_[i + 1] : nullptr;
  }
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(qp_.get(), list_wrs_.data(), &bad);
  // verbs posts the WRs before `bad` and none from it on.
  const size_t posted =
      rc == 0 ? wrs.size()
              : (bad != nullptr ? static_cast<size_t>(bad - list_wrs_.data()) : size_t{0});
  for (size_t i = 0; i < posted && i < wrs.size(); ++i) {
    sends_.push_back({wrs[i].wr_id, SendCompletionOpcode(wrs[i].opcode)});
    send_signaled_.push_back(wrs[i].signaled);
  }
  if (rc != 0) {
    const SendWr& wr = wrs[std::min(posted, wrs.size() - 1)];
    std::string detail =
        Describe() + " peer_rank=" + std::to_string(peer_rank_) + " wr_id=" + Hex(wr.wr_id) +
        " opcode=" + std::string(WrOpcodeName(wr.opcode)) +
        " len=" + std::to_string(wr.sge.length) + " outstanding=" + std::to_string(sends_.size()) +
        " max_send_wr=" + std::to_string(options_.max_send_wr);
    if (wrs.size() > 1) {
      detail +=
          " (WR " + std::to_string(posted) + " of a list of " + std::to_string(wrs.size()) + ")";
    }
    if (rc == ENOMEM) return Unavailable(VerbsCallError("ibv_post_send", detail, rc));
    return VerbsError("ibv_post_send", detail, rc);
  }
  return Status::Ok();
}

Status VerbsQp::PostRecv(const RecvWr& wr) {
  if (state_ == QpState::kErr) {
    // A receive posted in ERR completes with IBV_WC_WR_FLUSH_ERR (IBTA
    // C10-42, C10-97.2.1), but rxe of Linux 6.1 (the testbed's kernel) leaves
    // it in the queue forever: complete it here, without the device. (ERR
    // is known from the first error completion polled on; a receive posted
    // between the QP's error and that poll still goes to the device.)
    Completion c;
    c.wr_id = wr.wr_id;
    c.status = WcStatus::kWrFlushErr;
    c.opcode = WcOpcode::kRecv;
    c.qp_num = qp_->qp_num;
    c.peer_rank = peer_rank_;
    cq_->AddFlushed(c);
    return Status::Ok();
  }
  ibv_sge sge{wr.sge.addr, wr.sge.length, wr.sge.lkey};
  ibv_recv_wr w{};
  w.wr_id = wr.wr_id;
  w.sg_list = &sge;
  w.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (const int rc = ibv_post_recv(qp_.get(), &w, &bad); rc != 0) {
    const std::string detail = Describe() + " peer_rank=" + std::to_string(peer_rank_) +
                               " wr_id=" + Hex(wr.wr_id) + " len=" + std::to_string(wr.sge.length) +
                               " outstanding=" + std::to_string(recvs_.size()) +
                               " max_recv_wr=" + std::to_string(options_.max_recv_wr);
    if (rc == ENOMEM) return Unavailable(VerbsCallError("ibv_post_recv", detail, rc));
    return VerbsError("ibv_post_recv", detail, rc);
  }
  recvs_.push_back({wr.wr_id, WcOpcode::kRecv});
  return Status::Ok();
}

void VerbsQp::OnCompletion(Completion& c) {
  c.peer_rank = peer_rank_;
  if (c.status != WcStatus::kSuccess) state_ = QpState::kErr;
  // Success: the opcode says which queue. Error: verbs leaves the opcode
  // undefined, so match the wr_id, send queue first.
  bool is_send = false;
  if (c.status == WcStatus::kSuccess) {
    is_send = (static_cast<int>(c.opcode) & IBV_WC_RECV) == 0;
  } else {
    for (const PostedWr& p : sends_) {
      if (p.wr_id == c.wr_id) {
        is_send = true;
        break;
      }
    }
  }
  if (is_send) {
    // Retire unsignaled WRs before the completed one (they completed too).
    while (!sends_.empty()) {
      const PostedWr p = sends_.front();
      const bool signaled = send_signaled_.front();
      sends_.pop_front();
      send_signaled_.pop_front();
      if (p.wr_id == c.wr_id && (signaled || c.status != WcStatus::kSuccess)) {
        if (c.status != WcStatus::kSuccess) c.opcode = p.opcode;
        break;
      }
    }
  } else if (!recvs_.empty()) {
    recvs_.pop_front();
    if (c.status != WcStatus::kSuccess) c.opcode = WcOpcode::kRecv;
  }
}

}  // namespace internal
}  // namespace fathom::transport::verbs
