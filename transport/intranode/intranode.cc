#include "transport/intranode/intranode.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace fathom::transport::intranode {
namespace {

bool IsWrite(WrOpcode op) {
  return op == WrOpcode::kRdmaWrite || op == WrOpcode::kRdmaWriteWithImm;
}
bool HasImm(WrOpcode op) {
  return op == WrOpcode::kRdmaWriteWithImm || op == WrOpcode::kSendWithImm;
}
bool ConsumesRecv(WrOpcode op) { return op != WrOpcode::kRdmaWrite; }

// A QP's posted receives in order, kept as runs of identical WRs: the
// collectives post one WR (a connection's staging) over and over, so the
// head run lives inside the QP and a delivery reads no line beside it (a
// deque's head block was a cache miss per delivery at 1024 GPUs). FIFO
// order of wr_ids and SGEs is exactly the posting order.
class RecvQueue {
 public:
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const RecvWr& front() const { return head_.wr; }
  void push_back(const RecvWr& wr) {
    ++size_;
    if (head_.count == 0) {
      head_ = Run{wr, 1};
      return;
    }
    Run& back = rest_.empty() ? head_ : rest_.back();
    if (Same(back.wr, wr)) {
      ++back.count;
      return;
    }
    rest_.push_back(Run{wr, 1});
  }
  void pop_front() {
    --size_;
    if (--head_.count == 0 && !rest_.empty()) {
      head_ = rest_.front();
      rest_.pop_front();
    }
  }

 private:
  struct Run {
    RecvWr wr;
    uint32_t count = 0;
  };
  static bool Same(const RecvWr& a, const RecvWr& b) {
    return a.wr_id == b.wr_id && a.sge.addr == b.sge.addr && a.sge.length == b.sge.length &&
           a.sge.lkey == b.sge.lkey;
  }
  Run head_;
  uint32_t size_ = 0;
  std::deque<Run> rest_;  // the runs after the head's
};

// A FIFO of completions in one growing ring: no block allocated and freed
// every few entries (a deque's), and its few slots stay warm.
class CompletionRing {
 public:
  bool empty() const { return count_ == 0; }
  const Completion& front() const { return buf_[head_]; }
  void pop_front() {
    head_ = (head_ + 1) & (buf_.size() - 1);
    --count_;
  }
  void push_back(const Completion& c) {
    if (count_ == buf_.size()) Grow();
    buf_[(head_ + count_) & (buf_.size() - 1)] = c;
    ++count_;
  }

 private:
  void Grow() {
    std::vector<Completion> bigger(buf_.empty() ? 8 : buf_.size() * 2);
    for (size_t i = 0; i < count_; ++i) bigger[i] = buf_[(head_ + i) & (buf_.size() - 1)];
    buf_.swap(bigger);
    head_ = 0;
  }
  std::vector<Completion> buf_;  // a power of two in size
  size_t head_ = 0, count_ = 0;
};

}  // namespace

// One CQ for a rank's NVLink and NIC QPs: NVLink completions wait in
// `own_`; the NIC's stay in its CQ (or, when received payloads bounce through
// host memory, move to `own_` after their copy to the GPU).
class ServerFabric::ServerCq final : public CompletionQueue {
 public:
  ServerCq(ServerFabric* f, int rank, std::unique_ptr<CompletionQueue> inner)
      : fabric_(f), rank_(rank), inner_(std::move(inner)) {
    if (!fabric_->tier().spec.gpudirect_rdma) {
      inner_->SetNotify([this] { DrainInner(); });
    } else {
      // The NIC's CQ says when it may hold entries, so that a poll served
      // from `own_` (NVLink) does not read the NIC's cold CQ as well.
      inner_->SetNotify([this] {
        inner_pending_ = true;
        if (notify_) notify_();
      });
    }
  }
  int Poll(std::span<Completion> out) override {
    int n = 0;
    while (n < static_cast<int>(out.size()) && !own_.empty()) {
      out[static_cast<size_t>(n++)] = own_.front();
      own_.pop_front();
    }
    if (n < static_cast<int>(out.size()) && inner_pending_) {
      const int want = static_cast<int>(out.size()) - n;
      const int got = inner_->Poll(out.subspan(static_cast<size_t>(n)));
      if (got < want) inner_pending_ = false;  // drained
      n += got;
    }
    for (auto& [proxy, cq] : proxy_cqs_) {
      if (n >= static_cast<int>(out.size())) break;
      n += cq->Poll(out.subspan(static_cast<size_t>(n)));
    }
    return n;
  }
  void SetNotify(std::function<void()> notify) override {
    notify_ = std::move(notify);
    for (auto& [proxy, cq] : proxy_cqs_) cq->SetNotify(notify_);
  }
  CompletionQueue* inner() { return inner_.get(); }
  // PXN: the send completions of this rank's QPs on `proxy`'s NIC, in a CQ
  // of that NIC (QP numbers are per NIC), polled with this one.
  StatusOr<CompletionQueue*> ProxyCq(int proxy, Device* nic) {
    for (auto& [p, cq] : proxy_cqs_) {
      if (p == proxy) return cq.get();
    }
    FATHOM_ASSIGN_OR_RETURN(auto cq, nic->CreateCq(1024));
    cq->SetNotify(notify_);
    proxy_cqs_.emplace_back(proxy, std::move(cq));
    return proxy_cqs_.back().second.get();
  }
  void Push(const Completion& c) {
    own_.push_back(c);
    if (notify_) notify_();
    fabric_->nic_fabric().OnCompletion();
  }

