// Nic setup, verbs-like calls, the transmit scheduler and completions. The
// RC protocol itself is in requester.cc and responder.cc.
#include "fabric/sim/nic.h"

#include <cstddef>
#include <string>

#include "fabric/sim/flow_fabric.h"
#include "fabric/wire/psn.h"

namespace fathom::sim {

int CompletionQueue::Poll(std::span<Completion> out) {
  int n = 0;
  while (n < static_cast<int>(out.size()) && !entries_.empty()) {
    out[n++] = entries_.front();
    entries_.pop_front();
  }
  return n;
}

Nic::Nic(Engine* engine, PacketPool* pool, DropStats* drops, int32_t host_node,
         const NetworkConfig& config)
    : engine_(engine),
      pool_(pool),
      host_(host_node),
      ipv6_(config.ipv6),
      drops_(drops),
      profile_(config.nic),
      dscp_to_priority_(config.qos.dscp_to_priority) {
  const NicProfile& np = profile_;
  timed_ = np.doorbell.ps() != 0 || np.wqe_fetch.ps() != 0 || np.per_message.ps() != 0 ||
           np.dma_read_latency.ps() != 0 || np.dma_write_latency.ps() != 0 ||
           np.cqe_write.ps() != 0 || np.pcie_rate.bps() != 0;
  retrans_profile_ =
      np.adaptive_retransmission || np.timeout_floor != 0 || np.timeout_multiplier != 1;
  infinite_retry7_ = np.infinite_retry7;
  engine_->set_prefetcher<&Nic::OnPump>(&Nic::PrefetchPump);
  engine_->set_prefetcher<&Nic::OnDelayed>(&Nic::PrefetchDelayed);
  dcqcn_ = config.dcqcn.enabled;
  dcqcn_config_ = config.dcqcn;
  // What the pump's fetch hint reads is in the NIC's first two lines, which
  // the engine fetched before it.
  static_assert(offsetof(Nic, rr_full_size_) < 128 && offsetof(Nic, rr_wqe_) < 128 &&
                offsetof(Nic, rr_front_) < 128 && offsetof(Nic, control_head_) < 128 &&
                offsetof(Nic, port_) < 128 && offsetof(Nic, active_) + sizeof(active_) <= 128 &&
                offsetof(Nic, dcqcn_base_) < 128);
  // NewPacket reads line 0 of a QP; the requester lines 0 to 2
  // (PrefetchQp fetches them).
  static_assert(offsetof(Qp, attr) + sizeof(Qp::attr) <= 192);
  static_assert(offsetof(Qp, remote_qpn) + sizeof(uint32_t) <= 64);
  static_assert(offsetof(Qp, ack_deadline_ps) + sizeof(int64_t) <= 128);
  // A full-size packet (RequesterSendFullSize) reads lines 0 and 1 only; the
  // READ responses' count (ResponderHasWork) is in the first 16 bytes of
  // their ring.
  static_assert(offsetof(Qp, send_pkt) + sizeof(uint32_t) <= 64);
  static_assert(offsetof(Qp, rnr_until_ps) + sizeof(int64_t) <= 128);
  static_assert(offsetof(Qp, reads) + 16 <= 128);
  // ... and a WRITE's full-size packet received lines 0 and 3.
  static_assert(offsetof(Qp, rq) == 192 && offsetof(Qp, rcvd_pkts) + sizeof(uint64_t) <= 256);
  // The fetch hints' fields are in the NIC's first two lines.
  static_assert(offsetof(Nic, rr_wqe_) + sizeof(rr_wqe_) <= 128);
  // The send queue holds base's SendWr, a CQ the verbs fields plus a time:
  // the sizes the NIC had with structs of its own.
  static_assert(sizeof(SendWqe) == 88 && sizeof(Completion) == 40);
}

void Nic::PrefetchQp(const Qp* qp, bool receive) {
  const char* lines = reinterpret_cast<const char*>(qp);
  __builtin_prefetch(lines);                     // line 0: everyone
  __builtin_prefetch(lines + 64);                // line 1: requester (sending, ACKs)
  __builtin_prefetch(lines + 128);               // line 2: attributes, READ responses
  if (receive) __builtin_prefetch(lines + 192);  // line 3: responder
}

void Nic::PrefetchDelayed(const void* nic, uint64_t which) {
  // The queue's header (its front), outside the NIC's first two lines.
  const Nic* self = static_cast<const Nic*>(nic);
  __builtin_prefetch(which == 0 ? static_cast<const void*>(&self->delayed_posts_)
                                : static_cast<const void*>(&self->delayed_completions_));
}

void Nic::PrefetchFlowQp(const Nic* nic, uint32_t qpn, bool receive) {
  __builtin_prefetch(nic);
  __builtin_prefetch(reinterpret_cast<const char*>(nic) + 64);
  // A QP in the NIC itself is found from the NIC's address, without a load.
  const uint32_t index = qpn - kFirstQpn;
  if (qpn < kFirstQpn || index >= kQpChunk) return;
  const Qp* qp = &nic->first_qps_[index];
  PrefetchQp(qp, receive);
  if (!receive) {
    // OnFlowSent and FlowActivate read the peer and the route's links.
    __builtin_prefetch(&qp->flow.dst_host);
    __builtin_prefetch(&qp->flow_route);
  }
  // A completion queues behind the NIC's delays (Complete).
  if (nic->timed_) __builtin_prefetch(&nic->delayed_completions_);
}

void Nic::PrefetchPump(const void* nic, uint64_t /*arg*/) {
  const Nic* self = static_cast<const Nic*>(nic);
  const Qp* qp = self->rr_front_;
  if (self->control_head_ != nullptr) __builtin_prefetch(self->control_head_);
  if (self->port_ != nullptr) {
    // Send reads both of the port's hot lines (the serializer's time is in
    // the second).
    __builtin_prefetch(self->port_);
    __builtin_prefetch(reinterpret_cast<const char*>(self->port_) + 64);
  }
  if (self->dcqcn_ && qp != nullptr) {
    // DCQCN: PaceFront reads the front QP's rate limiter (its first bytes,
    // DcqcnRate::waits), in storage of its own: found by the QP's index,
    // from its address, for the QPs in the NIC itself (no load of the QP).
    const uintptr_t at = reinterpret_cast<uintptr_t>(qp);
    const uintptr_t first = reinterpret_cast<uintptr_t>(&self->first_qps_[0]);
    const uintptr_t i = (at - first) / sizeof(Qp);
    if (at >= first && i < kQpChunk && i < self->qp_count_) {
      const char* cc = reinterpret_cast<const char*>(&self->dcqcn_base_[i]);
      __builtin_prefetch(cc);
      __builtin_prefetch(cc + 64);
    }
    // The paced pump's time (OnPump, SchedulePacedPump) and the byte
    // counter's threshold (OnSent), on the NIC's cold lines.
    __builtin_prefetch(&self->paced_at_ps_);
    __builtin_prefetch(&self->dcqcn_config_.rpg_byte_reset_bytes);
  }
  if (qp != nullptr && self->rr_full_size_) {
    // A full-size packet (RequesterSendFullSize) reads the QP's first two
    // lines and nothing else of it.
    __builtin_prefetch(qp);
    __builtin_prefetch(reinterpret_cast<const char*>(qp) + 64);
    return;
  }
  if (qp != nullptr) {
    // The round-robin list's front entry (Pump reads the QP through it, in
    // storage of its own) and the QP's lines.
    __builtin_prefetch(self->active_.at_address(0));
    PrefetchQp(qp, false);
  }
  if (self->rr_wqe_ != nullptr) {
    const char* wqe = reinterpret_cast<const char*>(self->rr_wqe_);
    __builtin_prefetch(wqe);
    __builtin_prefetch(wqe + sizeof(SendWqe) - 1);
  }
}

Nic::~Nic() {
  while (control_head_ != nullptr) {
    Packet* p = control_head_;
    control_head_ = p->next;
    pool_->Free(p);
  }
}

Nic::Qp* Nic::FindQp(uint32_t qpn) {
  if (qpn < kFirstQpn || qpn - kFirstQpn >= qp_count_) return nullptr;
  return QpAt(qpn - kFirstQpn);
}
const Nic::Qp* Nic::FindQp(uint32_t qpn) const {
  if (qpn < kFirstQpn || qpn - kFirstQpn >= qp_count_) return nullptr;
  return QpAt(qpn - kFirstQpn);
}

StatusOr<MemoryRegion> Nic::RegisterMemory(void* addr, uint64_t length, uint32_t access) {
  if (addr == nullptr || length == 0) {
    return InvalidArgument(
        "ibv_reg_mr: empty region (addr=" + std::to_string(reinterpret_cast<uintptr_t>(addr)) +
        " length=" + std::to_string(length) + ")");
  }
  if ((access & ~uint32_t{kAccessAll}) != 0) {
    return InvalidArgument("ibv_reg_mr: unsupported access flags " + Hex(access));
  }
  MemoryRegion mr;
  mr.addr = reinterpret_cast<uint64_t>(addr);
  mr.length = length;
  mr.access = access;
  const uint32_t index = static_cast<uint32_t>(mrs_.size()) + 1;
  // lkey and rkey differ so that swapping them is caught as an access error.
  mr.lkey = index;
  mr.rkey = (index << 8) | 0x5A;
  mrs_.push_back(mr);
  return mr;
}

Status Nic::DeregisterMemory(uint32_t lkey) {
  if (lkey == kModelledKey || lkey > mrs_.size() || mrs_[lkey - 1].length == 0) {
    return InvalidArgument("ibv_dereg_mr: no region with lkey " + Hex(lkey));
  }
  mrs_[lkey - 1].length = 0;
  mrs_[lkey - 1].access = 0;
  return Status::Ok();
}

StatusOr<const MemoryRegion*> Nic::CheckLocal(const Sge& sge, uint32_t need) const {
  if (sge.lkey == 0 || sge.lkey > mrs_.size()) {
    return InvalidArgument("lkey " + Hex(sge.lkey) + " is not registered");
  }
  const MemoryRegion& mr = mrs_[sge.lkey - 1];
  if (mr.length == 0 || sge.addr < mr.addr || sge.addr + sge.length > mr.addr + mr.length ||
      (mr.access & need) != need) {
    return InvalidArgument("sge addr " + std::to_string(sge.addr) + " length " +
                           std::to_string(sge.length) + " outside lkey " + Hex(sge.lkey));
  }
  return &mr;
}

const MemoryRegion* Nic::CheckRemote(uint32_t rkey, uint64_t va, uint64_t len,
                                     uint32_t need) const {
  if ((rkey & 0xFF) != 0x5A) return nullptr;
  const uint32_t index = rkey >> 8;
  if (index == 0 || index > mrs_.size()) return nullptr;
  const MemoryRegion& mr = mrs_[index - 1];
  if (mr.length == 0 || va < mr.addr || va + len > mr.addr + mr.length ||
      (mr.access & need) != need) {
    return nullptr;
  }
  return &mr;
}

CompletionQueue* Nic::CreateCq() {
  cqs_.push_back(std::make_unique<CompletionQueue>());
  return cqs_.back().get();
}

StatusOr<uint32_t> Nic::CreateQp(CompletionQueue* send_cq, CompletionQueue* recv_cq,
                                 const QpAttr& attr) {
  const std::string call = "ibv_create_qp(host " + std::to_string(host_) + ")";
  if (send_cq == nullptr || recv_cq == nullptr) return InvalidArgument(call + ": null CQ");
  if (MtuBytesToEnum(attr.path_mtu_bytes) <= 0) {
    return InvalidArgument(call + ": path_mtu " + std::to_string(attr.path_mtu_bytes) +
                           " is not 256/512/1024/2048/4096");
  }
  if (attr.timeout < 0 || attr.timeout > 31 || attr.retry_cnt < 0 || attr.retry_cnt > 7 ||
      attr.rnr_retry < 0 || attr.rnr_retry > 7 || attr.min_rnr_timer < 0 ||
      attr.min_rnr_timer > 31 || attr.max_rd_atomic < 1 || attr.ack_every_packets < 1) {
    return InvalidArgument(call + ": timeout=" + std::to_string(attr.timeout) +
                           " retry_cnt=" + std::to_string(attr.retry_cnt) +
                           " rnr_retry=" + std::to_string(attr.rnr_retry) +
                           " min_rnr_timer=" + std::to_string(attr.min_rnr_timer) +
                           " max_rd_atomic=" + std::to_string(attr.max_rd_atomic) +
                           ": out of range");
  }
  if (qp_count_ >= kQpChunk && qp_count_ % kQpChunk == 0) {
    qp_chunks_.push_back(std::make_unique<Qp[]>(kQpChunk));
  }
  Qp* qp = QpAt(qp_count_++);
  qp->qpn = kFirstQpn + qp_count_ - 1;
  qp->attr = attr;
  qp->send_cq = send_cq;
  qp->recv_cq = recv_cq;
  // The priority of the QP's DSCP (QosConfig; by default DSCP >> 3, the
  // traffic class's top 3 bits).
  qp->buffer_class = dscp_to_priority_[static_cast<size_t>(attr.traffic_class >> 2)] & 7;
  qp->flow.src_host = host_;
  qp->flow.src_qpn = qp->qpn;
  qp->flow.traffic_class = attr.traffic_class;
  qp->flow.ipv6 = ipv6_;
  qp->flow.buffer_class = qp->buffer_class & 7;
  qp->flow.full_payload = static_cast<uint16_t>(attr.path_mtu_bytes) & 0x1FFF;
  qp->flow.full_wire_bytes = static_cast<uint16_t>(
      FrameWireBytes(Opcode::kRdmaWriteMiddle, static_cast<uint32_t>(attr.path_mtu_bytes), ipv6_));
  qp->full_wire_bytes = qp->flow.full_wire_bytes;
  qp->ack_every_packets = static_cast<uint32_t>(attr.ack_every_packets);
  qp->regular_timeout_ps = RegularTimeoutPs(profile_, attr.timeout);
  qp->adp_steps =
      static_cast<uint8_t>(AdaptiveRetransmissions(profile_, attr.timeout, attr.retry_cnt));
  // rxe: source port 0xC000 + hash_32(qpn, 14), so each QP is its own ECMP flow.
  qp->flow.udp_sport = static_cast<uint16_t>(0xC000u | ((qp->qpn * 0x61C88647u) >> 18));
  // The send queue's first storage and the QP's place in the round-robin
  // list are taken now, as ibv_create_qp does, not when the first work
  // request is posted (in the middle of a run, where a fresh page costs a
  // fault).
  qp->sq.reserve(8);
  active_.reserve(qp_count_);
  if (dcqcn_) {
    dcqcn_qps_.emplace_back();
    dcqcn_base_ = dcqcn_qps_.data();
  }
  return qp->qpn;
}

Status Nic::ModifyToInit(uint32_t qpn) {
  Qp* qp = FindQp(qpn);
  if (qp == nullptr || qp->state != QpState::kReset) {
    return FailedPrecondition("ibv_modify_qp(INIT) qpn=" + Hex(qpn) + ": QP " +
                              (qp ? std::string(QpStateName(qp->state)) : "does not exist"));
  }
  qp->state = QpState::kInit;
  return Status::Ok();
}

Status Nic::ModifyToRtr(uint32_t qpn, int32_t remote_host, uint32_t remote_qpn, uint32_t rq_psn) {
  Qp* qp = FindQp(qpn);
  if (qp == nullptr || qp->state != QpState::kInit) {
    return FailedPrecondition("ibv_modify_qp(RTR) qpn=" + Hex(qpn) + ": QP " +
                              (qp ? std::string(QpStateName(qp->state)) : "does not exist"));
  }
  if (remote_host < 0 || remote_qpn == 0 || remote_qpn > wire::kPsnMask) {
    return InvalidArgument("ibv_modify_qp(RTR) qpn=" + Hex(qpn) +
                           " dest_host=" + std::to_string(remote_host) +
                           " dest_qpn=" + Hex(remote_qpn) + ": invalid destination");
  }
  qp->flow.dst_host = remote_host;
  qp->flow.dest_qpn = remote_qpn;
  if (profile_.udp_sport_from_qp_pair) {
    // rdma_get_udp_sport(0, qpn, dest_qpn) (include/rdma/ib_verbs.h): the
    // flow label is the product of the QP numbers folded to 20 bits, its
    // top 6 bits folded into the low 14, in 0xC000..0xFFFF.
    uint64_t v = uint64_t{qpn} * remote_qpn;
    v ^= v >> 20;
    v ^= v >> 40;
    const uint32_t label = static_cast<uint32_t>(v & 0xFFFFF);
    const uint32_t low = (label & 0x03FFF) ^ ((label & 0xFC000) >> 14);
    qp->flow.udp_sport = static_cast<uint16_t>(0xC000u | low);
  }
  qp->remote_qpn = remote_qpn;
  qp->epsn = rq_psn & wire::kPsnMask;
  if (path_fn_ != nullptr) {
    path_fn_(path_ctx_, host_, remote_host, FlowHash(host_, remote_host, qp->flow.udp_sport),
             qp->flow.path);
  }
  qp->flow_route = {};
  qp->state = QpState::kRtr;
  return Status::Ok();
}

Status Nic::ModifyToRts(uint32_t qpn, uint32_t sq_psn) {
  Qp* qp = FindQp(qpn);
  if (qp == nullptr || qp->state != QpState::kRtr) {
    return FailedPrecondition("ibv_modify_qp(RTS) qpn=" + Hex(qpn) + ": QP " +
                              (qp ? std::string(QpStateName(qp->state)) : "does not exist"));
  }
  qp->next_psn = qp->acked_psn = qp->max_sent_psn = sq_psn & wire::kPsnMask;
  ResetRetryBudget(*qp);
  ResetRnrBudget(*qp);
  qp->state = QpState::kRts;
  return Status::Ok();
}

Status Nic::ModifyToError(uint32_t qpn) {
  Qp* qp = FindQp(qpn);
  if (qp == nullptr) return NotFound("ibv_modify_qp(ERR) qpn=" + Hex(qpn) + ": no such QP");
  EnterError(*qp);
  return Status::Ok();
}

Status Nic::PostSend(uint32_t qpn, const SendWr& wr) {
  Qp* qp = FindQp(qpn);
  if (qp == nullptr) return NotFound("ibv_post_send qpn=" + Hex(qpn) + ": no such QP");
  if (qp->state != QpState::kRts) {
    return FailedPrecondition("ibv_post_send qpn=" + Hex(qpn) + ": QP in " +
                              std::string(QpStateName(qp->state)));
  }
  const bool atomic =
      wr.opcode == WrOpcode::kAtomicCmpAndSwp || wr.opcode == WrOpcode::kAtomicFetchAndAdd;
  if (static_cast<uint8_t>(wr.opcode) > static_cast<uint8_t>(WrOpcode::kAtomicFetchAndAdd)) {
    return InvalidArgument("ibv_post_send qpn=" + Hex(qpn) + ": opcode " +
                           std::to_string(static_cast<int>(wr.opcode)) + " not supported");
  }
  if (wr.sge.length > (1u << 31)) {
    return InvalidArgument("ibv_post_send qpn=" + Hex(qpn) + ": length " +
                           std::to_string(wr.sge.length) + " exceeds 2^31");
  }
  if (atomic && (wr.sge.length != 8 || wr.remote_addr % 8 != 0)) {
    return InvalidArgument("ibv_post_send qpn=" + Hex(qpn) +
                           ": atomics need an 8-byte SGE and an 8-byte aligned remote_addr");
  }
  if (flow_mode_ && (atomic || wr.opcode == WrOpcode::kRdmaRead)) [[unlikely]] {
    return InvalidArgument("ibv_post_send qpn=" + Hex(qpn) +
                           ": RDMA READ and atomics are not modelled by the flow model "
                           "(network model flow); use the packet model");
  }
  if (timed_) {
    // The WR reaches the NIC after the doorbell, the WQE fetch and the first
    // payload read; WRs keep their order.
    const uint32_t mtu = static_cast<uint32_t>(qp->attr.path_mtu_bytes);
    int64_t at =
        (engine_->Now() + PostToWireDelay(profile_, wr.sge.length < mtu ? wr.sge.length : mtu))
            .ps();
    if (!delayed_posts_.empty() && delayed_posts_.back().at_ps > at) {
      at = delayed_posts_.back().at_ps;
    }
    delayed_posts_.push_back(DelayedPost{at, qpn, wr});
    if (delayed_posts_.size() == 1) ScheduleDelayed(0, at);
    // A split flow model replicates every send queue (flow_fabric.h).
    if (flow_mode_) [[unlikely]] {
      flow_->NotePost(*this, qpn, wr, at);
    }
    return Status::Ok();
  }
  EnqueueSend(*qp, wr);
  return Status::Ok();
}

void Nic::EnqueueSend(Qp& qp, const SendWr& wr) {
  const bool atomic =
      wr.opcode == WrOpcode::kAtomicCmpAndSwp || wr.opcode == WrOpcode::kAtomicFetchAndAdd;
  SendWqe w;
  w.wr = wr;
  w.local_error = false;
  if (wr.sge.lkey != kModelledKey) {
    const bool writes_local = wr.opcode == WrOpcode::kRdmaRead || atomic;
    w.local_error = !CheckLocal(wr.sge, writes_local ? uint32_t{kAccessLocalWrite} : 0).ok();
  }
  const uint32_t mtu = static_cast<uint32_t>(qp.attr.path_mtu_bytes);
  w.npkts = atomic ? 1u : (wr.sge.length == 0 ? 1u : (wr.sge.length + mtu - 1) / mtu);
  w.first_psn = qp.next_psn;
  qp.next_psn = wire::PsnAdd(qp.next_psn, w.npkts);
  qp.sq.push_back(w);
  if (RequesterHasWork(qp)) Activate(qp);
}

Status Nic::PostRecv(uint32_t qpn, const RecvWr& wr) {
  Qp* qp = FindQp(qpn);
  if (qp == nullptr) return NotFound("ibv_post_recv qpn=" + Hex(qpn) + ": no such QP");
  if (qp->state == QpState::kReset) {
    return FailedPrecondition("ibv_post_recv qpn=" + Hex(qpn) + ": QP in IBV_QPS_RESET");
  }
  if (wr.sge.lkey != kModelledKey) {
    auto mr = CheckLocal(wr.sge, kAccessLocalWrite);
    if (!mr.ok()) return mr.status().WithContext("ibv_post_recv qpn=" + Hex(qpn));
  }
  if (qp->state == QpState::kErr) {
    Complete(*qp, qp->recv_cq, RecvWc(wr.wr_id, WcStatus::kWrFlushErr));
    return Status::Ok();
  }
  qp->rq.push_back(RecvWqe{wr});
  return Status::Ok();
}

Status Nic::SetQpContext(uint32_t qpn, void* context) {
  Qp* qp = FindQp(qpn);
  if (qp == nullptr) return NotFound("SetQpContext qpn=" + Hex(qpn) + ": no such QP");
  qp->context = context;
  return Status::Ok();
}

StatusOr<QpState> Nic::GetQpState(uint32_t qpn) const {
  const Qp* qp = FindQp(qpn);
  if (qp == nullptr) return NotFound("ibv_query_qp qpn=" + Hex(qpn) + ": no such QP");
  return qp->state;
}

StatusOr<QpCounters> Nic::GetQpCounters(uint32_t qpn) const {
  const Qp* qp = FindQp(qpn);
  if (qp == nullptr) return NotFound("qp counters qpn=" + Hex(qpn) + ": no such QP");
  return qp->Counters();
}

QpCounters Nic::TotalCounters() const {
  QpCounters t;
  for (uint32_t i = 0; i < qp_count_; ++i) t += QpAt(i)->Counters();
  return t;
}

Packet* Nic::NewPacket(const Qp& qp, Opcode opcode, uint32_t psn) {
  Packet* p = pool_->Alloc();
  p->flow = &qp.flow;
  p->buffer_class = qp.buffer_class & 7;
  p->opcode = opcode;
  p->dest_qpn = qp.remote_qpn;
  p->psn = psn & wire::kPsnMask;
  return p;
}

void Nic::SetPortState(bool up) {
  if (up == port_active_) return;
  port_active_ = up;
  port_events_.push_back(PortEvent{engine_->Now(), up});
  engine_->TraceMix(0xe0000000ULL | (uint64_t{up} << 16) | static_cast<uint64_t>(host_));
}

std::vector<Nic::PortEvent> Nic::TakePortEvents() {
  std::vector<PortEvent> out;
  out.swap(port_events_);
  return out;
}

void Nic::Crash() {
  if (crashed_) return;
  crashed_ = true;
  engine_->TraceMix(0xc0000000ULL | static_cast<uint64_t>(host_));
  // Packets queued in the NIC die with it.
  while (control_head_ != nullptr) {
    Packet* p = control_head_;
    control_head_ = p->next;
    pool_->Free(p);
  }
  control_tail_ = nullptr;
  for (uint32_t i = 0; i < qp_count_; ++i) {
    QpAt(i)->pending_ack = nullptr;
    if (flow_mode_) FlowWithdrawFold(*QpAt(i));
  }
  active_.clear();
  SyncFront();
}

void Nic::Complete(Qp& qp, CompletionQueue* cq, const WorkCompletion& c) {
  if (crashed_) return;  // nobody is left to poll
  Completion out{c};
  out.qp_num = qp.qpn;
  out.time = engine_->Now();
  engine_->TraceMix((uint64_t{qp.qpn} << 40) ^ (uint64_t{static_cast<uint8_t>(c.status)} << 32) ^
                    c.wr_id);
  if (!timed_) {
    cq->Push(out, qp.context);
    return;
  }
  // The CQE is written later: after the payload's DMA write for a message
  // received (its last packet's bytes), after the CQE write for the rest.
  const bool received = c.status == WcStatus::kSuccess &&
                        (c.opcode == WcOpcode::kRecv || c.opcode == WcOpcode::kRecvRdmaWithImm);
  const uint32_t mtu = static_cast<uint32_t>(qp.attr.path_mtu_bytes);
  const uint32_t last = c.byte_len == 0 ? 0 : (c.byte_len - 1) % mtu + 1;
  out.time += received ? ReceiveCompletionDelay(profile_, last) : SendCompletionDelay(profile_);
  if (!delayed_completions_.empty() && delayed_completions_.back().c.time > out.time) {
    out.time = delayed_completions_.back().c.time;  // CQEs stay in order
  }
  delayed_completions_.push_back(DelayedCompletion{out.time.ps(), cq, out});
  if (delayed_completions_.size() == 1) ScheduleDelayed(1, out.time.ps());
}

void Nic::EnterError(Qp& qp) {
  if (qp.state == QpState::kErr) return;
  if (flow_mode_) [[unlikely]] {
    FlowWithdrawFold(qp);
  }
  qp.state = QpState::kErr;
  // Flush in order (IBTA 10.3.1: WRs outstanding when the QP enters the
  // error state complete with IBV_WC_WR_FLUSH_ERR).
  while (!qp.sq.empty()) {
    const SendWqe w = qp.sq.front();
    qp.sq.pop_front();
    Complete(qp, qp.send_cq, SendWc(w.wr, WcStatus::kWrFlushErr));
  }
  while (!qp.rq.empty()) {
    const RecvWqe r = qp.rq.front();
    qp.rq.pop_front();
    Complete(qp, qp.recv_cq, RecvWc(r.wr.wr_id, WcStatus::kWrFlushErr));
  }
  MoveSendCursor(qp, 0, 0);
  qp.outstanding_rd = 0;
  qp.reads.clear();
  qp.has_deferred_ack = false;
  qp.ack_deadline_ps = 0;
  qp.rnr_until_ps = 0;
}

void Nic::Activate(Qp& qp) {
  if (flow_mode_) [[unlikely]] {
    FlowActivate(qp);
    return;
  }
  if (!qp.active) {
    qp.active = true;
    active_.push_back(&qp);
    SyncFront();
  }
  KickPump();
}

void Nic::KickPump() {
  if (port_ == nullptr || crashed_) return;
  if (dcqcn_) [[unlikely]] {
    KickPumpPaced();
    return;
  }
  if (pump_pending_) return;
  pump_pending_ = true;
  const Picoseconds at =
      port_->busy_until() > engine_->Now() ? port_->busy_until() : engine_->Now();
  engine_->Schedule<&Nic::OnPump>(at, EventKind::kNicPump, static_cast<uint32_t>(host_), this, 0);
}

void Nic::OnPump(void* nic, uint64_t arg) {
  Nic* self = static_cast<Nic*>(nic);
  if (arg == 0) {
    self->pump_pending_ = false;
  } else {
    // A paced pump (DCQCN: SchedulePacedPump); a later one an earlier
    // replaced does nothing.
    if (static_cast<int64_t>(arg) != self->paced_at_ps_) return;
    self->paced_at_ps_ = 0;
  }
  if (!self->crashed_) self->Pump();
}

void Nic::SendControl(Packet* p) {
  p->next = nullptr;
  if (control_tail_ == nullptr) {
    control_head_ = control_tail_ = p;
  } else {
    control_tail_->next = p;
    control_tail_ = p;
  }
  KickPump();
}

Packet* Nic::PopControl(Qp** from) {
  Packet* p = control_head_;
  control_head_ = p->next;
  if (control_head_ == nullptr) control_tail_ = nullptr;
  *from = FindQp(p->flow->src_qpn);
  if (*from != nullptr && (*from)->pending_ack == p) (*from)->pending_ack = nullptr;
  return p;
}

// One packet per call, when the port is idle: the NIC paces every QP at line
// rate and round-robins between QPs; ACKs and NAKs go first.
void Nic::Pump() {
  if (port_->busy_until() > engine_->Now()) {
    KickPump();
    return;
  }
  if (port_->policy_classes() != 0) [[unlikely]] {
    if (const uint8_t paused = port_->paused_classes(); paused != 0) {
      PumpPaused(paused);
      return;
    }
  }
  // DCQCN: a QP whose rate says wait does not send yet.
  if (dcqcn_ && control_head_ == nullptr && !PaceFront()) return;
  if (control_head_ == nullptr && rr_front_ != nullptr && RequesterSendFullSize(*rr_front_)) {
    KickPump();  // the QP stays active
    return;
  }
  Packet* p = nullptr;
  Qp* from = nullptr;  // the QP that sends p
  if (control_head_ != nullptr) {
    p = PopControl(&from);
  } else {
    for (size_t tries = active_.size(); tries > 0 && p == nullptr; --tries) {
      Qp& qp = *active_.front();
      active_.pop_front();
      if (dcqcn_ && Paced(qp)) {
        active_.push_back(&qp);
        continue;
      }
      if (qp.state == QpState::kRtr || qp.state == QpState::kRts) {
        p = ResponderNext(qp);
        if (p == nullptr && RequesterHasWork(qp)) p = RequesterNext(qp);
        if (p != nullptr) from = &qp;
      }
      if ((qp.state == QpState::kRtr || qp.state == QpState::kRts) &&
          (ResponderHasWork(qp) || RequesterHasWork(qp))) {
        active_.push_back(&qp);
      } else {
        qp.active = false;
      }
    }
    SyncFront();
    SetPumpHint(from);
  }
  if (p != nullptr) {
    // The NIC's IP version, not the flow's: the same, and no line to read.
    p->wire_bytes = static_cast<uint16_t>(FrameWireBytes(p->opcode, p->payload_bytes, ipv6_));
    if (from != nullptr) {
      ++from->sent_pkts;
      if (dcqcn_) DcqcnSent(*from, p->opcode, p->wire_bytes);
    }
    port_->Send(p);
  }
  if (control_head_ != nullptr || !active_.empty()) KickPump();
}

void Nic::PumpPaused(uint8_t paused) {
  // Control packets (ACKs, NAKs) go as usual: the port holds those of a
  // paused class in its waiting queue, in order.
  Packet* p = nullptr;
  Qp* from = nullptr;
  if (control_head_ != nullptr) {
    p = PopControl(&from);
  } else {
    for (size_t tries = active_.size(); tries > 0 && p == nullptr; --tries) {
      Qp& qp = *active_.front();
      active_.pop_front();
      const bool live = qp.state == QpState::kRtr || qp.state == QpState::kRts;
      // DCQCN: a QP its rate holds back waits too (WakeForPace below).
      if (live && ((paused >> (qp.buffer_class & 7)) & 1) == 0 && !(dcqcn_ && Paced(qp))) {
        p = ResponderNext(qp);
        if (p == nullptr && RequesterHasWork(qp)) p = RequesterNext(qp);
        if (p != nullptr) from = &qp;
      }
      if (live && (ResponderHasWork(qp) || RequesterHasWork(qp))) {
        active_.push_back(&qp);
      } else {
        qp.active = false;
      }
    }
    SyncFront();
    SetPumpHint(nullptr);
  }
  if (p == nullptr) {
    // All paused (the port's resume kicks the pump) or held back by their
    // DCQCN rate (wake when the first of those may send).
    if (dcqcn_) WakeForPace(paused);
    return;
  }
  p->wire_bytes = static_cast<uint16_t>(FrameWireBytes(p->opcode, p->payload_bytes, ipv6_));
  if (from != nullptr) ++from->sent_pkts;
  port_->Send(p);
  KickPump();
}

void Nic::ArmTimer(Qp& qp, int64_t at_ps) {
  if (at_ps <= 0) return;
  if (qp.timer_at_ps != 0 && qp.timer_at_ps <= at_ps) return;  // an earlier event re-arms
  qp.timer_at_ps = at_ps;
  ++qp.timer_gen;
  engine_->Schedule<&Nic::OnTimer>(Picoseconds(at_ps), EventKind::kQpTimer,
                                   static_cast<uint32_t>(host_) * 65536u + qp.qpn, this,
                                   (uint64_t{qp.qpn} << 32) | qp.timer_gen);
}

void Nic::OnTimer(void* nic, uint64_t arg) {
  Nic* self = static_cast<Nic*>(nic);
  if (self->crashed_) return;
  Qp* qp = self->FindQp(static_cast<uint32_t>(arg >> 32));
  if (qp == nullptr || static_cast<uint32_t>(arg) != qp->timer_gen) return;  // superseded
  qp->timer_at_ps = 0;
  const int64_t now = self->engine_->Now().ps();
  if (qp->rnr_until_ps != 0 && now >= qp->rnr_until_ps) {
    qp->rnr_until_ps = 0;
    self->RestartAckTimer(*qp);
    if (self->RequesterHasWork(*qp)) self->Activate(*qp);
  }
  if (qp->ack_deadline_ps != 0 && now >= qp->ack_deadline_ps) self->TimerExpired(*qp);
  // Re-arm for whichever deadline is still ahead.
  int64_t next = qp->ack_deadline_ps;
  if (qp->rnr_until_ps != 0 && (next == 0 || qp->rnr_until_ps < next)) next = qp->rnr_until_ps;
  self->ArmTimer(*qp, next);
}

void Nic::Prefetch(const void* nic, uint32_t dest_qpn, bool full_size) {
  const Nic* self = static_cast<const Nic*>(nic);
  // The NIC's own two lines, and the QP's.
  __builtin_prefetch(nic);
  __builtin_prefetch(static_cast<const char*>(nic) + 64);
  const uint32_t index = dest_qpn - kFirstQpn;
  if (index < kQpChunk) {
    // In the NIC: no load to find it (and a slot not yet in use is the
    // NIC's memory all the same).
    PrefetchQpReceive(&self->first_qps_[index], full_size);
  } else if (index < self->qp_count_) {
    // Through its chunk's pointer, a load that may wait.
    PrefetchQpReceive(self->QpAt(index), full_size);
  }
}

void Nic::Receive(void* nic, Packet* p, int32_t /*in_port*/) {
  Nic* self = static_cast<Nic*>(nic);
  Qp* qp = self->FindQp(p->dest_qpn);
  if (self->crashed_) {
    self->drops_->Add(DropReason::kHostCrashed);
    self->pool_->Free(p);
    return;
  }
  if (qp == nullptr || (qp->state != QpState::kRtr && qp->state != QpState::kRts)) {
    self->drops_->Add(DropReason::kQpNotReady);
    self->pool_->Free(p);
    return;
  }
  if (p->ecn_ce) self->OnCeMarked(*qp);
  if (p->opcode == Opcode::kCnp) {
    self->OnCnp(*qp);
    self->pool_->Free(p);
    return;
  }
  ++qp->rcvd_pkts;
  if (p->opcode >= Opcode::kRdmaReadResponseFirst && p->opcode <= Opcode::kAtomicAcknowledge) {
    self->OnResponse(*qp, p);
  } else {
    self->OnRequest(*qp, p);
  }
  self->pool_->Free(p);
}

}  // namespace fathom::sim