 private:
  // GPUDirect off: a received payload landed in host memory; its copy to
  // the GPU over the PCIe uplink comes before the completion is seen.
  void DrainInner() {
    Completion batch[16];
    while (true) {
      const int n = inner_->Poll(std::span<Completion>(batch, 16));
      const Picoseconds now = fabric_->nic_fabric().engine().Now();
      for (int i = 0; i < n; ++i) {
        const Completion& c = batch[i];
        if (c.status == WcStatus::kSuccess && c.opcode == WcOpcode::kRecvRdmaWithImm &&
            c.byte_len > kSmallMessageBytes) {
          const Picoseconds end = fabric_->ReservePcie(rank_, false, c.byte_len, now);
          fabric_->At(end, [this, c] { Push(c); });
        } else {
          own_.push_back(c);
        }
      }
      if (n < 16) break;
    }
    if (!own_.empty() && notify_) notify_();
  }

  ServerFabric* fabric_;
  int rank_;
  std::unique_ptr<CompletionQueue> inner_;
  std::vector<std::pair<int, std::unique_ptr<CompletionQueue>>> proxy_cqs_;
  CompletionRing own_;
  std::function<void()> notify_;
  bool inner_pending_ = false;  // GPUDirect: the NIC's CQ may hold entries
};

// An RC QP between two GPUs of one server: writes and sends are NVLink
// copies into the peer's memory, timed by ReserveNvlink. Aligned, with what
// a delivery reads first: at 1024 GPUs the QPs are cold when their
// transfers land, and each line is a miss.
class alignas(64) ServerFabric::NvlinkQp final : public QueuePair {
 public:
  NvlinkQp(ServerFabric* f, ServerCq* cq, int rank, int peer, const QpOptions& o, int active_mtu)
      : fabric_(f), cq_(cq), rank_(rank), peer_(peer), options_(o), active_mtu_(active_mtu) {
    qpn_ = fabric_->NextQpn();
    fabric_->AddQp(rank_, qpn_, this);
  }
  ~NvlinkQp() override {
    if (inflight_ > 0) fabric_->DropDeliveries(this);
    for (NvlinkQp* w : watchers_) w->dst_ = nullptr;
    if (dst_ != nullptr) std::erase(dst_->watchers_, this);
    fabric_->RemoveQp(rank_, qpn_);
  }
  // A delivery of this QP's fires (its record is released).
  void OnFire() { --inflight_; }
  uint32_t qp_num() const override { return qpn_; }
  int peer_rank() const override { return peer_; }
  QpState state() const override { return state_; }
  EndpointInfo LocalInfo() const override {
    EndpointInfo e;
    e.rank = rank_;
    e.qpn = qpn_;
    e.active_mtu = active_mtu_;
    return e;
  }
  Status Connect(const EndpointInfo& remote) override {
    const std::string call = "Connect NVLink qpn " + Hex(qpn_) + " -> rank " +
                             std::to_string(remote.rank) + " qpn " + Hex(remote.qpn);
    if (remote.rank != peer_) {
      return InvalidArgument(call + ": the QP was created for rank " + std::to_string(peer_));
    }
    if (state_ != QpState::kInit) {
      return FailedPrecondition(call + ": QP is in " + std::string(QpStateName(state_)) +
                                ", not IBV_QPS_INIT");
    }
    remote_qpn_ = remote.qpn;
    state_ = QpState::kRts;
    return Status::Ok();
  }
  int path_mtu() const override { return state_ == QpState::kRts ? active_mtu_ : 0; }
  Status PostSend(const SendWr& wr) override {
    // Built only for an error: a post is on every chunk's path.
    auto call = [&] {
      return "ibv_post_send (NVLink) rank " + std::to_string(rank_) + " qpn " + Hex(qpn_);
    };
    if (sends_ >= options_.max_send_wr) {
      return Unavailable(call() + ": send queue full (max_send_wr " +
                         std::to_string(options_.max_send_wr) + ")");
    }
    if (state_ == QpState::kErr) {
      ++sends_;
      Complete(wr, WcStatus::kWrFlushErr);
      return Status::Ok();
    }
    if (state_ != QpState::kRts) {
      return FailedPrecondition(call() + ": QP is in " + std::string(QpStateName(state_)) +
                                ", not IBV_QPS_RTS");
    }
    if (wr.opcode != WrOpcode::kRdmaWrite && wr.opcode != WrOpcode::kRdmaWriteWithImm &&
        wr.opcode != WrOpcode::kSend && wr.opcode != WrOpcode::kSendWithImm) {
      return InvalidArgument(call() + ": opcode " + std::to_string(static_cast<int>(wr.opcode)) +
                             " is not a write or send (the copy engine does those)");
    }
    ++sends_;
    const Picoseconds now = fabric_->nic_fabric().engine().Now();
    const uint64_t bytes = wr.sge.length;
    const Picoseconds at = bytes <= kSmallMessageBytes
                               ? now + fabric_->tier().spec.nvlink_latency
                               : fabric_->ReserveNvlink(rank_, peer_, bytes, now);
    ++inflight_;
    fabric_->DeliverAt(at, this, wr);
    return Status::Ok();
  }
  Status PostRecv(const RecvWr& wr) override {
    if (static_cast<int>(recvs_.size()) >= options_.max_recv_wr) {
      return Unavailable("ibv_post_recv (NVLink) rank " + std::to_string(rank_) + " qpn " +
                         Hex(qpn_) + ": receive queue full (max_recv_wr " +
                         std::to_string(options_.max_recv_wr) + ")");
    }
    if (state_ == QpState::kErr) {
      Completion c;
      c.wr_id = wr.wr_id;
      c.status = WcStatus::kWrFlushErr;
      c.opcode = WcOpcode::kRecv;
      c.qp_num = qpn_;
      c.peer_rank = peer_;
      cq_->Push(c);
      return Status::Ok();
    }
    recvs_.push_back(wr);
    return Status::Ok();
  }
  int outstanding_sends() const override { return sends_; }
  int outstanding_recvs() const override { return static_cast<int>(recvs_.size()); }
  Status ModifyToError() override {
    Fail();
    return Status::Ok();
  }

  // The copy is at the peer: place the bytes, consume a receive there, and
  // complete both sides.
  void Deliver(const SendWr& wr) {
    if (state_ == QpState::kErr) {
      Complete(wr, WcStatus::kWrFlushErr);
      return;
    }
    // The peer's QP, found once by number and kept (it clears dst_ when it
    // goes: QP numbers are never reused, so the lookup would find no other).
    if (dst_ == nullptr) {
      dst_ = fabric_->FindQp(peer_, remote_qpn_);
      if (dst_ != nullptr) dst_->watchers_.push_back(this);
    }
    NvlinkQp* dst = dst_;
    if (dst == nullptr || dst->state_ != QpState::kRts) {
      // The peer's QP is gone or failed: what RC reports after its retries.
      Complete(wr, WcStatus::kRetryExcErr);
      Fail();
      return;
    }
    const uint64_t bytes = wr.sge.length;
    const bool modelled = wr.sge.lkey == 0;
    if (IsWrite(wr.opcode) && bytes > 0 && !modelled) {
      const Region* r = fabric_->FindRegion(peer_, wr.rkey);
      if (r == nullptr || wr.remote_addr < r->addr ||
          wr.remote_addr + bytes > r->addr + r->length) {
        Complete(wr, WcStatus::kRemAccessErr);
        Fail();
        return;
      }
      std::memcpy(reinterpret_cast<void*>(wr.remote_addr),
                  reinterpret_cast<const void*>(wr.sge.addr), bytes);
    }
    if (ConsumesRecv(wr.opcode)) {
      if (dst->recvs_.empty()) {
        // No receive posted: RNR, retried forever by the credit protocol's
        // peers on real hardware; here a collective never does this.
        Complete(wr, WcStatus::kRnrRetryExcErr);
        Fail();
        return;
      }
      const RecvWr r = dst->recvs_.front();
      dst->recvs_.pop_front();
      Completion c;
      c.wr_id = r.wr_id;
      c.status = WcStatus::kSuccess;
      if (!IsWrite(wr.opcode) && bytes > 0) {
        if (r.sge.length < bytes) {
          c.status = WcStatus::kLocLenErr;
        } else if (!modelled && r.sge.lkey != 0) {
          std::memcpy(reinterpret_cast<void*>(r.sge.addr),
                      reinterpret_cast<const void*>(wr.sge.addr), bytes);
        }
      }
      c.opcode = IsWrite(wr.opcode) ? WcOpcode::kRecvRdmaWithImm : WcOpcode::kRecv;
      c.byte_len = static_cast<uint32_t>(bytes);
      c.has_imm = HasImm(wr.opcode);
      c.imm_data = wr.imm_data;
      c.qp_num = dst->qpn_;
      c.peer_rank = rank_;
      dst->cq_->Push(c);
    }
    Complete(wr, WcStatus::kSuccess);
  }
  void Complete(const SendWr& wr, WcStatus status) {
    if (sends_ > 0) --sends_;
    if (!wr.signaled && status == WcStatus::kSuccess) return;
    Completion c;
    c.wr_id = wr.wr_id;
    c.status = status;
    c.opcode = SendCompletionOpcode(wr.opcode);
    c.byte_len = wr.sge.length;
    c.qp_num = qpn_;
    c.peer_rank = peer_;
    cq_->Push(c);
  }
  // To ERR: posted receives flush (sends flush as their events fire).
  void Fail() {
    state_ = QpState::kErr;
    while (!recvs_.empty()) {
      Completion c;
      c.wr_id = recvs_.front().wr_id;
      c.status = WcStatus::kWrFlushErr;
      c.opcode = WcOpcode::kRecv;
      c.qp_num = qpn_;
      c.peer_rank = peer_;
      recvs_.pop_front();
      cq_->Push(c);
    }
  }

 private:
  // What a delivery reads, first (two lines).
  ServerFabric* fabric_;
  ServerCq* cq_;
  NvlinkQp* dst_ = nullptr;  // the peer's QP once a delivery found it
  QpState state_ = QpState::kInit;
  int sends_ = 0;
  int rank_, peer_;
  uint32_t qpn_ = 0, remote_qpn_ = 0;
  int inflight_ = 0;  // deliveries scheduled, not yet fired
  RecvQueue recvs_;
  // The rest.
  QpOptions options_;
  int active_mtu_;
  std::vector<NvlinkQp*> watchers_;  // QPs whose dst_ is this one
};

// PXN (intranode.h): `out_` on the proxy's NIC sends to the peer's own NIC;
// `in_` on this rank's NIC receives from the peer's proxy. Connect() pairs
// them with the peer's PxnQp (found by rank and QP number, as NVLink QPs).
class ServerFabric::PxnQp final : public QueuePair {
 public:
  PxnQp(ServerFabric* f, int rank, int peer, int proxy, Device* proxy_nic,
        std::unique_ptr<QueuePair> out, std::unique_ptr<QueuePair> in, const QpOptions& o)
      : fabric_(f),
        rank_(rank),
        peer_(peer),
        proxy_(proxy),
        proxy_nic_(proxy_nic),
        out_(std::move(out)),
        in_(std::move(in)),
        options_(o),
        alive_(std::make_shared<bool>(true)) {
    qpn_ = fabric_->NextQpn();
    fabric_->AddPxn(rank_, qpn_, this);
  }
  ~PxnQp() override {
    *alive_ = false;
    fabric_->RemovePxn(rank_, qpn_);
  }
  uint32_t qp_num() const override { return qpn_; }
  int peer_rank() const override { return peer_; }
  QpState state() const override {
    return in_->state() == QpState::kErr ? QpState::kErr : out_->state();
  }
  EndpointInfo LocalInfo() const override {
    EndpointInfo e = in_->LocalInfo();
    e.rank = rank_;
    e.qpn = qpn_;
    return e;
  }
  Status Connect(const EndpointInfo& remote) override {
    const std::string call = "Connect PXN qpn " + Hex(qpn_) + " (via rank " +
                             std::to_string(proxy_) + ") -> rank " + std::to_string(remote.rank) +
                             " qpn " + Hex(remote.qpn);
    if (remote.rank != peer_) {
      return InvalidArgument(call + ": the QP was created for rank " + std::to_string(peer_));
    }
    PxnQp* r = fabric_->FindPxn(peer_, remote.qpn);
    if (r == nullptr) return InvalidArgument(call + ": the peer's QP is not a PXN QP");
    // Ours out -> their in (the peer's NIC, on the proxy's rail); their out
    // (their proxy) -> our in.
    FATHOM_RETURN_IF_ERROR(out_->Connect(r->in_->LocalInfo()).WithContext(call));
    return in_->Connect(r->out_->LocalInfo()).WithContext(call);
  }
  int path_mtu() const override { return out_->path_mtu(); }
  Status PostSend(const SendWr& wr) override {
    if (outstanding_sends() >= options_.max_send_wr) {
      return Unavailable("ibv_post_send (PXN) rank " + std::to_string(rank_) + " qpn " + Hex(qpn_) +
                         ": send queue full (max_send_wr " + std::to_string(options_.max_send_wr) +
                         ")");
    }
    if (state() != QpState::kRts) return out_->PostSend(wr);  // its error or flush
    const Picoseconds now = fabric_->nic_fabric().engine().Now();
    const uint64_t bytes = wr.sge.length;
    Picoseconds at = bytes <= kSmallMessageBytes
                         ? now + fabric_->tier().spec.nvlink_latency
                         : fabric_->ReserveNvlink(rank_, proxy_, bytes, now);
    // RC order: nothing overtakes an earlier WR of this QP on its NVLink hop.
    at = std::max(at, last_at_);
    last_at_ = at;
    ++pending_;
    std::weak_ptr<bool> alive = alive_;
    fabric_->At(at, [this, alive, wr] {
      if (alive.expired() || !*alive.lock()) return;
      --pending_;
      // A failure now has no caller: the QP's error completions (or the
      // watchdog) report it.
      (void)Relay(wr);
    });
    return Status::Ok();
  }
  Status PostRecv(const RecvWr& wr) override { return in_->PostRecv(wr); }
  int outstanding_sends() const override { return out_->outstanding_sends() + pending_; }
  int outstanding_recvs() const override { return in_->outstanding_recvs(); }
  Status ModifyToError() override {
    FATHOM_RETURN_IF_ERROR(out_->ModifyToError());
    return in_->ModifyToError();
  }

 private:
  // The bytes are in the proxy GPU's memory: its NIC sends them from there.
  // Staging slot k is reused max_send_wr posts later: the QP then has fewer
  // than max_send_wr sends outstanding, and RC completes in order, so the
  // WR that last used it has completed.
  Status Relay(SendWr wr) {
    const bool modelled = wr.sge.lkey == 0;
    // Zero-length WRs (credits) too: their lkey must be the proxy NIC's.
    if (!modelled) {
      const size_t k = static_cast<size_t>(relayed_ % static_cast<uint64_t>(options_.max_send_wr));
      if (staging_.size() <= k) staging_.resize(k + 1);
      Staging& st = staging_[k];
      if (st.buf.empty() || st.buf.size() < wr.sge.length) {
        st.mr.reset();
        st.buf.assign(std::max<uint64_t>(wr.sge.length, 8), 0);
        FATHOM_ASSIGN_OR_RETURN(
            st.mr, proxy_nic_->RegisterMemory(st.buf.data(), st.buf.size(), kAccessLocalWrite));
      }
      if (wr.sge.length > 0) {
        std::memcpy(st.buf.data(), reinterpret_cast<const void*>(wr.sge.addr), wr.sge.length);
      }
      wr.sge.addr = reinterpret_cast<uint64_t>(st.buf.data());
      wr.sge.lkey = st.mr->lkey();
    }
    ++relayed_;
    return out_->PostSend(wr);
  }

  struct Staging {
    std::vector<uint8_t> buf;
    std::unique_ptr<MemoryRegion> mr;
  };
  ServerFabric* fabric_;
  int rank_, peer_, proxy_;
  Device* proxy_nic_;
  std::unique_ptr<QueuePair> out_, in_;
  QpOptions options_;
  std::shared_ptr<bool> alive_;
  uint32_t qpn_ = 0;
  int pending_ = 0;
  uint64_t relayed_ = 0;
  Picoseconds last_at_;
  std::vector<Staging> staging_;
};

namespace {

// A NIC QP whose payloads bounce through host memory (GPUDirect RDMA off):
// each write waits for its copy GPU -> host over the PCIe uplink.
class BounceQp final : public QueuePair {
 public:
  BounceQp(ServerFabric* f, int rank, std::unique_ptr<QueuePair> inner)
      : fabric_(f), rank_(rank), inner_(std::move(inner)), alive_(std::make_shared<bool>(true)) {}
  ~BounceQp() override { *alive_ = false; }
  uint32_t qp_num() const override { return inner_->qp_num(); }
  int peer_rank() const override { return inner_->peer_rank(); }
  QpState state() const override { return inner_->state(); }
  EndpointInfo LocalInfo() const override { return inner_->LocalInfo(); }
  Status Connect(const EndpointInfo& remote) override { return inner_->Connect(remote); }
  int path_mtu() const override { return inner_->path_mtu(); }
  Status PostSend(const SendWr& wr) override {
    if (wr.sge.length <= kSmallMessageBytes || !IsWrite(wr.opcode)) return inner_->PostSend(wr);
    const Picoseconds now = fabric_->nic_fabric().engine().Now();
    const Picoseconds end = fabric_->ReservePcie(rank_, true, wr.sge.length, now);
    ++pending_;
    std::weak_ptr<bool> alive = alive_;
    fabric_->At(end, [this, alive, wr] {
      if (alive.expired() || !*alive.lock()) return;
      --pending_;
      // A failure to post now has no caller: the QP's error completions
      // (or the watchdog) report it.
      (void)inner_->PostSend(wr);
    });
    return Status::Ok();
  }
  Status PostRecv(const RecvWr& wr) override { return inner_->PostRecv(wr); }
  int outstanding_sends() const override { return inner_->outstanding_sends() + pending_; }
  int outstanding_recvs() const override { return inner_->outstanding_recvs(); }
  Status ModifyToError() override { return inner_->ModifyToError(); }

 private:
  ServerFabric* fabric_;
  int rank_;
  std::unique_ptr<QueuePair> inner_;
  std::shared_ptr<bool> alive_;
  int pending_ = 0;
};

class ServerMr final : public MemoryRegion {
 public:
  ServerMr(ServerFabric* f, int rank, std::unique_ptr<MemoryRegion> inner)
      : fabric_(f), rank_(rank), inner_(std::move(inner)) {
    fabric_->AddRegion(rank_, inner_->rkey(),
                       {reinterpret_cast<uint64_t>(inner_->addr()), inner_->length()});
  }
  ~ServerMr() override { fabric_->RemoveRegion(rank_, inner_->rkey()); }
  void* addr() const override { return inner_->addr(); }
  uint64_t length() const override { return inner_->length(); }
  uint32_t lkey() const override { return inner_->lkey(); }
  uint32_t rkey() const override { return inner_->rkey(); }

 private:
  ServerFabric* fabric_;
  int rank_;
  std::unique_ptr<MemoryRegion> inner_;
};

}  // namespace

// A rank's device: NVLink QPs to its own server's GPUs, the NIC's to the
// rest, one CQ and one set of memory keys for both.
class ServerDevice final : public Device {
 public:
  ServerDevice(ServerFabric* f, int rank, std::unique_ptr<Device> nic)
      : fabric_(f), rank_(rank), nic_(std::move(nic)) {}
  const DeviceInfo& info() const override { return nic_->info(); }
  StatusOr<std::unique_ptr<MemoryRegion>> RegisterMemory(void* addr, uint64_t length,
                                                         uint32_t access) override {
    FATHOM_ASSIGN_OR_RETURN(auto inner, nic_->RegisterMemory(addr, length, access));
    return std::unique_ptr<MemoryRegion>(new ServerMr(fabric_, rank_, std::move(inner)));
  }
  StatusOr<std::unique_ptr<CompletionQueue>> CreateCq(int depth) override {
    FATHOM_ASSIGN_OR_RETURN(auto inner, nic_->CreateCq(depth));
    return std::unique_ptr<CompletionQueue>(
        new ServerFabric::ServerCq(fabric_, rank_, std::move(inner)));
  }
  StatusOr<std::unique_ptr<QueuePair>> CreateQp(int peer_rank, const QpOptions& options,
                                                CompletionQueue* cq) override {
    auto* scq = dynamic_cast<ServerFabric::ServerCq*>(cq);
    if (scq == nullptr) return InvalidArgument("ibv_create_qp: CQ is not this server's CQ");
    if (peer_rank >= 0 && peer_rank < fabric_->nranks() && peer_rank != rank_ &&
        fabric_->SameServer(rank_, peer_rank)) {
      return std::unique_ptr<QueuePair>(new ServerFabric::NvlinkQp(
          fabric_, scq, rank_, peer_rank, options, nic_->info().active_mtu));
    }
    if (const int proxy = fabric_->PxnProxy(rank_, peer_rank); proxy >= 0) {
      const int their_proxy = fabric_->PxnProxy(peer_rank, rank_);
      if (their_proxy < 0) {
        return InvalidArgument("ibv_create_qp rank " + std::to_string(rank_) + " peer " +
                               std::to_string(peer_rank) + ": PXN one way only (no proxy back)");
      }
      FATHOM_ASSIGN_OR_RETURN(Device * proxy_nic, fabric_->NicDevice(proxy));
      FATHOM_ASSIGN_OR_RETURN(CompletionQueue * proxy_cq, scq->ProxyCq(proxy, proxy_nic));
      FATHOM_ASSIGN_OR_RETURN(auto out, proxy_nic->CreateQp(peer_rank, options, proxy_cq));
      FATHOM_ASSIGN_OR_RETURN(auto in, nic_->CreateQp(their_proxy, options, scq->inner()));
      return std::unique_ptr<QueuePair>(new ServerFabric::PxnQp(
          fabric_, rank_, peer_rank, proxy, proxy_nic, std::move(out), std::move(in), options));
    }
    FATHOM_ASSIGN_OR_RETURN(auto qp, nic_->CreateQp(peer_rank, options, scq->inner()));
    if (!fabric_->tier().spec.gpudirect_rdma) {
      return std::unique_ptr<QueuePair>(new BounceQp(fabric_, rank_, std::move(qp)));
    }
    return qp;
  }
  std::vector<AsyncEvent> TakeAsyncEvents() override { return nic_->TakeAsyncEvents(); }

 private:
  ServerFabric* fabric_;
  int rank_;
  std::unique_ptr<Device> nic_;
};

ServerFabric::ServerFabric(emulated::EmulatedFabric* nic_fabric, topo::ServerTier tier,
                           std::vector<int32_t> gpu_of_rank)
    : nic_fabric_(nic_fabric), tier_(std::move(tier)), gpu_of_rank_(std::move(gpu_of_rank)) {
  const size_t gpus = tier_.gpus.size();
  tx_free_.assign(gpus, Picoseconds());
  rx_free_.assign(gpus, Picoseconds());
  counters_.assign(gpus, NvlinkCounters{});
  rank_of_gpu_.assign(gpus, -1);
  for (size_t r = 0; r < gpu_of_rank_.size(); ++r) {
    rank_of_gpu_[static_cast<size_t>(gpu_of_rank_[r])] = static_cast<int32_t>(r);
  }
  nic_devices_.resize(gpu_of_rank_.size());
  const auto& s = tier_.spec;
  switches_per_server_ = (s.gpus + s.gpus_per_pcie_switch - 1) / s.gpus_per_pcie_switch;
  const size_t uplinks = static_cast<size_t>(tier_.servers) * switches_per_server_;
  pcie_up_free_.assign(uplinks, Picoseconds());
  pcie_down_free_.assign(uplinks, Picoseconds());
}

ServerFabric::~ServerFabric() = default;

StatusOr<std::unique_ptr<Device>> ServerFabric::OpenDevice(int rank) {
  if (rank < 0 || rank >= nranks()) {
    return InvalidArgument("ServerFabric::OpenDevice: rank " + std::to_string(rank) +
                           " outside 0.." + std::to_string(nranks() - 1));
  }
  FATHOM_ASSIGN_OR_RETURN(auto nic, nic_fabric_->OpenDevice(rank));
  return std::unique_ptr<Device>(new ServerDevice(this, rank, std::move(nic)));
}

int ServerFabric::PxnProxy(int rank, int peer) const {
  const int32_t gpu = topo::PxnProxyGpu(nic_fabric_->network().topology(), tier_,
                                        gpu_of_rank_[static_cast<size_t>(rank)],
                                        gpu_of_rank_[static_cast<size_t>(peer)]);
  return gpu < 0 ? -1 : rank_of_gpu_[static_cast<size_t>(gpu)];
}

StatusOr<Device*> ServerFabric::NicDevice(int rank) {
  if (rank < 0 || rank >= nranks()) {
    return InvalidArgument("ServerFabric::NicDevice: rank " + std::to_string(rank) +
                           " outside 0.." + std::to_string(nranks() - 1));
  }
  std::unique_ptr<Device>& d = nic_devices_[static_cast<size_t>(rank)];
  if (!d) {
    FATHOM_ASSIGN_OR_RETURN(d, nic_fabric_->OpenDevice(rank));
  }
  return d.get();
}

Picoseconds ServerFabric::ReserveNvlink(int src, int dst, uint64_t bytes, Picoseconds now) {
  const size_t a = static_cast<size_t>(gpu_of_rank_[static_cast<size_t>(src)]);
  const size_t b = static_cast<size_t>(gpu_of_rank_[static_cast<size_t>(dst)]);
  const Picoseconds latency = tier_.spec.nvlink_latency;
  const Picoseconds duration =
      tier_.spec.nvlink_rate.SerializationTime(static_cast<int64_t>(bytes));
  const Picoseconds tx_start = std::max(now, tx_free_[a]);
  const Picoseconds rx_start = std::max(tx_start + latency, rx_free_[b]);
  const Picoseconds end = rx_start + duration;
  // The sender streams while the receiver takes the bytes (NVLink's credit
  // flow control holds it back when the receiver is busy).
  tx_free_[a] = end - latency;
  rx_free_[b] = end;
  counters_[a].tx_bytes += bytes;
  counters_[b].rx_bytes += bytes;
  ++counters_[a].transfers;
  return end;
}

Picoseconds ServerFabric::ReservePcie(int rank, bool up, uint64_t bytes, Picoseconds now) {
  const topo::GpuPlace& p = place(rank);
  const size_t i = static_cast<size_t>(p.server) * switches_per_server_ + p.pcie_switch;
  Picoseconds& free = up ? pcie_up_free_[i] : pcie_down_free_[i];
  const Picoseconds start = std::max(now, free);
  free = start + tier_.spec.pcie_rate.SerializationTime(static_cast<int64_t>(bytes));
  // GPU -> PCIe switch -> root port (or back): two switch-class hops.
  return free + tier_.spec.pcie_latency * 2;
}

void ServerFabric::At(Picoseconds at, std::function<void()> fn) {
  const uint64_t id = next_event_++;
  pending_.emplace(id, std::move(fn));
  nic_fabric_->engine().Schedule<&ServerFabric::Fire>(at, sim::EventKind::kUser, 0, this, id);
}

void ServerFabric::Fire(void* obj, uint64_t id) {
  auto* f = static_cast<ServerFabric*>(obj);
  auto it = f->pending_.find(id);
  if (it == f->pending_.end()) return;
  std::function<void()> fn = std::move(it->second);
  f->pending_.erase(it);
  fn();
}

void ServerFabric::DeliverAt(Picoseconds at, NvlinkQp* qp, const SendWr& wr) {
  Delivery* d;
  if (free_deliveries_.empty()) {
    d = &deliveries_.emplace_back();
  } else {
    d = free_deliveries_.back();
    free_deliveries_.pop_back();
  }
  d->fabric = this;
  d->qp = qp;
  d->wr = wr;
  nic_fabric_->engine().Schedule<&ServerFabric::FireDelivery>(at, sim::EventKind::kUser, 0, d, 0);
}

void ServerFabric::DropDeliveries(NvlinkQp* qp) {
  for (Delivery& d : deliveries_) {
    if (d.qp == qp) d.qp = nullptr;
  }
}

void ServerFabric::FireDelivery(void* obj, uint64_t /*unused*/) {
  auto* d = static_cast<Delivery*>(obj);
  // A copy: Deliver may post (and so take a record) before it returns.
  const SendWr wr = d->wr;
  NvlinkQp* qp = d->qp;
  d->fabric->free_deliveries_.push_back(d);
  if (qp != nullptr) {
    qp->OnFire();
    qp->Deliver(wr);
  }
}

void ServerFabric::AddQp(int rank, uint32_t qpn, NvlinkQp* qp) { Slot(qpn) = {rank, qp, nullptr}; }
void ServerFabric::RemoveQp(int /*rank*/, uint32_t qpn) { Slot(qpn) = QpSlot{}; }
void ServerFabric::AddRegion(int rank, uint32_t key, Region r) { regions_[Key(rank, key)] = r; }
void ServerFabric::RemoveRegion(int rank, uint32_t key) { regions_.erase(Key(rank, key)); }
const ServerFabric::Region* ServerFabric::FindRegion(int rank, uint32_t key) const {
  auto it = regions_.find(Key(rank, key));
  return it == regions_.end() ? nullptr : &it->second;
}

}  // namespace fathom::transport::intranode
